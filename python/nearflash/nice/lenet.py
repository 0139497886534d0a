"""LeNet-5 on Fashion-MNIST for NICE-C: the images and labels (Debian's ``dataset-fashion-mnist``), weights in the
firmware's file layout (``crates/nearflash-nice/src/lenet.rs``), and a numpy reference of the forward pass.

Weights: the convolutions and the first two linear layers are random (He-scaled, seeded); the last linear layer is
fitted by ridge regression (closed form) on the 84 features of a few thousand training images. That is "quickly
trained", enough for an accuracy well above chance, and needs no deep-learning framework."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from nearflash.ndsearch.datasets import FASHION_DIR, fashion_mnist

#: (weights shape, biases) of each parameterised layer, in the weights file's order.
SHAPES = [((6, 1, 5, 5), 6), ((16, 6, 5, 5), 16), ((120, 400), 120), ((84, 120), 84), ((10, 84), 10)]
WEIGHT_BYTES = 4 * sum(int(np.prod(s)) + b for s, b in SHAPES)
IMAGE_BYTES = 28 * 28
#: Multiply-accumulates of one image (conv1 117,600 + conv2 240,000 + fc 48,000 + 10,080 + 840).
MACS_PER_IMAGE = 6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10


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


def features(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray) -> np.ndarray:
    """The 84 inputs of the last layer (float64)."""
    x = imgs.reshape(-1, 1, 28, 28).astype(np.float64) / 255.0
    x = _pool(np.maximum(_conv(x, *wts[0], pad=2), 0))
    x = _pool(np.maximum(_conv(x, *wts[1], pad=0), 0))
    x = np.maximum(x.reshape(len(x), -1) @ wts[2][0].T + wts[2][1], 0)
    return np.maximum(x @ wts[3][0].T + wts[3][1], 0)


def logits(wts: list[tuple[np.ndarray, np.ndarray]], imgs: np.ndarray) -> np.ndarray:
    return features(wts, imgs) @ wts[4][0].T + wts[4][1]


def train(seed: int = 1, n_train: int = 4000, ridge: float = 1e-2) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random LeNet-5 weights with the last layer fitted to `n_train` training images; float32 values."""
    rng = np.random.default_rng(seed)
    wts = []
    for shape, nb in SHAPES:
        fan_in = int(np.prod(shape[1:]))
        wts.append(((rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32).astype(np.float64),
                    np.zeros(nb)))
    x, y = images("train")[:n_train], labels("train")[:n_train]
    f = np.concatenate([np.concatenate([features(wts, x[i:i + 1000]) for i in range(0, len(x), 1000)]),
                        np.ones((len(x), 1))], axis=1)
    target = np.eye(10)[y]
    sol = np.linalg.solve(f.T @ f + ridge * len(x) * np.eye(f.shape[1]), f.T @ target)
    wts[4] = (sol[:-1].T.copy(), sol[-1].copy())
    return [(w.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)) for w, b in wts]


def weight_bytes(wts: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """The weights file (f32 little-endian, layer by layer: weights then biases)."""
    out = b"".join(w.astype("<f4").tobytes() + b.astype("<f4").tobytes() for w, b in wts)
    assert len(out) == WEIGHT_BYTES
    return out
