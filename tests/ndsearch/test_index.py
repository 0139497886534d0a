"""The FAISS-shaped index: recall against exact ground truth for both graph kinds, every metric and dtype;
determinism; save/load; and a hostile user's arguments and files."""

import numpy as np
import pytest

from nearflash import ImageError, InvalidArgument
from nearflash.ndsearch import Index, ground_truth, recall_at, synthetic


def _glove(n, nq, seed=3):
    return synthetic("glove-100-like", n, seed=seed)[:, :32].copy(), synthetic("glove-100-like", nq, seed=seed, queries=True)[:, :32].copy()


@pytest.mark.parametrize("kind", ["hnsw", "vamana"])
@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_recall_against_exact_ground_truth(kind, metric):
    base, q = _glove(3000, 100)
    ix = Index(32, metric, kind=kind, R=12 if kind == "hnsw" else 24, ef_construction=100)
    ix.add(base)
    d, i = ix.search(q, 10, ef=64)
    assert d.shape == i.shape == (100, 10) and d.dtype == np.float32 and i.dtype == np.int64
    assert (np.diff(d, axis=1) >= 0).all(), "nearest first"
    _, truth = ground_truth(base, q, 10, metric)
    assert recall_at(i, truth, 10) > 0.9


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_integer_vectors(dtype):
    base = synthetic("sift-like", 2000, seed=1)[:, :48]
    q = synthetic("sift-like", 50, seed=1, queries=True)[:, :48]
    if dtype == "int8":
        base, q = (base // 2).astype(np.int8), (q // 2).astype(np.int8)
    ix = Index(48, "l2", dtype=dtype, R=12, ef_construction=100)
    ix.add(base)
    d, i = ix.search(q, 10, ef=64)
    td, truth = ground_truth(base, q, 10, "l2")
    assert recall_at(i, truth, 10) > 0.9
    # integer L2 distances are exact
    hit = i[:, 0] == truth[:, 0]
    assert np.array_equal(d[hit, 0], td[hit, 0].astype(np.float32))


def test_single_thread_build_is_deterministic_and_threads_agree():
    base, q = _glove(1500, 40)
    a, b = Index(32, R=8, seed=5), Index(32, R=8, seed=5)
    a.add(base, threads=1)
    b.add(base, threads=1)
    ra, rb = a.search(q, 5, threads=1), b.search(q, 5, threads=2)
    assert np.array_equal(ra[1], rb[1]) and np.array_equal(ra[0], rb[0])


@pytest.mark.parametrize("kind", ["hnsw", "vamana"])
def test_save_load_round_trip(tmp_path, kind):
    base, q = _glove(800, 20)
    ix = Index(32, "cosine", kind=kind, R=10, ef_construction=60)
    ix.add(base)
    ix.save(tmp_path / "a.nfidx")
    back = Index.load(tmp_path / "a.nfidx")
    assert (back.kind, back.metric, back.dim, back.ntotal, back.R) == (kind, "cosine", 32, 800, 10)
    for x, y in zip(ix.search(q, 10), back.search(q, 10)):
        assert np.array_equal(x, y)


def test_damaged_files_raise_image_error(tmp_path):
    base, _ = _glove(300, 1)
    ix = Index(32, R=6)
    ix.add(base)
    p = tmp_path / "a.nfidx"
    ix.save(p)
    raw = p.read_bytes()
    rng = np.random.default_rng(0)
    for pos in rng.integers(0, len(raw), 30):
        bad = bytearray(raw)
        bad[pos] ^= 0x10
        p.write_bytes(bytes(bad))
        with pytest.raises(ImageError):
            Index.load(p)
    for cut in (0, 7, 60, len(raw) // 2, len(raw) - 1):
        p.write_bytes(raw[:cut])
        with pytest.raises(ImageError):
            Index.load(p)
    p.write_bytes(b"not an index at all" * 10)
    with pytest.raises(ImageError, match="magic"):
        Index.load(p)
    with pytest.raises(Exception, match="index file I/O"):
        Index.load(tmp_path / "missing.nfidx")


def test_hostile_arguments():
    with pytest.raises(InvalidArgument, match="metric"):
        Index(8, "hamming")
    with pytest.raises(InvalidArgument, match="kind"):
        Index(8, kind="ivf")
    with pytest.raises(InvalidArgument, match="dim"):
        Index(0)
    with pytest.raises(InvalidArgument, match="dtype"):
        Index(8, dtype="float16")
    with pytest.raises(InvalidArgument, match="R"):
        Index(8, R=5000)
    with pytest.raises(InvalidArgument, match="dim"):
        Index(8.5)
    ix = Index(8, R=4)
    x = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    d, i = ix.search(x[:1], 2)  # an empty index answers with padding, as FAISS
    assert i.tolist() == [[-1, -1]] and np.isinf(d).all()
    ix.add(x)
    with pytest.raises(InvalidArgument, match="columns"):
        ix.add(np.zeros((3, 7), np.float32))
    with pytest.raises(InvalidArgument, match="2-D"):
        ix.add(np.zeros(8, np.float32))
    nan = x[:3].copy()
    nan[2, 5] = np.nan
    with pytest.raises(InvalidArgument, match="row 2"):
        ix.add(nan)
    with pytest.raises(InvalidArgument, match="real numbers"):
        ix.add(np.array([["a"] * 8]))
    assert ix.ntotal == 50, "refused adds change nothing"
    d, i = ix.search(x[:2], 53)
    assert (i[:, 50:] == -1).all() and np.isinf(d[:, 50:]).all() and (np.sort(i[:, :50], axis=1) == np.arange(50)).all()
    for bad_k in (0, -1, 2.5, True):
        with pytest.raises(InvalidArgument, match="k"):
            ix.search(x[:2], bad_k)
    with pytest.raises(InvalidArgument, match="ef"):
        ix.search(x[:2], 5, ef=0)
    with pytest.raises(InvalidArgument, match="threads"):
        ix.search(x[:2], 5, threads=0)
    u = Index(8, dtype="uint8", R=4)
    with pytest.raises(InvalidArgument, match="uint8"):
        u.add(x)
    # float64 and integer input to a float32 index is converted
    ix.add(x.astype(np.float64)[:2])
    assert ix.ntotal == 52


from hypothesis import given, settings, strategies as st  # noqa: E402

_DTYPES = ["float16", "float32", "float64", "int8", "uint8", "int32", "bool", "complex64"]


@settings(max_examples=60, deadline=None)
@given(index_dtype=st.sampled_from(["float32", "uint8", "int8"]), dtype=st.sampled_from(_DTYPES),
       rows=st.integers(0, 5), cols=st.integers(0, 6), ndim=st.integers(1, 3), k=st.integers(-2, 8))
def test_any_array_is_accepted_or_refused_cleanly(index_dtype, dtype, rows, cols, ndim, k):
    ix = Index(4, dtype=index_dtype, R=4)
    shape = {1: (cols,), 2: (rows, cols), 3: (rows, cols, 2)}[ndim]
    x = np.ones(shape, dtype=dtype)
    try:
        ix.add(x)
        added = True
    except InvalidArgument:
        added = False
        assert ix.ntotal == 0
    if added:
        assert ix.ntotal == rows
    if ix.ntotal:
        try:
            d, i = ix.search(x, k)
            assert d.shape == (rows, k) and (i < ix.ntotal).all()
        except InvalidArgument:
            pass
