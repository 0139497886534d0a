"""Execute Program time against the instructions the VM counted, as the input grows: a least-squares line whose
slope is the modelled ns per eBPF instruction, beside the preset's controller CPI / clock x
native_per_ebpf_instruction (the model's promise) - they agree when time follows counted instructions only."""

from __future__ import annotations

import numpy as np

from nearflash import programs
from nearflash.experiment import Experiment, Options
from nearflash.programs.experiments.common import device, option, text


def run_scaling(exp: Experiment, opts: Options) -> None:
    presets = option(opts, "presets", ["cosmos-plus", "samsung-970pro"], ["cosmos-plus", "samsung-970pro"])
    sizes = [4096 * 2**k for k in range(4 if opts.quick else 7)]
    obj = programs.example("grep")
    data = text(sizes[-1], opts.seed)
    rows, fits = [], {}
    fig, ax = exp.figure("scaling", width=6, height=4)
    for preset in presets:
        with device(preset, opts.seed) as dev:
            programs.write_slm(dev, 0, data)
            programs.load(dev, 1, obj)
            programs.activate(dev, 1)
            cpi = float(dev.param("controller.cpi").split()[0])
            ghz = float(dev.param("controller.core_freq").split()[0])
            pts = []
            for n in sizes:
                r = programs.execute(dev, 1, [(0, n)], params=b"needle")
                pts.append((r.instructions, r.latency_ns))
                rows.append([preset, n, r.instructions, r.latency_ns / 1e3])
        x, y = np.array(pts, dtype=float).T
        slope, intercept = np.polyfit(x, y, 1)
        expect = cpi / ghz  # ns per instruction at native_per_ebpf_instruction = 1
        fits[preset] = {"ns_per_instruction": slope, "intercept_ns": intercept, "expected": expect}
        exp.compare(f"{preset}: ns per eBPF instruction (least-squares slope)", slope, expect, "ns",
                    "paper column: the preset's controller.cpi / controller.core_freq (the model's promise), not a "
                    "paper", reference="model")
        ax.plot(x / 1e6, y / 1e3, "o-", label=preset)
    exp.table("Execute Program latency vs counted instructions (grep)", ["preset", "input bytes", "instructions",
              "latency (us)"], rows)
    exp.record("fits", fits)
    ax.set_xlabel("eBPF instructions counted (millions)")
    ax.set_ylabel("Execute Program latency (us)")
    ax.legend()
