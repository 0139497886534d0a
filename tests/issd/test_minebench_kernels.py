"""Table 1's NU-MineBench kernels (naive_bayes, scalparc, hop): answers equal to numpy references written from the
algorithms' definitions, on seeded data, in any chunking; hostile parameters and damaged records are refused."""

import math

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash.issd import data, kernels
from minebench_reference import gini_rows, hop_reference, nb_predict, nb_reference, split_reference

PAGE = 4096


# ---- naive_bayes ----

def test_naive_bayes_trains_and_classifies_like_numpy():
    A, C, V = 6, 3, 16
    recs = data.labelled_records(25_000, A, C, V, seed=11)  # one seed: the same class centres
    train, test = recs[:20_000], recs[20_000:]
    spec = kernels.spec("naive_bayes", attributes=A, classes=C, values=V)
    out = kernels.run(spec, data.pack_records(train, A + 1, PAGE), PAGE, pages_per_chunk=3)
    cc, counts = nb_reference(train, A, C, V)
    np.testing.assert_array_equal(out["class_counts"], cc)
    np.testing.assert_array_equal(out["counts"], counts)
    assert out["confusion"] is None and out["alpha"] < 0.25
    model = {"class_counts": out["class_counts"].tolist(), "counts": out["counts"].reshape(-1).tolist()}
    cls = kernels.spec("naive_bayes", attributes=A, classes=C, values=V, model=model)
    got = kernels.run(cls, data.pack_records(test, A + 1, PAGE), PAGE, pages_per_chunk=2)
    pred = nb_predict(test, A, cc, counts)
    expect = np.zeros((C, C), np.uint64)
    np.add.at(expect, (test[:, A].astype(np.int64), pred), 1)
    np.testing.assert_array_equal(got["confusion"], expect)
    accuracy = np.trace(expect) / len(test)
    assert 0.5 < accuracy < 1.0, accuracy  # overlapping classes: better than chance, not perfect


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"attributes": 0, "classes": 2, "values": 4}, "attributes"),
        ({"attributes": 2, "classes": 1, "values": 4}, "classes"),
        ({"attributes": 2, "classes": 2, "values": 300}, "values"),
        ({"attributes": 5000, "classes": 2, "values": 4}, "attributes"),
        ({"attributes": 2, "classes": 2, "values": 4, "model": {"class_counts": [1], "counts": []}}, "model"),
        ({"attributes": 2, "classes": 2, "values": 4, "colour": 1}, "bad kernel spec"),
        ({"attributes": -1, "classes": 2, "values": 4}, "bad kernel spec"),
        ({"attributes": "2", "classes": 2, "values": 4}, "bad kernel spec"),
        ({"attributes": 1000, "classes": 256, "values": 256}, "counts per chunk"),
    ],
)
def test_naive_bayes_refuses_bad_parameters(params, message):
    with pytest.raises(InvalidArgument, match=message):
        kernels.run({"kernel": "naive_bayes", **params}, np.zeros(PAGE, np.uint8), PAGE)


def test_damaged_labelled_records_are_refused():
    recs = data.labelled_records(100, 3, 2, 8, seed=1)
    bad_value, bad_class = recs.copy(), recs.copy()
    bad_value[7, 1] = 8
    bad_class[9, 3] = 2
    nb = kernels.spec("naive_bayes", attributes=3, classes=2, values=8)
    with pytest.raises(InvalidArgument, match="attribute value 8"):
        kernels.run(nb, data.pack_records(bad_value, 4, PAGE), PAGE)
    for spec in (nb, kernels.spec("scalparc", attributes=3, classes=2)):
        with pytest.raises(InvalidArgument, match="class label 2"):
            kernels.run(spec, data.pack_records(bad_class, 4, PAGE), PAGE)
    with pytest.raises(InvalidArgument, match="whole"):  # 5-byte records read as 4-byte ones
        kernels.run(nb, data.pack_records(data.labelled_records(101, 4, 2, 8, seed=1), 5, PAGE), PAGE)


# ---- scalparc ----

def test_scalparc_split_equals_numpy_at_the_root_and_below():
    A, C = 5, 3
    recs = data.labelled_records(30_000, A, C, 256, seed=21)
    pages = data.pack_records(recs, A + 1, PAGE)
    path = []
    for _ in range(4):
        spec = kernels.spec("scalparc", attributes=A, classes=C,
                            path=[{"attribute": a, "threshold": t, "left": l} for a, t, l in path])
        out = kernels.run(spec, pages, PAGE, pages_per_chunk=5)
        total, node, splits = split_reference(recs, A, C, path)
        np.testing.assert_array_equal(out["class_counts"], total)
        assert out["node_gini"] == node
        assert out["splits"] == [None if s is None else (s[0], s[1]) for s in splits]
        ginis = [s[1] if s else math.inf for s in splits]
        best = int(np.argmin(ginis))
        if not ginis[best] < node:  # a pure node is a leaf
            assert out["best"] is None and node == 0.0
            break
        assert out["best"] == best
        left = splits[best][2]
        np.testing.assert_array_equal(out["left_counts"], left)
        # descend into the less pure child
        g = gini_rows(np.stack([left, total - left]), np.array([left.sum(), (total - left).sum()]))
        path.append((best, splits[best][0], bool(g[0] >= g[1])))
    assert len(path) >= 2, "the seeded classes need at least two levels"


def test_scalparc_refuses_bad_paths():
    with pytest.raises(InvalidArgument, match="attribute 4 of 4"):
        kernels.run(kernels.spec("scalparc", attributes=4, classes=2, path=[{"attribute": 4, "threshold": 1, "left": True}]),
                    np.zeros(PAGE, np.uint8), PAGE)
    with pytest.raises(InvalidArgument, match="bad kernel spec"):
        kernels.run(kernels.spec("scalparc", attributes=4, classes=2, path=[{"attribute": 0, "threshold": 256, "left": True}]),
                    np.zeros(PAGE, np.uint8), PAGE)


# ---- hop ----

@pytest.mark.parametrize(("grid", "lo", "hi", "threshold"), [(16, 0, 1000, 4), (10, 100, 900, 1), (5, -50, 1200, 30)])
def test_hop_groups_equal_numpy(grid, lo, hi, threshold):
    pts = data.cluster_points(40_000, 3, 6, seed=31)
    out = kernels.run(kernels.spec("hop", grid=grid, lo=lo, hi=hi, threshold=threshold),
                      data.pack_records(pts, 12, PAGE), PAGE, pages_per_chunk=4)
    ref = hop_reference(pts, grid, lo, hi, threshold)
    assert {k: out[k] for k in ref} == ref
    assert out["grid"] == grid and len(out["groups"]) >= 1


def test_hop_finds_the_seeded_clusters():
    pts = data.cluster_points(50_000, 3, 4, seed=8)
    out = kernels.run(kernels.spec("hop", grid=20, lo=0, hi=1000, threshold=20), data.pack_records(pts, 12, PAGE), PAGE)
    big = [g for g in out["groups"] if g["particles"] > 5000]
    assert len(big) == 4  # one group per seeded centre (+-60 noise fits a few 50-unit cells)
    assert sum(g["particles"] for g in big) + out["below"] + sum(
        g["particles"] for g in out["groups"] if g not in big) == 50_000


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"grid": 0, "lo": 0, "hi": 10}, "grid"),
        ({"grid": 65, "lo": 0, "hi": 10}, "grid"),
        ({"grid": 4, "lo": 10, "hi": 10}, "lo < hi"),
        ({"grid": 4, "lo": 0, "hi": 10, "threshold": 0}, "threshold"),
        ({"grid": 4, "lo": 0, "hi": 2**31}, "bad kernel spec"),
        ({"grid": 4, "lo": 0}, "bad kernel spec"),
    ],
)
def test_hop_refuses_bad_parameters(params, message):
    with pytest.raises(InvalidArgument, match=message):
        kernels.run({"kernel": "hop", **params}, np.zeros(PAGE, np.uint8), PAGE)


def test_in_storage_answers_equal_the_host_path():
    from nearflash.issd import agent

    page = 8192
    dev, _ = agent.device("iSSD-XL", n_ch=4, n_host_cpu=4)
    try:
        lab = data.labelled_records(40_000, 8, 4, 256, seed=3)
        lab16 = (lab[:, :8] // 16).astype(np.uint8)
        nb_recs = np.concatenate([lab16, lab[:, 8:]], axis=1)
        pts = data.cluster_points(30_000, 3, 5, seed=4)
        jobs = [
            (kernels.spec("scalparc", attributes=8, classes=4), data.pack_records(lab, 9, page)),
            (kernels.spec("naive_bayes", attributes=8, classes=4, values=16), data.pack_records(nb_recs, 9, page)),
            (kernels.spec("hop", grid=12, lo=0, hi=1000, threshold=5), data.pack_records(pts, 12, page)),
        ]
        slba = 0
        for spec, pages in jobs:
            ext = agent.write_input(dev, slba, pages, page)
            slba += len(pages) // dev.lba_bytes
            host = kernels.run(spec, pages, page)
            for strategy, kw in [("in_storage", {}), ("conventional", {}), ("static", {"fraction": 0.5}),
                                 ("dynamic", {"chunk_pages": 4})]:
                out = agent.run(dev, spec, ext, page, strategy, **kw)
                assert out["encoded"] == host["encoded"], (spec["kernel"], strategy)
            assert agent.run(dev, spec, ext, page, accelerate=True)["encoded"] == host["encoded"]
    finally:
        dev.close()


def test_hardware_counters_count_or_say_they_cannot():
    from nearflash.issd import counters

    result, counts = counters.count(lambda: sum(range(100_000)))
    assert result == sum(range(100_000))
    if counts is None:
        assert not counters.available()
    else:  # a PMU: a Python loop of 1e5 additions takes well over 1e5 instructions
        assert counters.available() and counts["instructions"] > 100_000 and counts["cycles"] > 0


def test_instructions_are_counted_under_valgrind():
    from nearflash.issd import characterise

    with pytest.raises(ValueError, match="unknown kernel"):
        characterise.count_instructions("sort", 1000, 1)
    if not characterise.valgrind_available():
        assert characterise.count_instructions("linear_regression", 100_000, 1) is None
        pytest.skip("valgrind is not installed")
    instructions, nbytes = characterise.count_instructions("linear_regression", 200_000, 1)
    assert 190_000 < nbytes < 220_000
    assert 1.0 < instructions / nbytes < 100.0  # a few instructions per 2-byte point, not the interpreter's millions


@pytest.mark.parametrize(
    ("args", "error"),
    [((10, 0, 2, 4, 1), InvalidArgument), ((10, 3, 1, 4, 1), InvalidArgument), ((10, 3, 2, 300, 1), InvalidArgument),
     ((-1, 3, 2, 4, 1), OverflowError), (("10", 3, 2, 4, 1), TypeError)],
)
def test_labelled_records_refuse_bad_shapes(args, error):
    with pytest.raises(error):
        data.labelled_records(*args)
