"""NICE (Wang et al., "A Non-intrusive In-Storage-Computing Framework for Embedded Applications") on nearflash:
the firmware's ext4 learner and an ext4 reader over image files, NICE-K (exact KNN as the FPGA pipelines compute
it, with its timing) and NICE-C timing. The Rust side lives in ``nearflash._native.nice`` (crate
``nearflash-nice``); see ``docs/nice.md``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from nearflash import _native
from nearflash.device import _count

_n = _native.nice


def _params(params: dict[str, Any] | None) -> str | None:
    if params is None:
        return None
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of parameter values, got {type(params).__name__}")
    return json.dumps(params)


def learn_image(path: str, order: str = "forward", sector_size: int = 4096) -> dict[str, Any]:
    """Write an ext4 image's sectors to the firmware learner in ``order`` ('forward' or 'backward'); returns the
    files it learnt (inode, mode, uid, size, device LBAs), the Superblock Table, deferred re-reads and errors."""
    return _n.learn_image(str(path), order, sector_size)


def lookup(path: str, fs_path: str, start_lba: int = 0, sector_size: int = 4096) -> tuple[int, int, list[int]]:
    """(inode, directory levels walked, data LBAs) of ``fs_path`` inside the ext4 image at ``path``."""
    return _n.lookup(str(path), fs_path, _count("start_lba", start_lba, 0, 2**64 - 1), sector_size)


def lookup_via(read: Any, fs_path: str, start_lba: int = 0, sector_size: int = 4096) -> dict[str, Any]:
    """Looks ``fs_path`` up through ``read(lba) -> bytes`` (one sector per call; only the blocks the walk needs):
    {inode, levels, mode, uid, size, generation (the inode's i_generation), is_dir, lbas (data LBAs), reads (the
    sectors asked for, in order)}. An error
    ``read`` raises is re-raised; FileNotFoundError for an unknown path, ImageError for damaged metadata."""
    return _n.lookup_via(read, fs_path, _count("start_lba", start_lba, 0, 2**64 - 1), sector_size)


def knn(embeddings: np.ndarray, query: np.ndarray, k: int, params: dict[str, Any] | None = None) -> np.ndarray:
    """Indices of the ``k`` nearest rows of ``embeddings`` (int16 or int32, shape N x D) to ``query`` by squared
    L2 distance, nearest first (ties by index), computed by NICE-K's kernel (exact for every value of the dtype:
    128-bit accumulators). ``query`` holds ``D`` integers within the embeddings' dtype."""
    e = np.asarray(embeddings)
    if e.ndim != 2 or e.dtype not in (np.int16, np.int32):
        raise TypeError(f"embeddings must be a 2-D int16 or int32 array, got {e.dtype} with {e.ndim} dims")
    q = np.asarray(query)
    if q.shape != (e.shape[1],) or not np.issubdtype(q.dtype, np.integer):
        raise ValueError(f"query must be {e.shape[1]} integers, got shape {q.shape} of {q.dtype}")
    lo, hi = np.iinfo(e.dtype).min, np.iinfo(e.dtype).max
    if q.size and (int(q.min()) < lo or int(q.max()) > hi):
        raise ValueError(f"query values must fit the embeddings' {e.dtype} ({lo}..{hi}), got {int(q.min())}..{int(q.max())}")
    bits = 16 if e.dtype == np.int16 else 32
    data = np.ascontiguousarray(e, dtype=e.dtype.newbyteorder("<")).tobytes()
    out = _n.knn_search(data, e.shape[1], bits, [int(v) for v in q], _count("k", k, 1, 4096), _params(params))
    return np.array([i for _, i in out], dtype=np.int64)


def knn_timing(n: int, dim: int, bits: int, k: int, params: dict[str, Any] | None = None) -> dict[str, float]:
    """NICE-K cycle counts and seconds of one query over ``n`` vectors."""
    return _n.knn_timing(_count("n", n, 0, 2**64 - 1), _count("dim", dim, 1, 2**32 - 1), _count("bits", bits, 0, 2**32 - 1),
                         _count("k", k, 1, 2**32 - 1), _params(params))


def mobilenet_v2_timing(batch: int, params: dict[str, Any] | None = None) -> dict[str, float]:
    """NICE-C multiply-accumulates, weights, cycles and seconds of MobileNetV2 on one batch."""
    return _n.mobilenet_v2_timing(_count("batch", batch, 1, 2**32 - 1), _params(params))


def network_kernels(net: str) -> list[dict[str, int]]:
    """The kernels a GPU runs for one image of NICE-C's network `net` ("lenet5" or "mobilenet_v2"), in order: each
    one's multiply-adds (0 for pools and activations), weights, input and output elements."""
    return _n.network_kernels(net)


__all__ = ["knn", "knn_timing", "learn_image", "lookup", "mobilenet_v2_timing", "network_kernels"]


def cnn_logits(net: str, weights: bytes, images: np.ndarray, precision: str = "int8") -> np.ndarray:
    """The logits (float64, one row per image) NICE-C's op 6 computes for ``net`` ("lenet5" or "mobilenet_v2") over
    u8 ``images`` (whole frames in the network's CHW shape) with its f32 weights file ``weights``, in ``precision``
    ("int8": the FPGA's 8-bit datapath, the firmware's default; "f32")."""
    imgs = np.ascontiguousarray(images, dtype=np.uint8)
    return np.asarray(_n.cnn_logits(net, bytes(weights), imgs.tobytes(), precision), dtype=np.float64)
