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


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Build and cache the HNSW graph of a large synthetic set.")
    p.add_argument("--name", default="sift-like")
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--R", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=100)
    p.add_argument("--checkpoints", action="store_true",
                   help="also save the index of the first BUILD_STEP x 2**j rows on the way")
    a = p.parse_args(argv)
    _, rec = build_index(a.name, a.n, a.seed, a.R, a.ef_construction, log=sys.stdout, checkpoints=a.checkpoints)
    print(rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
