"""Helpers of the reliability suite: a small image with known contents."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from conftest import SMALL, TINY  # noqa: F401  (tests/conftest.py)
from nearflash import Device

#: LBAs written by `image` (each sector holds its own LBA number).
WRITTEN = 1000


def pattern(lba: int, n: int, lb: int, tag: int = 1) -> np.ndarray:
    """`n` sectors whose 8-byte words hold (tag << 32 | lba)."""
    words = np.repeat(np.arange(lba, lba + n, dtype=np.uint64) | np.uint64(tag << 32), lb // 8)
    return words.view(np.uint8)


def build_image(path: Path, *, trim: bool = False, close: bool = True) -> Device:
    dev = Device(path, **TINY)
    dev.write(0, pattern(0, WRITTEN, dev.lba_bytes))
    if trim:
        dev.trim(100, 50)
    dev.flush()
    if close:
        dev.close()
    return dev
