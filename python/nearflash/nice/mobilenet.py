"""MobileNetV2 (width 1.0, 224x224x3) for NICE-C's in-storage op (network 1): the layer table of
``crates/nearflash-nice/src/cnn.rs`` (Sandler et al. 2018, Table 2), random He-scaled weights in the firmware's
file layout (``cnn_net.rs``: per convolution weights then biases; an inverted residual's expand, depthwise and
project convolutions in that order; the classifier last), and a numpy reference of the forward pass. Batch norm is
taken as folded into the convolutions; the weights are random (the figure is about time and energy, not accuracy)."""

from __future__ import annotations

import numpy as np

from nearflash.nice import int8 as q8

SHAPE = (3, 224, 224)
IMAGE_BYTES = 3 * 224 * 224
#: (expansion t, channels c, repeats n, first stride s)
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def convs() -> list[tuple]:
    """Every convolution or linear layer in file order: ("conv", in, out, k, stride, groups, act, block) with block
    = (index of the inverted residual, is its last part) or None, and ("linear", in, out)."""
    out, c = [("conv", 3, 32, 3, 2, 1, True, None)], 32
    b = 0
    for t, ch, n, s in BLOCKS:
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), c * t
            if t > 1:
                out.append(("conv", c, hidden, 1, 1, 1, True, (b, False)))
            out.append(("conv", hidden, hidden, 3, stride, hidden, True, (b, False)))
            out.append(("conv", hidden, ch, 1, 1, 1, False, (b, True, stride == 1 and c == ch)))
            c, b = ch, b + 1
    out.append(("conv", c, 1280, 1, 1, 1, True, None))
    out.append(("linear", 1280, 1000))
    return out


def random_weights(seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    wts = []
    for layer in convs():
        if layer[0] == "linear":
            _, i, o = layer
            wts.append((rng.standard_normal((o, i)) * np.sqrt(1.0 / i), rng.standard_normal(o) * 0.01))
        else:
            _, i, o, k, _, g, _, _ = layer
            fan = i // g * k * k
            wts.append((rng.standard_normal((o, i // g, k, k)) * np.sqrt(2.0 / fan), rng.standard_normal(o) * 0.01))
    return [(w.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)) for w, b in wts]


def weight_bytes(wts: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    return b"".join(w.astype("<f4").tobytes() + b.astype("<f4").tobytes() for w, b in wts)


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, groups: int) -> np.ndarray:
    """x (c, h, w); w (o, c/groups, k, k); padding k // 2."""
    k = w.shape[-1]
    if k == 1:
        y = np.einsum("chw,oc->ohw", x, w[:, :, 0, 0], optimize=True)
    else:
        xp = np.pad(x, ((0, 0), (k // 2, k // 2), (k // 2, k // 2)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::stride, ::stride]
        if groups == 1:
            y = np.einsum("chwij,ocij->ohw", win, w, optimize=True)
        else:
            y = np.einsum("chwij,cij->chw", win, w[:, 0], optimize=True)
    return y[:, :: 1 if k > 1 else stride, :: 1 if k > 1 else stride] + b[:, None, None]


def logits(wts: list[tuple[np.ndarray, np.ndarray]], img: np.ndarray, record: list[float] | None = None) -> np.ndarray:
    """The 1000 logits of one image (150,528 u8 in CHW order), float64; `record` (if given) receives the largest
    magnitude of each convolution's output after its activation and residual add (for ``calibrate``)."""
    x = img.reshape(SHAPE).astype(np.float64) / 255.0
    block_in = None
    for layer, (w, b) in zip(convs(), wts):
        if layer[0] == "linear":
            return w @ x.mean(axis=(1, 2)) + b
        _, _, _, _, stride, groups, act, blk = layer
        if blk is not None and block_in is None:
            block_in = x
        x = _conv(x, w, b, stride, groups)
        if act:
            x = np.clip(x, 0.0, 6.0)
        if blk is not None and blk[1]:
            if blk[2]:
                x = x + block_in
            block_in = None
        if record is not None:
            record.append(float(np.abs(x).max()))
    raise AssertionError("the network ends with its classifier")


def calibrate(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray) -> list[float]:
    """The activation scales of the 8-bit datapath (one per convolution: its largest output over `imgs` / 127)."""
    top: np.ndarray | None = None
    for img in imgs:
        rec: list[float] = []
        logits(wts, img, rec)
        top = np.asarray(rec) if top is None else np.maximum(top, rec)
    return [q8.scale_of(m) for m in top]


def logits_int8(wts: list[tuple[np.ndarray, np.ndarray]], img: np.ndarray, scales: list[float]) -> np.ndarray:
    """The 1000 logits of one image on NICE-C's 8-bit datapath (``cnn_precision = "int8"``) with activation
    `scales` (``calibrate``), bit for bit as the firmware computes them (``nearflash.nice.int8``)."""
    x = q8.Q.image(img, SHAPE)
    block_in = None
    for i, (layer, (w, b)) in enumerate(zip(convs(), wts)):
        qw = q8.quantise_weights(w)
        if layer[0] == "linear":
            return q8.layer(q8.global_avg_pool(x), qw, b, None, lambda v, wq: v @ wq.T).real()[0]
        _, _, _, _, stride, groups, act, blk = layer
        if blk is not None and block_in is None:
            block_in = x
        x = q8.layer(x, qw, b, scales[i],
                     lambda v, wq, stride=stride, groups=groups: _conv(v[0], wq, np.zeros(len(wq)), stride, groups)[None])
        if act:
            x = q8.relu6(x)
        if blk is not None and blk[1]:
            if blk[2]:
                x = q8.residual(x, block_in)
            block_in = None
    raise AssertionError("the network ends with its classifier")


def weights_file(wts: list[tuple[np.ndarray, np.ndarray]], scales: list[float] | None) -> bytes:
    """The weights file as NICE-C reads it: the f32 parameters, then (for int8) the scales' NCQ1 section."""
    return q8.weights_file(weight_bytes(wts), scales)
