"""The eight recommendation models: shapes, determinism, swappable SLS paths, FLOP counts."""

import numpy as np
import pytest

from nearflash.recssd import (
    MODEL_NAMES,
    SPECS,
    Batch,
    DenseEmbeddings,
    GeneratedEmbeddings,
    NdpFunctionalEmbeddings,
    build_model,
    uniform_batch,
)
from nearflash.recssd.layers import GRU, FlopCounter, dot_interaction

OUTPUT_SHAPES = {
    "RM1": (1,),
    "RM2": (1,),
    "RM3": (1,),
    "WND": (256,),
    "MTWND": (8, 128),
    "DIN": (2,),
    "DIEN": (2,),
    "NCF": (64,),
}


def test_specs_follow_the_artifact():
    assert set(MODEL_NAMES) == set(OUTPUT_SHAPES)
    table_counts = {"RM1": 8, "RM2": 32, "RM3": 10, "WND": 27, "MTWND": 43, "DIN": 254, "DIEN": 43, "NCF": 4}
    for name, n in table_counts.items():
        assert len(SPECS[name].tables) == n
    assert {(t.rows, t.dim, t.lookups) for t in SPECS["RM2"].tables} == {(1_000_000, 64, 120)}
    assert SPECS["RM1"].lookups_per_sample == 640
    din_rows = [t.rows for t in SPECS["DIN"].tables]
    assert din_rows[0] == 10_000 and din_rows[1:-2] == [1000] * 251 and din_rows[-2:] == [100_000, 100_000]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_forward_shapes_and_determinism(name):
    model = build_model(name, seed=1)
    batch = uniform_batch(model.spec, 4, seed=2)
    emb = GeneratedEmbeddings(model.spec.tables, seed=3)
    out = model.forward(batch, emb)
    assert out.shape == (4, *OUTPUT_SHAPES[name]) and out.dtype == np.float32
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, build_model(name, seed=1).forward(batch, GeneratedEmbeddings(model.spec.tables, 3)))
    other = build_model(name, seed=2).forward(batch, emb)
    assert not np.array_equal(out, other)
    if name in ("DIN", "DIEN"):
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    else:
        assert ((out >= 0) & (out <= 1)).all()


def test_embeddings_drive_the_output():
    model = build_model("RM1", seed=0)
    batch = uniform_batch(model.spec, 8, seed=0)
    a = model.forward(batch, GeneratedEmbeddings(model.spec.tables, seed=0))
    b = model.forward(batch, GeneratedEmbeddings(model.spec.tables, seed=1))
    assert not np.array_equal(a, b)


def test_sls_paths_are_interchangeable():
    # NCF's four 100K x 32 tables are small enough to hold; every path must give the same prediction.
    model = build_model("NCF", seed=4)
    gen = GeneratedEmbeddings(model.spec.tables, seed=5)
    tables = [gen.materialize(t) for t in range(len(model.spec.tables))]
    batch = uniform_batch(model.spec, 32, seed=6)
    want = model.forward(batch, gen)
    np.testing.assert_allclose(model.forward(batch, DenseEmbeddings(tables)), want, rtol=1e-6)
    ndp = NdpFunctionalEmbeddings(tables, placement="one_row_per_page")
    np.testing.assert_allclose(model.forward(batch, ndp), want, rtol=1e-5, atol=1e-6)
    assert ndp.stats["pages"] == sum(len(np.unique(ids)) for ids, _ in batch.sparse)


def test_rm1_flops_by_hand():
    # Bottom 128-64-32 and top 288-256-64-1 (cat of 32 + 8 x 32): 2 per multiply-add, +1 per bias and activation.
    per_sample = sum(2 * a * b + 2 * b for a, b in [(128, 64), (64, 32), (288, 256), (256, 64), (64, 1)])
    f = build_model("RM1").flops(16)
    assert f.dense == 16 * per_sample
    assert f.sls == 16 * 8 * 80 * 32
    counter = FlopCounter()
    model = build_model("RM1")
    model.forward(uniform_batch(model.spec, 16, 0), GeneratedEmbeddings(model.spec.tables, 0), counter)
    assert counter.total == f.dense


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_flops_scale_with_batch(name):
    model = build_model(name)
    f1, f8 = model.flops(1), model.flops(8)
    assert f8.dense == 8 * f1.dense and f8.sls == 8 * f1.sls and f1.dense > 0


def test_dot_interaction():
    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    pooled = [np.ones((2, 3), np.float32), 2 * np.ones((2, 3), np.float32)]
    out = dot_interaction(dense, pooled)
    # pairs (dense, p0), (dense, p1), (p0, p1)
    np.testing.assert_array_equal(out[0], [0, 1, 2, 3, 6, 6])
    np.testing.assert_array_equal(out[1], [3, 4, 5, 12, 24, 6])
    model = build_model("RM1", interaction="dot")
    assert model.top.sizes[0] == 32 + 36
    out = model.forward(uniform_batch(model.spec, 2, 0), GeneratedEmbeddings(model.spec.tables, 0))
    assert out.shape == (2, 1)
    with pytest.raises(ValueError):
        build_model("RM1", interaction="sum")


def test_gru_matches_a_step_by_step_reference():
    rng = np.random.default_rng(0)
    gru = GRU(3, 2, rng)
    xs = rng.standard_normal((4, 1, 3)).astype(np.float32)
    h = np.zeros(2)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    wi, bi, wh, bh = gru.inp.w, gru.inp.b, gru.rec.w, gru.rec.b
    for t in range(4):
        gx, gh = xs[t, 0] @ wi + bi, h @ wh + bh
        r, z = sig(gx[:2] + gh[:2]), sig(gx[2:4] + gh[2:4])
        n = np.tanh(gx[4:] + r * gh[4:])
        h = (1 - z) * n + z * h
    np.testing.assert_allclose(gru(xs)[-1, 0], h, rtol=1e-5, atol=1e-6)
    # AUGRU with zero attention never updates the state.
    assert not gru(xs, scores=np.zeros((4, 1), np.float32)).any()


def test_bad_batches_are_rejected():
    model = build_model("NCF")
    emb = GeneratedEmbeddings(model.spec.tables, 0)
    batch = uniform_batch(model.spec, 2, 0)
    with pytest.raises(ValueError, match="tables"):
        model.forward(Batch(batch.dense, batch.sparse[:3]), emb)
    with pytest.raises(ValueError, match="dense"):
        model.forward(Batch(np.zeros((2, 5), np.float32), batch.sparse), emb)
    with pytest.raises(ValueError, match="returned"):
        model.forward(batch, lambda t, i, o: np.zeros((2, 7), np.float32))
    with pytest.raises(ValueError, match="unknown model"):
        build_model("RM9")
