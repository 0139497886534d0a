"""Fig. 7: data-processing throughput against the number of FMCs (8..64) for HOST-SATA, HOST-4G, HOST-8G,
iSSD-400, iSSD-800 and iSSD-XL on linear_regression, string_match, k-means and scan: Eq. 1 with Table 2's
parameters, and the execution-driven runs with Eq. 1 evaluated beside each (the §4.3 validation: mean 5.1%, max
17.9%)."""

from __future__ import annotations

from nearflash.experiment import Experiment, Options
from nearflash.issd import model, sim
from nearflash.issd.experiments.common import COLORS, CONFIGS, N_CH, common_notes, kernels, mb, sizing


def first_n(points: dict, cond) -> int | None:
    """Smallest channel count for which `cond(n)` holds."""
    return next((n for n in sorted(points) if cond(n)), None)


def run_fig7(exp: Experiment, opts: Options) -> None:
    ks = kernels(opts, ["linear_regression", "string_match", "kmeans", "scan"])
    chans = [8, 24, 40, 48, 64] if opts.quick else N_CH
    pts = []
    for n in chans:
        pts += sim.fig7(CONFIGS, ks, n, sizing(opts), opts.seed)
    by = {(p["config"], p["kernel"], p["n_ch"]): p for p in pts}
    ana = {(p["config"], k, p["n_ch"]): p["bandwidth"] for k in ks for p in model.fig7(k)}
    mean, worst = sim.error_summary(pts)
    built_in = "partly built in: both sides charge Table 2's costs (paper: model vs SoC Designer simulation)"
    exp.compare("Eq. 1 vs executed: mean abs. error", 100 * mean, 5.1, "%", built_in, better="lower")
    exp.compare("Eq. 1 vs executed: max abs. error", 100 * worst, 17.9, "%", built_in, better="lower")

    def bw(c, k, n):
        return by[(c, k, n)]["bandwidth"]

    def xl_beats_best_host_from(k):
        """First n_ch at which iSSD-XL outruns HOST-8G at its best n_ch."""
        host = max(bw("HOST-8G", k, n) for n in chans)
        xl = {n: bw("iSSD-XL", k, n) for n in chans}
        return first_n(xl, lambda n: xl[n] > host)

    if "scan" in ks:
        xl = {n: bw("iSSD-XL", "scan", n) for n in chans}
        top = max(xl.values())
        wall = first_n(xl, lambda n: xl[n] >= 0.95 * top)
        exp.compare("iSSD-XL scan stops scaling at (FMCs)", wall, 48, "FMCs",
                    "CALIBRATED: CPB_ssd_cpu is fitted to this wall, so it agrees by construction", fitted=True)
        # not fitted: the same constant predicts where iSSD-800 (no stream processors, 800 MHz) stops scaling
        x8 = {n: bw("iSSD-800", "scan", n) for n in chans}
        top8 = max(x8.values())
        exp.compare("iSSD-800 scan stops scaling at (FMCs)", first_n(x8, lambda n: x8[n] >= 0.95 * top8), None, "FMCs",
                    "prediction, not fitted; the paper names only iSSD-XL's wall")
        n = chans[-1]
        exp.compare(f"HOST-4G scan at {n} FMCs (link-bound reading)", mb(bw("HOST-4G", "scan", n)), 4000, "MB/s",
                    "paper column: HOST-4G's link rate, as Sec. 5.2 says the hosts 'suffered the host interface "
                    "bandwidth limitation' on scan", reference="paper-derived")
        exp.compare(f"HOST-8G scan at {n} FMCs (link-bound reading)", mb(bw("HOST-8G", "scan", n)), 8000, "MB/s",
                    "paper column: HOST-8G's link rate (Sec. 5.2)", reference="paper-derived")
    if "kmeans" in ks:
        exp.compare("iSSD-XL k-means beats the best host from", xl_beats_best_host_from("kmeans"), 24, "FMCs")
    if "string_match" in ks:
        exp.compare("iSSD-XL string_match beats the best host from", xl_beats_best_host_from("string_match"), 40, "FMCs")
        n = chans[-1]
        exp.compare(
            "string_match stream-processor gain (XL / iSSD-400)",
            100 * (bw("iSSD-XL", "string_match", n) / bw("iSSD-400", "string_match", n) - 1),
            37,
            "%",
            f"at {n} FMCs, both 400 MHz",
        )
    derived = {"linear_regression": 813, "string_match": 552, "kmeans": 219}
    for k in [k for k in ks if k in derived]:
        exp.compare(f"HOST-8G {k} (compute-bound)", mb(bw("HOST-8G", k, chans[-1])), derived[k], "MB/s",
                    "paper column: 8 x 3.2 GHz / Table 2's CPB, which our host is charged too (a check of the "
                    "executed host against its own inputs)", reference="paper-derived", paper_input=True)
    rows = [
        [p["kernel"], p["config"], p["n_ch"], mb(ana[(p["config"], p["kernel"], p["n_ch"])]), mb(p["model_bandwidth"]),
         mb(p["bandwidth"]), 100 * sim.model_error(p), p["model_bottleneck"], p["alpha"], p["beta"], p["input_bytes"] / 1e6]
        for p in pts
    ]
    exp.table(
        "Throughput (MB/s): Eq. 1 with Table 2 alpha/beta, Eq. 1 with the measured alpha/beta, executed",
        ["kernel", "config", "n_ch", "Eq.1 (Table 2)", "Eq.1 (measured a, b)", "executed", "error %", "bottleneck", "alpha", "beta", "MB"],
        rows,
    )
    if "scan" in ks and not opts.quick:
        lookups(exp, opts)
    fig, axes = exp.figure("fig7", width=12, height=8, ncols=2, nrows=2)
    for ax, k in zip(axes.flat, ks):
        for c in CONFIGS:
            ax.plot(N_CH, [mb(ana[(c, k, n)]) for n in N_CH], "-", color=COLORS[c], lw=1.2, label=f"{c} Eq. 1")
            ax.plot(chans, [mb(bw(c, k, n)) for n in chans], "o", color=COLORS[c], ms=4)
        ax.set_title(f"{k} (lines: Eq. 1, Table 2; dots: executed)")
        ax.set_xlabel("FMCs (channels)")
        ax.set_ylabel("MB/s")
        ax.set_yscale("log")
    axes.flat[0].legend(fontsize=7)
    exp.record("points", pts)
    common_notes(exp)
    exp.note(
        "Scan's Fig. 7 kernel selects 5% of the rows and projects whole rows, so its measured alpha is Table 2's 0.05; "
        "the other kernels' alpha and beta are what their partials measure (Table 2: '< 0.05'). The executed beta of "
        "scan is about 1 (the selected rows go to the host), not the model's assumed 0.1."
    )
    exp.note(
        "HOST-* configurations run on the device of the iSSD they share a link with in Fig. 7 (SATA: iSSD-400, "
        "4G: iSSD-800, 8G: iSSD-XL); the host reads 128 KiB at a time, 8 in flight, and computes on 8 cores."
    )
    exp.note(
        "Link-bound hosts (changed on purpose): Eq. 1 read literally charges a conventional byte through r_dram = "
        "3.2 GB/s (alpha = 1), which made HOST-4G and HOST-8G identical on scan (both 3.2 GB/s). Sec. 5.2 says the "
        "opposite ('all conventional machine configurations suffered the host interface bandwidth limitation, making "
        "scan the only truly storage bandwidth bound workload'), so the model passes host bytes through DRAM at "
        "max(r_dram, r_host) and the HOST-4G / HOST-8G devices' DRAM port runs at 2 x r_host: their scans are "
        "link-bound at 4 and 8 GB/s where the channels allow. The iSSDs keep r_dram = 3.2 GB/s."
    )
    exp.note(
        "The Eq. 1 vs executed agreement is partly built in: both sides charge the same Table 2 cycles per byte and "
        "the same link, DRAM and channel rates, where the paper's 5.1% / 17.9% compared Eq. 1 with a cycle-level "
        "simulator (SoC Designer). It checks the pipeline's overlap and queueing, not the per-byte costs."
    )


def lookups(exp: Experiment, opts: Options) -> None:
    """iSSD-XL's scan beyond its wall with the FTL's per-block lookups charged on the SSD CPUs."""
    rows = []
    for n in (48, 64):
        off, on = (sim.fig7(["iSSD-XL"], ["scan"], n, sizing(opts), opts.seed, agent={"ftl_lookups": f})[0] for f in (False, True))
        rows.append([n, mb(off["bandwidth"]), mb(on["bandwidth"]), 100 * (on["bandwidth"] / off["bandwidth"] - 1)])
    exp.table("iSSD-XL scan with and without the FTL's lookups on the SSD CPUs (MB/s)", ["n_ch", "without", "with", "change %"], rows)
    exp.note(
        "Charging the FTL's 60 instructions per 4 KiB block on the SSD CPUs (`ftl_lookups = true`) changes iSSD-XL's "
        f"scan beyond its wall by {rows[-1][3]:.1f}% at {rows[-1][0]} FMCs (table above): Eq. 1's single SSD-CPU stage "
        "leaves out FTL work, which is one reason an executed iSSD can fall short of the model."
    )
