"""SparseLengthsSum through every functional path (host DRAM, generated tables, RecSSD's NDP engine) against the
plain-numpy reference, on adversarial bags."""

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash._native import recssd as rs
from nearflash.recssd import DenseEmbeddings, GeneratedEmbeddings, NdpFunctionalEmbeddings, TableSpec, sls_reference


def _table(rows, dim, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, dim), dtype=np.float32)


def _bags(bags):
    """(indices, offsets) from a list of id lists."""
    lengths = [len(b) for b in bags]
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if bags else np.zeros(0, np.int64)
    indices = np.array([i for b in bags for i in b], dtype=np.int64)
    return indices, offsets


ROWS, DIM = 1000, 32  # packed: 128 rows per 16 KiB page, 32 rows per 4 KiB LBA
ADVERSARIAL = {
    "empty_first_middle_last": [[], [1, 2], [], [3], []],
    "repeated_ids": [[7, 7, 7, 7], [0, 0], [999, 999, 999]],
    "page_boundaries": [[127, 128], [255, 256, 383, 384], [0, 127], [896, 895, 999]],
    "lba_boundaries": [[31, 32], [63, 64, 95, 96]],
    "spanning_many_pages": [list(range(0, 1000, 97)), list(range(999, 0, -128))],
    "single_bag_all_rows": [list(range(ROWS))],
    "one_id_per_bag": [[i] for i in range(0, 1000, 111)],
}


@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
def test_native_paths_match_numpy_reference(case):
    table = _table(ROWS, DIM)
    idx, off = _bags(ADVERSARIAL[case])
    want = sls_reference(table, idx, off)
    np.testing.assert_allclose(rs.sls(table, idx, off), want, rtol=1e-5, atol=1e-5)
    for placement in ("packed", "one_row_per_page"):
        got, stats = rs.ndp_sls(table, idx, off, placement=placement)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        pages = rs.pages_of(idx, ROWS, DIM, placement) if len(idx) else np.zeros(0)
        assert stats["pages"] == len(np.unique(pages))
        assert stats["pairs"] == len(idx)


def test_empty_bags_are_zero_and_weights_scale_rows():
    table = _table(50, 8)
    idx, off = _bags([[], [3, 4], []])
    out = rs.sls(table, idx, off)
    assert out.shape == (3, 8) and not out[0].any() and not out[2].any()
    w = np.array([0.5, -2.0], dtype=np.float32)
    np.testing.assert_allclose(rs.sls(table, idx, off, per_sample_weights=w), sls_reference(table, idx, off, w), rtol=1e-6)
    last = np.append(off, len(idx))
    np.testing.assert_array_equal(rs.sls(table, idx, last, include_last_offset=True), out)


def test_large_batch_and_index_dtypes():
    table = _table(20_000, 64, seed=1)
    rng = np.random.default_rng(2)
    idx = rng.integers(0, 20_000, 256 * 120)
    off = np.arange(256) * 120
    want = sls_reference(table, idx, off)
    np.testing.assert_allclose(rs.sls(table, idx, off), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rs.sls(table, idx.astype(np.int32), off.astype(np.uint32)), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rs.sls(table, idx[::1].copy()[::-1][::-1], off), want, rtol=1e-4, atol=1e-4)
    strided = np.repeat(idx, 2)[::2]  # non-contiguous view
    np.testing.assert_allclose(rs.sls(table, strided, off), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("idx", "off", "message"),
    [
        ([0, 50], [0], "outside the table"),
        ([0, -1], [0], "outside the table"),
        ([0], [1], "first bag must start at 0"),
        ([0, 1], [0, 2, 1], "non-decreasing"),
        ([0], [0, 5], "beyond the 1 indices"),
        ([0], [], "no bags"),
    ],
)
def test_bad_requests_raise(idx, off, message):
    table = _table(50, 4)
    with pytest.raises(InvalidArgument, match=message):
        rs.sls(table, np.array(idx, dtype=np.int64), np.array(off, dtype=np.int64))


def test_bad_tables_raise():
    with pytest.raises(InvalidArgument, match="C-contiguous"):
        rs.sls(_table(10, 8)[:, ::2], np.array([0]), np.array([0]))
    with pytest.raises(TypeError):
        rs.sls(_table(10, 8).astype(np.float64), np.array([0]), np.array([0]))
    with pytest.raises(InvalidArgument, match="per_sample_weights"):
        rs.sls(_table(10, 8), np.array([0]), np.array([0]), per_sample_weights=np.ones(2, np.float32))


def test_generated_tables_are_sls_over_their_rows():
    spec = [TableSpec(5000, 16, 4), TableSpec(300, 16, 4)]
    gen = GeneratedEmbeddings(spec, seed=9)
    dense = DenseEmbeddings([gen.materialize(0), gen.materialize(1)])
    for t, rows in enumerate((5000, 300)):
        idx, off = _bags([[0, rows - 1, rows - 1], [], [rows // 2]])
        np.testing.assert_allclose(gen(t, idx, off), dense(t, idx, off), rtol=1e-6)
        np.testing.assert_allclose(gen(t, idx, off), sls_reference(dense.tables[t], idx, off), rtol=1e-6)
    bound = np.sqrt(1 / 5000)
    assert np.abs(dense.tables[0]).max() <= bound and dense.tables[0].std() > bound / 3
    assert not np.array_equal(dense.tables[0][:300], dense.tables[1])
    np.testing.assert_array_equal(GeneratedEmbeddings(spec, seed=9).materialize(1), dense.tables[1])


def test_ndp_path_uses_the_ssd_cache_on_reuse():
    tables = [_table(ROWS, DIM, seed=s) for s in range(2)]
    cache = rs.SsdCache(index_bits=16)
    ndp = NdpFunctionalEmbeddings(tables, cache=cache)
    idx, off = _bags(ADVERSARIAL["page_boundaries"])
    first = ndp(0, idx, off)
    assert ndp.stats["cache_hits"] == 0
    again = ndp(0, idx, off)  # every row was filled by the first request's translation
    np.testing.assert_array_equal(again, first)
    assert ndp.stats["cache_hits"] == len(idx) and cache.stats()["hits"] == len(idx)
    other = ndp(1, idx, off)  # another table id: no false hits
    np.testing.assert_allclose(other, sls_reference(tables[1], idx, off), rtol=1e-5, atol=1e-5)
    assert ndp.stats["cache_hits"] == len(idx)
    with pytest.raises(InvalidArgument, match="payload"):
        NdpFunctionalEmbeddings([_table(100, 64)], cache=rs.SsdCache(index_bits=8))(0, *_bags([[1]]))
