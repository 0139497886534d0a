"""Data sets: synthetic sets regenerate identically from their seed however they are sliced; ground truth equals
brute force and is cached; Fashion-MNIST loads (a small subset searched) where the Debian package is installed."""

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash.ndsearch import Index, cached_ground_truth, fashion_mnist, ground_truth, recall_at, synthetic
from nearflash.ndsearch.datasets import CHUNK, FASHION_DIR


def test_synthetic_slices_are_the_same_rows():
    whole = synthetic("sift-like", 300, seed=9, start=CHUNK - 100)
    a = synthetic("sift-like", 100, seed=9, start=CHUNK - 100)
    b = synthetic("sift-like", 200, seed=9, start=CHUNK)
    assert np.array_equal(whole, np.concatenate([a, b]))
    assert whole.dtype == np.uint8 and whole.shape == (300, 128)
    assert not np.array_equal(synthetic("sift-like", 10, seed=9), synthetic("sift-like", 10, seed=10))
    assert not np.array_equal(synthetic("sift-like", 10, seed=9), synthetic("sift-like", 10, seed=9, queries=True))
    g = synthetic("glove-100-like", 5, seed=1)
    assert g.dtype == np.float32 and g.shape == (5, 100)
    with pytest.raises(InvalidArgument, match="name"):
        synthetic("deep-1b", 10)


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_ground_truth_equals_brute_force(metric):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((700, 12)).astype(np.float32)
    q = rng.standard_normal((30, 12)).astype(np.float32)
    d, i = ground_truth(base, q, 7, metric, block=128, qblock=8)
    b, qq = base.astype(np.float64), q.astype(np.float64)
    if metric == "l2":
        full = ((qq[:, None, :] - b[None]) ** 2).sum(-1)
    else:
        if metric == "cosine":
            b = b / np.linalg.norm(b, axis=1, keepdims=True)
            qq = qq / np.linalg.norm(qq, axis=1, keepdims=True)
        full = 1 - qq @ b.T
    want = np.argsort(full, axis=1, kind="stable")[:, :7]
    assert np.array_equal(i, want)
    assert np.allclose(d, np.take_along_axis(full, want, 1))


def test_ground_truth_cache(tmp_path):
    base = synthetic("sift-like", 400, seed=2)
    q = synthetic("sift-like", 10, seed=2, queries=True)
    d1, i1 = cached_ground_truth("t", base, q, 5, "l2", tmp_path)
    assert len(list(tmp_path.glob("gt-t-*.npz"))) == 1
    d2, i2 = cached_ground_truth("t", base, q, 5, "l2", tmp_path)
    assert np.array_equal(i1, i2) and np.array_equal(d1, d2)
    with pytest.raises(InvalidArgument):
        ground_truth(base, q[:, :5], 5)


def test_fashion_mnist_missing_says_how_to_install(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        fashion_mnist(tmp_path)


@pytest.mark.skipif(not FASHION_DIR.exists(), reason="Debian package dataset-fashion-mnist is not installed")
def test_fashion_mnist_subset_search():
    base, q = fashion_mnist()
    assert base.shape == (60000, 784) and q.shape == (10000, 784) and base.dtype == np.uint8
    base, q = base[:4000], q[:50]
    ix = Index(784, "l2", dtype="uint8", R=12, ef_construction=100)
    ix.add(base)
    _, i = ix.search(q, 10, ef=64)
    _, truth = ground_truth(base, q, 10, "l2")
    assert recall_at(i, truth, 10) > 0.9


def test_a_chunk_prefix_is_the_whole_chunks_rows():
    from nearflash.ndsearch.datasets import _chunk
    for name in ("sift-like", "glove-100-like"):
        assert np.array_equal(_chunk(name, 3, 1, 2, 50), _chunk(name, 3, 1, 2, 400)[:50])
