"""The eight recommendation models of the RecSSD evaluation (paper §3.3, §5; DeepRecInfra), as numpy float32
forward passes with seeded weights, a pluggable embedding lookup and a FLOP count per batch.

Shapes are the artifact's (RecSSD-RecInfra ``models/sweep_*.py``, ``utils/utils.py``):

=====  ==================================  ===  =======  ==================================================
model  tables (rows)                        dim  lookups  dense part
=====  ==================================  ===  =======  ==================================================
RM1    8 x 1M                               32   80       dense 128, bottom 128-64-32, top 256-64-1
RM2    32 x 1M                              64   120      dense 128, bottom 128-64-64, top 128-64-1
RM3    10 x 1M                              32   20       dense 2560, bottom 2560-1024-256-32, top 512-256-1
WND    27 x 100K                            32   1        dense 512, top 1024-512-256
MTWND  41 x 10K + 2 x 100K                  32   1        dense 512, shared 1024-512, 8 tasks 512-256-128
DIN    10K + 251 x 1K + 2 x 100K            32   3        attention unit (hidden 1) per behaviour, top 200-80-2
DIEN   41 x 10K + 2 x 100K                  32   3        GRU + AUGRU hidden 64 over 40 behaviours, top 200-80-2
NCF    4 x 100K                             32   1        MLP 256-256-128-64 + GMF, final 64
=====  ==================================  ===  =======  ==================================================

Choices where the artifact is not a model to copy (documented, each small in FLOPs):

* DLRM interaction: the artifact runs ``--arch_interaction_op cat`` (top input = bottom output + all pooled
  vectors); DLRM's ``dot`` interaction is available with ``interaction="dot"``. Default: ``cat``, as measured.
* DIN: the artifact's "attention" is a per-behaviour MLP on [b, a, b + a] summed over behaviours; here the same
  layer sizes (96 -> 1 -> 32) produce a sigmoid gate on [b, a, b * a] that weights each behaviour before the sum
  (DIN's activation unit). Behaviour tables: the artifact turns ``--user_behavior_tables 250`` into 251 tables of
  1K rows (utils.py keeps the listed one and adds 250).
* DIEN: the artifact stacks two tanh RNNs with a softmax in between; here DIEN proper: a GRU over the 40
  behaviour vectors, attention of each state against the candidate ad, an AUGRU whose last state joins the top MLP.
* NCF: the artifact sums the two MF embeddings; GMF multiplies them (NCF paper). Final layer 96 -> 64 as the
  artifact.
* Heads: the last layer ends in a sigmoid (a softmax for the 2-way DIN/DIEN heads); the artifact's Caffe2 nets mix
  ReLU and sigmoid there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from nearflash.recssd.embeddings import EmbeddingLookup, TableSpec
from nearflash.recssd.layers import GRU, MLP, FlopCounter, Linear, dot_interaction, sigmoid, softmax


@dataclass(frozen=True)
class ModelSpec:
    """Tables and dense input of a model."""

    name: str
    tables: tuple[TableSpec, ...]
    dense_in: int
    """Dense (continuous) features per sample; 0 when the model has none."""

    @property
    def lookups_per_sample(self) -> int:
        return sum(t.lookups for t in self.tables)


def _tables(rows: Sequence[int], dim: int, lookups: int) -> tuple[TableSpec, ...]:
    return tuple(TableSpec(int(r), dim, lookups) for r in rows)


M, K = 1_000_000, 1000
SPECS: dict[str, ModelSpec] = {
    "RM1": ModelSpec("RM1", _tables([M] * 8, 32, 80), 128),
    "RM2": ModelSpec("RM2", _tables([M] * 32, 64, 120), 128),
    "RM3": ModelSpec("RM3", _tables([M] * 10, 32, 20), 2560),
    "WND": ModelSpec("WND", _tables([100 * K] * 27, 32, 1), 512),
    "MTWND": ModelSpec("MTWND", _tables([10 * K] * 41 + [100 * K] * 2, 32, 1), 512),
    "DIN": ModelSpec("DIN", _tables([10 * K] + [K] * 251 + [100 * K] * 2, 32, 3), 0),
    "DIEN": ModelSpec("DIEN", _tables([10 * K] * 41 + [100 * K] * 2, 32, 3), 0),
    "NCF": ModelSpec("NCF", _tables([100 * K] * 4, 32, 1), 0),
}


@dataclass
class Batch:
    """Inputs of one batch: dense features and, per table, EmbeddingBag (indices, offsets)."""

    dense: np.ndarray
    sparse: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return int(self.dense.shape[0])


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one batch: dense compute on the host, and the additions of the SLS operators."""

    dense: int
    sls: int

    @property
    def total(self) -> int:
        return self.dense + self.sls


class RecModel:
    """Base class: subclasses define ``_forward(dense, pooled, counter)``."""

    def __init__(self, spec: ModelSpec, seed: int):
        self.spec = spec
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)
        self._flops: dict[int, int] = {}

    def forward(self, batch: Batch, lookup: EmbeddingLookup, counter: FlopCounter | None = None) -> np.ndarray:
        """Runs the model; ``lookup(table, indices, offsets)`` supplies the pooled embeddings."""
        if len(batch.sparse) != len(self.spec.tables):
            raise ValueError(f"{self.spec.name} has {len(self.spec.tables)} tables, batch has {len(batch.sparse)}")
        if batch.dense.shape != (batch.size, self.spec.dense_in):
            raise ValueError(f"{self.spec.name} wants dense input ({batch.size}, {self.spec.dense_in})")
        pooled = []
        for t, (idx, off) in enumerate(batch.sparse):
            p = np.asarray(lookup(t, idx, off), dtype=np.float32)
            if p.shape != (batch.size, self.spec.tables[t].dim):
                raise ValueError(f"lookup of table {t} returned {p.shape}")
            pooled.append(p)
        return self._forward(batch.dense.astype(np.float32, copy=False), pooled, counter)

    def _forward(self, dense: np.ndarray, pooled: list[np.ndarray], counter: FlopCounter | None) -> np.ndarray:
        raise NotImplementedError

    def flops(self, batch_size: int) -> FlopCount:
        """FLOPs per batch of ``batch_size`` samples (dense part counted by running the layers on zeros)."""
        if batch_size not in self._flops:
            counter = FlopCounter()
            dense = np.zeros((batch_size, self.spec.dense_in), dtype=np.float32)
            pooled = [np.zeros((batch_size, t.dim), dtype=np.float32) for t in self.spec.tables]
            self._forward(dense, pooled, counter)
            self._flops[batch_size] = counter.total
        sls = batch_size * sum(t.lookups * t.dim for t in self.spec.tables)
        return FlopCount(dense=self._flops[batch_size], sls=sls)


class DLRM(RecModel):
    """DLRM (RM1-3): bottom MLP on dense features, interaction with pooled embeddings, top MLP."""

    def __init__(self, spec: ModelSpec, bottom: Sequence[int], top: Sequence[int], seed: int, interaction: str):
        super().__init__(spec, seed)
        if interaction not in ("cat", "dot"):
            raise ValueError(f"interaction must be 'cat' or 'dot', not {interaction!r}")
        self.interaction = interaction
        self.bottom = MLP([spec.dense_in, *bottom], self.rng)
        n_feat = len(spec.tables) + 1
        width = bottom[-1] + (sum(t.dim for t in spec.tables) if interaction == "cat" else n_feat * (n_feat - 1) // 2)
        self.top = MLP([width, *top], self.rng, final="sigmoid")

    def _forward(self, dense, pooled, counter):
        x = self.bottom(dense, counter)
        z = np.concatenate([x, *pooled], axis=1) if self.interaction == "cat" else dot_interaction(x, pooled, counter)
        return self.top(z, counter)


class WideAndDeep(RecModel):
    """Wide & Deep: dense features and pooled embeddings concatenated into one MLP."""

    def __init__(self, spec: ModelSpec, top: Sequence[int], seed: int):
        super().__init__(spec, seed)
        self.top = MLP([spec.dense_in + sum(t.dim for t in spec.tables), *top], self.rng, final="sigmoid")

    def _forward(self, dense, pooled, counter):
        return self.top(np.concatenate([dense, *pooled], axis=1), counter)


class MultiTaskWideAndDeep(RecModel):
    """Multi-task Wide & Deep: a shared MLP, then one MLP per task; output (batch, tasks, task width)."""

    def __init__(self, spec: ModelSpec, shared: Sequence[int], task: Sequence[int], tasks: int, seed: int):
        super().__init__(spec, seed)
        self.shared = MLP([spec.dense_in + sum(t.dim for t in spec.tables), *shared], self.rng)
        self.tasks = [MLP([shared[-1], *task], self.rng, final="sigmoid") for _ in range(tasks)]

    def _forward(self, dense, pooled, counter):
        h = self.shared(np.concatenate([dense, *pooled], axis=1), counter)
        return np.stack([t(h, counter) for t in self.tasks], axis=1)


def _split_user_tables(pooled: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, np.ndarray]:
    """(user profile, behaviours, candidate ad, context) as in the artifact's DIN/DIEN table order."""
    return pooled[0], pooled[1:-2], pooled[-2], pooled[-1]


class DIN(RecModel):
    """Deep Interest Network: behaviours gated by an activation unit against the candidate ad, summed."""

    def __init__(self, spec: ModelSpec, att_hidden: Sequence[int], top: Sequence[int], seed: int):
        super().__init__(spec, seed)
        d = spec.tables[0].dim
        self.attention = MLP([3 * d, *att_hidden, d], self.rng, final="sigmoid")
        self.top = MLP([4 * d, *top], self.rng, final="none")

    def _forward(self, dense, pooled, counter):
        profile, behaviours, ad, context = _split_user_tables(pooled)
        b = np.stack(behaviours)  # (T, B, d)
        a = np.broadcast_to(ad, b.shape)
        if counter:
            counter.add(b.size)  # b * a
        gate = self.attention(np.concatenate([b, a, b * a], axis=2), counter)
        if counter:
            counter.add(2 * b.size)  # gate * b, sum over behaviours
        interest = (gate * b).sum(axis=0)
        logits = self.top(np.concatenate([profile, interest, ad, context], axis=1), counter)
        return softmax(logits, axis=1, counter=counter)


class DIEN(RecModel):
    """Deep Interest Evolution Network: GRU interest extractor, attention to the ad, AUGRU interest evolution."""

    def __init__(self, spec: ModelSpec, hidden: int, top: Sequence[int], seed: int):
        super().__init__(spec, seed)
        d = spec.tables[0].dim
        self.extractor = GRU(d, hidden, self.rng)
        self.query = Linear(d, hidden, self.rng)
        self.evolution = GRU(hidden, hidden, self.rng)
        self.top = MLP([hidden + 3 * d, *top], self.rng, final="none")

    def _forward(self, dense, pooled, counter):
        profile, behaviours, ad, context = _split_user_tables(pooled)
        states = self.extractor(np.stack(behaviours), counter=counter)  # (T, B, H)
        q = self.query(ad, counter)  # (B, H)
        if counter:
            counter.add(2 * states.size)  # state . query
        scores = softmax((states * q).sum(axis=2), axis=0, counter=counter)  # (T, B)
        final = self.evolution(states, scores, counter)[-1]
        logits = self.top(np.concatenate([final, profile, ad, context], axis=1), counter)
        return softmax(logits, axis=1, counter=counter)


class NCF(RecModel):
    """Neural Collaborative Filtering: GMF (product of user and item MF embeddings) beside an MLP over the MLP
    embeddings, joined by a final layer. Tables: MF user, MF item, MLP user, MLP item (artifact order)."""

    def __init__(self, spec: ModelSpec, mlp: Sequence[int], final: int, seed: int):
        super().__init__(spec, seed)
        d = spec.tables[0].dim
        self.mlp = MLP([2 * d, *mlp], self.rng)
        self.final = MLP([d + mlp[-1], final], self.rng, final="sigmoid")

    def _forward(self, dense, pooled, counter):
        mf_user, mf_item, mlp_user, mlp_item = pooled
        if counter:
            counter.add(mf_user.size)
        gmf = mf_user * mf_item
        h = self.mlp(np.concatenate([mlp_user, mlp_item], axis=1), counter)
        return self.final(np.concatenate([gmf, h], axis=1), counter)


MODEL_NAMES = tuple(SPECS)


def build_model(name: str, seed: int = 0, interaction: str = "cat") -> RecModel:
    """One of :data:`MODEL_NAMES` with weights drawn from ``seed``."""
    spec = SPECS.get(name.upper())
    if spec is None:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODEL_NAMES)}")
    if spec.name == "RM1":
        return DLRM(spec, [64, 32], [256, 64, 1], seed, interaction)
    if spec.name == "RM2":
        return DLRM(spec, [64, 64], [128, 64, 1], seed, interaction)
    if spec.name == "RM3":
        return DLRM(spec, [1024, 256, 32], [512, 256, 1], seed, interaction)
    if spec.name == "WND":
        return WideAndDeep(spec, [1024, 512, 256], seed)
    if spec.name == "MTWND":
        return MultiTaskWideAndDeep(spec, [1024, 512], [256, 128], 8, seed)
    if spec.name == "DIN":
        return DIN(spec, [1], [200, 80, 2], seed)
    if spec.name == "DIEN":
        return DIEN(spec, 64, [200, 80, 2], seed)
    return NCF(spec, [256, 256, 128, 64], 64, seed)
