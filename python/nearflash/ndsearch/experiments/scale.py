"""Issue 12's scale goal: one 2,048-query SearSSD batch over a 10M-vector synthetic set (sift-like, 128-d uint8,
L2) in under 10 minutes on this machine within 8 GiB. The HNSW graph is built once over the real (regenerated)
vectors and cached in the index format (``nearflash.ndsearch.scale``; its build time is reported apart); the
batch goes through the same pure model as Figs. 14-16 (``searssd.batch``: degree-ascending BFS, LUNCSR over the
searssd geometry, lock-step iterations, dynamic allocating, timing), timing-only (no emulated device holds 10M
vectors). Wall time, CPU time and peak RSS (``getrusage``) are measured beside the goal; page accesses and
speed-ups beside the paper's billion-scale figures; recall@10 against exact ground truth of a query sample."""

from __future__ import annotations

import time

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.ndsearch import searssd
from nearflash.ndsearch.datasets import SYNTHETIC, cached_synthetic_ground_truth, recall_at, synthetic
from nearflash.ndsearch.experiments.common import CPU_NAME, GPU_NAME, cache_dir, cpus
from nearflash.ndsearch.experiments.scheduling import (PAPER_DYNAMIC_CUT, PAPER_DYNAMIC_SPEEDUP,
                                                       PAPER_REORDER_CUT, PAPER_REORDER_SPEEDUP)
from nearflash.ndsearch.scale import cpu_seconds, load_or_build, peak_rss_bytes
from nearflash.recssd.experiments.common import option

#: Issue 12's acceptance goal for one batch at 10M vectors.
GOAL_WALL_S = 600.0
GOAL_RSS_GIB = 8.0
#: NDSearch Sec. VII-B: SearSSD over DS-cp on HNSW (2.81x) and over the CPU at billion scale (up to 31.7x, 36 Xeon
#: cores, SSD-resident sets); the target recall@10 of sift-1b (94%).
PAPER_OVER_DSCP = 2.81
PAPER_OVER_CPU = 31.7
PAPER_OVER_GPU = 14.6
PAPER_SIFT1B_RECALL = 0.94
#: The lowest recall@10 at which this run's speed-ups are shown as comparable with the paper's (issue 22: a 10M
#: figure "only at a stated recall"; the paper's targets are 0.90-0.95).
RECALL_FLOOR = 0.9

#: (label, reorder, dynamic allocating, design): the first is SearSSD as built (the timed acceptance batch).
CONFIGS = (("SearSSD (degree BFS + dynamic allocating)", "degree", True, "searssd"),
           ("degree BFS, no dynamic allocating", "degree", False, "searssd"),
           ("as built, no dynamic allocating", "none", False, "searssd"),
           ("DS-cp (degree BFS + dynamic allocating)", "degree", True, "ds-cp"))


def _timed(f):
    t, c = time.perf_counter(), cpu_seconds()
    out = f()
    return out, time.perf_counter() - t, cpu_seconds() - c


def run_scale(exp: Experiment, opts: Options) -> None:
    name = option(opts, "dataset", "sift-like", "sift-like")
    if name not in SYNTHETIC:
        raise ValueError(f"dataset must be one of {sorted(SYNTHETIC)} (synthetic sets only), not {name!r}")
    n = option(opts, "n", 20000, 10_000_000)
    nq = option(opts, "queries", 256, 2048)
    ef = option(opts, "ef", 64, 64)
    R = option(opts, "R", 8, 8)
    efc = option(opts, "ef_construction", 32, 32)
    sample = option(opts, "truth_queries", 50, 100)
    configs = min(option(opts, "configs", len(CONFIGS), len(CONFIGS)), len(CONFIGS))
    seed = opts.seed

    # The acceptance batch: graph loaded (or built, where not cached), queries generated, one model batch.
    (ix, built), load_wall, load_cpu = _timed(lambda: load_or_build(name, n, seed, R, efc))
    q = synthetic(name, nq, seed=seed, queries=True)
    (rep, d, i), model_wall, model_cpu = _timed(
        lambda: searssd.batch(ix, q, 10, ef, reorder="degree", dynamic=True, params={"batch": nq}))
    sim_wall, sim_cpu = load_wall + model_wall, load_cpu + model_cpu
    rss = peak_rss_bytes() / 2**30
    # The host search of the same batch: the model's results must equal it; its wall clock is only printed.
    (hd, hi), cpu_wall, _ = _timed(lambda: ix.search(q, 10, ef=ef, threads=cpus()))
    hosts = rep["hosts"]
    if not (np.array_equal(i, hi) and np.array_equal(d, hd)):
        raise AssertionError(f"{name} {n}: SearSSD's results differ from the host search's")
    gt_q = q[:sample]
    _, gt = cached_synthetic_ground_truth(name, n, gt_q, 10, seed, cache_dir=cache_dir(exp, opts))
    recall = recall_at(i[:sample], gt, 10)

    rows = [[CONFIGS[0][0], rep["page_access_ratio"], rep["page_reads"], rep["trace_length"], rep["iterations"],
             rep["qps"], model_wall, model_cpu]]
    reps = [rep]
    for label, reorder, dynamic, design in CONFIGS[1:configs]:
        (r, _, _), w, c = _timed(lambda: searssd.batch(ix, q, 10, ef, reorder=reorder, dynamic=dynamic,
                                                        params={"batch": nq}, design=design))
        reps.append(r)
        rows.append([label, r["page_access_ratio"], r["page_reads"], r["trace_length"], r["iterations"], r["qps"], w, c])
    exp.table("one batch through the SearSSD model", ["configuration", "page access ratio", "page reads",
                                                       "distances", "iterations", "model QPS", "wall s", "CPU s"], rows)
    run = {"dataset": name, "n": n, "queries": nq, "ef": ef, "R": R, "ef_construction": efc, "seed": seed,
           "build": built, "load_wall_s": load_wall, "load_cpu_s": load_cpu, "model_wall_s": model_wall,
           "model_cpu_s": model_cpu, "batch_wall_s": sim_wall, "batch_cpu_s": sim_cpu, "peak_rss_gib_after_batch": rss,
           "peak_rss_gib_end": peak_rss_bytes() / 2**30, "recall@10": recall, "truth_queries": len(gt_q),
           "this_host_threads": cpus(), "this_host_qps": nq / cpu_wall, "hosts": hosts, "reports": reps}
    exp.record("run", run)

    how = "loaded from the cache" if built["loaded"] else "built in this run"
    exp.compare(f"wall time of one {nq}-query batch at {n:,} vectors (graph {how})", sim_wall, GOAL_WALL_S, "s",
                "goal of issue 12 (not a paper figure); 2 cores shared with other jobs: see CPU time")
    exp.compare("CPU time of that batch (all threads)", sim_cpu, None, "s")
    exp.compare("peak resident memory (getrusage) after the batch", rss, GOAL_RSS_GIB, "GiB", "goal of issue 12")
    exp.compare(f"graph build ({built['n']:,} vectors, HNSW R {R}, ef_construction {efc}), wall",
                built["build_wall_s"], None, "s", f"CPU {built['build_cpu_s']:.0f} s; reported apart, done once")
    at = f"at recall@10 {recall:.2f}"
    exp.compare(f"recall@10 against exact ground truth ({len(gt_q)} queries)", recall, PAPER_SIFT1B_RECALL, "",
                "paper: sift-1b's target recall")
    low = {} if recall >= RECALL_FLOOR else {
        "comparable": False, "why_not_comparable": f"recall@10 {recall:.2f} is below {RECALL_FLOOR}: the paper "
        "compares at 0.90-0.95, and a search that stops early is fast for the wrong reason"}
    exp.compare(f"SearSSD model QPS {at}", rep["qps"], None, "queries/s")
    exp.compare(f"SearSSD / {CPU_NAME} {at}", rep["qps"] / hosts["cpu_qps"], PAPER_OVER_CPU, "x",
                f"paper: up to, billion-scale; ours: its {hosts['cpu_choice']} search", **low)
    exp.compare(f"SearSSD / {GPU_NAME} {at}", rep["qps"] / hosts["gpu_qps"], PAPER_OVER_GPU, "x",
                f"paper: up to, billion-scale (sharded over PCIe); ours: its {hosts['gpu_choice']} search", **low)
    if configs == len(CONFIGS):
        dyn, stat, built_order, dscp = reps
        exp.compare("page accesses cut by degree BFS (no dynamic allocating)",
                    1 - stat["page_access_ratio"] / built_order["page_access_ratio"], PAPER_REORDER_CUT, "fraction")
        exp.compare("speed-up from degree BFS (model)", stat["qps"] / built_order["qps"], PAPER_REORDER_SPEEDUP, "x")
        exp.compare("page accesses cut by dynamic allocating (after reordering)",
                    1 - dyn["page_access_ratio"] / stat["page_access_ratio"], PAPER_DYNAMIC_CUT, "fraction")
        exp.compare("speed-up from dynamic allocating (model)", dyn["qps"] / stat["qps"], PAPER_DYNAMIC_SPEEDUP, "x",
                    "paper: up to")
        exp.compare(f"SearSSD / DS-cp (model) {at}", dyn["qps"] / dscp["qps"], PAPER_OVER_DSCP, "x", "paper: HNSW",
                    **low)
    exp.note(f"Timing-only and synthetic: {n:,} {name} vectors regenerated from seed {seed}, the HNSW graph over "
             "them real; no emulated device holds them (its reserved area is far smaller), the SearSSD model times "
             "the pages the lock-step search reads on the searssd geometry (256 LUNs x 2 planes, 16 KiB pages).")
    exp.note(f"The batch's wall time counts loading the cached graph ({load_wall:.1f} s), reordering, the LUNCSR "
             f"layout, the lock-step search and the timing ({model_wall:.1f} s); the graph build is reported apart "
             f"({built['build_wall_s']:.0f} s wall, {built['build_cpu_s']:.0f} s CPU, done once). This machine's "
             "2 cores are shared with other jobs, so wall times are inflated; CPU time is the steadier figure.")

    fig, ax = exp.figure("scale_10m", ncols=2, width=10)
    ax[0].bar(["batch wall / 10 min", "batch CPU / 10 min", "peak RSS / 8 GiB"],
              [sim_wall / GOAL_WALL_S, sim_cpu / GOAL_WALL_S, rss / GOAL_RSS_GIB])
    ax[0].axhline(1.0, color="k", ls="--", lw=1, label="goal")
    ax[0].set_ylabel("fraction of the goal")
    ax[0].set_title(f"one {nq}-query batch, {n:,} vectors (timing-only)", fontsize=9)
    ax[0].legend(fontsize=8)
    ax[1].bar(range(len(rows)), [r[1] for r in rows])
    ax[1].set_xticks(range(len(rows)), [r[0].split(" (")[0] for r in rows], rotation=20, ha="right", fontsize=7)
    ax[1].set_ylabel("page access ratio")
    ax[1].set_title("page accesses / distances (paper: -38% reordering, -73% dynamic)", fontsize=9)
