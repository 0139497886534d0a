"""TPC-H ``lineitem`` as fixed-width 150-byte records (dbgen rows via the ``tpchgen`` crate), packed into flash
pages: ``[u32 payload length][whole records][zero padding]``. Integers little-endian; decimals as scaled integers
(cents, hundredths); dates as days since 1970-01-01; CHAR fields space padded, ``l_comment`` zero padded with its
length in ``comment_len``; ``row_id`` is the row's number in the table. :data:`LAYOUT` lists the fields."""

from __future__ import annotations

import numpy as np

from nearflash._native import issd as _issd

RECORD_SIZE = 150
PAGE_HEADER = 4
#: (name, offset, width, kind) of each field, kind in i64, i32, u8, u64, text.
LAYOUT: list[tuple[str, int, int, str]] = _issd.lineitem_layout()

_NUMPY = {"i64": "<i8", "i32": "<i4", "u8": "u1", "u64": "<u8"}


def record_dtype() -> np.dtype:
    """A numpy structured dtype of one record (text fields as fixed-size bytes)."""
    names, formats, offsets = [], [], []
    for name, off, width, kind in LAYOUT:
        names.append(name)
        formats.append(_NUMPY.get(kind, f"S{width}"))
        offsets.append(off)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": RECORD_SIZE})


def generate(
    scale_factor: float = 1.0,
    rows: int | None = None,
    page_size: int | None = 8192,
    comment_pool: str = "standard",
) -> np.ndarray:
    """The table at ``scale_factor`` (or its first ``rows`` rows) as uint8, packed into ``page_size`` pages, or
    contiguous records when ``page_size`` is None. ``comment_pool='compact'`` avoids dbgen's 300 MiB text pool
    (only ``l_comment`` differs)."""
    return _issd.lineitem(scale_factor, rows, page_size, comment_pool)


def records_per_page(page_size: int) -> int:
    """Whole records a page holds."""
    return (page_size - PAGE_HEADER) // RECORD_SIZE


def decode(data: np.ndarray, page_size: int | None = 8192) -> np.ndarray:
    """Records of a paged (or contiguous, ``page_size=None``) lineitem buffer as a structured array, decoded in
    numpy independently of the Rust decoder."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if page_size is None:
        return data.view(record_dtype())
    pages = data.reshape(-1, page_size)
    counts = pages[:, :PAGE_HEADER].copy().view("<u4")[:, 0] // RECORD_SIZE
    per = records_per_page(page_size)
    slots = pages[:, PAGE_HEADER : PAGE_HEADER + per * RECORD_SIZE].reshape(len(pages), per, RECORD_SIZE)
    keep = np.arange(per)[None, :] < counts[:, None]
    return np.ascontiguousarray(slots[keep]).reshape(-1).view(record_dtype())
