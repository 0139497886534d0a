"""The host-side merge of sharded top-k answers (as SmartANNS- and FusionANNS-style systems do): every shard returns
its own k nearest per query under global ids, the host keeps the k nearest of all. Shared by the sharded NDSearch
and Cognitive SSD searches (``nearflash.ndsearch.sharded``, ``nearflash.cognitive.sharded``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from nearflash.array.array import Array
from nearflash.array.host import ArrayReport
from nearflash.device import _count
from nearflash.errors import InvalidArgument


@dataclass
class Merged:
    """A sharded search's answer: ``ids`` and ``distances`` (nq x k, global ids, nearest first, ties by id), the
    array's report and per shard what it held and spent."""

    ids: np.ndarray
    distances: np.ndarray
    report: ArrayReport
    shards: list[dict[str, Any]] = field(default_factory=list)

    @property
    def qps(self) -> float:
        """Queries per second of the array clock (every query searched on every shard and merged)."""
        return len(self.ids) / (self.report.elapsed_ns * 1e-9) if self.report.elapsed_ns else 0.0


def merge(parts: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest of every shard's ``(D, I)`` (each nq x k_s, distances smaller-is-nearer, ids global, -1 for
    none): ``(D, I)`` nq x k, nearest first, ties by smaller id, so the answer does not depend on the shard order.
    Missing answers (fewer than ``k`` vectors in all) stay id -1 at distance +inf, as FAISS pads."""
    k = _count("k", k, 1)
    if not parts:
        raise InvalidArgument("merge needs at least one shard's answer")
    nq = len(parts[0][0])
    if any(d.shape != i.shape or d.ndim != 2 or len(d) != nq for d, i in parts):
        raise InvalidArgument(f"every shard must answer (D, I) of the same nq = {nq} rows, got shapes "
                              f"{[(d.shape, i.shape) for d, i in parts]}")
    d = np.hstack([p[0] for p in parts]).astype(np.float64)
    i = np.hstack([p[1] for p in parts]).astype(np.int64)
    d[i < 0] = np.inf
    key_id = np.where(i < 0, np.iinfo(np.int64).max, i)
    order = np.lexsort((key_id, d), axis=1)[:, :k]
    dk, ik = np.take_along_axis(d, order, 1), np.take_along_axis(i, order, 1)
    if dk.shape[1] < k:
        pad = k - dk.shape[1]
        dk = np.hstack([dk, np.full((nq, pad), np.inf)])
        ik = np.hstack([ik, np.full((nq, pad), -1, np.int64)])
    ik[~np.isfinite(dk)] = -1
    return dk.astype(np.float32), ik


def even_split(n: int, devices: int) -> list[tuple[int, int]]:
    """(first row, rows) of each of ``devices`` shards of ``n`` rows: consecutive ranges whose sizes differ by at
    most one (shard i holds global ids first .. first + rows - 1)."""
    n, devices = _count("n", n, 1), _count("devices", devices, 1)
    if n < devices:
        raise InvalidArgument(f"cannot split {n} rows over {devices} devices: every shard needs at least one")
    bounds = [n * s // devices for s in range(devices + 1)]
    return [(a, b - a) for a, b in zip(bounds, bounds[1:])]


def one_preset(array: Array, what: str) -> str:
    """The preset every device of ``array`` has; refuses an Array of mixed presets (an even split over devices of
    different speeds or capacities would leave the fast ones waiting on every batch)."""
    if not isinstance(array, Array):
        raise InvalidArgument(f"array must be a nearflash.Array, got {type(array).__name__}")
    presets = sorted({s.preset for s in array.specs})
    if len(presets) != 1:
        raise InvalidArgument(f"{what} splits its data evenly and needs devices of one preset; this Array mixes "
                              f"{presets}")
    return presets[0]
