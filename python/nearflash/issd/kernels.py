"""iSSD kernels (``nearflash_issd::kernel``) from Python. A kernel is named by a spec, a dict
``{"kernel": name, **params}``; :func:`spec` builds one. :func:`run` executes a kernel over a paged buffer on the
host path; :func:`map_chunk` and :func:`reduce` expose the device's two steps (Map per chunk of whole pages
returning the encoded partial, Reduce over encoded partials in any order), so the bytes an FMC would ship are
visible. Outputs are dicts with a ``kind`` and kind-specific fields:

* ``selection`` (scan, grep): ``scanned``, ``items``, ``data`` (projected rows / matching lines back to back)
* ``aggregate`` (filter_sum): ``scanned``, ``matched``, ``sum`` (exact, stored units multiplied)
* ``matches`` (string_match): ``keys`` = [{``key``, ``count``, ``positions`` (n, 2) of (page, payload offset)}]
* ``word_counts``: ``total``, ``distinct``, ``words`` [(word, count)] by count desc then word
* ``histogram``: ``counts`` (3, 256) for r, g, b
* ``regression``: ``n, sx, sy, sxx, syy, sxy``, ``slope``, ``intercept`` (None when undefined)
* ``clusters`` (kmeans): ``centroids`` (k, dim), ``counts``, ``sse``, ``moved``
* ``naive_bayes``: ``attributes``, ``classes``, ``values``; training: ``class_counts`` (C,), ``counts``
  (C, attributes, values), ``confusion`` None; classification: ``confusion`` (C, C) of (true, predicted)
* ``split`` (scalparc): ``class_counts``, ``node_gini``, ``splits`` [(threshold, gini) or None per attribute],
  ``best`` (attribute or None), ``left_counts`` (class counts of ``value <= threshold`` under the best split)
* ``halos`` (hop): ``grid``, ``particles``, ``outside``, ``below``, ``groups`` [{peak, peak_count, cells,
  particles, sum}] by peak cell

Every output also carries ``encoded`` (the bytes sent to the host); :func:`run` adds ``chunks``,
``input_bytes``, ``partial_bytes``, ``output_bytes`` and ``alpha`` (= partial_bytes / input_bytes)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from nearflash._native import issd as _issd

KERNEL_NAMES: list[str] = _issd.kernel_names()


def spec(kernel: str, **params: Any) -> dict:
    """A kernel spec. Parameters per kernel:

    * ``scan``: ``conditions`` [{field, min, max}] (inclusive, stored units), ``projection`` [field names];
      default: ``l_partkey <= 2000`` (1% of SF-1 rows) projecting the 4-byte ``l_quantity``.
    * ``filter_sum``: ``conditions``, ``product`` [fields]; default TPC-H Q6 for 1994.
    * ``grep``: ``pattern``, ``regex`` (bool). ``string_match``: ``keys``, ``locate`` (bool).
    * ``word_count``: ``top`` (int or None). ``histogram``, ``linear_regression``: none.
    * ``kmeans``: ``dim``, ``centroids`` [[int] * dim].
    * ``naive_bayes``: ``attributes``, ``classes``, ``values``, ``model`` ({class_counts, counts} of a training
      run, flattened) to classify; without it, train.
    * ``scalparc``: ``attributes``, ``classes``, ``path`` [{attribute, threshold, left}] from the root.
    * ``hop``: ``grid`` (cells per axis, 1..64), ``lo``, ``hi`` (the cube), ``threshold`` (particles per cell).
    """
    if kernel not in KERNEL_NAMES:
        raise ValueError(f"unknown kernel {kernel!r}; known: {KERNEL_NAMES}")
    return {"kernel": kernel, **params}


def scan_for_selectivity(
    selectivity: float, partkey_max: int = 200_000, projection: Sequence[str] = ("l_quantity",)
) -> dict:
    """Scan whose predicate ``l_partkey <= round(selectivity * partkey_max)`` selects ``selectivity`` of the rows
    in expectation (dbgen draws ``l_partkey`` uniformly on [1, 200 000 x SF])."""
    return spec(
        "scan",
        conditions=[{"field": "l_partkey", "max": round(selectivity * partkey_max)}],
        projection=list(projection),
    )


def _json(s: dict | str) -> str:
    return s if isinstance(s, str) else json.dumps(s)


def _u8(data: np.ndarray | bytes) -> np.ndarray:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, dtype=np.uint8)
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8)


def run(
    kernel: dict | str, data: np.ndarray, page_size: int, pages_per_chunk: int = 64, mode: str = "parallel"
) -> dict:
    """Runs a kernel over a paged buffer on the host: ``mode`` is "parallel" (rayon), "chunked" (one thread, chunk
    by chunk) or "serial" (the whole input as one Map task)."""
    return _issd.run(_json(kernel), _u8(data), page_size, pages_per_chunk, mode)


def chunks(data: np.ndarray, page_size: int, sizes: Iterable[int]) -> list[tuple[int, np.ndarray]]:
    """Cuts a paged buffer into runs of ``sizes`` pages (cycled until the end): [(first_page, bytes)]."""
    data = _u8(data)
    pages = len(data) // page_size
    sizes = list(sizes)
    if not sizes or min(sizes) < 1:
        raise ValueError("chunk sizes must be positive page counts")
    out, first, i = [], 0, 0
    while first < pages:
        n = min(sizes[i % len(sizes)], pages - first)
        out.append((first, data[first * page_size : (first + n) * page_size]))
        first, i = first + n, i + 1
    return out


def map_chunk(kernel: dict | str, chunk: np.ndarray, page_size: int, first_page: int) -> bytes:
    """Map over one chunk of whole pages; returns the encoded partial."""
    return _issd.map_chunk(_json(kernel), _u8(chunk), page_size, first_page)


def reduce(kernel: dict | str, partials: Sequence[bytes], page_size: int) -> dict:
    """Reduce: merges encoded partials (any order) and finishes."""
    return _issd.reduce(_json(kernel), list(partials), page_size)


def kmeans(
    centroids: np.ndarray, data: np.ndarray, page_size: int, max_iterations: int, pages_per_chunk: int = 64
) -> list[dict]:
    """Host k-means from ``centroids`` (k, dim) over paged int32 points: one output dict per iteration, stopping
    early when no centroid moves."""
    c = np.asarray(centroids, dtype=np.int64)
    k = spec("kmeans", dim=int(c.shape[1]), centroids=c.tolist())
    return _issd.kmeans(_json(k), _u8(data), page_size, max_iterations, pages_per_chunk)


def logical_offsets(data: np.ndarray, page_size: int, positions: np.ndarray) -> np.ndarray:
    """Maps (page, payload offset) positions to offsets in the unpaged content."""
    pages = _u8(data).reshape(-1, page_size)
    lengths = pages[:, :4].copy().view("<u4")[:, 0].astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    positions = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
    return starts[positions[:, 0]] + positions[:, 1]
