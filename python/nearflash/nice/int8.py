"""NICE-C's 8-bit datapath in numpy, bit for bit as the firmware computes it (``crates/nearflash-nice/src/quant.rs``):
int8 weights with one symmetric scale per layer (max |w| / 127), the image's u8 pixels (scale 1/255), int32 sums,
and dynamic per-tensor requantisation of every activation tensor to int8 by its own largest magnitude (per image)
before the next convolution or linear layer. The networks' forward passes built on these steps are
``lenet.logits_int8`` and ``mobilenet.logits_int8``.

Tensors carry a batch axis: ``Q(v, s, narrow)`` holds integer values ``v`` (n, ...) as int64, one float64 scale per
image ``s`` (n,), and whether the values are 8-bit (``narrow``) or int32 sums. Sums of integer products are formed in
float64 (exact: every partial sum is an integer below 2^53) and converted back to int64."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

QMAX = 127
SHIFT = 31
I32 = (-(2**31), 2**31 - 1)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Rounds half away from zero (``quant::round_half_away``)."""
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def to_int32(x: np.ndarray) -> np.ndarray:
    return np.clip(round_half_away(x), *I32).astype(np.int64)


def sat32(v: np.ndarray) -> np.ndarray:
    return np.clip(v, *I32)


def quantise_weights(w: np.ndarray) -> tuple[np.ndarray, float]:
    """(int8 values as int64, scale = max |w| / 127, or 1 for all zeros) of one layer's weights."""
    w = np.asarray(w, dtype=np.float64)
    m = float(np.abs(w).max()) if w.size else 0.0
    scale = m / 127.0 if m > 0 else 1.0
    return np.clip(round_half_away(w / scale), -QMAX, QMAX).astype(np.int64), scale


@dataclass
class Q:
    v: np.ndarray
    s: np.ndarray
    narrow: bool

    @staticmethod
    def image(imgs: np.ndarray, shape: tuple[int, ...]) -> "Q":
        imgs = np.asarray(imgs, dtype=np.uint8).reshape((-1, *shape))
        return Q(imgs.astype(np.int64), np.full(len(imgs), 1.0 / 255.0), True)

    def _per_image(self, a: np.ndarray) -> np.ndarray:
        return a.reshape((-1,) + (1,) * (self.v.ndim - 1))

    def requantise(self) -> "Q":
        """int32 sums to int8 by each image's largest magnitude m: M = floor(127 * 2^31 / m),
        q = sign(v) * ((|v| * M + 2^30) >> 31), scale * 2^31 / M; an all-zero tensor keeps its scale."""
        if self.narrow:
            return self
        m = np.abs(self.v).reshape(len(self.v), -1).max(axis=1)
        mult = np.where(m > 0, (QMAX << SHIFT) // np.maximum(m, 1), 0)
        q = np.sign(self.v) * ((np.abs(self.v) * self._per_image(mult) + (1 << (SHIFT - 1))) >> SHIFT)
        s = np.where(m > 0, self.s * (float(1 << SHIFT) / np.maximum(mult, 1)), self.s)
        return Q(q, s, True)

    def real(self) -> np.ndarray:
        """value x scale, float64."""
        return self.v.astype(np.float64) * self._per_image(self.s)


def layer(x: Q, qw: tuple[np.ndarray, float], b: np.ndarray, apply: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Q:
    """A convolution or linear layer: requantise the input, ``apply(values, weights)`` (float64, exact integer
    sums, the output's channel axis second), add the biases on the sums' grid, saturate to int32."""
    x = x.requantise()
    w, sw = qw
    grid = x.s * sw
    bias = to_int32(np.asarray(b, dtype=np.float64)[None, :] / grid[:, None])  # (n, out)
    y = np.rint(apply(x.v.astype(np.float64), w.astype(np.float64))).astype(np.int64)
    y = y + bias.reshape(bias.shape + (1,) * (y.ndim - 2))
    return Q(sat32(y), grid, False)


def relu(x: Q) -> Q:
    return Q(np.maximum(x.v, 0), x.s, x.narrow)


def relu6(x: Q) -> Q:
    """Clamps at 0 and at floor(6 / scale), 6 on the tensor's grid."""
    hi = np.floor(6.0 / x.s).astype(np.int64)
    return Q(np.clip(x.v, 0, x._per_image(hi)), x.s, x.narrow)


def residual(z: Q, y: Q) -> Q:
    """z + y with y rescaled to z's grid: z + round(y * (s_y / s_z))."""
    r = y.s / z.s
    return Q(sat32(z.v + to_int32(y.v.astype(np.float64) * z._per_image(r))), z.s, False)


def global_avg_pool(x: Q) -> Q:
    """Per channel the int32 sum of its values, scale / (h x w)."""
    n, c = x.v.shape[:2]
    hw = int(np.prod(x.v.shape[2:]))
    return Q(sat32(x.v.reshape(n, c, hw).sum(axis=2)), x.s / hw, False)
