"""Per-operation costs of graph search on a CPU core, measured once on a reference machine: the cycles a SIMD step,
a distance and an expansion cost hnswlib (the paper's CPU library) and nearflash's own HNSW, both single-threaded
on float32 sets that fit this machine's caches. The work of each batch is counted exactly (the lock-step trace of
``searssd.batch``: distances, expansions, vector width); times are CPU seconds, the best of ``--repeats``; the
core's nominal clock (/proc/cpuinfo) converts them to cycles. A non-negative least
squares fit over data sets and ``ef`` gives

    cycles per batch = step x distances x ceil(dim / 16) + overhead x distances + hop x expansions

whose three numbers are the ``cpu_step_cycles``, ``cpu_distance_overhead`` and ``cpu_hop_cycles`` of
``nearflash.ndsearch.searssd.host_parameters()`` (sources there name this script, its date and machine). The
paper's CPU (2 x Xeon Gold 6254) is then costed with them at its own clock, cores, caches and DRAM.

Needs hnswlib (the ``baselines`` extra)::

    .venv/bin/python benches/ndsearch_cpu_costs.py [--out benches/results/ndsearch_cpu_costs] [--repeats 5]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

import numpy as np

from nearflash.ndsearch import Index, searssd
from nearflash.ndsearch.experiments.common import load

SETS = {"sift-like": 128, "glove-100-like": 100, "fashion-mnist": 784}
EFS = (16, 32, 64)
N, NQ = 20_000, 1024


def clock_hz() -> float:
    """The core's nominal clock (``cpu MHz`` of /proc/cpuinfo, the TSC rate on a VM). Cycles are counted at it: a
    core that turbos above it does more per nominal cycle, so the costs err towards a faster (stronger) CPU."""
    mhz = next(float(line.split(":", 1)[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz"))
    return mhz * 1e6


def nonnegative_lstsq(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient >= 0: a negative one is fixed at 0 and the rest refitted."""
    free = list(range(A.shape[1]))
    while True:
        coef = np.zeros(A.shape[1])
        coef[free] = np.linalg.lstsq(A[:, free], y, rcond=None)[0]
        if (coef >= 0).all():
            return coef
        free.remove(int(np.argmin(coef)))


def cpu_time(f, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        f()
        best = min(best, time.process_time() - t)
    return best


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return f"{model}, {len(__import__('os').sched_getaffinity(0))} CPUs, {platform.system()} {platform.release()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benches/results/ndsearch_cpu_costs")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    import hnswlib

    hz = clock_hz()
    rows = []
    for name, dim in SETS.items():
        base, q = load(name, N, NQ, 1)
        base, q = base.astype(np.float32), q.astype(np.float32)
        ours = Index(dim, "l2", R=16, ef_construction=100)
        ours.add(base)
        h = hnswlib.Index(space="l2", dim=dim)
        h.init_index(max_elements=N, M=16, ef_construction=100, random_seed=100)
        h.add_items(base, np.arange(N))
        for ef in EFS:
            work = searssd.batch(ours, q, 10, ef, params={"batch": NQ})[0]["host_work"]
            h.set_ef(ef)
            t_h = cpu_time(lambda: h.knn_query(q, k=10, num_threads=1), a.repeats)
            t_o = cpu_time(lambda: ours.search(q, 10, ef=ef, threads=1), a.repeats)
            dists = work["distances"] + work["upper_distances"]
            rows.append({"dataset": name, "dim": dim, "ef": ef, "distances": dists, "hops": work["hops"],
                         "steps": dists * -(-dim // 16), "hnswlib_s": t_h, "nearflash_s": t_o})
            print(f"{name} ef {ef}: {dists / NQ:.0f} distances and {work['hops'] / NQ:.0f} expansions per query; "
                  f"hnswlib {t_h / NQ * 1e6:.1f} us, nearflash {t_o / NQ * 1e6:.1f} us per query (CPU time)", flush=True)
    fits = {}
    for lib in ("hnswlib", "nearflash"):
        A = np.array([[r["steps"], r["distances"], r["hops"]] for r in rows], dtype=float)
        y = np.array([r[f"{lib}_s"] * hz for r in rows])
        coef = nonnegative_lstsq(A, y)
        pred = A @ coef
        fits[lib] = {"step_cycles": coef[0], "distance_overhead_cycles": coef[1], "hop_cycles": coef[2],
                     "max_rel_error": float(np.max(np.abs(pred - y) / y))}
        print(f"{lib}: {coef[0]:.2f} cycles per 16-lane step, {coef[1]:.1f} per distance, {coef[2]:.1f} per "
              f"expansion (worst fit error {fits[lib]['max_rel_error']:.0%})")
    res = {"date": datetime.date.today().isoformat(), "machine": machine(), "clock_ghz": hz / 1e9, "n": N, "queries": NQ,
           "method": "single-thread CPU time (best of repeats) / counted work, non-negative least squares",
           "rows": rows, "fits": fits}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ndsearch_cpu_costs.json").write_text(json.dumps(res, indent=1))
    print(f"clock {hz / 1e9:.2f} GHz; wrote {out}/ndsearch_cpu_costs.json")


if __name__ == "__main__":
    main()
