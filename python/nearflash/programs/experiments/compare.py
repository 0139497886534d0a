"""Each example in storage (Memory Copy + Execute Program) and on the host path (Reads + the same program on a
host core), per preset, each path in its own measurement window on the same device."""

from __future__ import annotations

from typing import Any

import numpy as np

from nearflash import programs
from nearflash.experiment import Experiment, Options
from nearflash.programs.experiments.common import PAGE, Q6, device, lineitem_pages, option, place, text


def _paths(dev: Any, obj: bytes, parts: list[tuple[int, int, int]], out_bytes: int, params: bytes,
           cparam1: int) -> dict[str, Any]:
    block = dev.lba_bytes
    programs.load(dev, 1, obj)
    programs.activate(dev, 1)
    dev.reset_stats()
    t0 = dev.now_ns
    programs.copy_to_slm(dev, 0, sources=[(lba, n) for lba, n, _ in parts])
    ranges, at = [], 0
    for _, n, nbytes in parts:
        ranges.append((at, nbytes))
        at += n * block
    if out_bytes:
        ranges.append((at, out_bytes))
    r = programs.execute(dev, 1, ranges, params=params, cparam1=cparam1)
    out = bytes(programs.read_slm(dev, at, out_bytes)) if out_bytes else b""
    storage = {"value": r.value, "instructions": r.instructions, "time_ns": dev.now_ns - t0,
               "energy_j": dev.report().total_energy_j, "output": out}
    dev.reset_stats()
    t0 = dev.now_ns
    h = programs.host_run(dev, obj, [(lba, n) for lba, n, _ in parts], params, cparam1,
                          lengths=[nbytes for *_, nbytes in parts], outputs=[out_bytes] if out_bytes else [])
    host = {"value": h["result"], "instructions": h["instructions"], "time_ns": dev.now_ns - t0,
            "energy_j": dev.report().total_energy_j, "output": h["outputs"][0] if out_bytes else b""}
    return {"storage": storage, "host": host}


def run_compare(exp: Experiment, opts: Options) -> None:
    presets = option(opts, "presets", ["cosmos-plus", "samsung-970pro"], ["cosmos-plus", "samsung-970pro"])
    rows = option(opts, "rows", 4000, 100_000)
    text_kib = option(opts, "text_kib", 64, 1024)
    objs = {name: programs.example(name) for name in ("lineitem_filter", "grep", "sls")}
    rng = np.random.default_rng(opts.seed)
    dim, table_rows = 16, 20_000 if not opts.quick else 2_000
    table = rng.integers(-1000, 1000, size=(table_rows, dim), dtype=np.int32)
    lengths = rng.integers(10, 80, size=64, dtype=np.uint32)
    idx = rng.integers(0, table_rows, size=int(lengths.sum()), dtype=np.uint32)
    workloads = {
        "lineitem_filter": ([lineitem_pages(rows)], 16, Q6, PAGE),
        "grep": ([text(text_kib * 1024, opts.seed)], 0, b"needle", 0),
        "sls": ([table, idx, lengths], len(lengths) * dim * 8, b"", dim),
    }
    table_rows_out, results = [], {}
    for preset in presets:
        for name, (parts, out_bytes, params, c1) in workloads.items():
            with device(preset, opts.seed) as dev:
                placed = place(dev, parts)
                r = _paths(dev, objs[name], placed, out_bytes, params, c1)
            s, h = r["storage"], r["host"]
            if (s["value"], s["output"]) != (h["value"], h["output"]):
                raise AssertionError(f"{preset} {name}: the two paths disagree ({s['value']} vs {h['value']})")
            results[f"{preset}/{name}"] = {k: {kk: vv for kk, vv in v.items() if kk != "output"} for k, v in r.items()}
            table_rows_out.append([preset, name, sum(p[2] for p in placed), s["instructions"], s["time_ns"] / 1e3,
                                   h["time_ns"] / 1e3, h["time_ns"] / s["time_ns"], s["energy_j"] * 1e3,
                                   h["energy_j"] * 1e3, h["energy_j"] / s["energy_j"]])
    exp.table("In storage vs host path (same program, same answer)", [
        "preset", "program", "input bytes", "eBPF instructions", "in storage (us)", "host (us)", "host/storage time",
        "in storage (mJ)", "host (mJ)", "host/storage energy"], table_rows_out)
    for r in table_rows_out:
        exp.compare(f"{r[0]} {r[1]}: host/in-storage time", r[6], None, "x",
                    "no paper reports this interface; FEMU's CSD mode charges a flat runtime instead")
    exp.record("results", results)
    exp.note("Energy is each window's total, static power included; the host path charges the same counted "
             "instructions at host_cycles_per_instruction on one host core (docs/programs.md).")
    exp.note("The SLS table holds int32 fixed-point rows: eBPF has no floating point.")
    fig, ax = exp.figure("compare", width=8, height=4)
    labels = [f"{r[0]}\n{r[1]}" for r in table_rows_out]
    ax.bar(range(len(labels)), [r[6] for r in table_rows_out])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel("host time / in-storage time")
    ax.set_title("Computational programs: in-storage speed-up over the host path")
