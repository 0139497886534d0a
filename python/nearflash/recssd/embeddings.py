"""Embedding-lookup back-ends for the RecSSD models: each is a callable
``lookup(table, indices, offsets) -> float32[bags, dim]`` computing SparseLengthsSum / EmbeddingBag(mode="sum")
for one table, so a model can run its SLS on host DRAM, on the baseline SSD or through RecSSD's NDP path without
changing (PyTorch offsets convention: ``offsets[b]`` is where bag ``b`` starts in ``indices``).

* :class:`GeneratedEmbeddings` - the DRAM path over procedurally generated tables (rows computed from the seed on
  demand, so RM2's 8 GB of tables never exist on the host).
* :class:`DenseEmbeddings` - the DRAM path over tables held as numpy arrays.
* :class:`NdpFunctionalEmbeddings` - RecSSD's NDP path without timing: the request is encoded as the NDP config,
  decoded and validated as the FTL would, grouped by flash page and summed page by page.
* :func:`sls_reference` - the plain-numpy reference the others are tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from nearflash._native import recssd as _rs


class EmbeddingLookup(Protocol):
    """Pooled vectors of one table: ``float32[len(offsets), dim]``."""

    def __call__(self, table: int, indices: np.ndarray, offsets: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class TableSpec:
    """One embedding table of a model."""

    rows: int
    dim: int
    lookups: int
    """Ids per sample (bag) for this table."""


def sls_reference(
    table: np.ndarray,
    indices: np.ndarray,
    offsets: np.ndarray,
    per_sample_weights: np.ndarray | None = None,
) -> np.ndarray:
    """EmbeddingBag(mode="sum") in plain numpy (fancy indexing and an unbuffered scatter-add), empty bags = 0."""
    indices = np.asarray(indices, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    bags = len(offsets)
    ends = np.append(offsets[1:], len(indices)) if bags else np.zeros(0, dtype=np.int64)
    bag_of = np.repeat(np.arange(bags), ends - offsets)
    rows = table[indices]
    if per_sample_weights is not None:
        rows = rows * np.asarray(per_sample_weights, dtype=np.float32)[:, None]
    out = np.zeros((bags, table.shape[1]), dtype=np.float32)
    np.add.at(out, bag_of, rows)
    return out


class GeneratedEmbeddings:
    """Tables whose rows are a function of (seed, table id, row): DLRM's uniform(+-sqrt(1/rows)) initialisation."""

    def __init__(self, tables: Sequence[TableSpec], seed: int):
        self.tables = tuple(tables)
        self.seed = int(seed)

    def __call__(self, table: int, indices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        t = self.tables[table]
        return _rs.sls_generated(self.seed, table, t.rows, t.dim, indices, offsets)

    def rows(self, table: int, ids: np.ndarray) -> np.ndarray:
        """The given rows of a table, ``float32[len(ids), dim]``."""
        t = self.tables[table]
        return _rs.generated_rows(self.seed, table, t.rows, t.dim, ids)

    def materialize(self, table: int) -> np.ndarray:
        """A whole table as an array (mind the size: rows x dim x 4 bytes)."""
        return self.rows(table, np.arange(self.tables[table].rows, dtype=np.int64))


class DenseEmbeddings:
    """Tables held in host memory as C-contiguous float32 arrays."""

    def __init__(self, tables: Sequence[np.ndarray]):
        self.tables = [np.ascontiguousarray(t, dtype=np.float32) for t in tables]

    def __call__(self, table: int, indices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        return _rs.sls(self.tables[table], indices, offsets)


class NdpFunctionalEmbeddings:
    """RecSSD's in-SSD SLS, functionally: config encode/decode/validate, page grouping, per-page translation and an
    optional SSD-side cache shared by all tables. ``stats`` accumulates the engine's work counters."""

    def __init__(self, tables: Sequence[np.ndarray], placement: str = "packed", cache: _rs.SsdCache | None = None):
        self.tables = [np.ascontiguousarray(t, dtype=np.float32) for t in tables]
        self.placement = placement
        self.cache = cache
        self.stats: dict[str, int] = {}

    def __call__(self, table: int, indices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        pooled, stats = _rs.ndp_sls(
            self.tables[table], indices, offsets, placement=self.placement, table_id=table, cache=self.cache
        )
        for k, v in stats.items():
            self.stats[k] = self.stats.get(k, 0) + v
        return pooled
