"""Shared set-up of NDSearch's experiments: the data sets (Fashion-MNIST from Debian's ``dataset-fashion-mnist``,
seeded synthetic sets, MiniLM embeddings of Debian's ``fortunes``), the HNSW index, exact ground truth, and a SearSSD device (the ``searssd`` preset with
fewer blocks per plane, so the memory device stays small; every LUN, plane, page size and timing is the preset's)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from nearflash.device import Device
from nearflash.experiment import Experiment, Options
from nearflash.ndsearch.datasets import (FORTUNES_DIR, cached_ground_truth, fashion_mnist, fortunes_minilm, synthetic,
                                         xdg_cache)
from nearflash.ndsearch.index import Index
from nearflash.recssd.experiments.common import option

#: Data sets the experiments know: (dim, metric, dtype).
DATASETS = {
    "fashion-mnist": (784, "l2", "uint8"),
    "sift-like": (128, "l2", "uint8"),
    "glove-100-like": (100, "cosine", "float32"),
    # all-MiniLM-L6-v2 sentence embeddings (unit vectors) of the fortunes quotations: 13,083 base, 2,048 queries.
    "fortunes-minilm": (384, "cosine", "float32"),
}


def unavailable(name: str) -> str | None:
    """Why data set ``name`` cannot be loaded on this machine (what to install), or None."""
    if name == "fortunes-minilm":
        from nearflash.ndsearch import minilm
        if minilm.missing():
            return minilm.missing()
        if not FORTUNES_DIR.is_dir():
            return "the Debian package 'fortunes' is not installed"
    return None

#: The searssd preset's geometry with 24 blocks per plane (the full 512 would make a 512 GB image; the search
#: touches only the reserved blocks): 256 LUNs x 2 planes x 2 reserved blocks x 128 pages x 16 KiB = 2 GiB of
#: vertex pages, 2.6M Fashion-MNIST vectors.
DEVICE = dict(blocks_per_plane=24, over_provisioning=40, ext_reserved_blocks=2)


def load(name: str, n: int, nq: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` base vectors and ``nq`` queries of data set ``name``."""
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, not {name!r}")
    if name in ("fashion-mnist", "fortunes-minilm"):
        base, q = fashion_mnist() if name == "fashion-mnist" else fortunes_minilm()
        if nq > len(q):
            q = np.concatenate([q] * (-(-nq // len(q))))  # repeated queries for batches beyond the held-out set
        return base[:n], q[:nq]  # fortunes-minilm has 13,083 base vectors: a larger n gives all of them
    return synthetic(name, n, seed=seed), synthetic(name, nq, seed=seed, queries=True)


def build(name: str, base: np.ndarray, R: int = 16, ef_construction: int = 100) -> tuple[Index, float]:
    """The HNSW index of ``base`` and its build time (s). Built on one thread: a parallel build's graph depends on
    how the threads interleave, and every figure (the traces, the counted host work) must be the same in every run."""
    dim, metric, dtype = DATASETS[name]
    ix = Index(dim, metric, kind="hnsw", R=R, ef_construction=ef_construction, dtype=dtype)
    t = time.perf_counter()
    ix.add(base.astype(dtype, copy=False), threads=1)
    return ix, time.perf_counter() - t


#: ``--set cache=``: where the experiments keep exact ground truth - under the output directory (``out``, the
#: default: ``<--out>/ndsearch/cache``) or in the user's XDG cache (``xdg``, shared across output directories).
CACHES = ("out", "xdg")


def cache_dir(exp: Experiment, opts: Options) -> Path:
    """The ground-truth cache of this run (``--set cache=out|xdg``)."""
    where = option(opts, "cache", "out", "out")
    if where not in CACHES:
        raise ValueError(f"cache must be one of {CACHES}, not {where!r}")
    return exp.out_dir / "cache" if where == "out" else xdg_cache()


def truth(name: str, base: np.ndarray, q: np.ndarray, seed: int, cache: Path) -> np.ndarray:
    """Exact 10 nearest of every query, cached in ``cache`` (see :func:`cache_dir`)."""
    _, metric, _ = DATASETS[name]
    _, ids = cached_ground_truth(f"{name}-{len(base)}-{len(q)}-{seed}", base, q, 10, metric, cache_dir=cache)
    return ids


def device(**params) -> Device:
    """A SearSSD device with the firmware attached (``params``: its parameters, e.g. ``batch``)."""
    dev = Device(None, preset="searssd", overrides=DEVICE)
    dev.attach("ndsearch", **params)
    return dev


def host_qps(ix: Index, q: np.ndarray, k: int, ef: int, threads: int, repeats: int = 3) -> float:
    """Queries per second of the host search (best of ``repeats``, wall clock)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        ix.search(q, k, ef=ef, threads=threads)
        best = min(best, time.perf_counter() - t)
    return len(q) / best


def sizes(opts: Options) -> tuple[list[str], int, int, int]:
    """(data sets, base vectors, queries, ef) from the options."""
    names = option(opts, "datasets", ["sift-like"], ["fashion-mnist", "sift-like"])
    n = option(opts, "n", 3000, 20000)
    nq = option(opts, "queries", 256, 2048)
    ef = option(opts, "ef", 32, 32)
    return names, n, nq, ef


def cpus() -> int:
    return len(os.sched_getaffinity(0))


def device_search(ix: Index, q: np.ndarray, ef: int, nq: int, hi: np.ndarray, hd: np.ndarray, name: str):
    """Deploys `ix` on a fresh SearSSD device (batch `nq`, degree reordering) and searches `q` there (k = 10) in a
    new measurement window; the device must return the host search's ids `hi` and distances `hd`. Returns
    (device, deployment)."""
    dev = device(batch=nq)
    dep = ix.deploy(dev, reorder="degree")
    dev.reset_stats()
    dd, di = dep.search(q, 10, ef=ef)
    if not (np.array_equal(di, hi) and np.array_equal(dd, hd)):
        raise AssertionError(f"{name}: the device's results differ from the host search's")
    return dev, dep


def grouped_bars(ax, rows: list, names: list[str], column: int, rotation: int) -> None:
    """One bar per row of `rows` (dataset name first, configuration second), grouped by configuration and coloured
    by dataset, the bar height from `column`."""
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        rs = [r for r in rows if r[0] == name]
        x = np.arange(len(rs))
        ax.bar(x + i * width, [r[column] for r in rs], width, label=name)
        if i == 0:
            ax.set_xticks(x + 0.4 - width / 2, [r[1].split(" (")[0] for r in rs], rotation=rotation, ha="right",
                          fontsize=7)


#: The paper's host processors, as the comparisons name them (costed from counted work: ``searssd.batch(...)
#: ["hosts"]``, ``searssd.host_parameters()``).
CPU_NAME = "CPU (2 x Xeon Gold 6254, costed)"
GPU_NAME = "GPU (TITAN RTX, costed)"


def host_note(exp: Experiment, threads: int) -> None:
    exp.note("Host baselines (issue 22): the paper's CPU (2 x Intel Xeon Gold 6254, 36 cores, 3.1 GHz) and GPU (NVIDIA "
             "TITAN RTX) are costed from the host search's counted work on this very batch (its distances, vector "
             "width and expansions: the lock-step trace, which is the host search's) times per-operation costs "
             "(`searssd.host_parameters()`: clock, cores, SIMD width, caches, DRAM from the processors' data sheets; "
             "cycles per SIMD step, distance and expansion measured once by `benches/ndsearch_cpu_costs.py`). Each "
             "runs what its practitioner would: the graph search (hnswlib / cuhnsw, float32) or brute force (FAISS's "
             "flat index: SGEMM + top-k), whichever is faster for the batch. No clock of this machine enters a "
             f"ratio; 'this host' ({threads} threads, wall clock) is printed beside for reference only.")


def quick(opts: Options) -> dict:
    """`compare` keywords marking a `--quick` run's paper comparisons as not comparable."""
    if not opts.quick:
        return {}
    return {"comparable": False,
            "why_not_comparable": "--quick: a few thousand vectors and 256 queries, far from the paper's sets"}
