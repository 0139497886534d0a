"""Fig. 9: partitioning at 32 channels (stream-processor FMCs at 400 MHz, a 600 MB/s link): the host alone, the
iSSD alone, and both together with the static split of §4.2 (both finish together) and a dynamic split (chunks to
whichever side is free next), for hosts of 4, 8 and 16 CPUs; §4.2's model beside the executed runs."""

from __future__ import annotations

from nearflash.experiment import Experiment, Options
from nearflash.issd import model, sim
from nearflash.issd.experiments.common import common_notes, kernels, mb, sizing


def run_fig9(exp: Experiment, opts: Options) -> None:
    ks = kernels(opts, ["linear_regression", "scan"])
    cpus = [4] if opts.quick else [4, 8, 16]
    runs = [sim.fig9(k, n, sizing(opts), 256, opts.seed) for k in ks for n in cpus]
    rows = []
    for r in runs:
        rows.append([
            r["kernel"], r["n_host_cpu"], mb(r["model_host"]), mb(r["host_only"]["bandwidth"]), mb(r["model_issd"]),
            mb(r["issd_only"]["bandwidth"]), mb(r["model_partitioned"]), r["static_fraction"],
            mb(r["static_split"]["bandwidth"]), mb(r["dynamic_split"]["bandwidth"]),
            r["dynamic_split"]["device_bytes"] / r["dynamic_split"]["input_bytes"],
        ])
    exp.table(
        "Throughput (MB/s): host only, iSSD only, partitioned (Eq. 1 / Sec. 4.2 beside executed)",
        ["kernel", "CPUs", "host Eq.1", "host exec.", "iSSD Eq.1", "iSSD exec.", "part. Eq.1", "static share", "static exec.", "dynamic exec.", "dynamic share"],
        rows,
    )
    get = {(r["kernel"], r["n_host_cpu"]): r for r in runs}
    if ("linear_regression", 4) in get:
        r = get[("linear_regression", 4)]
        exp.compare("linear_regression, 4 CPUs, partitioned (Sec. 4.2)", mb(r["model_partitioned"]), 1700, "MB/s", "paper: nearly 1,700 MB/s over a 600 MB/s link")
        exp.compare("linear_regression, 4 CPUs, static split executed", mb(r["static_split"]["bandwidth"]), 1700, "MB/s")
        exp.compare("linear_regression, 4 CPUs, dynamic split executed", mb(r["dynamic_split"]["bandwidth"]), 1700, "MB/s")
        total = r["host_only"]["bandwidth"] + r["issd_only"]["bandwidth"]
        exp.compare("static split / (host + iSSD), executed", r["static_split"]["bandwidth"] / total, 1.0, "ratio",
                    "paper: throughput ~ sum of both (1.0 is our reading)", reference="paper-derived")
    for n in cpus:
        if ("scan", n) in get:
            r = get[("scan", n)]
            raw = "paper column: the raw flash bandwidth, 32 x 400 MB/s (Table 2), which the paper says the iSSD reaches"
            exp.compare(f"scan, {n} CPUs, iSSD alone (Eq. 1, Table 2 beta)", mb(r["model_issd"]), 12800, "MB/s", raw,
                        reference="paper-derived")
            exp.compare(f"scan, {n} CPUs, iSSD alone executed", mb(r["issd_only"]["bandwidth"]), 12800, "MB/s", raw,
                        reference="paper-derived")
    fig, ax = exp.figure("fig9", width=10, height=4.5)
    labels = [f"{r['kernel'][:6]}/{r['n_host_cpu']}" for r in runs]
    series = [("host only", "host_only"), ("iSSD only", "issd_only"), ("static", "static_split"), ("dynamic", "dynamic_split")]
    w = 0.2
    for i, (name, key) in enumerate(series):
        ax.bar([j + (i - 1.5) * w for j in range(len(runs))], [mb(r[key]["bandwidth"]) for r in runs], w, label=name)
    ax.scatter(range(len(runs)), [mb(r["model_partitioned"]) for r in runs], color="k", marker="_", s=300, label="Eq. 1 partitioned", zorder=3)
    ax.set_xticks(range(len(runs)), labels, fontsize=8)
    ax.set_ylabel("MB/s")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    exp.record("runs", runs)
    partition_energy_and_p(exp, ks)
    common_notes(exp)
    exp.note(
        "The paper's 'nearly 1,700 MB/s' for linear_regression fits a 4-CPU host (406 MB/s) + 32 x 39.6 MB/s of "
        "accelerated FMCs = 1,674 MB/s, not 8 CPUs (which the 600 MB/s link caps at 600 MB/s): we report 4 CPUs."
    )
    exp.note(
        "Static split: the iSSD's share is B_issd / (B_issd + B_host) from Sec. 4.2 with Table 2's alpha and beta; "
        "B_host = min(n f / CPB_host, r_host). Dynamic split: the device takes guided chunks (a quarter of what "
        "remains), the host a 256th of the input at a time while that is expected to shorten the job."
    )
    exp.note(
        "Scan over SATA: the selected rows (5% of the input, beta about 1 for a selection, not the model's 0.1) "
        "share the 600 MB/s link with the host's reads, so the iSSD alone is nearly link-bound at 32 channels and "
        "any split that gives the host reads slows it; Sec. 4.2's model charges the device's result nothing."
    )


#: Fractions of the work that can be offloaded (Eq. 1's p; the figures above take p = 1).
P_VALUES = (1.0, 0.9, 0.75, 0.5)


def partition_energy_and_p(exp: Experiment, ks) -> None:
    """Sec. 4.2's partitioning with its energy beside the iSSD alone and the host alone, and Eq. 1 with p < 1
    (only part of the work offloadable: T = (1 - p) t_conv + max(t_*)): Fig. 7's iSSD-XL (8 GB/s link, 8 host
    CPUs) at 32 channels, beside HOST-8G."""
    rows, prows = [], []
    for k in ks:
        part = model.partition("iSSD-XL", k, 32)
        e_issd = model.energy("iSSD-XL", k, 32)["e_total"]
        e_host = model.energy("HOST-8G", k, 32)["e_total"]
        rows.append([k, part["fraction_issd"], mb(part["bandwidth"]), part["e_total"], e_issd, e_host])
        for p in P_VALUES:
            prows.append([k, p, mb(model.bandwidth("iSSD-XL", k, 32, config_overrides={"p": p})),
                          mb(model.bandwidth("HOST-8G", k, 32))])
    exp.table(
        "Sec. 4.2 partitioning of Fig. 7's iSSD-XL (8 GB/s, 8 host CPUs) at 32 channels (Eq. 1 / Sec. 4.1): iSSD share, "
        "bandwidth and energy for 1 GB (J), beside the iSSD alone and the host alone",
        ["kernel", "iSSD share", "partitioned MB/s", "partitioned J", "iSSD-XL alone J", "HOST-8G alone J"],
        rows,
    )
    exp.table(
        "Eq. 1 with p < 1 (fraction of the work the iSSD can take; the rest runs conventionally first), iSSD-XL at 32 "
        "channels (8 GB/s), MB/s",
        ["kernel", "p", "iSSD-XL", "HOST-8G"],
        prows,
    )
    below = sorted({r[0] for r in prows if r[1] == 0.5 and r[2] < r[3]})
    exp.record("partition_energy", rows)
    exp.record("p_sweep", prows)
    exp.note(
        "Partitioning's energy is the sum of both sides' energies for their shares (Sec. 4.1's per-byte energies): "
        "it buys bandwidth with the host's energy per byte, so it costs more than the iSSD alone for every kernel "
        "here. With p < 1 the non-offloadable part runs at the host's speed first (Eq. 1's (1 - p) t_conv), which "
        "dominates quickly: T >= (1 - p) t_conv, so at p = 0.5 the iSSD is at most twice its own system run "
        f"conventionally; at 32 FMCs it then falls below HOST-8G for {', '.join(below) or 'no kernel'}."
    )
