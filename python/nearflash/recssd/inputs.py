"""Input batches for the RecSSD models: dense features (uniform in [0, 1), as DLRM's generator) and, per table,
EmbeddingBag ids from one of the paper's id patterns (generated natively, see ``nearflash_recssd::trace``):

* ``uniform`` - DLRM's random ids, distinct within a bag (paper Fig. 9 "randomly generated input indices");
* ``locality`` - DLRM's stack-distance traces with locality knob K (paper Fig. 10: K = 0, 1, 2);
* SEQ / STR microbenchmark ids (paper Fig. 8) via :func:`microbenchmark_ids`.
"""

from __future__ import annotations

import numpy as np

from nearflash._native import recssd as _rs
from nearflash.device import _count
from nearflash.recssd.models import Batch, ModelSpec


def _table_seed(seed: int, table: int) -> int:
    return int(np.random.SeedSequence([seed, table]).generate_state(1, np.uint64)[0])


def fixed_offsets(batch_size: int, lookups: int) -> np.ndarray:
    """Offsets of ``batch_size`` bags of ``lookups`` ids each."""
    return np.arange(_count("batch_size", batch_size), dtype=np.int64) * _count("lookups", lookups)


def _dense(spec: ModelSpec, batch_size: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, 1 << 20]).random((batch_size, spec.dense_in), dtype=np.float32)


def uniform_batch(spec: ModelSpec, batch_size: int, seed: int) -> Batch:
    """One batch with uniformly random ids."""
    batch_size, seed = _count("batch_size", batch_size), _count("seed", seed)
    sparse = []
    for t, ts in enumerate(spec.tables):
        ids = _rs.uniform_bags(ts.rows, batch_size, ts.lookups, _table_seed(seed, t))
        sparse.append((ids, fixed_offsets(batch_size, ts.lookups)))
    return Batch(_dense(spec, batch_size, seed), sparse)


#: Stack-distance bins of the artifact's profile; a trace needs ``(bins - 1) x lookups`` lines.
_BINS = 50


def trace_line_rows(rows: int, lookups: int, line_rows: int = 128) -> int:
    """Rows per trace line for a table: the artifact's 128, or fewer when the table has too few lines for the
    deepest stack distance (``49 x lookups`` lines; e.g. DIN's 1K-row behaviour tables with 3 lookups)."""
    return max(1, min(line_rows, rows // ((_BINS - 1) * lookups)))


def locality_traces(
    spec: ModelSpec, batch_size: int, batches: int, k: float, seed: int, line_rows: int = 128
) -> tuple[list[np.ndarray], list[float]]:
    """Per table, the ids of ``batches`` batches of the stack-distance trace of locality ``k`` (a ``batches x
    batch_size * lookups`` array), and each table's new-reference ("unique access") fraction. Tables too small for
    ``line_rows``-row lines use shorter lines (:func:`trace_line_rows`)."""
    per_table: list[np.ndarray | None] = [None] * len(spec.tables)
    unique: list[float] = [0.0] * len(spec.tables)
    groups = sorted({(t.lookups, trace_line_rows(t.rows, t.lookups, line_rows)) for t in spec.tables})
    for lookups, lines in groups:
        which = [i for i, t in enumerate(spec.tables) if (t.lookups, trace_line_rows(t.rows, t.lookups, line_rows)) == (lookups, lines)]
        n = batches * batch_size * lookups
        traces = _rs.locality_traces([spec.tables[i].rows for i in which], lookups, n, k, seed, line_rows=lines)
        for i, (ids, new_refs) in zip(which, traces):
            per_table[i] = ids.reshape(batches, batch_size * lookups)
            unique[i] = new_refs / n if n else 0.0
    return [t for t in per_table if t is not None], unique


def trace_batches(spec: ModelSpec, traces: list[np.ndarray], batch_size: int, which: range, seed: int) -> list[Batch]:
    """Batches ``which`` of the per-table traces of :func:`locality_traces`."""
    return [
        Batch(_dense(spec, batch_size, seed + b),
              [(traces[i][b], fixed_offsets(batch_size, t.lookups)) for i, t in enumerate(spec.tables)])
        for b in which
    ]


def locality_batches(
    spec: ModelSpec, batch_size: int, batches: int, k: float, seed: int, line_rows: int = 128
) -> tuple[list[Batch], list[float]]:
    """``batches`` batches whose ids follow the stack-distance trace of locality ``k``, one trace per table.
    Returns the batches and each table's new-reference ("unique access") fraction."""
    batch_size, batches, seed = _count("batch_size", batch_size), _count("batches", batches), _count("seed", seed)
    line_rows = _count("line_rows", line_rows, 1)
    traces, unique = locality_traces(spec, batch_size, batches, k, seed, line_rows)
    return trace_batches(spec, traces, batch_size, range(batches), seed), unique


def microbenchmark_ids(pattern: str, rows: int, dim: int, batch_size: int, lookups: int = 80) -> np.ndarray:
    """SEQ (contiguous) or STR (one row per 16 KiB page) ids of the Fig. 8 microbenchmark, starting at 65."""
    if pattern == "seq":
        stride = 1
    elif pattern == "str":
        stride = _rs.one_row_per_page_stride(4 * _count("dim", dim, 1))
    else:
        raise ValueError(f"pattern must be 'seq' or 'str', not {pattern!r}")
    rows, batch_size, lookups = _count("rows", rows, 1), _count("batch_size", batch_size), _count("lookups", lookups)
    return _rs.strided_bags(rows, batch_size, lookups, stride=stride)
