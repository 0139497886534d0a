"""A validation that is not circular: our kernels' cycles per byte measured on this host, as the paper's Table 1
measured its kernels, and Eq. 1's Fig. 7 predictions re-evaluated with the measured costs instead of the given ones.

Hardware counters are used when ``perf stat -e instructions`` works here (instructions per byte); otherwise the
kernels are timed single-threaded (best of N wall-clock runs) and cycles per byte = seconds x clock / bytes, with the
clock read from /proc/cpuinfo. The FMC's cycles per byte are scaled by the same measured / given ratio (an in-order
core runs our instructions, not the paper's); both sides of the agreement then charge costs the paper did not give."""

from __future__ import annotations

import os
import re
import subprocess
import time

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.issd import data, kernels, lineitem, model

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
    }


def measure(spec: dict, pages: np.ndarray, repeat: int) -> float:
    """Best single-thread seconds of the host path (one thread, chunk by chunk, as one core maps)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        kernels.run(spec, pages, PAGE, mode="chunked")
        best = min(best, time.perf_counter() - t0)
    return best


def run_costs(exp: Experiment, opts: Options) -> None:
    scale = int(opts.extra.get("bytes", 4_000_000 if opts.quick else 40_000_000))
    repeat = 3 if opts.quick else 5
    hz, clock_src = clock_hz()
    counters = perf_counts_instructions()
    table1 = {r["name"]: r for r in model.parameters()["table1"]}
    rows, measured = [], {}
    for name, (spec, pages) in inputs(scale, opts.seed).items():
        t = measure(spec, pages, repeat)
        cpb = t * hz / len(pages)
        measured[name] = cpb
        given = table1[name]["cpb"]
        rows.append([name, len(pages) / 1e6, t * 1e3, cpb, given, cpb / given])
    exp.table(
        f"Host cycles per byte, measured here (single thread, {clock_src}: {hz / 1e9:.2f} GHz) vs Table 1",
        ["kernel", "MB", "ms", "CPB measured", "CPB Table 1", "measured / Table 1"],
        rows,
    )
    for name, cpb in measured.items():
        exp.compare(f"{name}: host CPB measured here", cpb, table1[name]["cpb"], "cycles/B", "MEASURED by timed runs (not fitted)")
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
    exp.record("hardware_counters", counters)
    exp.record("predictions", preds)
    exp.note(
        "Instructions per byte need hardware counters: `perf stat -e instructions` "
        + ("works here, but this run reports timed cycles per byte only." if counters else
           "is not supported on this machine (a VM without PMU access), so only timed cycles per byte are reported; "
           "IPB stays Table 1's.")
        + f" Clock: {clock_src}; {os.cpu_count()} cores, shared with other jobs, so single-thread times carry noise."
    )
    exp.note(
        "Why this matters: Fig. 7's 1.3% / 4.4% agreement between Eq. 1 and our executed runs is partly built in, since "
        "both sides charge Table 2's cycles per byte. Here the costs come from our own kernels on this host instead; "
        "the FMC's CPB is scaled by the same measured / given ratio (assumed: the in-order FMC runs the same "
        "instruction mix). The change in Eq. 1's predictions shows how much of the figures rest on the given costs."
    )
