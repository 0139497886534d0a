"""Seeded inputs of the Phoenix-style kernels, generated natively (see ``nearflash_issd::datagen``), and their
paged forms: text as pages of whole lines, points and pixels as pages of whole records."""

from __future__ import annotations

import numpy as np

from nearflash._native import issd as _issd


def text(size: int, seed: int) -> bytes:
    """About ``size`` bytes of ``\\n``-terminated lines (20-120 B) of TPC-H grammar text."""
    return _issd.text(size, seed)


def regression_points(n: int, seed: int) -> np.ndarray:
    """(n, 2) uint8 points: x uniform, y = round(0.75 x + 20 + U[-16, 16]) clamped to 0..255."""
    return _issd.regression_points(n, seed)


def pixels(width: int, height: int, seed: int) -> np.ndarray:
    """(width x height, 3) uint8 RGB pixels of a noisy gradient image, row-major."""
    return _issd.pixels(width, height, seed)


def cluster_points(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    """(n, dim) int32 points around ``clusters`` centres on Phoenix's [0, 1000) grid."""
    return _issd.cluster_points(n, dim, clusters, seed)


def labelled_records(n: int, attributes: int, classes: int, values: int, seed: int) -> np.ndarray:
    """(n, attributes + 1) uint8 labelled records (naive_bayes, scalparc): attribute values in ``0..values`` around
    a per-(class, attribute) centre (noise of +-values/4), then the class label in ``0..classes``."""
    return _issd.labelled_records(n, attributes, classes, values, seed)


def pack_records(records: np.ndarray, record_size: int, page_size: int) -> np.ndarray:
    """Packs records (any array whose bytes are whole records) into pages."""
    flat = np.ascontiguousarray(records).reshape(-1).view(np.uint8)
    return _issd.pack_records(flat, record_size, page_size)


def pack_lines(text: bytes, page_size: int) -> np.ndarray:
    """Packs text into pages of whole lines."""
    return _issd.pack_lines(text, page_size)


def unpack(pages: np.ndarray, page_size: int) -> np.ndarray:
    """The logical content of a paged buffer (payloads back to back)."""
    return _issd.unpack(np.ascontiguousarray(pages, dtype=np.uint8), page_size)
