"""LeNet-5 on Fashion-MNIST for NICE-C: the images and labels (Debian's ``dataset-fashion-mnist``), weights in the
firmware's file layout (``crates/nearflash-nice/src/lenet.rs``), and a numpy reference of the forward pass.

Weights: every layer trained with candle by ``nearflash nice train`` (``crates/nearflash-cognitive-train``, binary
``nearflash-nice-train``: AdamW, seeded) and shipped as ``lenet5_fashion.f32`` (the firmware's file format) with its
training record ``lenet5_fashion.f32.json``; ``load()`` reads them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Callable

import numpy as np

from nearflash.ndsearch.datasets import FASHION_DIR, fashion_mnist
from nearflash.nice import int8 as q8

#: (weights shape, biases) of each parameterised layer, in the weights file's order.
SHAPES = [((6, 1, 5, 5), 6), ((16, 6, 5, 5), 16), ((120, 400), 120), ((84, 120), 84), ((10, 84), 10)]
WEIGHT_BYTES = 4 * sum(int(np.prod(s)) + b for s, b in SHAPES)
IMAGE_BYTES = 28 * 28
#: Multiply-accumulates of one image (conv1 117,600 + conv2 240,000 + fc 48,000 + 10,080 + 840).
MACS_PER_IMAGE = 6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10
#: Training images the activation scales are calibrated on (``calibrate``).
CALIBRATION_IMAGES = 1000
#: The shipped weights (``nearflash nice train --out`` this path, default options) and their training record.
SHIPPED = Path(__file__).with_name("lenet5_fashion.f32")


def labels(split: str = "test", root: Path | str = FASHION_DIR) -> np.ndarray:
    """Fashion-MNIST labels (uint8) of the "train" or "test" split."""
    name = {"train": "train-labels-idx1-ubyte.gz", "test": "t10k-labels-idx1-ubyte.gz"}[split]
    with gzip.open(Path(root) / name, "rb") as f:
        raw = f.read()
    if len(raw) < 8 or int.from_bytes(raw[:4], "big") != 2049 or len(raw) != 8 + int.from_bytes(raw[4:8], "big"):
        raise ValueError(f"{name} is not an idx1 label file")
    return np.frombuffer(raw, dtype=np.uint8, offset=8)


def images(split: str = "test") -> np.ndarray:
    """Fashion-MNIST images, (n, 784) uint8."""
    train, test = fashion_mnist()
    return train if split == "train" else test


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    """(n, c, h, w) * (o, c, 5, 5) + b, stride 1."""
    k = w.shape[-1]
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))  # n, c, oh, ow, k, k
    return np.einsum("nchwij,ocij->nohw", win, w, optimize=True) + b[None, :, None, None]


def _pool(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def _hidden(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray) -> list[np.ndarray]:
    """The outputs of conv1, conv2 (after ReLU and pooling), fc1 and fc2 (after ReLU), float64."""
    x = imgs.reshape(-1, 1, 28, 28).astype(np.float64) / 255.0
    c1 = _pool(np.maximum(_conv(x, *wts[0], pad=2), 0))
    c2 = _pool(np.maximum(_conv(c1, *wts[1], pad=0), 0))
    f1 = np.maximum(c2.reshape(len(c2), -1) @ wts[2][0].T + wts[2][1], 0)
    return [c1, c2, f1, np.maximum(f1 @ wts[3][0].T + wts[3][1], 0)]


def features(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray) -> np.ndarray:
    """The 84 inputs of the last layer (float64)."""
    return _hidden(wts, imgs)[-1]


def logits(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray) -> np.ndarray:
    return features(wts, imgs) @ wts[4][0].T + wts[4][1]


def calibrate(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray | None = None) -> list[float]:
    """The activation scales of the 8-bit datapath (conv1, conv2, fc1, fc2: the largest output after ReLU / 127)
    from the float model over `imgs` (default: the first ``CALIBRATION_IMAGES`` training images, not test images)."""
    imgs = images("train")[:CALIBRATION_IMAGES] if imgs is None else imgs
    top = np.zeros(4)
    for i in range(0, len(imgs), 1000):
        top = np.maximum(top, [float(np.abs(h).max()) for h in _hidden(wts, imgs[i : i + 1000])])
    return [q8.scale_of(m) for m in top]


def logits_int8(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray, scales: list[float]) -> np.ndarray:
    """The logits of NICE-C's 8-bit datapath (``cnn_precision = "int8"``) with activation `scales` (``calibrate``),
    bit for bit as the firmware computes them (``nearflash.nice.int8``): float64 values of int32 sums x scale."""
    qw = [q8.quantise_weights(w) for w, _ in wts]
    x = q8.Q.image(imgs, (1, 28, 28))
    for i, pad in ((0, 2), (1, 0)):
        x = q8.relu(q8.layer(x, qw[i], wts[i][1], scales[i], lambda v, w, pad=pad: _conv(v, w, np.zeros(len(w)), pad)))
        x = q8.Q(_pool(x.v), x.s)
    x = q8.Q(x.v.reshape(len(x.v), -1), x.s)
    for i in (2, 3):
        x = q8.relu(q8.layer(x, qw[i], wts[i][1], scales[i], lambda v, w: v @ w.T))
    return q8.layer(x, qw[4], wts[4][1], None, lambda v, w: v @ w.T).real()


def load(path: Path | str = SHIPPED) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (weights, biases) of each layer from a weights file (f32 values as float64 arrays)."""
    raw = Path(path).read_bytes()
    if len(raw) != WEIGHT_BYTES:
        raise ValueError(f"{path}: {len(raw)} bytes, LeNet-5's weights file has {WEIGHT_BYTES}")
    flat = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    if not np.isfinite(flat).all():
        raise ValueError(f"{path}: a weight is not finite")
    out, at = [], 0
    for shape, nb in SHAPES:
        n = int(np.prod(shape))
        out.append((flat[at : at + n].reshape(shape), flat[at + n : at + n + nb]))
        at += n + nb
    return out


def record(path: Path | str = SHIPPED) -> dict:
    """The training record written beside a weights file (trainer, seed, epochs, accuracies)."""
    return json.loads(Path(f"{path}.json").read_text())


def accuracy(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray, labels_: np.ndarray,
             forward: Callable[..., np.ndarray] = logits) -> float:
    """Fraction of `imgs` whose largest numpy logit (``forward(wts, imgs)``: ``logits`` in float, or the int8
    datapath with its scales bound) is the label (in chunks of 1,000 images)."""
    right = sum(int((forward(wts, imgs[i : i + 1000]).argmax(1) == labels_[i : i + 1000]).sum())
                for i in range(0, len(imgs), 1000))
    return right / max(len(imgs), 1)


def weights_file(wts: list[tuple[np.ndarray, np.ndarray]], scales: list[float] | None) -> bytes:
    """The weights file as NICE-C reads it: the f32 parameters, then (for the int8 datapath) the activation
    scales' NCQ1 section."""
    return q8.weights_file(weight_bytes(wts), scales)


def weight_bytes(wts: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """The weights file (f32 little-endian, layer by layer: weights then biases)."""
    out = b"".join(w.astype("<f4").tobytes() + b.astype("<f4").tobytes() for w, b in wts)
    assert len(out) == WEIGHT_BYTES
    return out
