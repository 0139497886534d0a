"""The NU-MineBench classifiers on real data: Fashion-MNIST (Debian's dataset-fashion-mnist), pixels as categorical
(naive_bayes, 4 levels) and ordered (scalparc, 7 x 7 pooled) attributes; answers equal to the numpy references of
test_minebench_kernels, accuracy far above chance. Skipped where the dataset is not installed."""

import numpy as np
import pytest

from nearflash.issd import data, kernels
from minebench_reference import nb_predict, nb_reference, split_reference

PAGE = 8192


@pytest.fixture(scope="module")
def fashion():
    from nearflash.cognitive.data import fashion_mnist

    try:
        x, y = fashion_mnist("train", limit=12_000)
    except Exception as e:  # noqa: BLE001 - the dataset is an optional Debian package
        pytest.skip(f"Fashion-MNIST unavailable: {e}")
    return np.asarray(x, np.uint8), np.asarray(y, np.uint8)


def test_naive_bayes_on_fashion_mnist(fashion):
    x, y = fashion
    recs = np.concatenate([x >> 6, y[:, None]], axis=1)  # 784 pixels in 4 levels, then the label
    train, test = recs[:10_000], recs[10_000:]
    spec = kernels.spec("naive_bayes", attributes=784, classes=10, values=4)
    out = kernels.run(spec, data.pack_records(train, 785, PAGE), PAGE)
    cc, counts = nb_reference(train, 784, 10, 4)
    np.testing.assert_array_equal(out["class_counts"], cc)
    np.testing.assert_array_equal(out["counts"], counts)
    model = {"class_counts": cc.tolist(), "counts": counts.reshape(-1).tolist()}
    got = kernels.run(dict(spec, model=model), data.pack_records(test, 785, PAGE), PAGE)["confusion"]
    expect = np.zeros((10, 10), np.uint64)
    np.add.at(expect, (test[:, 784].astype(np.int64), nb_predict(test, 784, cc, counts)), 1)
    np.testing.assert_array_equal(got, expect)
    assert np.trace(expect) / len(test) > 0.6  # chance is 0.1


def test_scalparc_root_split_on_fashion_mnist(fashion):
    x, y = fashion
    pooled = x.reshape(-1, 7, 4, 7, 4).mean(axis=(2, 4)).astype(np.uint8).reshape(-1, 49)
    recs = np.concatenate([pooled, y[:, None]], axis=1)[:10_000]
    out = kernels.run(kernels.spec("scalparc", attributes=49, classes=10), data.pack_records(recs, 50, PAGE), PAGE)
    total, node, splits = split_reference(recs, 49, 10)
    np.testing.assert_array_equal(out["class_counts"], total)
    assert out["node_gini"] == node
    assert out["splits"] == [None if s is None else (s[0], s[1]) for s in splits]
    best = int(np.argmin([s[1] if s else np.inf for s in splits]))
    assert out["best"] == best and splits[best][1] < node - 0.05
