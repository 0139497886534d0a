"""NDSearch on an array of SearSSDs: the base set split into consecutive id ranges, one per device; each device
builds (or loads) its shard's graph, holds it as LUNCSR under its SearSSD firmware (``Index.deploy``) and answers
every batch of queries for its shard; the host merges the shards' top-k (as SmartANNS- and FusionANNS-style
systems do), paying ``cpu.topk_merge_ns_per_candidate`` of host CPU per candidate a shard returns.

    array = nearflash.Array(4, "searssd", overrides={"blocks_per_plane": 24, "over_provisioning": 40,
                                                      "ext_reserved_blocks": 2})
    res = sharded.search(array, sharded.Synthetic("sift-like", 40_000), queries, k=10, ef=32)
    res.ids, res.report.whole, res.qps, res.shards[0]["build_cpu_s"]

Shards are independent between merges, so they run one after another here, in worker processes or as Ray tasks
(``executor=``), with identical reports. Each shard's graph is built on one thread from a fixed seed (the same graph
in every worker) and cached under ``cache_dir`` when one is given, so a large run builds each shard once."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from nearflash.array import topk
from nearflash.array.array import Array, DeviceSpec, Shard
from nearflash.errors import InvalidType, InvalidValue
from nearflash.device import preset_params
from nearflash.ndsearch.datasets import SYNTHETIC, ground_truth, synthetic
from nearflash.ndsearch.index import KINDS, MAX_K, Index, _int
from nearflash.ndsearch.scale import cpu_seconds, peak_rss_bytes


@dataclass(frozen=True)
class Synthetic:
    """The first ``n`` rows of the seeded synthetic set ``name`` (``nearflash.ndsearch.SYNTHETIC``); each shard
    regenerates its own rows, so nothing but the name crosses to a worker."""

    name: str
    n: int
    seed: int = 0

    def __post_init__(self) -> None:
        if self.name not in SYNTHETIC:
            raise InvalidValue(f"name must be one of {sorted(SYNTHETIC)}, not {self.name!r}")
        _int("n", self.n, 1, 2**32 - 2)
        _int("seed", self.seed, 0, 2**63 - 1)

    @property
    def dim(self) -> int:
        return SYNTHETIC[self.name][0]

    @property
    def dtype(self) -> str:
        return SYNTHETIC[self.name][1]

    @property
    def metric(self) -> str:
        return SYNTHETIC[self.name][2]

    def __len__(self) -> int:
        return self.n

    def rows(self, first: int, count: int) -> np.ndarray:
        return synthetic(self.name, count, seed=self.seed, start=first)


@dataclass(frozen=True)
class Graph:
    """How every shard builds its graph: HNSW or Vamana, ``R``, ``ef_construction``, the metric (None: the data
    set's, ``"l2"`` for an array) and the build seed."""

    kind: str = "hnsw"
    R: int = 16
    ef_construction: int = 100
    metric: Optional[str] = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidValue(f"graph kind must be one of {KINDS}, not {self.kind!r}")
        _int("R", self.R, 1, 1024)
        _int("ef_construction", self.ef_construction, 1, MAX_K)
        _int("seed", self.seed, 0, 2**63 - 1)


@dataclass
class Result(topk.Merged):
    """A sharded search: the merged ``distances``/``ids`` (nq x k, global ids), the array's report, and per shard
    what it held and what building and searching it cost (``rows``, ``first``, ``build_wall_s``, ``build_cpu_s``,
    ``loaded``, ``deploy_ns``, ``search_ns``, ``peak_rss_bytes`` of the process that ran it, ``energy_j``, and
    ``cpu_s``: this process's CPU seconds per phase, ``graph`` (load or build), ``deploy``, ``search`` (the
    simulated device), ``ground_truth``). ``truth``: the exact ``(distances, ids)`` of the first ``truth_queries``
    queries over the rows searched (each shard's exact k nearest, merged), or None."""

    truth: Optional[tuple[np.ndarray, np.ndarray]] = None

    @property
    def energy_j(self) -> float:
        """The devices' modelled energy over the searches (each device report's total: flash, link, controller and
        the SearSSD units' Table I power x busy time); the host's merge is not in it."""
        return sum(s["energy_j"] for s in self.shards)


def _base_rows(base: Any, first: int, count: int) -> np.ndarray:
    return base.rows(first, count) if isinstance(base, Synthetic) else base[first:first + count]


def _metric(base: Any, graph: Graph) -> str:
    return graph.metric or (base.metric if isinstance(base, Synthetic) else "l2")


def shard_path(cache_dir: Optional[str | Path], base: Any, first: int, rows: int, graph: Graph) -> Optional[Path]:
    """Where the graph of ``rows`` rows of ``base`` from ``first`` is cached under ``cache_dir`` (its build record
    beside it, ``.json``); None where nothing is cached (no directory, or rows given as an array)."""
    if cache_dir is None or not isinstance(base, Synthetic):
        return None
    key = f"{base.name}-s{base.seed}-{first}+{rows}-{graph.kind}-R{graph.R}-efc{graph.ef_construction}-g{graph.seed}"
    return Path(cache_dir) / f"shard-{key}.nfidx"


def shard_graph(base: Any, first: int, rows: int, graph: Graph, cache_dir: Optional[str]) -> tuple[Index, dict]:
    """The graph of ``rows`` rows of ``base`` from ``first`` (local ids 0..rows-1), built on one thread, or loaded
    from ``cache_dir`` where an earlier run built it; with the build's wall and CPU seconds."""
    path = shard_path(cache_dir, base, first, rows, graph)
    if path is not None and path.exists() and path.with_suffix(".json").exists():
        return Index.load(path), {**json.loads(path.with_suffix(".json").read_text()), "loaded": True}
    x = _base_rows(base, first, rows)
    ix = Index(x.shape[1], _metric(base, graph), kind=graph.kind, R=graph.R, ef_construction=graph.ef_construction,
               dtype=x.dtype.name, seed=graph.seed)
    t, c = time.perf_counter(), cpu_seconds()
    ix.add(x, threads=1)
    built = {"build_wall_s": time.perf_counter() - t, "build_cpu_s": cpu_seconds() - c}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        ix.save(path)
        path.with_suffix(".json").write_text(json.dumps(built))
    return ix, {**built, "loaded": False}


def shard_rows(base: Any, shard: Shard, split: Optional[int]) -> tuple[int, int]:
    """(first row, rows) of ``shard``: its part of ``base`` split evenly over ``split`` shards (None: the array's
    devices; a partial array runs the first ``len(array)`` of them)."""
    return topk.even_split(len(base), split or shard.devices)[shard.index]


def search_shard(shard: Shard, base: Any, queries: np.ndarray, k: int, ef: int, graph: Graph, batch: int,
                 merge_ns_per_candidate: float, cache_dir: Optional[str], split: Optional[int] = None,
                 truth: int = 0) -> tuple[np.ndarray, np.ndarray, dict, Optional[tuple[np.ndarray, np.ndarray]]]:
    """One device's part (module-level, so a worker process can run it): builds or loads its shard's graph, deploys
    it on its SearSSD, then searches every batch of ``queries``; each batch's queries cross to the device and its
    k x (id, distance) answers back, and the host folds them into the running top-k. ``truth`` > 0: also the exact
    k nearest of the first ``truth`` queries over this shard's rows (global ids), for the recall check."""
    first, rows = shard_rows(base, shard, split)
    cpu = {"graph": cpu_seconds()}
    ix, built = shard_graph(base, first, rows, graph, cache_dir)
    dev = shard.device
    if "ndsearch" not in dev.report().extensions:
        dev.attach("ndsearch", batch=batch)
    cpu["deploy"] = cpu_seconds()
    dep = ix.deploy(dev)
    cpu["search"] = cpu_seconds()
    shard.start_ns = dev.now_ns
    before = _energy(dev)
    out_d, out_i = [], []
    for b0 in range(0, len(queries), batch):
        q = queries[b0:b0 + batch]
        shard.transfer(dev.now_ns, q.nbytes, "to_device")
        d, i = dep.search(q, k, ef)
        got = int(np.count_nonzero(i >= 0))
        shard.transfer(dev.now_ns, got * 8, cpu_ns=math.ceil(got * merge_ns_per_candidate))
        out_d.append(d)
        out_i.append(np.where(i >= 0, i + first, -1))
    cpu["ground_truth"] = cpu_seconds()
    exact = shard_truth(base, first, rows, queries[:truth], k, _metric(base, graph)) if truth else None
    info = {"device": shard.index, "first": first, "rows": rows, **built, "deploy_ns": dep.deploy_ns,
            "search_ns": dev.now_ns - shard.start_ns, "energy_j": _energy(dev) - before,
            "peak_rss_bytes": peak_rss_bytes(), "index_bytes": ix.memory_bytes(), "cpu_s": _phases(cpu)}
    return np.vstack(out_d), np.vstack(out_i), info, exact


def _phases(marks: dict[str, float]) -> dict[str, float]:
    """CPU seconds of each phase from the CPU clock at each phase's start (in order; the last ends now)."""
    names, at = list(marks), [*marks.values(), cpu_seconds()]
    return {name: at[n + 1] - at[n] for n, name in enumerate(names)}


def shard_truth(base: Any, first: int, rows: int, queries: np.ndarray, k: int,
                metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The exact ``k`` nearest of each of ``queries`` among the shard's rows (global ids): merged over the shards
    (:func:`nearflash.array.topk.merge`) they are the whole set's, computed where each shard's rows already are,
    side by side, and kept with the shard's result when the search is resumable."""
    d, i = ground_truth(_base_rows(base, first, rows), queries, k, metric)
    return d, i + first


def host_search_shard(shard: Shard, base: Any, queries: np.ndarray, k: int, ef: int, graph: Graph, batch: int,
                      merge_ns_per_candidate: float, cache_dir: Optional[str], split: Optional[int] = None,
                      truth: int = 0) -> tuple[np.ndarray, np.ndarray, dict, Optional[tuple[np.ndarray, np.ndarray]]]:
    """One device's part on the host path (CPU + SSD, DiskANN-style, :mod:`nearflash.ndsearch.diskann`): the shard's
    graph and vectors in DiskANN's sector layout on the device's namespace, the host searching them with reads
    through the device's queue; each round's 4 KiB blocks cross the shared host, followed by the host search's CPU
    on them (:func:`search_cpu_ns`: the round's distances and expansions at the costed CPU baseline's per-operation
    costs), split evenly over the host's threads (one per shared core, at most one per query in the round), and the
    host folds the shard's top-k into the running lists."""
    from nearflash.ndsearch import diskann

    first, rows = shard_rows(base, shard, split)
    cpu = {"graph": cpu_seconds()}
    ix, built = shard_graph(base, first, rows, graph, cache_dir)
    dev = shard.device
    cpu["deploy"] = cpu_seconds()
    npb = diskann.write_layout(ix, _base_rows(base, first, rows), dev)
    cpu["search"] = cpu_seconds()
    shard.start_ns = dev.now_ns
    before = _energy(dev)
    reads = 0
    search_ns = 0.0
    out_d, out_i = [], []

    def round_done(t: int, blocks: int, distances: int, hops: int, live: int) -> None:
        nonlocal search_ns
        ns = search_cpu_ns(ix, distances, hops)
        search_ns += ns
        threads = min(live, shard.cores)  # the round's queries split over the host's threads
        shard.transfer(t, blocks * dev.lba_bytes, cpu_ns=[math.ceil(ns / threads)] * threads)

    for b0 in range(0, len(queries), batch):
        q = queries[b0:b0 + batch]
        got = diskann.search_io(ix, q, min(k, rows), ef, dev, npb, 0, on_round=round_done)
        reads += got.reads
        d, i = ix.search(q, k, ef=max(ef, k))
        n = int(np.count_nonzero(i >= 0))
        last = shard.transfers[-1]
        shard.transfers[-1] = dataclasses.replace(last, cpu_ns=last.cpu_ns + math.ceil(n * merge_ns_per_candidate))
        out_d.append(d)
        out_i.append(np.where(i >= 0, i + first, -1))
    cpu["ground_truth"] = cpu_seconds()
    exact = shard_truth(base, first, rows, queries[:truth], k, _metric(base, graph)) if truth else None
    info = {"device": shard.index, "first": first, "rows": rows, **built, "reads": reads, "search_cpu_ns": search_ns,
            "search_ns": dev.now_ns - shard.start_ns, "energy_j": _energy(dev) - before,
            "peak_rss_bytes": peak_rss_bytes(), "index_bytes": ix.memory_bytes(), "cpu_s": _phases(cpu)}
    return np.vstack(out_d), np.vstack(out_i), info, exact


def search_cpu_ns(ix: Index, distances: int, hops: int) -> float:
    """Host CPU time (ns, summed over cores) of a graph search over ``ix`` that measured ``distances`` distances and
    made ``hops`` expansions: the costed CPU baseline's per-operation costs (``searssd.host_parameters()``: cycles
    of a distance's SIMD steps and overhead, of an expansion, and the DRAM misses of a set beyond the last-level
    cache) through the same function that baseline uses (``hosts::cpu_graph_core``)."""
    from nearflash._native import ndsearch as native

    return native.cpu_search_core_ns(distances, hops, ix.dim, ix.ntotal, 2 * ix.R)


#: The work of each path on a shard.
PATHS = {"in_storage": search_shard, "host": host_search_shard}


def _energy(dev: Any) -> float:
    return float(dev.report().total_energy_j)


def search(array: Array, base: Any, queries: Any, k: int = 10, ef: int = 64, *, graph: Graph = Graph(),
           batch: int = 2048, executor: Any = None, cache_dir: Optional[str | Path] = None,
           path: str = "in_storage", split: Optional[int] = None, truth_queries: int = 0) -> Result:
    """Searches ``queries`` over ``base`` (a 2-D array, or :class:`Synthetic`) split evenly over ``array``'s
    devices (one preset, each with the ``ndsearch`` extension's reserved area: ``ext_reserved_blocks``); returns the
    merged k nearest per query (:class:`Result`). ``path`` "in_storage" (SearSSD) or "host" (CPU + SSD reads,
    :func:`host_search_shard`; the devices need no reserved area then). ``k`` beyond what a shard holds is fine (the shard pads, the
    merge takes from the others); beyond the whole set the answer pads with id -1, distance +inf, as FAISS.
    ``split``: ``base`` is split evenly over this many shards and ``array`` runs the first ``len(array)`` of them (a
    partial array: the answer covers their rows only); None: over ``array``'s devices. ``truth_queries``: the
    exact answers of the first this many queries over the rows searched, computed shard by shard beside the search
    (``Result.truth``). ``executor`` may be a :class:`nearflash.array.Resumable` (a killed search resumes at the
    shards it had not finished)."""
    fn, args = work(array, base, queries, k, ef, graph=graph, batch=batch, cache_dir=cache_dir, path=path,
                    split=split, truth_queries=truth_queries)
    report, parts = array.run(fn, *args, executor=executor)
    k = args[2]
    d, i = topk.merge([(p[0], p[1]) for p in parts], k)
    truth = topk.merge([p[3] for p in parts], k) if args[-1] else None
    return Result(ids=i, distances=d, report=report, shards=[p[2] for p in parts], truth=truth)


def work(array: Array, base: Any, queries: Any, k: int = 10, ef: int = 64, *, graph: Graph = Graph(),
         batch: int = 2048, cache_dir: Optional[str | Path] = None, path: str = "in_storage",
         split: Optional[int] = None, truth_queries: int = 0) -> tuple[Any, tuple[Any, ...]]:
    """The checked shard work of :func:`search` (its arguments as there): ``(work, args)`` for ``array.run``, e.g.
    to ask a :class:`nearflash.array.Resumable` which shards are still to run."""
    topk.one_preset(array, "the sharded NDSearch")
    if path not in PATHS:
        raise InvalidValue(f"path must be one of {sorted(PATHS)}, not {path!r}")
    if not isinstance(graph, Graph):
        raise InvalidType(f"graph must be a nearflash.ndsearch.sharded.Graph, not {type(graph).__name__}")
    if isinstance(base, Synthetic):
        dim, dtype = base.dim, base.dtype
    elif isinstance(base, np.ndarray):
        if base.ndim != 2 or base.dtype.name not in ("float32", "uint8", "int8"):
            raise InvalidValue(f"base must be 2-D float32, uint8 or int8, not {base.dtype} of shape {base.shape}")
        dim, dtype = base.shape[1], base.dtype.name
    else:
        raise InvalidType(f"base must be a numpy array or a sharded.Synthetic set, not {type(base).__name__}")
    if split is not None and _int("split", split, 1) < len(array):
        raise InvalidValue(f"split must be at least the array's {len(array)} devices, not {split}")
    if len(base) < (split or len(array)):
        raise InvalidValue(f"base has {len(base)} vectors for {split or len(array)} shards: every shard needs one")
    probe = Index(dim, _metric(base, graph), dtype=dtype)
    q = probe._rows("queries", queries)
    if len(q) == 0:
        raise InvalidValue("queries must hold at least one row")
    k, ef = _int("k", k, 1, MAX_K), _int("ef", ef, 1, MAX_K)
    batch = _int("batch", batch, 1, 1 << 16)
    truth_queries = min(_int("truth_queries", truth_queries, 0), len(q))
    cache = None if cache_dir is None else str(cache_dir)
    return PATHS[path], (base, q, k, ef, graph, batch, array.host["topk_merge_ns_per_candidate"], cache, split,
                         truth_queries)


def estimate(array: Array, base: Any, queries: np.ndarray, k: int, ef: int, graph: Graph, cache_dir: Optional[str],
             split: Optional[int], truth_queries: int, probe: int, shards: int, workers: int) -> dict:
    """What :func:`search` of ``queries`` over ``shards`` of ``array``'s shards will cost this machine, measured
    before it starts: shard 0 alone searches the first ``probe`` queries (and the exact answers of
    ``truth_queries``) in this process, and each phase's CPU seconds scale to the run (graph load and deploy once
    per shard, the device search per query, the ground truth per shard); wall time with ``workers`` shards at once,
    each on a core of its own. An upper bound: the simulated search's CPU per query falls with the batch's size
    (docs/arrays.md: ~35% over at 32 of 2,048 queries)."""
    p = min(_int("probe", probe, 1), len(queries))
    one = Array([array.specs[0]])
    t = time.perf_counter()
    got = search(one, base, queries[:p], k, ef, graph=graph, cache_dir=cache_dir, split=split or len(array),
                 truth_queries=truth_queries)
    c = got.shards[0]["cpu_s"]
    per_shard = c["graph"] + c["deploy"] + c["search"] * len(queries) / p + c["ground_truth"]
    return {"probe_queries": p, "probe_cpu_s": c, "probe_wall_s": time.perf_counter() - t,
            "per_shard_cpu_s": per_shard, "shards": shards, "workers": workers, "cpu_s": shards * per_shard,
            "wall_s_at_full_cores": math.ceil(shards / max(workers, 1)) * per_shard}


def device_capacity(spec: DeviceSpec, vector_bytes: int) -> int:
    """Vectors of ``vector_bytes`` that one device of ``spec`` holds in its LUNCSR layout: every LUN's planes x
    ``ext_reserved_blocks`` x pages per block x whole vectors per page (``luncsr::LunCsr::build``'s bound)."""
    units = {"count": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20}
    p = {name.split(".")[-1]: int(float(value) * units[unit])
         for name, value, unit, _ in preset_params(spec.preset, spec.overrides) if unit in units}
    planes = p["channels"] * p["chips_per_channel"] * p["dies_per_chip"] * p["planes_per_die"]
    return planes * p["ext_reserved_blocks"] * p["pages_per_block"] * (p["page_size"] // vector_bytes)


def main(argv: Optional[list[str]] = None) -> int:
    import argparse
    import concurrent.futures
    import multiprocessing
    import sys

    from nearflash.array.array import RayExecutor, Resumable, run_shard
    from nearflash.ndsearch.datasets import recall_at

    ap = argparse.ArgumentParser(prog="python -m nearflash.ndsearch.sharded",
                                 description="A synthetic set sharded over an array of SearSSDs: build each shard's "
                                 "graph, search a batch across the array, merge top-k on the host.")
    ap.add_argument("--name", default="sift-like", choices=sorted(SYNTHETIC))
    ap.add_argument("--n", type=int, required=True, help="vectors in the whole set")
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--split", type=int, help="split the set over this many shards and search the first --devices of "
                    "them (a partial array; recall against the rows they hold)")
    ap.add_argument("--preset", default="searssd")
    ap.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                    help="device preset overrides (e.g. ext_reserved_blocks=1, pages_per_block=2)")
    ap.add_argument("--queries", type=int, default=2048)
    ap.add_argument("--truth-queries", type=int, default=200, help="queries whose recall@k is checked by brute force")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--ef", type=int, default=32)
    ap.add_argument("--R", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0, help="worker processes, a fresh one per shard (0: this process)")
    ap.add_argument("--ray", metavar="ADDRESS", help="run each shard as a Ray task ('auto', 'ray://head:10001', ...)")
    ap.add_argument("--cache", help="directory for the shards' graphs (built once, loaded after)")
    ap.add_argument("--results", help="keep each shard's search result here as it finishes: run again, the search "
                    "resumes at the shards not finished (same final report)")
    ap.add_argument("--probe-queries", type=int, default=0, help="before searching, measure shard 0 with this many "
                    "queries and print the run's estimated CPU and wall time (0: no estimate)")
    ap.add_argument("--out", help="write the result JSON here")
    a = ap.parse_args(argv)
    overrides = {}
    for item in a.set:
        key, _, value = item.partition("=")
        overrides[key] = int(value) if value.isdigit() else value
    base = Synthetic(a.name, a.n, a.seed)
    array = Array(a.devices, a.preset, overrides=overrides)
    capacity = device_capacity(array.specs[0], base.dim * np.dtype(base.dtype).itemsize)
    q = synthetic(a.name, a.queries, seed=a.seed, queries=True)
    graph = Graph(R=a.R, ef_construction=a.ef_construction, seed=a.seed)
    nt = min(a.truth_queries, a.queries)
    executor: Any = None
    if a.ray:
        executor = RayExecutor(a.ray)
    elif a.workers:
        executor = concurrent.futures.ProcessPoolExecutor(a.workers, mp_context=multiprocessing.get_context("spawn"),
                                                          max_tasks_per_child=1)
    if a.results:
        executor = Resumable(a.results, executor)
    planned = None
    if a.probe_queries:
        todo = len(array) if not a.results else len(executor.pending(run_shard, *array.jobs(
            *work(array, base, q, a.k, a.ef, graph=graph, cache_dir=a.cache, split=a.split, truth_queries=nt))))
        planned = estimate(array, base, q, a.k, a.ef, graph, a.cache, a.split, nt, a.probe_queries, todo,
                           max(a.workers, 1)) if todo else {"shards": 0, "cpu_s": 0.0}
        print(json.dumps({"estimate": planned}), flush=True)
    t0 = time.perf_counter()
    res = search(array, base, q, a.k, a.ef, graph=graph, executor=executor, cache_dir=a.cache, split=a.split,
                 truth_queries=nt)
    wall = time.perf_counter() - t0
    if hasattr(executor, "shutdown"):
        executor.shutdown()
    held = sum(s["rows"] for s in res.shards)  # the first rows of the set (all of it unless --split)
    phases = {name: sum(s["cpu_s"][name] for s in res.shards) for name in res.shards[0]["cpu_s"]}
    out = {
        "command": "python -m nearflash.ndsearch.sharded " + " ".join(sys.argv[1:] if argv is None else argv),
        "set": a.name, "vectors": a.n, "devices": a.devices, "split": a.split or a.devices, "vectors_searched": held,
        "preset": a.preset, "overrides": overrides,
        "device_capacity_vectors": capacity, "multiple_of_one_device": a.n / capacity,
        "queries": a.queries, "k": a.k, "ef": a.ef, "R": a.R, "ef_construction": a.ef_construction,
        f"recall@{a.k}": recall_at(res.ids[:nt], res.truth[1], a.k) if nt else None, "recall_queries": nt,
        "qps": res.qps, "elapsed_ns": res.report.elapsed_ns, "energy_j": res.energy_j,
        "queries_per_joule": a.queries / res.energy_j if res.energy_j else None,
        "busiest_shared": res.report.whole["busiest"], "wall_s": wall, "cpu_s_by_phase": phases,
        "estimate": planned, "shards_resumed": getattr(executor, "loaded", 0),
        "build_cpu_s": sum(s["build_cpu_s"] for s in res.shards),
        "peak_rss_bytes_per_worker": max(s["peak_rss_bytes"] for s in res.shards),
        "peak_rss_bytes_driver": peak_rss_bytes(),
        "executor": "ray" if a.ray else (f"{a.workers} worker processes" if a.workers else "this process"),
        "shards": res.shards,
    }
    text = json.dumps(out, indent=2)
    if a.out:
        Path(a.out).write_text(text)
    print(json.dumps({k: v for k, v in out.items() if k != "shards"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
