"""Columnar lineitem pages: the table holds every record's bytes, col_scan / col_filter_sum answer exactly as the
row-layout kernels, DuckDB and numpy do (host path, the device stream, in storage on a device, where they read
fewer bytes and finish sooner), and bad input raises a clear error."""

import numpy as np
import pytest

import nearflash
from nearflash import InvalidArgument
from nearflash.issd import agent, columnar, kernels, lineitem

PAGE = 8192
ROWS = 7000


@pytest.fixture(scope="module")
def data():
    records = lineitem.generate(rows=ROWS, page_size=None, comment_pool="compact")
    pages = lineitem.generate(rows=ROWS, page_size=PAGE, comment_pool="compact")
    return {"records": records, "pages": pages, "table": columnar.from_records(records, PAGE),
            "rows": lineitem.decode(records, None)}


WIDE_SCAN = kernels.spec(
    "scan",
    conditions=[{"field": "l_partkey", "min": 500, "max": 60_000}, {"field": "comment_len", "min": 20}],
    projection=["l_quantity", "row_id", "l_shipdate"],
)


def test_layout_places_every_column_value(data):
    geo = columnar.layout(ROWS, PAGE, align_pages=8)
    assert geo["rows_per_group"] == 1024 and geo["groups"] == 7
    assert all(first % 8 == 0 and first > 0 for _, first, _ in geo["regions"])
    table = columnar.from_records(data["records"], PAGE, align_pages=8)
    assert len(table) == geo["total_pages"] * PAGE
    rows = data["rows"]
    for name, first, per_group in geo["regions"]:
        width = rows.dtype[name].itemsize
        for g in (0, geo["groups"] - 1):
            n = min(1024, ROWS - g * 1024)
            at = (first + g * per_group) * PAGE
            got = table[at : at + n * width]
            want = np.ascontiguousarray(rows[name][g * 1024 : g * 1024 + n]).view(np.uint8)
            assert got.tobytes() == want.tobytes(), name


@pytest.mark.parametrize("row_spec", [kernels.spec("scan"), WIDE_SCAN, kernels.spec("filter_sum")], ids=["scan", "wide", "q6"])
def test_answers_equal_the_row_layout_and_numpy(data, row_spec):
    spec = columnar.columnar(row_spec, ROWS)
    ref = kernels.run(row_spec, data["pages"], PAGE)
    host = columnar.run(spec, data["table"], PAGE, groups_per_task=2)
    assert host["encoded"] == ref["encoded"]
    stream = columnar.stream(spec, data["table"], PAGE)
    assert len(stream) == 7 * len(columnar.columns(spec)) * PAGE
    assert kernels.run(spec, stream, PAGE, pages_per_chunk=len(columnar.columns(spec)))["encoded"] == ref["encoded"]
    # only the named columns' pages are read
    assert host["input_bytes"] == 7 * len(columnar.columns(spec)) * PAGE
    rows = data["rows"]
    if row_spec["kernel"] == "filter_sum":
        hit = ((rows["l_shipdate"] >= 8766) & (rows["l_shipdate"] <= 9130) & (rows["l_discount"] >= 5)
               & (rows["l_discount"] <= 7) & (rows["l_quantity"] <= 2399))
        assert host["matched"] == hit.sum() > 0
        assert host["sum"] == int((rows["l_extendedprice"][hit].astype(object) * rows["l_discount"][hit]).sum())


def test_answers_equal_duckdb(data):
    duckdb = pytest.importorskip("duckdb")
    rows = data["rows"]
    con = duckdb.connect()
    con.register("src", {c: np.ascontiguousarray(rows[c]) for c in ("l_partkey", "l_quantity", "row_id", "l_shipdate",
                                                                     "l_discount", "l_extendedprice")})
    con.execute("CREATE TABLE lineitem AS SELECT * FROM src")
    scan = columnar.run(columnar.spec("col_scan", ROWS), data["table"], PAGE)
    duck = con.execute("SELECT l_quantity FROM lineitem WHERE l_partkey <= 2000 ORDER BY row_id").fetchnumpy()
    assert scan["data"] == duck["l_quantity"].astype("<i4").tobytes() and scan["items"] > 0
    q6 = columnar.run(columnar.spec("col_filter_sum", ROWS), data["table"], PAGE)
    s, n = con.execute(
        "SELECT sum(l_extendedprice::HUGEINT * l_discount), count(*) FROM lineitem WHERE l_shipdate >= 8766 AND "
        "l_shipdate < 9131 AND l_discount BETWEEN 5 AND 7 AND l_quantity < 2400"
    ).fetchall()[0]
    assert (q6["sum"], q6["matched"]) == (int(s), n)


def test_in_storage_equals_the_host_and_beats_the_row_layout(data):
    dev, _ = agent.device("iSSD-400", n_ch=4, n_host_cpu=4)
    try:
        per = PAGE // dev.lba_bytes
        row_ext = agent.write_input(dev, 0, data["pages"], PAGE)
        base = (len(data["pages"]) // PAGE + 8) * per
        base -= base % (4 * per)  # the table starts on channel 0
        table = columnar.from_records(data["records"], PAGE, align_pages=4)
        columnar.write(dev, base, table, PAGE)
        for row_spec in (kernels.spec("scan"), kernels.spec("filter_sum")):
            spec = columnar.columnar(row_spec, ROWS)
            row = agent.run(dev, row_spec, row_ext, PAGE)
            col = agent.run(dev, spec, columnar.extents(spec, base, dev.lba_bytes, PAGE, 4), PAGE)
            assert col["encoded"] == row["encoded"]
            assert col["input_bytes"] == 7 * len(columnar.columns(spec)) * PAGE
            assert col["seconds"] < row["seconds"] / 2, (col["seconds"], row["seconds"])
        with pytest.raises(InvalidArgument, match="in storage only"):
            agent.run(dev, spec, columnar.extents(spec, base, dev.lba_bytes, PAGE, 4), PAGE, "conventional")
        # extents that are not every row group of every column: the job fails with the kernel's status
        ext = columnar.extents(spec, base, dev.lba_bytes, PAGE, 4)
        for bad in ([(base + per, 3 * per)], [(s, n - per) for s, n in ext], ext[:-1]):
            with pytest.raises(nearflash.NvmeError):
                agent.run(dev, spec, bad, PAGE)
    finally:
        dev.close()


def test_bad_input_is_refused(data):
    table = data["table"]
    with pytest.raises(InvalidArgument, match="rows"):
        kernels.map_chunk({"kernel": "col_scan"}, table[:PAGE], PAGE, 0)
    with pytest.raises(InvalidArgument, match="text"):
        columnar.run(columnar.spec("col_scan", ROWS, projection=["l_comment"]), table, PAGE)
    with pytest.raises(InvalidArgument, match="columnar table"):
        columnar.run(columnar.spec("col_scan", ROWS), table[:-PAGE], PAGE)
    with pytest.raises(InvalidArgument, match="built for 7001 rows"):
        columnar.run(columnar.spec("col_scan", ROWS + 1), table, PAGE)
    damaged = table.copy()
    damaged[0] ^= 0xFF
    with pytest.raises(InvalidArgument, match="header"):
        columnar.run(columnar.spec("col_scan", ROWS), damaged, PAGE)
    with pytest.raises(InvalidArgument, match="groups_per_task"):
        columnar.run(columnar.spec("col_scan", ROWS), table, PAGE, groups_per_task=0)
    with pytest.raises(InvalidArgument, match="page size"):
        columnar.layout(ROWS, 8190)
    with pytest.raises(InvalidArgument, match="align_pages"):
        columnar.layout(ROWS, PAGE, 0)
    with pytest.raises(InvalidArgument, match="records"):
        columnar.from_records(data["records"][:-1], PAGE)
    with pytest.raises(InvalidArgument, match="not a columnar kernel"):
        columnar.columns(kernels.spec("scan"))
    with pytest.raises(ValueError, match="columnar kernel"):
        columnar.spec("scan", ROWS)
    with pytest.raises(ValueError, match="twins"):
        columnar.columnar(kernels.spec("grep", pattern="x"), ROWS)
    with pytest.raises(TypeError):
        columnar.run(columnar.spec("col_scan", ROWS), table, "8192")
    # a chunk of a stream that is not whole row groups
    spec = columnar.spec("col_filter_sum", ROWS)
    with pytest.raises(InvalidArgument, match="whole row groups"):
        kernels.map_chunk(spec, table[: 3 * PAGE], PAGE, 0)
