"""Single-thread HNSW build rate on the sift-like synthetic set (128-d uint8, L2; the set of the large sharded NDSearch
run), for a grid of ``R`` x ``ef_construction``: vectors built per CPU second (ours on one thread, as every shard of
the sharded run is built) and recall@10 against exact ground truth at a sweep of search ``ef``; with ``--hnswlib``,
hnswlib's single-thread build of the same rows (as float32, which it needs) with the same M and ef_construction,
measured in the same run, so the ratio ours / hnswlib does not move with this shared machine's load.

Not a test::

    .venv/bin/python benches/ndsearch_build_rate.py --n 1048576 --efc 100 64 48 40 [--R 16] [--hnswlib]
        [--out DIR] [--cache DIR]

Writes ``build-rate-<n>.json`` and ``.md`` under ``--out`` (default ``benches/results``). Ground truth is cached in
``--cache`` (default: the ndsearch cache).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from nearflash.ndsearch import Index
from nearflash.ndsearch.datasets import DEFAULT_CACHE, cached_synthetic_ground_truth, recall_at, synthetic
from nearflash.ndsearch.scale import cpu_seconds

EFS = [16, 24, 32, 48, 64, 96, 128]


def cpu_timed(f):
    """(result, CPU seconds of this process, wall seconds) of ``f()``."""
    t, c = time.perf_counter(), cpu_seconds()
    out = f()
    return out, cpu_seconds() - c, time.perf_counter() - t


def recalls(search, q: np.ndarray, truth: np.ndarray) -> dict[int, float]:
    return {ef: recall_at(search(q, ef), truth, 10) for ef in EFS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--R", type=int, nargs="+", default=[16])
    ap.add_argument("--efc", type=int, nargs="+", default=[100, 64, 48, 40])
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hnswlib", action="store_true", help="also build with hnswlib (single thread, float32 rows)")
    ap.add_argument("--out", default="benches/results")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    a = ap.parse_args(argv)
    x = synthetic("sift-like", a.n, seed=a.seed)
    q = synthetic("sift-like", a.queries, seed=a.seed, queries=True)
    _, truth = cached_synthetic_ground_truth("sift-like", a.n, q, 10, a.seed, cache_dir=a.cache)
    rows = []
    for R in a.R:
        for efc in a.efc:
            ix = Index(128, "l2", R=R, ef_construction=efc, dtype="uint8", seed=a.seed)
            _, cpu, wall = cpu_timed(lambda: ix.add(x, threads=1))
            row = {"impl": "nearflash", "R": R, "ef_construction": efc, "n": a.n, "build_cpu_s": cpu,
                   "build_wall_s": wall, "vectors_per_cpu_s": a.n / cpu,
                   "recall@10": recalls(lambda qq, ef: ix.search(qq, 10, ef=ef, threads=1)[1], q, truth)}
            if a.hnswlib:
                import hnswlib

                h = hnswlib.Index(space="l2", dim=128)
                h.init_index(max_elements=a.n, M=R, ef_construction=efc, random_seed=a.seed)
                h.set_num_threads(1)
                xf = x.astype(np.float32)
                _, hcpu, hwall = cpu_timed(lambda: h.add_items(xf, np.arange(a.n), num_threads=1))
                del xf

                def hsearch(qq, ef):
                    h.set_ef(ef)
                    return h.knn_query(qq.astype(np.float32), k=10, num_threads=1)[0]

                row["hnswlib"] = {"build_cpu_s": hcpu, "build_wall_s": hwall, "vectors_per_cpu_s": a.n / hcpu,
                                  "recall@10": recalls(hsearch, q, truth)}
                row["rate_vs_hnswlib"] = row["vectors_per_cpu_s"] / row["hnswlib"]["vectors_per_cpu_s"]
                del h
            rows.append(row)
            print(json.dumps(row), flush=True)
            del ix
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"build-rate-{a.n}.json").write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=2))
    lines = [f"# Single-thread HNSW build on sift-like ({a.n:,} x 128 uint8, L2), {a.queries} queries",
             "", "| R | efC | vectors / CPU s | hnswlib / CPU s | ours / hnswlib | "
             + " | ".join(f"recall ef {ef}" for ef in EFS) + " |", "|" + "---|" * (5 + len(EFS))]
    for r in rows:
        h = r.get("hnswlib")
        lines.append(f"| {r['R']} | {r['ef_construction']} | {r['vectors_per_cpu_s']:,.0f} | "
                     + (f"{h['vectors_per_cpu_s']:,.0f} | {r['rate_vs_hnswlib']:.2f}x | " if h else "- | - | ")
                     + " | ".join(f"{r['recall@10'][ef]:.3f}" for ef in EFS) + " |")
    (out / f"build-rate-{a.n}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
