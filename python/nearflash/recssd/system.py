"""RecSSD on a nearflash device: the firmware extension attached, a model's embedding tables placed and registered,
and the host library's three SLS paths - ``"dram"`` (tables in host memory), ``"baseline"`` (a conventional SSD:
host LRU, one 4 KiB read per missing row) and ``"ndp"`` (RecSSD: static partition, NDP config + result commands).

    dev = nearflash.Device(None, preset="cosmos-plus", materialise=False, stack="polled")
    rs = RecSSD(dev, [TableSpec(1_000_000, 32, 80)] * 8, seed=0)       # generated tables, mapped on the device
    bag = rs.embedding_bag(0, path="ndp")
    pooled = bag(indices, offsets)                                        # numpy float32 [bags, 32]
    result = rs.run(model, batches, path="ndp", pipelined=True)          # virtual-time inference

Tables given as :class:`TableSpec` are *generated*: their rows are a function of the seed (both the firmware and
the host compute them), while the device range they occupy is mapped so every read costs real flash time - how
RM2's 8 GB of tables run here. Tables given as arrays are *stored*: written to the device, which must keep data
(``materialise=True``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nearflash._native import recssd as _rs
from nearflash.device import Device, _count
from nearflash.errors import ConfigError, InvalidArgument
from nearflash.recssd.embeddings import TableSpec
from nearflash.recssd.models import Batch, RecModel

PATHS = ("dram", "baseline", "ndp")


def as_numpy(x: Any, dtype: Any = None) -> np.ndarray:
    """A numpy view of ``x``; PyTorch tensors (anything with ``detach``) are moved to the CPU first."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def integer_ids(x: Any, name: str, rows: int | None = None) -> np.ndarray:
    """``x`` as 1-D int64 ids, refusing what numpy would silently truncate (floats, bools, objects) with a TypeError
    and, given ``rows``, ids outside ``0..rows-1`` and other shapes than 1-D with InvalidArgument; all name the
    argument ``name``."""
    a = as_numpy(x)
    if a.ndim != 1:
        raise InvalidArgument(f"{name} must be a 1-D array of ids, got shape {a.shape}")
    if a.size == 0 and a.dtype.kind == "f":  # [] arrives as float64: an empty list of ids is fine
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer ids (as torch.nn.EmbeddingBag requires), got dtype {a.dtype}")
    if a.dtype.kind == "u" and a.size and int(a.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name} value {int(a.max())} is outside int64")
    a = a.astype(np.int64, copy=False)
    if rows is not None and a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= rows:
            bad = lo if lo < 0 else hi
            raise InvalidArgument(f"{name} contains {bad}, outside the table's rows (allowed 0..{rows - 1})")
    return a


@dataclass
class InferenceResult:
    """A run of batches in virtual time."""

    taken_ns: np.ndarray
    """When each batch's SLS started."""
    sls_done_ns: np.ndarray
    done_ns: np.ndarray
    stats: dict[str, Any]
    """Host-side counters (lookups, reads, NDP requests, host LRU and partition hits), see ``RunResult``."""
    firmware: dict[str, Any]
    """The firmware's counters over the run (deltas of ``extensions.recssd``)."""
    outputs: list[np.ndarray] | None = None
    """Model outputs per batch (when asked for)."""
    pooled: list[list[np.ndarray]] | None = field(default=None, repr=False)

    @property
    def latency_ns(self) -> np.ndarray:
        """Per batch: start of its SLS -> end of its dense part."""
        return self.done_ns - self.taken_ns

    @property
    def mean_latency_ns(self) -> float:
        return float(np.mean(self.latency_ns)) if len(self.done_ns) else 0.0

    @property
    def makespan_ns(self) -> int:
        return int(self.done_ns.max() - self.taken_ns.min()) if len(self.done_ns) else 0

    @property
    def time_per_batch_ns(self) -> float:
        """Makespan / batches: the per-batch time of a (pipelined) run."""
        return self.makespan_ns / max(1, len(self.done_ns))

    @property
    def lru_hit_rate(self) -> float:
        return _hit_rate(self.stats["lru"])

    @property
    def partition_hit_rate(self) -> float:
        return _hit_rate(self.stats["partition"])

    @property
    def ssd_cache_hit_rate(self) -> float:
        return _hit_rate(self.firmware.get("ssd_cache", {}))


def _hit_rate(counters: dict[str, Any]) -> float:
    """hits / (hits + misses) of a counter dict (0 when empty)."""
    hits = counters.get("hits", 0)
    n = hits + counters.get("misses", 0)
    return hits / n if n else 0.0


def _delta(after: Any, before: Any) -> Any:
    """Numeric difference of two nested report dicts (non-numeric values from ``after``)."""
    if isinstance(after, dict):
        return {k: _delta(v, before.get(k) if isinstance(before, dict) else None) for k, v in after.items()}
    if isinstance(after, (int, float)) and not isinstance(after, bool) and isinstance(before, (int, float)):
        return after - before
    return after


#: Stored element width of each precision (the wire's attributeSize).
PRECISIONS = {"fp32": 4, "fp16": 2, "int8": 1}


class RecSSD:
    """A model's tables on a device with the RecSSD firmware, and the host library driving it.

    Args:
        device: the device (fresh if any table is generated; storing data if any table is an array).
        tables: per table a :class:`TableSpec` (generated rows) or a float32 ``rows x dim`` array (stored).
        seed: seed of the generated tables.
        placement: ``"packed"`` (rows back to back, the artifact's firmware) or ``"one_row_per_page"`` (the
            paper's end-to-end assumption, §5).
        params: RecSSD parameter overrides (see ``parameters()``), applied to the firmware and the host library.
        precision: how rows are stored (Fig. 11a): ``"fp32"`` (the artifact's), ``"fp16"`` or ``"int8"`` (symmetric,
            one scale per table mapping its largest magnitude to 127). Sums are fp32; every path (dram, baseline,
            ndp) sums the values the stored rows decode to.
    """

    def __init__(
        self,
        device: Device,
        tables: Sequence[TableSpec | np.ndarray],
        *,
        seed: int = 0,
        placement: str = "packed",
        params: dict[str, Any] | None = None,
        precision: str = "fp32",
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
        seed = _count("seed", seed, 0, 2**64 - 1)
        if isinstance(tables, (str, bytes, np.ndarray)) or not isinstance(tables, Sequence) or not tables:
            raise InvalidArgument(f"tables must be a non-empty list of TableSpec or 2-D float32 arrays, "
                                  f"got {tables!r:.80}")
        self.precision = precision
        self.device = device
        self.params = dict(params or {})
        specs = []
        self.dims: list[int] = []
        self.rows: list[int] = []
        for i, t in enumerate(tables):
            if isinstance(t, TableSpec):
                rows = _count(f"tables[{i}].rows", t.rows, 1, 2**32 - 1)
                dim = _count(f"tables[{i}].dim", t.dim, 1, 2**32 - 1)
                specs.append((rows, dim, None, seed))
                self.dims.append(dim)
                self.rows.append(rows)
            else:
                a = np.ascontiguousarray(as_numpy(t, np.float32))
                if a.ndim != 2 or 0 in a.shape:
                    raise InvalidArgument(f"tables[{i}]: a stored table must be a 2-D array of 1 or more rows and "
                                          f"columns, got shape {a.shape}")
                specs.append((a.shape[0], a.shape[1], a, seed))
                self.dims.append(a.shape[1])
                self.rows.append(a.shape[0])
        # Attached once every argument is checked: a refused call leaves the device as it was.
        try:
            device.attach("recssd", **self.params)
        except ConfigError as e:
            if "already attached" not in str(e):
                raise
        # Set-up commands (table writes, registrations) go through the SDK's synchronous queue.
        setup_queue = device.sync_qid
        self.host = _rs.Host(device.native, specs, placement=placement, params=json.dumps(self.params),
                             setup_queue=setup_queue, attribute_bytes=PRECISIONS[precision])

    @property
    def tables(self) -> list[dict[str, Any]]:
        """Where each table lives (start LBA, LBAs, pages, placement, stored or generated)."""
        return self.host.tables()

    def firmware_report(self) -> dict[str, Any]:
        """The firmware's counters (``extensions.recssd`` of the device report)."""
        return self.device.report().data["extensions"].get("recssd", {})

    def _table(self, table: Any) -> int:
        return _count("table", table, 0, len(self.rows) - 1)

    def sls(self, table: int, indices: Any, offsets: Any, path: str = "ndp") -> np.ndarray:
        """EmbeddingBag(mode="sum") of one table through ``path``; advances the device clock."""
        table = self._table(table)
        ids = integer_ids(indices, "indices", self.rows[table])
        pooled, _, _ = self.host.sls(table, ids, integer_ids(offsets, "offsets"), path)
        return pooled

    def embedding_bag(self, table: int, path: str = "ndp") -> "EmbeddingBag":
        """A ``torch.nn.EmbeddingBag(mode="sum")``-like callable over one table."""
        return EmbeddingBag(self, self._table(table), path)

    def lookup(self, path: str = "ndp"):
        """A model lookup ``(table, indices, offsets) -> pooled`` through ``path`` (for ``RecModel.forward``)."""
        return lambda table, indices, offsets: self.sls(table, indices, offsets, path)

    def set_partitions(self, profiles: Sequence[Any]) -> None:
        """Static partitions: each table's hottest ids of its profile (best a trace other than the one measured) in
        host DRAM. One profile per table, ids in the table's rows; a refused call changes nothing."""
        profiles = list(profiles)
        if len(profiles) != len(self.rows):
            raise ValueError(f"profiles must give one id array per table ({len(self.rows)} tables), got {len(profiles)}")
        self.host.set_partitions([integer_ids(p, f"profiles[{t}]", self.rows[t]) for t, p in enumerate(profiles)])

    def clear_partitions(self) -> None:
        self.host.clear_partitions()

    def set_lru_rows(self, rows: int) -> None:
        """Resizes the baseline's host LRU per table (0: no host cache); empties it."""
        self.host.set_lru_rows(_count("rows", rows, 0, 2**32 - 1))

    def run(
        self,
        model: RecModel,
        batches: Sequence[Batch],
        path: str = "ndp",
        *,
        pipelined: bool = False,
        outputs: bool = False,
    ) -> InferenceResult:
        """Runs ``batches`` through ``model`` in virtual time: SLS through ``path`` (sequentially, or on the pool
        of SLS workers with ``pipelined``), the dense part charged to the host CPU model at the model's FLOP
        count. With ``outputs`` the model's real forward pass is computed on the pooled vectors."""
        if path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, not {path!r}")
        flops = [float(model.flops(b.size).dense) for b in batches]
        sparse = [[(integer_ids(i, f"batches[{n}].sparse[{t}] indices"), integer_ids(o, f"batches[{n}].sparse[{t}] offsets"))
                   for t, (i, o) in enumerate(b.sparse)] for n, b in enumerate(batches)]
        before = self.firmware_report()
        timings, pooled, stats = self.host.run(sparse, flops, path, pipelined, outputs)
        firmware = _delta(self.firmware_report(), before)
        outs = None
        if outputs:
            outs = [model._forward(b.dense.astype(np.float32, copy=False), p, None) for b, p in zip(batches, pooled)]
        return InferenceResult(
            taken_ns=timings[:, 0], sls_done_ns=timings[:, 1], done_ns=timings[:, 2],
            stats=stats, firmware=firmware, outputs=outs, pooled=pooled if outputs else None,
        )


class EmbeddingBag:
    """``torch.nn.EmbeddingBag(mode="sum")`` over a table on a RecSSD device: ``bag(input, offsets)`` returns a
    float32 numpy array ``[bags, dim]``. ``input`` is 1-D with ``offsets`` (bag starts) or 2-D (one bag per row,
    ``offsets`` None), as in PyTorch; numpy arrays, lists and PyTorch tensors are accepted."""

    def __init__(self, recssd: RecSSD, table: int, path: str = "ndp"):
        if path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, not {path!r}")
        self.recssd, self.table, self.path = recssd, int(table), path
        self.embedding_dim = recssd.dims[self.table]
        self.mode = "sum"

    def __call__(self, input: Any, offsets: Any = None, per_sample_weights: Any = None) -> np.ndarray:
        if per_sample_weights is not None:
            raise NotImplementedError("RecSSD's firmware only sums (fp32 sums of fp32, fp16 or int8 rows); per-sample weights are unsupported")
        idx = as_numpy(input)
        if idx.ndim == 2:
            if offsets is not None:
                raise ValueError("offsets must be None when input is 2-D")
            offsets = np.arange(idx.shape[0], dtype=np.int64) * idx.shape[1]
            idx = idx.reshape(-1)
        elif idx.ndim == 1:
            if offsets is None:
                raise ValueError("offsets is required when input is 1-D")
        else:
            raise ValueError(f"input must be 1-D or 2-D, got {idx.ndim}-D")
        idx = integer_ids(idx, "input")
        return self.recssd.sls(self.table, idx, integer_ids(offsets, "offsets"), self.path)

    forward = __call__

    def __repr__(self) -> str:
        return f"EmbeddingBag(table={self.table}, dim={self.embedding_dim}, mode='sum', path={self.path!r})"


def parameters() -> list[tuple[str, str, str, str]]:
    """Every RecSSD parameter: (name, default, unit, source)."""
    return list(_rs.parameter_docs())
