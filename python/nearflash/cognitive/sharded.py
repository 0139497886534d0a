"""Cognitive SSD on an array: the image database split into consecutive id ranges, one per device; each device
hashes its shard with DLG-x (one int8 model, calibrated on the database's first ``calibration`` images for every
shard, so a query hashes to the same code everywhere), holds its shard's K-NN hash graph in flash and answers each query's top-T by its GSE;
the host ranks every shard's T answers by Hamming distance to the query's code and keeps the T nearest, paying
``cpu.topk_merge_ns_per_candidate`` of host CPU per candidate (XOR, popcount and the merge step).

    array = nearflash.Array(4, "cosmos-plus", overrides={"ext_reserved_blocks": 8, ...})
    res = sharded.search(array, database, queries, t=10)
    res.ids, res.distances, res.report.whole, res.qps

Shards run one after another here, in worker processes or as Ray tasks (``executor=``), with identical reports.
Each query's images cross to every device (784 B), its code and T ids (8 + 4 T bytes) come back."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nearflash.array import topk
from nearflash.array.array import Array, Shard
from nearflash.cognitive.pipeline import LAYOUTS, _images
from nearflash.cognitive.ssd import CognitiveSSD
from nearflash.device import _count
from nearflash.errors import InvalidArgument

PIXELS = 784


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


def search(array: Array, database: Any, queries: Any, t: int = 10, *, k: int = 25, calibration: int = 1000,
           layout: str = "two_hop", seed: int = 1, method: str = "B", executor: Any = None) -> Result:
    """The top-``t`` images of ``database`` (uint8, (n, 784) or (n, 28, 28)) for each of ``queries``, the database
    split evenly over ``array``'s devices (one preset, each with ``ext_reserved_blocks`` for its shard's graph and
    DLG-x's weights). Every shard's int8 model is calibrated on the database's first ``calibration`` images; ``k``
    is each shard's K-NN graph degree (at most its rows - 1). ``t`` beyond what a shard holds is fine (that shard
    answers all its images); beyond the whole database it is refused, as :meth:`CognitiveSSD.search` does."""
    topk.one_preset(array, "the sharded Cognitive SSD search")
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
    report, parts = array.run(search_shard, db, db[:calibration], q, t, k, layout, _count("seed", seed, 0), method,
                              array.host["topk_merge_ns_per_candidate"], executor=executor)
    d, i = topk.merge([(p[1].astype(np.float32), p[0]) for p in parts], t)
    return Result(ids=i, distances=d.astype(np.int64), report=report, shards=[p[2] for p in parts])
