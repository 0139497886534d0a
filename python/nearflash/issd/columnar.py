"""TPC-H ``lineitem`` in columnar pages (beyond the paper's 150-byte row records): each column in its own region of
pages after a header page (page 0: magic, rows, page size, alignment), row groups of ``page_size / 8`` rows (1024 for 8 KiB pages), an integer column one page per group, values
little-endian at the record's width, no page headers, regions aligned to ``align_pages`` pages. The kernels
``col_scan`` and ``col_filter_sum`` take ``scan``'s and ``filter_sum``'s parameters plus the table's ``rows`` and
read only the columns they name (:func:`columns`), as dense typed arrays.

* host path: :func:`run` over the whole table (rayon, only the named regions touched);
* in storage: :func:`write` puts the table on a device and :func:`extents` gives the named columns' extents, column
  after column, which is the input order the Agent expects (``agent.run(dev, spec, extents(...), page_size)``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from nearflash._native import issd as _issd
from nearflash.issd import agent, lineitem


def _json(s: dict | str) -> str:
    return s if isinstance(s, str) else json.dumps(s)


def layout(rows: int, page_size: int = 8192, align_pages: int = 1) -> dict:
    """Geometry: ``rows_per_group``, ``groups``, ``total_pages`` and ``regions`` [(column, first_page,
    pages_per_group)] in record order."""
    return _issd.columnar_layout(rows, page_size, align_pages)


def from_records(records: np.ndarray, page_size: int = 8192, align_pages: int = 1) -> np.ndarray:
    """Contiguous 150-byte records (``lineitem.generate(..., page_size=None)``) as a columnar table (uint8)."""
    return _issd.columnar_from_records(np.ascontiguousarray(records, dtype=np.uint8).reshape(-1), page_size, align_pages)


def generate(
    scale_factor: float = 1.0,
    rows: int | None = None,
    page_size: int = 8192,
    comment_pool: str = "standard",
    align_pages: int = 1,
) -> np.ndarray:
    """The same rows as :func:`nearflash.issd.lineitem.generate`, as a columnar table."""
    records = lineitem.generate(scale_factor, rows, None, comment_pool)
    return from_records(records, page_size, align_pages)


def spec(kernel: str, rows: int, **params: Any) -> dict:
    """A ``col_scan`` / ``col_filter_sum`` spec over a table of ``rows`` rows (other parameters as ``scan`` /
    ``filter_sum``; defaults: the 1% scan and TPC-H Q6)."""
    if kernel not in ("col_scan", "col_filter_sum"):
        raise ValueError(f"columnar kernel {kernel!r}: one of 'col_scan', 'col_filter_sum'")
    return {"kernel": kernel, "rows": int(rows), **params}


def columnar(row_spec: dict, rows: int) -> dict:
    """The columnar twin of a row-layout ``scan`` / ``filter_sum`` spec."""
    kind = row_spec.get("kernel")
    if kind not in ("scan", "filter_sum"):
        raise ValueError(f"only scan and filter_sum have columnar twins, not {kind!r}")
    return {**row_spec, "kernel": "col_" + kind, "rows": int(rows)}


def columns(kernel: dict | str, page_size: int = 8192) -> list[str]:
    """The columns a kernel reads, in the order of each row group's pages."""
    return _issd.columnar_columns(_json(kernel), page_size)


def run(kernel: dict | str, table: np.ndarray, page_size: int = 8192, groups_per_task: int = 16) -> dict:
    """The host path over a whole table (output dict as :func:`nearflash.issd.kernels.run`; ``input_bytes`` counts
    the pages of the named columns). The table's header page must state the kernel's ``rows`` and page size."""
    t = np.ascontiguousarray(table, dtype=np.uint8).reshape(-1)
    return _issd.run_columnar(_json(kernel), t, page_size, groups_per_task)


def stream(kernel: dict | str, table: np.ndarray, page_size: int = 8192) -> np.ndarray:
    """The kernel's input as one paged stream (row group by row group, a page per named column): what
    ``kernels.run`` / ``map_chunk`` take."""
    t = np.ascontiguousarray(table, dtype=np.uint8).reshape(-1)
    return _issd.columnar_stream(_json(kernel), t, page_size)


def write(dev: Any, slba: int, table: np.ndarray, page_size: int = 8192) -> list[tuple[int, int]]:
    """Writes a table at ``slba`` (on flash when it returns); its extents as :func:`agent.write_input`'s."""
    return agent.write_input(dev, slba, table, page_size)


def extents(kernel: dict | str, slba: int, lba_bytes: int, page_size: int = 8192, align_pages: int = 1) -> list[tuple[int, int]]:
    """The named columns' pages of a table written at ``slba``, column after column: a columnar job's input."""
    k = json.loads(_json(kernel))
    geo = layout(k["rows"], page_size, align_pages)
    per = page_size // lba_bytes
    where = {name: (first, per_group) for name, first, per_group in geo["regions"]}
    out = []
    for c in columns(k, page_size):
        first, per_group = where[c]
        out.append((slba + first * per, geo["groups"] * per_group * per))
    return out
