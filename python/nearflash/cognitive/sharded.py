"""Cognitive SSD on an array: the image database split into consecutive id ranges, one per device; each device
hashes its shard with DLG-x (one int8 model, calibrated on the database's first ``calibration`` images once per
process for all its shards, :func:`nearflash.cognitive.pipeline.quantised`, so a query hashes to the same code
everywhere), holds its shard's K-NN hash graph in flash and answers each query's top-T by its GSE;
the host ranks every shard's T answers by Hamming distance to the query's code and keeps the T nearest, paying
``cpu.topk_merge_ns_per_candidate`` of host CPU per candidate (XOR, popcount and the merge step).

    array = nearflash.Array(4, "cosmos-plus", overrides={"ext_reserved_blocks": 8, ...})
    res = sharded.search(array, database, queries, t=10)
    res.ids, res.distances, res.report.whole, res.qps

Shards run one after another here, in worker processes or as Ray tasks (``executor=``), with identical reports.
Each query's images cross to every device (784 B), its code and T ids (8 + 4 T bytes) come back.

``path="host"`` is the paper's B-CPU baseline on the array (:func:`host_search_shard`): the host hashes every query
on its own cores and searches each shard's graph itself over pages read from the drives."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nearflash.array import topk
from nearflash.array.array import Array, Shard
from nearflash.cognitive import baselines
from nearflash.cognitive.pipeline import LAYOUTS, DlgIndex, _images
from nearflash.cognitive.ssd import CognitiveSSD
from nearflash.device import _count
from nearflash.errors import InvalidArgument

PIXELS = 784
#: A host read's queue depth on the host path (the host's threads keep this many graph pages in flight per drive).
HOST_DEPTH = 64


#: A sharded search's answer (``distances`` are Hamming distances).
Result = topk.Merged


def hamming(codes: np.ndarray, query_codes: np.ndarray) -> np.ndarray:
    """Bits differing between each row of ``codes`` (n x t uint64) and its query's code (n uint64)."""
    x = np.ascontiguousarray(codes ^ query_codes[:, None])
    return np.unpackbits(x.view(np.uint8), axis=1).reshape(len(x), x.shape[1], 64).sum(axis=2)


def search_shard(shard: Shard, database: np.ndarray, calibration: np.ndarray, queries: np.ndarray, t: int,
                 k: int, layout: str, seed: int, method: str, merge_ns_per_candidate: float
                 ) -> tuple[np.ndarray, np.ndarray, dict]:
    """One device's part (module-level, so a worker process can run it): deploys its shard on its Cognitive SSD,
    then searches the queries in DLG_hashing sessions; returns (global ids, Hamming distances, what it held)."""
    first, rows = topk.even_split(len(database), shard.devices)[shard.index]
    dev = shard.device
    ssd = CognitiveSSD(dev, method=method)
    ssd.deploy(None, database[first:first + rows], layout=layout, k=min(k, rows - 1), calibration=calibration,
               seed=seed)
    shard.start_ns = dev.now_ns
    before = dev.report().total_energy_j
    tt = min(t, rows)
    shard.transfer(dev.now_ns, queries.nbytes, "to_device")
    ids, codes = ssd.search_with_codes(queries, tt)
    dist = hamming(ssd.index.codes[ids.astype(np.int64)], codes)
    candidates = ids.size
    shard.transfer(dev.now_ns, codes.nbytes + ids.nbytes, cpu_ns=math.ceil(candidates * merge_ns_per_candidate))
    info = {"device": shard.index, "first": first, "rows": rows, "search_ns": dev.now_ns - shard.start_ns,
            "energy_j": dev.report().total_energy_j - before}
    return ids.astype(np.int64) + first, dist, info


@dataclass(frozen=True)
class HostCosts:
    """The host path's CPU costs, from Cognitive SSD's B-CPU baseline parameters (``host_*`` in
    ``nearflash._native.cognitive.parameters()``, measured once on a reference machine): hashing one query is the
    network's MACs x ``host_mac_time``; a graph search costs its neighbour steps x ``host_graph_step_time``."""

    hash_ns_per_query: float
    step_ns: float
    page_bytes: int

    @classmethod
    def of(cls, index: DlgIndex) -> "HostCosts":
        return cls(index.net.macs() * baselines.host_cost("host_mac_time") * 1e9,
                   baselines.host_cost("host_graph_step_time") * 1e9, int(baselines.host_cost("page_size")))


def store_graph(dev: Any, index: DlgIndex, layout: str, page_bytes: int) -> int:
    """Writes the shard's hash codes and K-NN lists from block 0 of ``dev``'s namespace, padded to the pages of the
    graph in ``layout`` (the pages the host's search reads); returns the pages."""
    pages = index.graph.pages(layout)
    payload = np.concatenate([index.codes.view(np.uint8), index.graph.neighbours().reshape(-1).view(np.uint8)])
    image = np.zeros(pages * page_bytes, dtype=np.uint8)
    image[: min(payload.size, image.size)] = payload[: image.size]
    if image.size > dev.lbas * dev.lba_bytes:
        raise InvalidArgument(f"the shard's graph needs {image.size} bytes, the device holds {dev.lbas * dev.lba_bytes}")
    step = max(1, (1 << 20) // dev.lba_bytes) * dev.lba_bytes
    for off in range(0, image.size, step):
        dev.write(off // dev.lba_bytes, image[off: off + step])
    dev.flush()
    return pages


def host_search_shard(shard: Shard, database: np.ndarray, calibration: np.ndarray, queries: np.ndarray, t: int,
                      k: int, layout: str, seed: int, method: str, merge_ns_per_candidate: float
                      ) -> tuple[np.ndarray, np.ndarray, dict]:
    """One device's part on the host path, the paper's B-CPU baseline (Sec. 5.3) on an array: the host indexes the
    shard as ``deploy`` does (its int8 codes and K-NN graph) and keeps the graph on the drive's namespace
    (:func:`store_graph`); then it hashes every query on its own cores, each query once for the whole array (query
    q's hashing is charged with shard q mod N's reads), and searches the shard's graph itself, reading every page
    the search visits from the drive (the page cache cold at each query, as Fig. 11's B-CPU), the queries' reads in
    lock-step rounds at queue depth ``HOST_DEPTH``. Each round's pages cross the shared host; a query's neighbour
    steps x ``host_graph_step_time`` and the merge of its T candidates are host CPU after its last page, its hashing
    after its first (the bytes and CPU per second are the host's; the order within a query is not modelled), each
    query's work a task of its own on the shared cores.
    ``method`` is the in-storage path's and unused here."""
    first, rows = topk.even_split(len(database), shard.devices)[shard.index]
    index = DlgIndex(database[first:first + rows], calibration=calibration, k=min(k, rows - 1), seed=seed)
    costs = HostCosts.of(index)
    dev = shard.device
    pages = store_graph(dev, index, layout, costs.page_bytes)
    shard.start_ns = dev.now_ns
    before = dev.report().total_energy_j
    tt = min(t, rows)
    codes = index.hash(queries)
    ids, st = index.graph.host_search(codes, tt, layout, max(pages, 1), True, index.seed)
    counts = st["pages_read"].astype(np.int64)
    if counts.min() < 1:  # a cold page cache: every search reads at least its entry vertex's page
        raise AssertionError(f"a host search read no page: {counts.tolist()}")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    trace = st["page_ids"].astype(np.int64)
    hashed = np.arange(len(queries)) % shard.devices == shard.index
    cpu = np.where(hashed, costs.hash_ns_per_query, 0.0)  # per query, charged at its first round
    done = st["neighbour_steps"] * costs.step_ns + tt * merge_ns_per_candidate  # charged at its last
    blocks = costs.page_bytes // dev.lba_bytes
    queue = dev.queue(depth=HOST_DEPTH)
    for r in range(int(counts.max())):
        live = np.nonzero(counts > r)[0]
        for q in live:
            if queue.in_flight == queue.depth:
                queue.wait()
            queue.submit_read(int(trace[starts[q] + r]) * blocks, blocks, None)
        queue.wait_all()
        # one task per query that read a page this round (the host's threads run queries side by side)
        tasks = np.where(counts[live] == r + 1, done[live], 0.0) + (cpu[live] if r == 0 else 0.0)
        shard.transfer(dev.now_ns, len(live) * costs.page_bytes, cpu_ns=[math.ceil(x) for x in tasks])
    dist = hamming(index.codes[ids.astype(np.int64)], codes)
    info = {"device": shard.index, "first": first, "rows": rows, "search_ns": dev.now_ns - shard.start_ns,
            "energy_j": dev.report().total_energy_j - before, "pages": pages, "pages_read": int(counts.sum()),
            "neighbour_steps": int(st["neighbour_steps"].sum()), "hashed": int(hashed.sum())}
    return ids.astype(np.int64) + first, dist, info


#: The work of each path on a shard.
PATHS = {"in_storage": search_shard, "host": host_search_shard}


def search(array: Array, database: Any, queries: Any, t: int = 10, *, k: int = 25, calibration: int = 1000,
           layout: str = "two_hop", seed: int = 1, method: str = "B", executor: Any = None,
           path: str = "in_storage") -> Result:
    """The top-``t`` images of ``database`` (uint8, (n, 784) or (n, 28, 28)) for each of ``queries``, the database
    split evenly over ``array``'s devices (one preset, each with ``ext_reserved_blocks`` for its shard's graph and
    DLG-x's weights). Every shard's int8 model is calibrated on the database's first ``calibration`` images; ``k``
    is each shard's K-NN graph degree (at most its rows - 1). ``t`` beyond what a shard holds is fine (that shard
    answers all its images); beyond the whole database it is refused, as :meth:`CognitiveSSD.search` does.
    ``path`` "in_storage" (each drive's DLG-x and GSE) or "host" (:func:`host_search_shard`: B-CPU; the devices need
    no reserved area then)."""
    topk.one_preset(array, "the sharded Cognitive SSD search")
    if path not in PATHS:
        raise InvalidArgument(f"path must be one of {sorted(PATHS)}, not {path!r}")
    db = _images(database, PIXELS, "database")
    q = _images(queries, PIXELS, "queries")
    if len(db) < 2 * len(array):
        raise InvalidArgument(f"database: {len(db)} images for {len(array)} devices; every shard needs 2 or more")
    t = _count("t", t, 1, len(db))
    k = _count("k", k, 1)
    calibration = min(_count("calibration", calibration, 1), len(db))
    if layout not in LAYOUTS:
        raise InvalidArgument(f"layout: {layout!r}; one of {', '.join(LAYOUTS)}")
    if method not in ("A", "B"):
        raise InvalidArgument(f"method: {method!r}; 'A' (blocking) or 'B' (doorbell + polling)")
    report, parts = array.run(PATHS[path], db, db[:calibration], q, t, k, layout, _count("seed", seed, 0), method,
                              array.host["topk_merge_ns_per_candidate"], executor=executor)
    d, i = topk.merge([(p[1].astype(np.float32), p[0]) for p in parts], t)
    return Result(ids=i, distances=d.astype(np.int64), report=report, shards=[p[2] for p in parts])
