"""A validation that is not circular: our kernels' cycles per byte measured on this host, as the paper's Table 1
measured its kernels, and Eq. 1's Fig. 7 predictions re-evaluated with the measured costs instead of the given ones.

Hardware counters are used where this machine has them (:mod:`nearflash.issd.counters`, perf_event_open on the
calling thread): cycles and instructions per byte, counted in user space over a single-threaded run (the best of N
by cycles). Otherwise the kernels are timed single-threaded (best of N wall-clock runs) and cycles per byte =
seconds x clock / bytes, with the clock read from /proc/cpuinfo; instructions per byte then stay unmeasured. The FMC's cycles per byte are scaled by the same measured / given ratio (an in-order
core runs our instructions, not the paper's); both sides of the agreement then charge costs the paper did not give."""

from __future__ import annotations

import os
import re
import subprocess
import time

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.issd import counters, data, kernels, lineitem, model

PAGE = 8192


def clock_hz() -> tuple[float, str]:
    """The host's clock (first 'cpu MHz' of /proc/cpuinfo), or 3 GHz assumed where it is not readable."""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"cpu MHz\s*:\s*([0-9.]+)", f.read())
        if m:
            return float(m.group(1)) * 1e6, "/proc/cpuinfo"
    except OSError:
        pass
    return 3e9, "assumed 3 GHz (/proc/cpuinfo unreadable)"


def perf_counts_instructions() -> bool:
    """Whether `perf stat -e instructions` counts on this machine (not in most VMs)."""
    try:
        r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and "not supported" not in r.stderr and re.search(r"^\d+,", r.stderr, re.M) is not None


def labelled(n: int, values: int, seed: int) -> np.ndarray:
    """Labelled records of 8 attributes and 4 classes (naive_bayes, scalparc)."""
    return data.labelled_records(n, 8, 4, values, seed=seed)


def inputs(scale: int, seed: int) -> dict[str, tuple[dict, np.ndarray]]:
    """Each Table 1 kernel we have, with a paged input of about ``scale`` bytes."""
    text = data.text(scale, seed=seed)
    cl = data.cluster_points(scale // 12, 3, 4, seed=seed)
    return {
        "scan": (kernels.spec("scan"), lineitem.generate(rows=scale // 150, page_size=PAGE, comment_pool="compact")),
        "grep": (kernels.spec("grep", pattern="special"), data.pack_lines(text, PAGE)),
        "string_match": (kernels.spec("string_match", keys=["ly ", "the", "furious"]), data.pack_lines(text, PAGE)),
        "word_count": (kernels.spec("word_count"), data.pack_lines(text, PAGE)),
        "histogram": (kernels.spec("histogram"), data.pack_records(data.pixels(1000, scale // 3000, seed=seed), 3, PAGE)),
        "linear_regression": (kernels.spec("linear_regression"), data.pack_records(data.regression_points(scale // 2, seed=seed), 2, PAGE)),
        "kmeans": (kernels.spec("kmeans", dim=3, centroids=cl[:4].tolist()), data.pack_records(cl, 12, PAGE)),
        "scalparc": (kernels.spec("scalparc", attributes=8, classes=4), data.pack_records(labelled(scale // 9, 256, seed), 9, PAGE)),
        "hop": (kernels.spec("hop", grid=32, lo=0, hi=1000, threshold=8), data.pack_records(cl, 12, PAGE)),
        "naive_bayes": (kernels.spec("naive_bayes", attributes=8, classes=4, values=16),
                        data.pack_records(labelled(scale // 9, 16, seed), 9, PAGE)),
    }


def measure(spec: dict, pages: np.ndarray, repeat: int, use_counters: bool) -> tuple[float, dict[str, int] | None]:
    """Best single-thread seconds of the host path (one thread, chunk by chunk, as one core maps), and the user-space
    instructions and cycles of the run with the fewest cycles where counters work."""
    best, best_counts = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        if use_counters:
            _, c = counters.count(lambda: kernels.run(spec, pages, PAGE, mode="chunked"))
            if c is not None and (best_counts is None or c["cycles"] < best_counts["cycles"]):
                best_counts = c
        else:
            kernels.run(spec, pages, PAGE, mode="chunked")
        best = min(best, time.perf_counter() - t0)
    return best, best_counts


def run_costs(exp: Experiment, opts: Options) -> None:
    scale = int(opts.extra.get("bytes", 4_000_000 if opts.quick else 40_000_000))
    repeat = 3 if opts.quick else 5
    hz, clock_src = clock_hz()
    perf_tool = perf_counts_instructions()
    hw = counters.available()
    how = "hardware counters (perf_event_open)" if hw else "timed runs"
    table1 = {r["name"]: r for r in model.parameters()["table1"]}
    rows, measured, measured_ipb = [], {}, {}
    for name, (spec, pages) in exp.steps(list(inputs(scale, opts.seed).items())):
        t, counts = measure(spec, pages, repeat, hw)
        cpb = counts["cycles"] / len(pages) if counts else t * hz / len(pages)
        ipb = counts["instructions"] / len(pages) if counts else None
        measured[name] = cpb
        if ipb is not None:
            measured_ipb[name] = ipb
        given = table1[name]
        rows.append([name, len(pages) / 1e6, t * 1e3, cpb, given["cpb"], cpb / given["cpb"],
                     "-" if ipb is None else ipb, given["ipb"], "-" if ipb is None else cpb / ipb, given["cpi"]])
    exp.table(
        f"Host cycles (and instructions) per byte, measured here by {how} (single thread, {clock_src}: "
        f"{hz / 1e9:.2f} GHz) vs Table 1, all ten kernels",
        ["kernel", "MB", "ms", "CPB measured", "CPB Table 1", "measured / Table 1", "IPB measured", "IPB Table 1",
         "CPI measured", "CPI Table 1"],
        rows,
    )
    for name, cpb in measured.items():
        exp.compare(f"{name}: host CPB measured here", cpb, table1[name]["cpb"], "cycles/B", f"MEASURED by {how} (not fitted)")
    for name, ipb in measured_ipb.items():
        exp.compare(f"{name}: host IPB measured here", ipb, table1[name]["ipb"], "instructions/B", "MEASURED by hardware counters")
    # Eq. 1 with the measured costs: host CPB replaced; FMC CPBs scaled by the same measured / given ratio
    preds = []
    profiles = {p["name"]: p for p in model.parameters()["profiles"]}
    for k in model.KERNELS:
        ratio = measured[k] / profiles[k]["cpb_host"]
        over = {"cpb_host": measured[k], "cpb_fmc": profiles[k]["cpb_fmc"] * ratio, "cpb_fmc_accel": profiles[k]["cpb_fmc_accel"] * ratio}
        for c in ("HOST-8G", "iSSD-400", "iSSD-XL"):
            for n in (16, 64):
                given = model.evaluate(c, k, n)
                moved = model.evaluate(c, k, n, kernel_overrides=over)
                preds.append({"kernel": k, "config": c, "n_ch": n, "given": given["bandwidth"], "measured": moved["bandwidth"],
                              "given_bottleneck": given["bottleneck"], "measured_bottleneck": moved["bottleneck"]})
    exp.table(
        "Eq. 1 bandwidth (MB/s) with Table 2's costs and with the costs measured here",
        ["kernel", "config", "n_ch", "Table 2 costs", "measured costs", "change %", "bottleneck (given / measured)"],
        [[p["kernel"], p["config"], p["n_ch"], p["given"] / 1e6, p["measured"] / 1e6, 100 * (p["measured"] / p["given"] - 1),
          f"{p['given_bottleneck']} / {p['measured_bottleneck']}"] for p in preds],
    )
    # Fig. 7's crossovers (iSSD-XL beats every host configuration from n FMCs) with given and measured costs
    hosts = [c for c in model.CONFIGS if c.startswith("HOST")]
    cross = []
    for k in ("kmeans", "string_match", "linear_regression"):
        ratio = measured[k] / profiles[k]["cpb_host"]
        over = {"cpb_host": measured[k], "cpb_fmc": profiles[k]["cpb_fmc"] * ratio,
                "cpb_fmc_accel": profiles[k]["cpb_fmc_accel"] * ratio}
        row = [k]
        for kw in ({}, {"kernel_overrides": over}, {"kernel_overrides": {"cpb_host": measured[k]}}):
            first = next((n for n in range(8, 65, 8) if model.evaluate("iSSD-XL", k, n, **kw)["bandwidth"]
                          > max(model.evaluate(h, k, n, **kw)["bandwidth"] for h in hosts)), None)
            row.append("never (<= 64)" if first is None else first)
        row.append({"kmeans": 24, "string_match": 40}.get(k, "-"))
        cross.append(row)
    exp.table("Fig. 7: iSSD-XL beats the best host from n FMCs (Eq. 1), with Table 2's and with measured costs",
              ["kernel", "Table 2 costs", "measured costs (FMC scaled alike)", "measured host, Table 2 FMC", "paper"],
              cross)
    exp.note(
        "Crossovers: with the FMC's cycles per byte scaled by the same measured / given ratio as the host's, the "
        "FMC-count at which iSSD-XL overtakes the hosts does not move (both sides speed up alike until the link or "
        "the flash bounds them): the paper's relative claims rest on the FMC / host cost ratio, not on absolute costs. "
        "Keeping Table 2's FMC costs while the host runs at our measured costs is the pessimistic reading (our "
        "kernels' instructions unknown on the FMC); the third column shows where the crossover then goes.")
    exp.record("crossovers", cross)
    changes = [abs(p["measured"] / p["given"] - 1) for p in preds]
    exp.compare("Eq. 1 prediction moves with measured costs: mean abs. change", 100 * float(np.mean(changes)), None, "%",
                "Fig. 7 points at 16 and 64 FMCs, HOST-8G / iSSD-400 / iSSD-XL")
    fig, ax = exp.figure("costs", width=8, height=4)
    names = list(measured)
    x = np.arange(len(names))
    ax.bar(x - 0.2, [table1[n]["cpb"] for n in names], 0.4, label="Table 1 (paper's host)")
    ax.bar(x + 0.2, [measured[n] for n in names], 0.4, label="measured here")
    ax.set_xticks(x, names, fontsize=8, rotation=20)
    ax.set_ylabel("host cycles per byte")
    ax.legend(fontsize=8)
    exp.record("measured_cpb", measured)
    exp.record("clock_hz", hz)
    exp.record("measured_ipb", measured_ipb)
    exp.record("hardware_counters", hw)
    exp.record("perf_tool_counts", perf_tool)
    exp.record("predictions", preds)
    exp.note(
        "Instructions per byte need hardware counters: "
        + ("perf_event_open counted this thread's user-space instructions and cycles, so CPB, IPB and CPI are "
           "counted, not timed." if hw else
           "perf_event_open (and `perf stat`) cannot count on this machine (a VM without PMU access), so only timed "
           "cycles per byte are reported; IPB stays Table 1's.")
        + f" Clock: {clock_src}; {os.cpu_count()} cores, shared with other jobs, so single-thread times carry noise."
    )
    exp.note(
        "Why this matters: Fig. 7's 1.3% / 4.4% agreement between Eq. 1 and our executed runs is partly built in, since "
        "both sides charge Table 2's cycles per byte. Here the costs come from our own kernels on this host instead; "
        "the FMC's CPB is scaled by the same measured / given ratio (assumed: the in-order FMC runs the same "
        "instruction mix). The change in Eq. 1's predictions shows how much of the figures rest on the given costs."
    )
