"""Kernel answers against numpy / standard-library references, chunking invariance of Map/Reduce, bytes shipped."""

import functools
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nearflash import InvalidArgument
from nearflash.issd import columnar, data, kernels, lineitem

PAGE = 4096


@pytest.fixture(scope="module")
def items():
    pages = lineitem.generate(rows=20_000, page_size=PAGE, comment_pool="compact")
    return pages, lineitem.decode(pages, PAGE)


@pytest.fixture(scope="module")
def text():
    t = data.text(300_000, seed=5)
    return t, data.pack_lines(t, PAGE)


def test_default_scan_selects_one_percent_and_projects_four_bytes(items):
    pages, r = items
    out = kernels.run(kernels.spec("scan"), pages, PAGE)
    expect = r["l_quantity"][r["l_partkey"] <= 2000].astype("<i4").tobytes()
    assert out["data"] == expect and out["items"] == len(expect) // 4 and out["scanned"] == len(r)
    assert 0.007 < out["items"] / out["scanned"] < 0.013


def test_scan_conjunction_and_multi_column_projection(items):
    pages, r = items
    k = kernels.spec(
        "scan",
        conditions=[{"field": "l_quantity", "min": 1000, "max": 2000}, {"field": "l_discount", "max": 3}],
        projection=["l_orderkey", "l_shipmode"],
    )
    out = kernels.run(k, pages, PAGE)
    m = (r["l_quantity"] >= 1000) & (r["l_quantity"] <= 2000) & (r["l_discount"] <= 3)
    rows = np.empty(m.sum(), dtype=[("k", "<i8"), ("mode", "S10")])
    rows["k"], rows["mode"] = r["l_orderkey"][m], r["l_shipmode"][m]
    assert out["data"] == rows.tobytes()


def test_q6_matches_numpy(items):
    pages, r = items
    out = kernels.run(kernels.spec("filter_sum"), pages, PAGE, mode="chunked", pages_per_chunk=7)
    lo, hi = 8766, 9131  # 1994-01-01, 1995-01-01 in days since 1970-01-01
    m = (r["l_shipdate"] >= lo) & (r["l_shipdate"] < hi) & (abs(r["l_discount"] - 6) <= 1) & (r["l_quantity"] < 2400)
    assert out["matched"] == m.sum() > 0
    assert out["sum"] == int((r["l_extendedprice"][m].astype(np.int64) * r["l_discount"][m]).sum())


@pytest.mark.parametrize(
    ("pattern", "regex"), [("furiously", False), ("zzzz", False), (r"^the \w+ly", True), (r"deposits$", True)]
)
def test_grep_matches_python_re_line_by_line(text, pattern, regex):
    t, pages = text
    out = kernels.run(kernels.spec("grep", pattern=pattern, regex=regex), pages, PAGE)
    rx = re.compile(pattern.encode() if regex else re.escape(pattern.encode()))
    lines = t.splitlines()
    expect = b"".join(line + b"\n" for line in lines if rx.search(line))
    assert out["data"] == expect and out["scanned"] == len(lines)


def test_string_match_counts_and_locates_like_bytes_find(text):
    t, pages = text
    keys = ["the", "furiously", "regular deposits", "xyzzy"]
    out = kernels.run(kernels.spec("string_match", keys=keys), pages, PAGE)
    for key, got in zip(keys, out["keys"]):
        k = key.encode()
        assert got["key"] == k and got["count"] == t.count(k)
        at, i = [], t.find(k)
        while i >= 0:
            at.append(i)
            i = t.find(k, i + len(k))
        np.testing.assert_array_equal(kernels.logical_offsets(pages, PAGE, got["positions"]), at)


def test_word_count_matches_counter(text):
    t, pages = text
    out = kernels.run(kernels.spec("word_count", top=20), pages, PAGE)
    c = Counter(w.lower() for w in re.findall(rb"[A-Za-z]+", t))
    assert out["total"] == sum(c.values()) and out["distinct"] == len(c)
    expect = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert out["words"] == [(w.decode(), n) for w, n in expect]


def test_histogram_matches_bincount():
    px = data.pixels(321, 123, seed=2)
    out = kernels.run(kernels.spec("histogram"), data.pack_records(px, 3, PAGE), PAGE)
    expect = np.stack([np.bincount(px[:, c], minlength=256) for c in range(3)])
    np.testing.assert_array_equal(out["counts"], expect)


def test_linear_regression_matches_numpy():
    pts = data.regression_points(100_000, seed=3)
    out = kernels.run(kernels.spec("linear_regression"), data.pack_records(pts, 2, PAGE), PAGE)
    x, y = pts[:, 0].astype(np.int64), pts[:, 1].astype(np.int64)
    assert (out["n"], out["sx"], out["sy"], out["sxy"]) == (len(x), x.sum(), y.sum(), (x * y).sum())
    slope, intercept = np.polyfit(x, y, 1)
    assert out["slope"] == pytest.approx(slope, rel=1e-9) and out["intercept"] == pytest.approx(intercept, rel=1e-9)
    assert out["slope"] == pytest.approx(0.75, abs=0.01)


def lloyd_step(points, cents):
    d = ((points[:, None, :] - cents[None, :, :]) ** 2).sum(axis=2)
    best = d.argmin(axis=1)  # first minimum = lowest index on ties
    new = cents.copy()
    counts = np.bincount(best, minlength=len(cents))
    for j in np.nonzero(counts)[0]:
        new[j] = np.floor_divide(points[best == j].sum(axis=0), counts[j])
    return new, counts, int(d.min(axis=1).sum())


def test_kmeans_iterations_match_numpy_lloyd():
    pts = data.cluster_points(5000, 3, 5, seed=4)
    pages = data.pack_records(pts, 12, PAGE)
    steps = kernels.kmeans(pts[:5], pages, PAGE, max_iterations=6)
    cents, p64 = pts[:5].astype(np.int64), pts.astype(np.int64)
    for s in steps:
        cents_new, counts, sse = lloyd_step(p64, cents)
        np.testing.assert_array_equal(s["centroids"], cents_new)
        np.testing.assert_array_equal(s["counts"], counts)
        assert s["sse"] == sse
        cents = cents_new


@functools.cache
def inputs():
    li = lineitem.generate(rows=3000, page_size=1024, comment_pool="compact")
    t = data.pack_lines(data.text(30_000, seed=9), 1024)
    pts = data.pack_records(data.regression_points(5000, seed=1), 2, 1024)
    cl = data.cluster_points(2000, 2, 3, seed=1)
    lab = data.labelled_records(2000, 4, 3, 256, seed=1)
    lab16 = data.labelled_records(2000, 4, 3, 16, seed=1)
    return {
        "scan": (kernels.spec("scan", conditions=[{"field": "l_partkey", "max": 20_000}]), li),
        "filter_sum": (kernels.spec("filter_sum"), li),
        "grep": (kernels.spec("grep", pattern=r"\bslyly\b", regex=True), t),
        "string_match": (kernels.spec("string_match", keys=["ly ", "the"]), t),
        "word_count": (kernels.spec("word_count"), t),
        "histogram": (kernels.spec("histogram"), data.pack_records(data.pixels(40, 50, seed=1), 3, 1024)),
        "linear_regression": (kernels.spec("linear_regression"), pts),
        "kmeans": (kernels.spec("kmeans", dim=2, centroids=cl[:3].tolist()), data.pack_records(cl, 8, 1024)),
        "col_scan": col(kernels.spec("scan", conditions=[{"field": "l_partkey", "max": 20_000}])),
        "col_filter_sum": col(kernels.spec("filter_sum")),
        "scalparc": (kernels.spec("scalparc", attributes=4, classes=3), data.pack_records(lab, 5, 1024)),
        "hop": (kernels.spec("hop", grid=8, lo=0, hi=1000, threshold=3),
                data.pack_records(data.cluster_points(2000, 3, 4, seed=2), 12, 1024)),
        "naive_bayes": (kernels.spec("naive_bayes", attributes=4, classes=3, values=16), data.pack_records(lab16, 5, 1024)),
    }


def col(row_spec):
    """A columnar kernel and its input stream (row groups of 128 rows in 1 KiB pages)."""
    records = lineitem.generate(rows=3000, page_size=None, comment_pool="compact")
    spec = columnar.columnar(row_spec, 3000)
    return spec, columnar.stream(spec, columnar.from_records(records, 1024), 1024)


def strip(out):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items() if k != "encoded"} | {
        "keys": [{**k, "positions": k["positions"].tolist()} for k in out.get("keys", [])]
    }


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(kernels.KERNEL_NAMES),
       sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6), order=st.randoms(use_true_random=False))
def test_any_chunking_and_merge_order_gives_the_serial_answer(name, sizes, order):
    spec, buf = inputs()[name]
    serial = kernels.run(spec, buf, 1024, mode="serial")
    # columnar kernels map whole row groups (a page per named column)
    unit = len(columnar.columns(spec, 1024)) if name.startswith("col_") else 1
    parts = [kernels.map_chunk(spec, c, 1024, first) for first, c in kernels.chunks(buf, 1024, [n * unit for n in sizes])]
    order.shuffle(parts)
    out = kernels.reduce(spec, parts, 1024)
    assert strip(out) == strip({k: v for k, v in serial.items() if k in out})
    assert out["encoded"] == serial["encoded"]


def test_run_reports_the_bytes_each_stage_moves(items):
    pages, _ = items
    spec = kernels.spec("scan")
    out = kernels.run(spec, pages, PAGE, pages_per_chunk=16)
    parts = [kernels.map_chunk(spec, c, PAGE, f) for f, c in kernels.chunks(pages, PAGE, [16])]
    assert out["chunks"] == len(parts) and out["partial_bytes"] == sum(map(len, parts))
    assert out["input_bytes"] == len(pages) and out["output_bytes"] == len(out["encoded"])
    assert out["alpha"] == pytest.approx(out["partial_bytes"] / len(pages))


@pytest.mark.parametrize(
    ("spec", "buf", "message"),
    [
        ({"kernel": "sort"}, np.zeros(4096, np.uint8), "bad kernel spec"),
        ({"kernel": "grep", "pattern": "(", "regex": True}, np.zeros(4096, np.uint8), "regular expression"),
        ({"kernel": "histogram"}, np.zeros(4000, np.uint8), "whole number"),
        ({"kernel": "kmeans", "dim": 2, "centroids": [[1]]}, np.zeros(4096, np.uint8), "coordinates"),
    ],
)
def test_bad_specs_and_buffers_raise(spec, buf, message):
    with pytest.raises(InvalidArgument, match=message):
        kernels.run(spec, buf, PAGE)
    with pytest.raises(ValueError, match="unknown kernel"):
        kernels.spec("sort")
