"""Inputs shared by the programs experiments: lineitem pages, text, an SLS table with its bags, all placed on
flash at block-aligned LBAs so that both paths read them from the same place."""

from __future__ import annotations

from typing import Any

import numpy as np

import nearflash
from nearflash.experiment import Options
from nearflash.issd import lineitem

Q6 = np.asarray((8766, 9131, 5, 7, 2400), dtype="<i4").tobytes()
PAGE = 8192


def option(opts: Options, key: str, quick: Any, full: Any) -> Any:
    v = opts.extra.get(key)
    if v is None:
        return quick if opts.quick else full
    if isinstance(quick, list):
        return [type(quick[0])(x) for x in str(v).split(",")]
    return type(quick)(v)


def device(preset: str, seed: int) -> Any:
    dev = nearflash.Device(None, preset=preset, seed=seed)
    dev.attach("programs")
    return dev


def lineitem_pages(rows: int) -> np.ndarray:
    return lineitem.generate(rows=rows, page_size=PAGE)


def text(nbytes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    words = [b"flash ", b"needle ", b"page ", b"die ", b"needles ", b"block\n", b"channel "]
    out = b"".join(words[i] for i in rng.integers(0, len(words), nbytes // 4))
    return np.frombuffer(out[:nbytes], dtype=np.uint8).copy()


def padded(a: np.ndarray, block: int) -> np.ndarray:
    out = np.zeros(-(-a.size // block) * block, dtype=np.uint8)
    out[: a.size] = a
    return out


def place(dev: Any, parts: list[np.ndarray]) -> list[tuple[int, int, int]]:
    """Writes each part at the next block boundary; returns (lba, nblocks, nbytes) per part."""
    block, lba, out = dev.lba_bytes, 0, []
    for p in parts:
        buf = padded(np.ascontiguousarray(p).view(np.uint8).reshape(-1), block)
        dev.write(lba, buf)
        out.append((lba, buf.size // block, p.nbytes))
        lba += buf.size // block
    return out
