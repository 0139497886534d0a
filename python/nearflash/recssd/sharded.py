"""RecSSD on an array: a model's embedding tables spread across drives (table t on device t mod N, as production
recommendation systems place tables), optionally one table split by row range over every drive; each drive runs
SparseLengthsSum over the rows it holds, by NDP (``path="ndp"``: only the pooled partial sums come back) or as a
conventional SSD (``path="baseline"``: the host reads a 4 KiB page per missing row, its LRU in front, and each
page crosses the shared host at its read's completion on the drive); the host adds the split table's partial sums,
paying ``cpu.partial_sum_ns_per_byte`` of host CPU per byte of partials.

    array = nearflash.Array(4, "cosmos-plus")
    res = sharded.run(array, tables, batches, path="ndp", split=0)
    res.pooled[b][t], res.report.whole, res.batches_per_s

``tables`` are stored (float32 arrays written to the drives: the devices keep data); ``batches`` are lists over
tables of (indices, offsets) in ``torch.nn.EmbeddingBag`` form. Shards run one after another here, in worker
processes or as Ray tasks (``executor=``), with identical reports."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from nearflash.array import topk
from nearflash.array.array import Array, Shard
from nearflash.array.host import ArrayReport
from nearflash.device import _count
from nearflash.errors import InvalidArgument
from nearflash.recssd.system import RecSSD, as_numpy, integer_ids

#: Bytes of one baseline read (the host library reads one 4 KiB LBA per row it misses; a run books the device's LBA).
BASELINE_READ_BYTES = 4096
#: An NDP request's config payload: a 20-byte header and 8 bytes per (result, input id) pair
#: (crates/nearflash-recssd/src/ndp_wire.rs, the artifact's ``struct transConfig``).
CONFIG_HEADER_BYTES, PAIR_BYTES = 20, 8


@dataclass(frozen=True)
class Part:
    """Rows ``first .. first + rows - 1`` of table ``table`` live on a device (as its local table ``local``)."""

    table: int
    first: int
    rows: int
    local: int


def placement(rows: Sequence[int], devices: int, split: Optional[int] = None) -> list[list[Part]]:
    """Each device's parts: whole tables round robin (table t on device t mod ``devices``, the split table left
    out), then the ``split`` table's even row ranges, one on every device."""
    devices = _count("devices", devices, 1)
    if split is not None:
        split = _count("split", split, 0, len(rows) - 1)
    out: list[list[Part]] = [[] for _ in range(devices)]
    whole = [t for t in range(len(rows)) if t != split]
    for j, t in enumerate(whole):
        d = j % devices
        out[d].append(Part(t, 0, rows[t], len(out[d])))
    if split is not None:
        for d, (first, n) in enumerate(topk.even_split(rows[split], devices)):
            out[d].append(Part(split, first, n, len(out[d])))
    return out


def _local_bags(indices: np.ndarray, offsets: np.ndarray, part: Part) -> tuple[np.ndarray, np.ndarray]:
    """The ids of ``part``'s rows in each bag, as local rows, with the bags' new offsets (empty bags stay)."""
    keep = (indices >= part.first) & (indices < part.first + part.rows)
    bag_of = np.searchsorted(offsets, np.arange(len(indices)), side="right") - 1
    counts = np.bincount(bag_of[keep], minlength=len(offsets))
    return indices[keep] - part.first, np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def run_shard(shard: Shard, tables: list[np.ndarray], parts: list[list[Part]], batches: list[list[tuple]],
              path: str, params: Optional[dict], partial_ns_per_byte: float) -> tuple[list[list[Any]], dict]:
    """One device's part (module-level, so a worker process can run it): stores its parts, then runs every batch's
    SLS over them; returns per batch per table its (partial) pooled sums, None where it holds none of the table."""
    mine = parts[shard.index]
    if not mine:
        return [[None] * len(tables) for _ in batches], {"device": shard.index, "parts": []}
    dev = shard.device
    rs = RecSSD(dev, [tables[p.table][p.first:p.first + p.rows] for p in mine], params=params)
    shard.start_ns = dev.now_ns
    before = dev.report().total_energy_j
    split = {p.table for p in mine if p.rows != len(tables[p.table])}
    out = []
    for batch in batches:
        pooled: list[Any] = [None] * len(tables)
        for p in mine:
            ids, offs = batch[p.table]
            local, local_offs = _local_bags(ids, offs, p)
            pooled[p.table], _, read_done = rs.host.sls(p.local, local, local_offs, path)
            cpu = math.ceil(pooled[p.table].nbytes * partial_ns_per_byte) if p.table in split else 0
            if path == "ndp":
                shard.transfer(dev.now_ns, CONFIG_HEADER_BYTES + PAIR_BYTES * len(local), "to_device")
                shard.transfer(dev.now_ns, pooled[p.table].nbytes, cpu_ns=cpu)
            elif len(read_done):
                # Each page crosses the shared host as its read completes on the drive (its completion's time);
                # the host adds the split table's partial sums after the last one.
                shard.transfer_each(read_done[:-1], dev.lba_bytes)
                shard.transfer(int(read_done[-1]), dev.lba_bytes, cpu_ns=cpu)
        out.append(pooled)
    info = {"device": shard.index, "parts": [(p.table, p.first, p.rows) for p in mine],
            "sls_ns": dev.now_ns - shard.start_ns, "energy_j": dev.report().total_energy_j - before}
    return out, info


def _bags(indices: Any, offsets: Any, rows: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(indices, offsets) checked as ``torch.nn.EmbeddingBag`` wants them: ids in the table, offsets starting at 0,
    non-decreasing and within the indices."""
    ids = integer_ids(indices, f"{name} indices", rows)
    offs = integer_ids(offsets, f"{name} offsets")
    if len(offs) == 0 or offs[0] != 0 or np.any(np.diff(offs) < 0) or offs[-1] > len(ids):
        raise InvalidArgument(f"{name} offsets must start at 0, never decrease and stay within the {len(ids)} "
                              f"indices, got {offs[:8]!r}")
    return ids, offs


@dataclass
class Result:
    """A sharded run: ``pooled[b][t]`` (bags x dim float32, the split table's partial sums added), the array's
    report and per device what it held and spent."""

    pooled: list[list[np.ndarray]]
    report: ArrayReport
    shards: list[dict[str, Any]] = field(default_factory=list)

    @property
    def batches_per_s(self) -> float:
        return len(self.pooled) / (self.report.elapsed_ns * 1e-9) if self.report.elapsed_ns else 0.0


def run(array: Array, tables: Sequence[Any], batches: Sequence[Sequence[tuple[Any, Any]]], path: str = "ndp", *,
        split: Optional[int] = None, params: Optional[dict] = None, executor: Any = None) -> Result:
    """SLS of every batch over ``tables`` spread over ``array``'s devices (one preset), ``split`` (a table index)
    split by rows over all of them; ``path`` "ndp" (in storage) or "baseline" (host reads)."""
    topk.one_preset(array, "the sharded RecSSD")
    if path not in ("ndp", "baseline"):
        raise InvalidArgument(f"path must be 'ndp' or 'baseline' on an array (not 'dram': no drive), got {path!r}")
    if isinstance(tables, (str, bytes, np.ndarray)) or not isinstance(tables, Sequence) or not tables:
        raise InvalidArgument(f"tables must be a non-empty list of 2-D float32 arrays, got {type(tables).__name__}")
    tabs = []
    for i, t in enumerate(tables):
        a = np.ascontiguousarray(as_numpy(t, np.float32))
        if a.ndim != 2 or 0 in a.shape:
            raise InvalidArgument(f"tables[{i}] must be a 2-D array of 1 or more rows and columns, got {a.shape}")
        tabs.append(a)
    if split is not None:
        split = _count("split", split, 0, len(tabs) - 1)
    if split is not None and len(tabs[split]) < len(array):
        raise InvalidArgument(f"tables[{split}] has {len(tabs[split])} rows, fewer than the {len(array)} devices "
                              "it is split over")
    checked = []
    for b, batch in enumerate(batches):
        if len(batch) != len(tabs):
            raise InvalidArgument(f"batches[{b}] gives {len(batch)} tables' (indices, offsets), the model has "
                                  f"{len(tabs)}")
        checked.append([_bags(i, o, len(tabs[t]), f"batches[{b}][{t}]") for t, (i, o) in enumerate(batch)])
    parts = placement([len(t) for t in tabs], len(array), split)
    report, shards = array.run(run_shard, tabs, parts, checked, path, params,
                               array.host["partial_sum_ns_per_byte"], executor=executor)
    pooled = []
    for b in range(len(checked)):
        row = []
        for t in range(len(tabs)):
            got = [s[0][b][t] for s in shards if s[0][b][t] is not None]
            row.append(np.sum(got, axis=0, dtype=np.float32) if len(got) > 1 else got[0])
        pooled.append(row)
    return Result(pooled, report, [s[1] for s in shards])
