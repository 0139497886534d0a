"""Numpy float32 building blocks of the recommendation models, each counting its floating-point operations.

FLOP convention (used to charge host CPU time): a multiply-add is 2 FLOPs, every other elementwise operation
(bias add, ReLU, sigmoid, tanh, exp, product, sum) is 1 per element; concatenation and reshapes are free.
Weights follow the artifact's initialisation (RecSSD-RecInfra ``create_mlp``): ``W ~ N(0, sqrt(2 / (in + out)))``,
``b ~ N(0, sqrt(1 / out))``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class FlopCounter:
    """Accumulates FLOPs of one forward pass."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, n: int) -> None:
        self.total += int(n)


def _count(counter: FlopCounter | None, n: int) -> None:
    if counter is not None:
        counter.add(n)


def sigmoid(x: np.ndarray, counter: FlopCounter | None = None) -> np.ndarray:
    _count(counter, x.size)
    # exp of a non-positive argument only: no overflow warnings, float32 kept.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(np.float32, copy=False)


def relu(x: np.ndarray, counter: FlopCounter | None = None) -> np.ndarray:
    _count(counter, x.size)
    return np.maximum(x, 0.0, dtype=np.float32)


def tanh(x: np.ndarray, counter: FlopCounter | None = None) -> np.ndarray:
    _count(counter, x.size)
    return np.tanh(x)


def softmax(x: np.ndarray, axis: int = -1, counter: FlopCounter | None = None) -> np.ndarray:
    _count(counter, 3 * x.size)  # exp, sum, divide
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return (z / z.sum(axis=axis, keepdims=True)).astype(np.float32, copy=False)


ACTIVATIONS = {"relu": relu, "sigmoid": sigmoid, "tanh": tanh, "none": None}


class Linear:
    """``y = x @ W + b`` over the last axis."""

    def __init__(self, n_in: int, n_out: int, rng: np.random.Generator):
        self.w = rng.normal(0.0, np.sqrt(2.0 / (n_in + n_out)), size=(n_in, n_out)).astype(np.float32)
        self.b = rng.normal(0.0, np.sqrt(1.0 / n_out), size=n_out).astype(np.float32)

    def __call__(self, x: np.ndarray, counter: FlopCounter | None = None) -> np.ndarray:
        rows = x.size // x.shape[-1]
        _count(counter, 2 * rows * self.w.shape[0] * self.w.shape[1] + rows * self.w.shape[1])
        return x @ self.w + self.b


class MLP:
    """Fully connected layers ``sizes[0] -> sizes[1] -> ...``; ReLU between layers, ``final`` after the last."""

    def __init__(self, sizes: Sequence[int], rng: np.random.Generator, final: str = "relu"):
        if len(sizes) < 2:
            raise ValueError(f"an MLP needs >= 2 sizes, got {list(sizes)}")
        if final not in ACTIVATIONS:
            raise ValueError(f"unknown activation {final!r}")
        self.sizes = tuple(int(s) for s in sizes)
        self.layers = [Linear(a, b, rng) for a, b in zip(self.sizes[:-1], self.sizes[1:])]
        self.final = final

    def __call__(self, x: np.ndarray, counter: FlopCounter | None = None) -> np.ndarray:
        for i, layer in enumerate(self.layers):
            x = layer(x, counter)
            act = ACTIVATIONS[self.final] if i == len(self.layers) - 1 else relu
            if act is not None:
                x = act(x, counter)
        return x


def dot_interaction(dense: np.ndarray, pooled: Sequence[np.ndarray], counter: FlopCounter | None = None) -> np.ndarray:
    """DLRM's dot interaction: the dense vector concatenated with the pairwise dot products (strict upper triangle)
    of the dense vector and the pooled embeddings, all of one width."""
    z = np.stack([dense, *pooled], axis=1)  # (B, F, d)
    b, f, d = z.shape
    _count(counter, 2 * b * f * f * d)
    gram = z @ z.transpose(0, 2, 1)
    iu, ju = np.triu_indices(f, k=1)
    return np.concatenate([dense, gram[:, iu, ju]], axis=1)


class GRU:
    """A GRU layer (PyTorch gate convention): ``r, z = sigmoid(.)``, ``n = tanh(x Wn + r * (h Un))``,
    ``h' = (1 - z) * n + z * h``. With attention scores it is DIEN's AUGRU: the update ``1 - z`` is scaled by
    the score of the step."""

    def __init__(self, n_in: int, hidden: int, rng: np.random.Generator):
        self.hidden = hidden
        self.inp = Linear(n_in, 3 * hidden, rng)
        self.rec = Linear(hidden, 3 * hidden, rng)

    def __call__(
        self, xs: np.ndarray, scores: np.ndarray | None = None, counter: FlopCounter | None = None
    ) -> np.ndarray:
        """``xs``: (T, B, in); ``scores``: (T, B) or None. Returns all hidden states (T, B, hidden)."""
        t_steps, batch, _ = xs.shape
        h = np.zeros((batch, self.hidden), dtype=np.float32)
        gx = self.inp(xs, counter)  # (T, B, 3H) for all steps at once
        out = np.empty((t_steps, batch, self.hidden), dtype=np.float32)
        hid = self.hidden
        for t in range(t_steps):
            gh = self.rec(h, counter)
            rz = sigmoid(gx[t, :, : 2 * hid] + gh[:, : 2 * hid], counter)
            r, z = rz[:, :hid], rz[:, hid:]
            n = tanh(gx[t, :, 2 * hid :] + r * gh[:, 2 * hid :], counter)
            update = 1.0 - z
            if scores is not None:
                update = update * scores[t][:, None]
                _count(counter, batch * hid)
            h = h + update * (n - h)
            _count(counter, 8 * batch * hid)  # 2H gate adds; r * gh, +, 1 - z, n - h, *, + (H each)
            out[t] = h
        return out
