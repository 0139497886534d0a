"""Id traces (locality K, uniform, SEQ/STR), the caches of both sides and static partitioning, checked against the
figures the paper reports for them."""

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash._native import recssd as rs
from nearflash.recssd import SPECS, fixed_offsets, locality_batches, microbenchmark_ids, sls_reference


@pytest.mark.parametrize(("k", "paper_unique", "paper_lru_hits"), [(0, 0.13, 0.84), (1, 0.54, 0.44), (2, 0.72, 0.28)])
def test_locality_k_gives_the_papers_unique_fractions_and_lru_hit_rates(k, paper_unique, paper_lru_hits):
    # Paper §5: K = 0, 1, 2 -> 13%, 54%, 72% unique accesses; §6.3: baseline 2,000-row LRU hits 84%, 44%, 28%
    # (RM1 tables: 1M rows, 80 lookups). Four tables = four independent traces.
    traces = rs.locality_traces([1_000_000] * 4, 80, 25_000, float(k), seed=7)
    unique = np.mean([new / len(ids) for ids, new in traces])
    assert abs(unique - paper_unique) < 0.03
    hits = []
    for ids, _ in traces:
        lru = rs.HostLruCache(2000)
        lru.access(ids[:5000])
        lru.reset_stats()
        hits.append(lru.access(ids[5000:]).mean())
    assert abs(np.mean(hits) - paper_lru_hits) < 0.04


def test_traces_are_deterministic_line_ids():
    a = rs.locality_traces([1_000_000, 500_000], 20, 3000, 1.0, seed=3)
    b = rs.locality_traces([1_000_000, 500_000], 20, 3000, 1.0, seed=3)
    for (ia, na), (ib, nb), rows in zip(a, b, [1_000_000, 500_000]):
        np.testing.assert_array_equal(ia, ib)
        assert na == nb
        assert (ia % 128 == 0).all() and ia.min() >= 0 and ia.max() < rows
    assert not np.array_equal(a[0][0], rs.locality_traces([1_000_000], 20, 3000, 1.0, seed=4)[0][0])
    cdf = rs.stack_distance_cdf(2.0, 0)
    assert len(cdf) == 50 and cdf[-1] == 1.0 and (np.diff(cdf) >= 0).all()


def test_small_tables_cannot_hold_deep_stack_distances():
    with pytest.raises(InvalidArgument, match="stack distances reach"):
        rs.locality_traces([10_000], 3, 100, 1.0, seed=0)


def test_locality_batches_follow_the_model_shape():
    spec = SPECS["RM3"]
    batches, unique = locality_batches(spec, batch_size=8, batches=3, k=1.0, seed=5)
    assert len(batches) == 3 and len(unique) == len(spec.tables)
    for b in batches:
        assert b.dense.shape == (8, 2560) and len(b.sparse) == 10
        for ids, off in b.sparse:
            assert ids.shape == (160,)
            np.testing.assert_array_equal(off, fixed_offsets(8, 20))
    assert all(0.3 < u < 0.8 for u in unique)


def test_uniform_and_microbenchmark_ids():
    ids = rs.uniform_bags(1000, 64, 80, 1).reshape(64, 80)
    assert (np.diff(ids, axis=1) > 0).all() and ids.min() >= 0 and ids.max() < 1000
    seq = microbenchmark_ids("seq", 1_000_000, 64, batch_size=4)
    np.testing.assert_array_equal(seq, np.arange(65, 65 + 320))
    stride = microbenchmark_ids("str", 1_000_000, 64, batch_size=4)
    pages = rs.pages_of(stride, 1_000_000, 64)
    assert len(np.unique(pages)) == len(stride)  # STR: every vector on its own flash page
    assert len(np.unique(rs.pages_of(seq, 1_000_000, 64))) == 6  # SEQ: 320 rows of 256 B on 6 pages (64 per page)
    with pytest.raises(ValueError):
        microbenchmark_ids("zigzag", 10, 4, 1)


def test_ssd_cache_indexing_conflicts_hurt_line_traces():
    # The artifact's key (id << 5 | table) puts line x 128 ids of one table into only 256 of 2^20 sets.
    tags = rs.SsdCacheTags()
    ids = np.arange(0, 7812 * 128, 128)
    assert not tags.access(0, ids).any()
    assert tags.access(0, ids[-256:]).all()  # only the last 256 lines survive, one per set
    assert not tags.access(0, ids[:256]).any()
    assert tags.access(1, ids[:1]).sum() == 0  # another table maps to other sets
    assert tags.stats()["evictions"] == (7812 - 256) + 256
    assert tags.footprint_bytes() == (1 << 20) * 132
    with pytest.raises(InvalidArgument, match="table bits"):
        tags.access(32, ids[:1])


def test_partition_split_recombines_and_tends_to_a_quarter():
    traces = rs.locality_traces([1_000_000], 120, 120 * 2000, 2.0, seed=11)
    ids = traces[0][0]
    part = rs.HotRowPartition(ids, 2000)
    assert len(part) == 2000
    hot = part.rows()
    counts = {i: c for i, c in zip(*np.unique(ids, return_counts=True))}
    assert min(counts[h] for h in hot) >= max(c for i, c in counts.items() if i not in set(hot.tolist()))
    off = fixed_offsets(2000, 120)
    host_slots, host_off, ndp_idx, ndp_off = part.split(ids, off)
    s = part.stats()
    assert s["hits"] == len(host_slots) and s["misses"] == len(ndp_idx)
    # Paper §6.3: with many lookups the partition hit rate approaches 25% (2,000 of the 7,812 lines used).
    assert 0.25 <= s["hits"] / len(ids) < 0.33
    # Host part + NDP part = the whole request.
    table = np.random.default_rng(0).integers(-8, 8, size=(1_000_000, 4)).astype(np.float32)
    host_rows = table[hot]
    whole = sls_reference(table, ids, off)
    np.testing.assert_array_equal(rs.sls(host_rows, host_slots, host_off) + rs.sls(table, ndp_idx, ndp_off), whole)
    assert part.contains(hot[:3]).all() and not part.contains(np.array([1])).any()
