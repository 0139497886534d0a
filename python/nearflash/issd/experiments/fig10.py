"""Fig. 10: energy per byte at 8 channels, by component, for conventional processing (HOST-SATA), the iSSD without
acceleration (iSSD-400) and with it (iSSD-XL): §4.1's model with Fig. 10's per-event energies beside the device's
ledger over executed runs (the same energies charged per event: NAND page reads, FMC instructions, stream-processor
ops, SSD CPU instructions, host-interface bytes, host instructions; static powers while the link or DRAM is busy)."""

from __future__ import annotations

from statistics import mean

from nearflash.experiment import Experiment, Options
from nearflash.issd import model, sim
from nearflash.issd.experiments.common import common_notes, kernels, sizing

CONFIGS = ["HOST-SATA", "iSSD-400", "iSSD-XL"]
N_CH = 8


def nj(j_per_byte: float) -> float:
    return j_per_byte * 1e9


def run_fig10(exp: Experiment, opts: Options) -> None:
    ks = kernels(opts, ["linear_regression", "string_match", "kmeans", "scan"])
    pts = sim.fig7(CONFIGS, ks, N_CH, sizing(opts), opts.seed)
    ex = {(p["config"], p["kernel"]): p for p in pts}
    mo = {(c, k): e for k in ks for c, e in model.fig10(k)}
    rows = []
    for k in ks:
        for c in CONFIGS:
            p, m = ex[(c, k)], mo[(c, k)]
            rows.append([k, c, nj(m["epb_comp"] + m["epb_xfer"]), nj(sim.energy_per_byte(p))] + [nj(j / p["input_bytes"]) for _, j in p["energy"]])
    comps = [c for c, _ in pts[0]["energy"]]
    exp.table("Energy per byte (nJ/B): model total, executed total, executed by component", ["kernel", "config", "model", "executed"] + comps, rows)

    def ratio(src, k, c):
        if src == "model":
            return (mo[("HOST-SATA", k)]["epb_comp"] + mo[("HOST-SATA", k)]["epb_xfer"]) / (mo[(c, k)]["epb_comp"] + mo[(c, k)]["epb_xfer"])
        return sim.energy_per_byte(ex[("HOST-SATA", k)]) / sim.energy_per_byte(ex[(c, k)])

    summary = []
    for src in ("model", "executed"):
        # the paper's summary read two ways: against the accelerated iSSD (iSSD-XL) and against the iSSD without
        # accelerators (iSSD-400), naming the kernel behind the smallest and largest ratio
        for reading, c in (("with accelerators (iSSD-XL)", "iSSD-XL"), ("without accelerators (iSSD-400)", "iSSD-400")):
            r = {k: ratio(src, k, c) for k in ks}
            lo, hi = min(r, key=r.get), max(r, key=r.get)
            summary.append([src, reading, f"{r[lo]:.1f}x ({lo})", f"{mean(r.values()):.1f}x", f"{r[hi]:.1f}x ({hi})"])
    exp.table(
        "HOST-SATA / iSSD energy ratio under both readings of the paper's summary (paper: >= 5x (k-means), > 9x on "
        "average, > 27x (linear_regression))",
        ["source", "reading", "smallest (kernel)", "mean", "largest (kernel)"],
        summary,
    )
    exp.record("summary", summary)
    for src in ("model", "executed"):
        xl = {k: ratio(src, k, "iSSD-XL") for k in ks}
        # the paper states floors: a larger ratio agrees with it
        exp.compare(f"{src}: smallest HOST-SATA / iSSD-XL ratio ({min(xl, key=xl.get)})", min(xl.values()), 5, "x",
                    "paper: >= 5x (k-means)", better="higher")
        exp.compare(f"{src}: mean HOST-SATA / iSSD-XL ratio", mean(xl.values()), 9, "x", "paper: > 9x on average",
                    better="higher")
        exp.compare(f"{src}: largest HOST-SATA / iSSD-XL ratio ({max(xl, key=xl.get)})", max(xl.values()), 27, "x",
                    "paper: > 27x (linear_regression)", better="higher")
        if "linear_regression" in ks:
            exp.compare(f"{src}: linear_regression HOST-SATA / iSSD-400", ratio(src, "linear_regression", "iSSD-400"), 9, "x", "paper: 9x without acceleration")
    if "string_match" in ks:
        sp = dict(ex[("iSSD-XL", "string_match")]["energy"])["stream_processor"] / ex[("iSSD-XL", "string_match")]["input_bytes"]
        exp.compare("string_match stream-processor energy (executed)", nj(sp), 0.123, "nJ/B", "paper: the stream processor's worst case")
        host = sim.energy_per_byte(ex[("HOST-SATA", "string_match")])
        exp.compare("string_match host energy (executed)", nj(host), 63.0, "nJ/B", "paper's 63.0 != 0.82 nJ x 54.0 IPB = 44.3 nJ/B of host CPU")
    # shares on a linear axis (a log axis hides small shares), each bar labelled with its total
    fig, axes = exp.figure("fig10", width=12, height=4.5, ncols=len(ks))
    axes = axes if hasattr(axes, "__len__") else [axes]
    for ax, k in zip(axes, ks):
        totals = [sim.energy_per_byte(ex[(c, k)]) for c in CONFIGS]
        bottom = [0.0] * len(CONFIGS)
        for comp in comps:
            vals = [dict(ex[(c, k)]["energy"])[comp] / ex[(c, k)]["input_bytes"] / t for c, t in zip(CONFIGS, totals)]
            ax.bar(CONFIGS, vals, bottom=bottom, label=comp)
            bottom = [b + v for b, v in zip(bottom, vals)]
        for i, (c, t) in enumerate(zip(CONFIGS, totals)):
            m = nj(mo[(c, k)]["epb_comp"] + mo[(c, k)]["epb_xfer"])
            ax.text(i, 1.02, f"{nj(t):.3g}\n(model {m:.3g})", ha="center", fontsize=6)
        ax.set_ylim(0, 1.15)
        ax.set_title(k, fontsize=9, pad=18)
        ax.tick_params(axis="x", labelsize=7, rotation=20)
    axes[0].set_ylabel("share of energy per input byte (executed); label: nJ/B")
    axes[-1].legend(fontsize=6)
    exp.record("points", pts)
    common_notes(exp)
    exp.note(
        "Both sides charge Fig. 10's energies: E_proc 192 pJ/inst (FMC and SSD CPUs), stream ALU/MUL/register/SRAM "
        "2.11/67.6/4.23/21.1 pJ per op (op counts per byte: model/params.rs, assumed from each kernel's dataflow), "
        "processor SRAM 89.3 pJ/read (one per 32-bit word), NAND 3.31 uJ per 8 kB read, host interface 1.05 nJ/B, "
        "host 0.82 nJ/inst at Table 1's IPB; host DRAM, chipset and I/O power (0.42, 5.49, 9.61 W) and SSD DRAM "
        "(154 mW) count while the link (DRAM) moves data, the model's EPB = P / r. The device also charges the preset's "
        "NAND bus and ECC energies (0.05 and 0.01 nJ/B, assumed), which the model lacks."
    )
    exp.note(
        "Host string_match: the paper's 63.0 nJ/B does not follow from 0.82 nJ x 54.0 IPB = 44.3 nJ/B of CPU energy; "
        "with the chipset and I/O power over a 600 MB/s link (26 nJ/B) the host total exceeds both; we charge the "
        "written parameters and report what they give."
    )
