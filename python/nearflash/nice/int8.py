"""NICE-C's 8-bit datapath in numpy, bit for bit as the firmware computes it (``crates/nearflash-nice/src/quant.rs``),
and its calibration step.

* Weights: int8 with one symmetric scale per layer (max |w| / 127), quantised from the f32 weights file (the
  firmware does the same when it reads the file).
* Activations: int8 with one scale per tensor, calibrated here on data: the float model runs over calibration
  images and each convolution or linear layer (but the last) gets scale = the largest magnitude of its output after
  its activation and residual add, / 127. The scales travel in a small section appended to the weights file
  (``scales_section``: magic ``NCQ1``, version 1, count, f32 scales, CRC-32).
* Per layer: int32 sums starting at the bias round(b / (s_x s_w)); requantised by M = s_x s_w / s_y as a fixed-point
  multiplier and shift (``fixed_point``), half up, saturating to -127..127; ReLU6 at floor(6 / s); the global
  average pool rounds sum / (h x w) half up; the residual add rescales the block input to the output's scale.

Tensors carry a batch axis: ``Q(v, s)`` holds integer values ``v`` (n, ...) as int64 and their scale ``s`` (a float,
the same for every image: the scales are static). Sums of integer products are formed in float64 (exact: every
partial sum is an integer below 2^53) and converted back to int64. The networks' passes are ``lenet.logits_int8``
and ``mobilenet.logits_int8``."""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

QMAX = 127
MAGIC, VERSION = b"NCQ1", 1
I32 = (-(2**31), 2**31 - 1)


def round_half_away(x: np.ndarray | float) -> np.ndarray:
    """Rounds half away from zero (``quant::round_half_away``)."""
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def to_int32(x: np.ndarray) -> np.ndarray:
    return np.clip(round_half_away(x), *I32).astype(np.int64)


def quantise_weights(w: np.ndarray) -> tuple[np.ndarray, float]:
    """(int8 values as int64, scale = max |w| / 127, or 1 for all zeros) of one layer's weights."""
    w = np.asarray(w, dtype=np.float64)
    m = float(np.abs(w).max()) if w.size else 0.0
    scale = m / 127.0 if m > 0 else 1.0
    return np.clip(round_half_away(w / scale), -QMAX, QMAX).astype(np.int64), scale


def fixed_point(m: float) -> tuple[int, int]:
    """``m`` as (mult, shift), m ~ mult x 2^-shift, mult in [2^30, 2^31): ``quant::fixed_point``."""
    if not m >= 2.0**-31:
        return 0, 1
    if m >= 2.0**29:
        return 2**31 - 1, 1
    f, e = math.frexp(m)
    mult = int(round_half_away(f * 2.0**31))
    if mult == 2**31:
        mult, e = 2**30, e + 1
    return mult, 31 - e


def requantise(v: np.ndarray, m: float) -> np.ndarray:
    mult, shift = fixed_point(m)
    return np.clip((v * mult + (1 << (shift - 1))) >> shift, -QMAX, QMAX)


@dataclass
class Q:
    v: np.ndarray
    s: float

    @staticmethod
    def image(imgs: np.ndarray, shape: tuple[int, ...]) -> "Q":
        return Q(np.asarray(imgs, dtype=np.uint8).reshape((-1, *shape)).astype(np.int64), 1.0 / 255.0)

    def real(self) -> np.ndarray:
        """value x scale, float64."""
        return self.v.astype(np.float64) * self.s


def layer(x: Q, qw: tuple[np.ndarray, float], b: np.ndarray, out: float | None,
          apply: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Q:
    """A convolution or linear layer: ``apply(values, weights)`` (float64, exact integer sums, channels on axis 1),
    the biases on the sums' grid, int32 saturation, then requantisation to the output scale ``out`` (None: the
    last layer, whose int32 sums are the result)."""
    w, sw = qw
    grid = x.s * sw
    bias = to_int32(np.asarray(b, dtype=np.float64) / grid)
    y = np.rint(apply(x.v.astype(np.float64), w.astype(np.float64))).astype(np.int64)
    y = np.clip(y + bias.reshape((1, -1) + (1,) * (y.ndim - 2)), *I32)
    return Q(y, grid) if out is None else Q(requantise(y, grid / out), out)


def relu(x: Q) -> Q:
    return Q(np.maximum(x.v, 0), x.s)


def relu6(x: Q) -> Q:
    """Clamps at 0 and at floor(6 / scale), 6 on the tensor's grid."""
    return Q(np.clip(x.v, 0, int(np.floor(6.0 / x.s))), x.s)


def residual(z: Q, y: Q) -> Q:
    """z + y with y requantised to z's scale, saturating."""
    return Q(np.clip(z.v + requantise(y.v, y.s / z.s), -QMAX, QMAX), z.s)


def global_avg_pool(x: Q) -> Q:
    """Per channel round(sum / (h x w)), half up; the scale is kept."""
    n, c = x.v.shape[:2]
    hw = int(np.prod(x.v.shape[2:]))
    return Q((2 * x.v.reshape(n, c, hw).sum(axis=2) + hw) // (2 * hw), x.s)


def scale_of(max_abs: float) -> float:
    """A calibrated activation scale (f32, as stored): max |x| / 127, 1 for an all-zero tensor."""
    return float(np.float32(max_abs / 127.0)) if max_abs > 0 else 1.0


def scales_section(scales: list[float]) -> bytes:
    """The NCQ1 section the firmware reads after the weights' f32 parameters."""
    body = MAGIC + struct.pack("<HH", VERSION, len(scales)) + np.asarray(scales, dtype="<f4").tobytes()
    return body + struct.pack("<I", zlib.crc32(body))


def weights_file(params: bytes, scales: list[float] | None) -> bytes:
    """A weights file as NICE-C reads it: the f32 `params`, then (for the int8 datapath) the scales' NCQ1 section."""
    return params + (scales_section(scales) if scales is not None else b"")


def parse_scales(b: bytes) -> list[float]:
    """The scales of an NCQ1 section (``ValueError`` when damaged)."""
    if len(b) < 12 or b[:4] != MAGIC:
        raise ValueError("not an NCQ1 activation-scales section")
    version, count = struct.unpack("<HH", b[4:8])
    if version != VERSION or len(b) != 12 + 4 * count or zlib.crc32(b[:-4]) != struct.unpack("<I", b[-4:])[0]:
        raise ValueError("damaged NCQ1 activation-scales section")
    return [float(v) for v in np.frombuffer(b[8:-4], dtype="<f4")]
