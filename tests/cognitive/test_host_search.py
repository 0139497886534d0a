"""The host-side graph search the CPU baselines are costed from (`Graph.host_search`: the GSE's code on the host,
reading pages through a page cache) and tie-aware recall (`distance_recall`), driven as a hostile caller would.
Random codes, no dataset: a fraction of a second."""

import numpy as np
import pytest

from nearflash import _native
from nearflash.errors import InvalidArgument

cog = _native.cognitive


@pytest.fixture(scope="module")
def graph():
    codes = np.random.default_rng(0).integers(0, 1 << 48, 400, dtype=np.uint64)
    return codes, cog.Graph(codes, 48, 25, 1)


def test_a_page_cache_never_reads_a_page_twice_and_does_not_change_the_answer(graph):
    codes, g = graph
    queries = codes[:6] ^ np.uint64(0b1011)
    pages = g.pages("two_hop")
    ids, warm = g.host_search(queries, 20, "two_hop", pages)  # room for the whole graph, kept across queries
    cold_ids, cold = g.host_search(queries, 20, "two_hop", pages, cold=True)
    tiny_ids, tiny = g.host_search(queries, 20, "two_hop", 1, cold=True)
    assert ids.shape == (6, 20) and ids.dtype == np.uint32
    assert np.array_equal(ids, cold_ids) and np.array_equal(ids, tiny_ids), "the cache changes costs, not answers"
    assert warm["pages_read"].sum() <= pages, "a page kept in the cache is never read again"
    assert (cold["pages_read"] <= pages).all() and (warm["pages_read"] <= cold["pages_read"]).all()
    assert (tiny["pages_read"] >= cold["pages_read"]).all()
    for key in ("evaluated", "neighbour_steps", "expansions"):
        assert np.array_equal(warm[key], cold[key]) and (warm[key] > 0).all(), key
    # the same search as the device model's: every id once, each at most brute force's T-th distance or near it
    assert all(len(set(row)) == 20 for row in ids.tolist())
    empty, stats = g.host_search(queries[:0], 20)
    assert empty.shape == (0, 20) and all(len(v) == 0 for v in stats.values())


@pytest.mark.parametrize("kwargs, error, match", [
    ({"t": 0}, InvalidArgument, "T: 0; 1 to 400"),
    ({"t": 401}, InvalidArgument, "T: 401"),
    ({"t": 10, "layout": "zigzag"}, InvalidArgument, "layout"),
    ({"t": 10, "cache_pages": 0}, InvalidArgument, "cache_pages"),
    ({"t": 10, "cache_pages": -1}, OverflowError, "negative"),
    ({"t": 10, "seed": -1}, OverflowError, "negative"),
    ({"t": 10, "params": {"bogus": 1}}, InvalidArgument, "bogus"),
    ({"t": 10, "params": {"termination": "never"}}, InvalidArgument, "termination"),
    ({"t": "10"}, TypeError, "t"),
])
def test_host_search_refuses_bad_arguments(graph, kwargs, error, match):
    codes, g = graph
    with pytest.raises(error, match=match):
        g.host_search(codes[:2], **kwargs)


@pytest.mark.parametrize("queries", [np.zeros(2, np.float64), np.zeros((1, 2), np.uint64), [1, 2]])
def test_host_search_refuses_queries_that_are_not_a_uint64_vector(graph, queries):
    _, g = graph
    with pytest.raises(TypeError, match="queries"):
        g.host_search(queries, 10)


def test_distance_recall_counts_ties_and_refuses_foreign_ids(graph):
    codes, _ = graph
    q = int(codes[7])
    bf = cog.brute_force(codes, q, 10)
    assert cog.distance_recall(codes, q, bf, bf) == 1.0
    d = np.array([bin(int(c) ^ q).count("1") for c in codes])
    far = np.ascontiguousarray(np.argsort(-d, kind="stable")[:10], np.uint32)
    assert cog.distance_recall(codes, q, far, bf) == 0.0
    tied = np.flatnonzero(d == d[bf[-1]])  # an id as near as brute force's T-th stands in for it
    swap = np.array([*bf[:-1], next(i for i in tied if i not in bf[:-1])], np.uint32)
    assert cog.distance_recall(codes, q, swap, bf) == 1.0
    with pytest.raises(InvalidArgument, match="400 is not an index"):
        cog.distance_recall(codes, q, np.array([400], np.uint32), bf)
    with pytest.raises(TypeError, match="returned"):
        cog.distance_recall(codes, q, np.array([1, 2]), bf)
    with pytest.raises(OverflowError):
        cog.distance_recall(codes, -1, bf, bf)


def test_distance_recall_refuses_more_ids_than_brute_forces_top_t(graph):
    codes, _ = graph
    bf = cog.brute_force(codes, int(codes[3]), 5)
    with pytest.raises(InvalidArgument, match="returned: 6 ids against brute force's 5"):
        cog.distance_recall(codes, int(codes[3]), np.arange(6, dtype=np.uint32), bf)
    with pytest.raises(InvalidArgument, match="T >= 1"):
        cog.distance_recall(codes, int(codes[3]), bf[:0], bf[:0])
