"""DLG-x's int8 hashing network run by numpy/BLAS on the host: the B-CPU baseline's strong implementation (the one a
practitioner would write, convolutions as im2col + one matrix product per layer), and the host's fast way to hash a
database. Same arithmetic as the crate's int8 executor (``QModel.hash``), so the codes are equal bit for bit: int8
inputs and weights, exact integer accumulation, requantisation by ``round(acc * mult * 2^-shift)`` saturated to
+-127, the code bit ``acc >= 0`` of the hash layer.

The products are summed in float32 where every partial sum of a layer stays below 2^24 (then float32 is exact, in
any summation order), else in float64 (exact below 2^53); ``Int8Network.float_layers`` says which.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from threadpoolctl import threadpool_limits

#: Largest integer magnitude below which float32 and float64 hold every integer exactly.
EXACT = {np.float32: 1 << 24, np.float64: 1 << 53}


def layer_macs(network: dict[str, Any]) -> list[tuple[str, int]]:
    """Multiply-accumulates of one image per weighted layer, (name, MACs), from a layer list (``Model.layers()``)."""
    c, h, w = network["input"]
    out = []
    for layer in network["body"]:
        kind = layer["type"]
        if kind == "conv":
            k, s, p = layer["kernel"], layer["stride"], layer["pad"]
            h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            out.append((layer["name"], layer["out_ch"] * h * w * layer["in_ch"] * k * k))
            c = layer["out_ch"]
        elif kind == "max_pool":
            h, w = (h - layer["size"]) // layer["stride"] + 1, (w - layer["size"]) // layer["stride"] + 1
        elif kind == "flatten":
            c, h, w = c * h * w, 1, 1
        elif kind == "fc":
            out.append((layer["name"], layer["inputs"] * layer["outputs"]))
            c, h, w = layer["outputs"], 1, 1
    return out


def _requant(acc: np.ndarray, mult: int, shift: int) -> np.ndarray:
    r = (acc.astype(np.int64) * mult + (1 << (shift - 1))) >> shift
    return np.clip(r, -127, 127).astype(np.int8)


class Int8Network:
    """An int8 model (``nearflash._native.cognitive.QModel``) as numpy arrays; :meth:`hash` runs it."""

    def __init__(self, qmodel: Any) -> None:
        e = qmodel.export()
        self.network = e["network"]
        self.input = tuple(self.network["input"])
        self.pixels = int(np.prod(self.input))
        self.bits = self.network["body"][-1]["outputs"]
        weighted = iter(e["layers"])
        self.steps: list[tuple[str, Any]] = []
        #: Names of the layers summed in float32 (exact there), the others in float64.
        self.float_layers: dict[str, str] = {}
        for layer in self.network["body"]:
            if layer["type"] in ("conv", "fc"):
                q = next(weighted)
                w = q["weight"].reshape(q["weight"].shape[0], -1)
                # the largest partial sum of one output is below sum |w| * 127 (int8 inputs)
                bound = int(np.abs(w.astype(np.int64)).sum(axis=1).max(initial=0)) * 127
                dtype = np.float32 if bound < EXACT[np.float32] else np.float64
                self.float_layers[layer["name"]] = np.dtype(dtype).name
                self.steps.append((layer["type"], (layer, np.ascontiguousarray(w.T, dtype=dtype),
                                                   q["bias"].astype(np.int64), int(q["mult"]), int(q["shift"]))))
            else:
                self.steps.append((layer["type"], layer))

    def accumulators(self, images: np.ndarray) -> np.ndarray:
        """The hash layer's int32 accumulators, (n, bits), of uint8 images (n, pixels)."""
        images = np.asarray(images)
        if images.dtype != np.uint8 or images.ndim != 2 or images.shape[1] != self.pixels:
            raise ValueError(f"images: uint8 of shape (n, {self.pixels}) expected, got {images.dtype} {images.shape}")
        n = len(images)
        # pixel/255 quantised at scale 1/127: q = round(p * 127 / 255), as the executor
        x = ((images.astype(np.uint32) * 127 + 127) // 255).astype(np.int8).reshape(n, *self.input)
        last = len(self.steps) - 1
        for i, (kind, arg) in enumerate(self.steps):
            if kind == "relu":
                x = np.maximum(x, 0)
            elif kind == "max_pool":
                x = sliding_window_view(x, (arg["size"], arg["size"]), axis=(2, 3))[
                    :, :, :: arg["stride"], :: arg["stride"]].max(axis=(4, 5))
            elif kind == "flatten":
                x = x.reshape(n, -1, 1, 1)
            else:
                layer, wt, bias, mult, shift = arg
                if kind == "conv":
                    k, s, p = layer["kernel"], layer["stride"], layer["pad"]
                    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))) if p else x
                    win = sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s]  # n, c, oh, ow, k, k
                    oh, ow = win.shape[2], win.shape[3]
                    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1).astype(wt.dtype)
                    acc = (cols @ wt).astype(np.int64) + bias  # n*oh*ow, out
                    acc = acc.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2)
                else:
                    acc = (x.reshape(n, -1).astype(wt.dtype) @ wt).astype(np.int64) + bias
                    acc = acc.reshape(n, -1, 1, 1)
                if i == last:
                    return acc.reshape(n, -1).astype(np.int32)
                x = _requant(acc, mult, shift)
        raise ValueError("the network must end with its fc hash layer")

    def hash(self, images: np.ndarray, batch: int = 16) -> np.ndarray:
        """Hash codes (uint64, bit i = accumulator i >= 0) of uint8 images (n, pixels), ``batch`` images per matrix
        product (im2col of a few dozen images stays in cache)."""
        images = np.asarray(images)
        if len(images) == 0:
            return np.zeros(0, dtype=np.uint64)
        with threadpool_limits(1, user_api="blas"):  # products this small only lose to a pool's hand-offs
            acc = np.concatenate([self.accumulators(images[i:i + batch]) for i in range(0, len(images), batch)])
        weights = np.left_shift(np.uint64(1), np.arange(self.bits, dtype=np.uint64))
        return ((acc >= 0).astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)

    def macs(self) -> int:
        """Multiply-accumulates of one image."""
        return sum(m for _, m in layer_macs(self.network))
