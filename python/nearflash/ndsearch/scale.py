"""Large synthetic sets for SearSSD timing runs (the 10M-vector acceptance run of issue 12): an HNSW graph built
once over a seeded synthetic set streamed in chunks (the vectors are regenerated from their seed, never held
twice) and written to a cache file in the index format (``Index.save``), exact ground truth for a sample of
queries by a streaming brute-force pass over the regenerated set, and one SearSSD batch through the same pure model
the paper-figure experiments use (:func:`nearflash.ndsearch.searssd.batch`). Runs at this scale are timing-only
and synthetic: no emulated device holds the vectors (its reserved area is far smaller), the model times the pages
the lock-step search reads."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

from nearflash.errors import InvalidArgument
from nearflash.ndsearch.datasets import CHUNK, DEFAULT_CACHE, SYNTHETIC, synthetic
from nearflash.ndsearch.index import Index, _int

#: Rows generated and added per step of a streamed build (a multiple of the generator's chunk).
BUILD_STEP = 16 * CHUNK


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (``getrusage``; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cpu_seconds() -> float:
    """User + system CPU time of this process, all threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def index_path(name: str, n: int, seed: int, R: int, ef_construction: int,
               cache_dir: Path | str = DEFAULT_CACHE) -> Path:
    """Where :func:`build_index` caches the graph of these settings."""
    key = hashlib.sha256(f"{name}/{n}/{seed}/hnsw/{R}/{ef_construction}".encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{name}-{n}-hnsw-R{R}-efc{ef_construction}-s{seed}-{key}.nfidx"


def build_index(name: str, n: int, seed: int = 0, R: int = 16, ef_construction: int = 100,
                path: Path | str | None = None, threads: int | None = None, log=None,
                checkpoints: bool = False, cache_dir: Path | str = DEFAULT_CACHE) -> tuple[Index, dict]:
    """Builds the HNSW index of the first ``n`` rows of the synthetic set ``name`` (added in steps of
    :data:`BUILD_STEP` rows, each regenerated from the seed) and saves it to ``path`` (default
    :func:`index_path`) with its build record (wall and CPU seconds, peak RSS) beside it. With ``checkpoints``
    the index of the first ``BUILD_STEP x 2**j`` rows is saved on the way too (the same graph a build of that
    many rows makes), under :func:`index_path` in ``cache_dir``."""
    if name not in SYNTHETIC:
        raise InvalidArgument(f"name must be one of {sorted(SYNTHETIC)}, not {name!r}")
    n = _int("n", n, 1, 2**32 - 2)
    dim, dtype, metric, _ = SYNTHETIC[name]
    path = Path(path) if path is not None else index_path(name, n, seed, R, ef_construction, cache_dir)
    ix = Index(dim, metric, kind="hnsw", R=R, ef_construction=ef_construction, dtype=dtype, seed=seed)
    t0, c0 = time.perf_counter(), cpu_seconds()
    settings = dict(name=name, seed=seed, R=R, ef_construction=ef_construction, threads=threads or cpu_count())

    def save(at: Path) -> dict:
        rec = {"build_wall_s": time.perf_counter() - t0, "build_cpu_s": cpu_seconds() - c0}
        at.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        ix.save(at)
        rec.update(save_s=time.perf_counter() - t, peak_rss_bytes=peak_rss_bytes(), path=str(at), n=ix.ntotal,
                   **settings)
        build_record_path(at).write_text(json.dumps(rec, indent=2))
        return rec

    for start in range(0, n, BUILD_STEP):
        ix.add(synthetic(name, min(BUILD_STEP, n - start), seed=seed, start=start), threads=threads)
        if log is not None:
            print(f"  built {ix.ntotal:,} / {n:,}: {time.perf_counter() - t0:.0f} s wall, "
                  f"{cpu_seconds() - c0:.0f} s CPU, peak RSS {peak_rss_bytes() / 2**30:.2f} GiB", file=log, flush=True)
        steps = ix.ntotal // BUILD_STEP
        if checkpoints and ix.ntotal < n and ix.ntotal % BUILD_STEP == 0 and steps & (steps - 1) == 0:
            save(index_path(name, ix.ntotal, seed, R, ef_construction, cache_dir))
    return ix, save(path)


def build_record_path(path: Path | str) -> Path:
    """The JSON beside a cached index that records how it was built."""
    return Path(path).with_suffix(".build.json")


def cpu_count() -> int:
    return len(os.sched_getaffinity(0))


def load_or_build(name: str, n: int, seed: int = 0, R: int = 16, ef_construction: int = 100,
                  cache_dir: Path | str = DEFAULT_CACHE, log=None) -> tuple[Index, dict]:
    """The cached index of these settings (built by :func:`build_index` first where missing) and its build
    record, with ``loaded`` (whether it came from the cache) and ``load_s``."""
    path = index_path(name, n, seed, R, ef_construction, cache_dir)
    record = build_record_path(path)
    if path.exists() and record.exists():
        t = time.perf_counter()
        ix = Index.load(path)
        built = json.loads(record.read_text())
        built.update(loaded=True, load_s=time.perf_counter() - t)
        return ix, built
    ix, built = build_index(name, n, seed, R, ef_construction, path, log=log, cache_dir=cache_dir)
    built.update(loaded=False, load_s=0.0)
    return ix, built


#: List sizes tried, smallest first, when looking for the ``ef`` that reaches a recall target.
EFS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def ef_for_recall(ix: Index, name: str, n: int, seed: int, target: float, queries: int = 100,
                  cache_dir: Path | str = DEFAULT_CACHE) -> tuple[int | None, float, dict[int, float]]:
    """The smallest ``ef`` of :data:`EFS` whose recall@10 over ``queries`` queries (exact ground truth of the first
    ``n`` rows, streamed) reaches ``target``: ``(ef or None, its recall or the best seen, {ef: recall})``."""
    from nearflash.ndsearch.datasets import cached_synthetic_ground_truth, recall_at

    q = synthetic(name, queries, seed=seed, queries=True)
    _, truth = cached_synthetic_ground_truth(name, n, q, 10, seed, cache_dir=cache_dir)
    seen: dict[int, float] = {}
    for ef in EFS:
        seen[ef] = recall_at(ix.search(q, 10, ef=ef)[1], truth, 10)
        if seen[ef] >= target:
            return ef, seen[ef], seen
    return None, max(seen.values()), seen


def largest_at_recall(name: str, seed: int, R: int, ef_construction: int, target: float, start: int, budget_s: float,
                      log=None, cache_dir: Path | str = DEFAULT_CACHE, max_n: int = 2**32 - 2) -> list[dict]:
    """Builds (or loads) the graphs of ``start``, ``2 start``, ... rows until one misses ``target`` at every ``ef``
    of :data:`EFS`, the builds so far have taken ``budget_s`` of wall time or the size would pass ``max_n``; one
    record per size (build wall and
    CPU seconds, peak RSS, the ``ef`` reaching the target, the recall, the search's wall and CPU time for 2,048
    queries on all cores). The largest size this machine builds at the target is the last record that met it."""
    out: list[dict] = []
    n, spent = start, 0.0
    while spent < budget_s and n <= max_n:
        ix, built = load_or_build(name, n, seed, R, ef_construction, cache_dir=cache_dir, log=log)
        spent += 0.0 if built["loaded"] else built["build_wall_s"]
        ef, recall, seen = ef_for_recall(ix, name, n, seed, target, cache_dir=cache_dir)
        q = synthetic(name, 2048, seed=seed, queries=True)
        t, c = time.perf_counter(), cpu_seconds()
        ix.search(q, 10, ef=ef or EFS[-1])
        rec = {"n": n, "R": R, "ef_construction": ef_construction, "target": target, "met": ef is not None,
               "ef": ef, "recall@10": recall, "recall_by_ef": seen, "build_wall_s": built["build_wall_s"],
               "build_cpu_s": built["build_cpu_s"], "peak_rss_bytes": built.get("peak_rss_bytes"),
               "search_2048_wall_s": time.perf_counter() - t, "search_2048_cpu_s": cpu_seconds() - c,
               "threads": cpu_count()}
        out.append(rec)
        if log is not None:
            print(json.dumps({k: v for k, v in rec.items() if k != "recall_by_ef"}), file=log, flush=True)
        if ef is None:
            break
        n *= 2
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Build and cache the HNSW graph of a large synthetic set; with "
                                "--target-recall, find the largest size this machine builds that reaches it.")
    p.add_argument("--name", default="sift-like")
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--R", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=100)
    p.add_argument("--checkpoints", action="store_true",
                   help="also save the index of the first BUILD_STEP x 2**j rows on the way")
    p.add_argument("--target-recall", type=float, metavar="R",
                   help="double the size from --start until recall@10 >= R is out of reach (or --budget-s is spent)")
    p.add_argument("--start", type=int, default=65_536)
    p.add_argument("--budget-s", type=float, default=3600.0, help="wall seconds of graph builds to spend at most")
    a = p.parse_args(argv)
    if a.target_recall is not None:
        recs = largest_at_recall(a.name, a.seed, a.R, a.ef_construction, a.target_recall, a.start, a.budget_s,
                                 log=sys.stdout)
        met = [r for r in recs if r["met"]]
        print(f"largest size at recall@10 >= {a.target_recall}: "
              + (f"{met[-1]['n']:,} (ef {met[-1]['ef']}, recall {met[-1]['recall@10']:.3f})" if met else "none"))
        return 0
    _, rec = build_index(a.name, a.n, a.seed, a.R, a.ef_construction, log=sys.stdout, checkpoints=a.checkpoints)
    print(rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
