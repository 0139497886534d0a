"""lineitem as 150-byte records in pages: layout, dbgen fidelity, paging, numpy decoding, TPC-H Q6."""

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash.issd import kernels, lineitem

DAYS_1994 = (np.datetime64("1994-01-01") - np.datetime64("1970-01-01")).astype(int)
DAYS_1995 = (np.datetime64("1995-01-01") - np.datetime64("1970-01-01")).astype(int)


@pytest.fixture(scope="module")
def small():
    return lineitem.generate(rows=5000, page_size=8192, comment_pool="compact")


def test_layout_tiles_150_bytes():
    end = 0
    for _name, off, width, _kind in lineitem.LAYOUT:
        assert off == end
        end += width
    assert end == lineitem.RECORD_SIZE == 150
    assert lineitem.record_dtype().itemsize == 150


def test_first_row_is_dbgens(small):
    r = lineitem.decode(small)[0]
    # dbgen SF 1: 1|155190|7706|1|17|21168.23|0.04|0.02|N|O|1996-03-13|1996-02-12|1996-03-22|DELIVER IN PERSON|TRUCK|
    assert (r["l_orderkey"], r["l_partkey"], r["l_suppkey"], r["l_linenumber"]) == (1, 155190, 7706, 1)
    assert (r["l_quantity"], r["l_extendedprice"], r["l_discount"], r["l_tax"]) == (1700, 2116823, 4, 2)
    assert (r["l_returnflag"], r["l_linestatus"]) == (b"N", b"O")
    day = lambda s: (np.datetime64(s) - np.datetime64("1970-01-01")).astype(int)  # noqa: E731
    dates = (r["l_shipdate"], r["l_commitdate"], r["l_receiptdate"])
    assert dates == (day("1996-03-13"), day("1996-02-12"), day("1996-03-22"))
    assert r["l_shipinstruct"].rstrip() == b"DELIVER IN PERSON" and r["l_shipmode"].rstrip() == b"TRUCK"
    assert 10 <= r["comment_len"] <= 43


def test_pages_hold_whole_records_and_decode_like_contiguous(small):
    per = lineitem.records_per_page(8192)
    assert per == 54 and len(small) % 8192 == 0
    counts = small.reshape(-1, 8192)[:, :4].copy().view("<u4")[:, 0] // 150
    assert counts.sum() == 5000 and (counts[:-1] == per).all()
    flat = lineitem.generate(rows=5000, page_size=None, comment_pool="compact")
    assert len(flat) == 5000 * 150
    np.testing.assert_array_equal(lineitem.decode(small), lineitem.decode(flat, page_size=None))
    np.testing.assert_array_equal(lineitem.decode(small)["row_id"], np.arange(5000))


def test_generation_is_deterministic_and_prefix_stable(small):
    again = lineitem.generate(rows=5000, page_size=8192, comment_pool="compact")
    np.testing.assert_array_equal(small, again)
    more = lineitem.decode(lineitem.generate(rows=7000, page_size=4096, comment_pool="compact"), page_size=4096)
    np.testing.assert_array_equal(more[:5000], lineitem.decode(small))


def test_value_domains_follow_dbgen(small):
    r = lineitem.decode(small)
    assert r["l_partkey"].min() >= 1 and r["l_partkey"].max() <= 200_000
    assert set(np.unique(r["l_quantity"])) <= set(range(100, 5001, 100))
    assert r["l_discount"].min() >= 0 and r["l_discount"].max() <= 10
    assert r["l_tax"].min() >= 0 and r["l_tax"].max() <= 8
    assert (r["l_receiptdate"] > r["l_shipdate"]).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scale_factor": 0.0}, "scale factor"),
        ({"rows": 10, "page_size": 100}, "does not fit"),
        ({"rows": 10, "comment_pool": "huge"}, "comment_pool"),
        ({"scale_factor": 0.001, "rows": 10**6, "comment_pool": "compact"}, "rows"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        lineitem.generate(**kwargs)


@pytest.mark.slow
def test_q6_at_scale_factor_1_is_the_tpch_answer():
    pages = lineitem.generate(scale_factor=1.0, comment_pool="compact")
    out = kernels.run(kernels.spec("filter_sum"), pages, 8192)
    assert out["scanned"] == 6_001_215
    assert out["sum"] == 1_231_410_782_283  # TPC-H Q6 validation answer 123141078.2283 (1e-4 units)
    r = lineitem.decode(pages)
    m = (
        (r["l_shipdate"] >= DAYS_1994)
        & (r["l_shipdate"] < DAYS_1995)
        & (r["l_discount"] >= 5)
        & (r["l_discount"] <= 7)
        & (r["l_quantity"] < 2400)
    )
    assert out["matched"] == m.sum()
    assert int((r["l_extendedprice"][m].astype(np.int64) * r["l_discount"][m]).sum()) == out["sum"]
    scan = kernels.run(kernels.scan_for_selectivity(0.01), pages, 8192)
    assert abs(scan["items"] / scan["scanned"] - 0.01) < 0.0005
