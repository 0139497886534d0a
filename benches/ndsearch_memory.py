"""Memory per vector: nearflash's HNSW (``nearflash.ndsearch.Index``) against hnswlib, both measured in this run the
same way - each build in a fresh Python process, resident memory (``/proc/self/statm``) before and after adding
``n`` random float32 vectors with M = 16 (a warm-up build of 2,000 vectors first, so that code pages, thread pools
and visited-list pools are not counted as the index's), one add or ``--chunks`` adds, then one search. Prints the
bytes per vector of each, the ratio (goal: <= 1.2, issue 22), and our own heap accounting (``Index.memory_bytes``).

Not a test (``tests/ndsearch/test_faiss_api.py`` checks the ratio at a small size). Needs hnswlib (the
``baselines`` extra)::

    .venv/bin/python benches/ndsearch_memory.py [--n 100000] [--dims 32,128,784] [--chunks 1,10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import gc, json, sys
import numpy as np
lib, n, d, chunks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
x = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
def build(m, parts):
    bounds = np.linspace(0, m, parts + 1).astype(int)
    if lib == "nearflash":
        from nearflash.ndsearch import Index
        ix = Index(d, "l2", R=16, ef_construction=40)
        for a, b in zip(bounds, bounds[1:]):
            ix.add(x[a:b])
        ix.search(x[:100], 10)
    else:
        import hnswlib
        ix = hnswlib.Index(space="l2", dim=d)
        ix.init_index(max_elements=m, M=16, ef_construction=40)
        for a, b in zip(bounds, bounds[1:]):
            ix.add_items(x[a:b], np.arange(a, b))
        ix.knn_query(x[:100], k=10)
    return ix
warm = build(2000, 1)
del warm
gc.collect()
r0 = rss()
ix = build(n, chunks)
gc.collect()
out = {"rss_per_vector": (rss() - r0) / n}
if lib == "nearflash":
    out["heap_per_vector"] = ix.memory_bytes() / n
print(json.dumps(out))
"""


def measure(lib: str, n: int, dim: int, chunks: int) -> dict:
    """Bytes per vector of one build in a fresh process."""
    r = subprocess.run([sys.executable, "-c", CHILD, lib, str(n), str(dim), str(chunks)], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def ratio(n: int, dim: int, chunks: int) -> tuple[dict, dict, float]:
    ours, theirs = measure("nearflash", n, dim, chunks), measure("hnswlib", n, dim, chunks)
    return ours, theirs, ours["rss_per_vector"] / theirs["rss_per_vector"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dims", default="32,128,784")
    ap.add_argument("--chunks", default="1,10")
    a = ap.parse_args()
    try:
        import hnswlib  # noqa: F401
    except ImportError:
        sys.exit("hnswlib is not installed: pip install 'nearflash[baselines]'")
    print(f"| dim | adds | nearflash B/vector (RSS) | nearflash heap B/vector | hnswlib B/vector (RSS) | ratio |")
    print("|---|---|---|---|---|---|")
    for dim in map(int, a.dims.split(",")):
        for chunks in map(int, a.chunks.split(",")):
            ours, theirs, r = ratio(a.n, dim, chunks)
            print(f"| {dim} | {chunks} | {ours['rss_per_vector']:.0f} | {ours['heap_per_vector']:.0f} | "
                  f"{theirs['rss_per_vector']:.0f} | {r:.2f} |", flush=True)


if __name__ == "__main__":
    main()
