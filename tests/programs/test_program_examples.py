"""The C examples run in the VM on real data (no device) and agree with references computed on the host; the
TPC-H Q6 filter also runs through the standard commands on cosmos-plus and samsung-970pro and equals DuckDB."""

from __future__ import annotations

import numpy as np
import pytest

from nearflash import programs
from nearflash.issd import lineitem
from programs_fixtures import dev, make_device, objects  # noqa: F401  (fixtures)

Q6 = (8766, 9131, 5, 7, 2400)  # shipdate in [1994-01-01, 1995-01-01), discount 0.05..0.07, quantity < 24


def q6_numpy(r: np.ndarray) -> tuple[int, int]:
    m = (r["l_shipdate"] >= Q6[0]) & (r["l_shipdate"] < Q6[1]) & (r["l_discount"] >= Q6[2]) & (r["l_discount"] <= Q6[3]) \
        & (r["l_quantity"] < Q6[4])
    return int(m.sum()), int((r["l_extendedprice"][m].astype(np.int64) * r["l_discount"][m]).sum())


def test_grep_counts_like_python(objects):
    text = b"the needle and the needleneedle in a haystack of needles\n" * 300
    buf = np.frombuffer(text, dtype=np.uint8).copy()
    value, n = programs.run_local(objects["grep"], [buf], b"needle")
    assert value == text.count(b"needle") == 1200 and n > len(text)
    assert programs.run_local(objects["grep"], [buf], b"zzz")[0] == 0


def test_sls_matches_numpy(objects):
    rng = np.random.default_rng(4)
    rows, dim = 300, 8
    table = rng.integers(-1000, 1000, size=(rows, dim), dtype=np.int32)
    lengths = np.array([3, 0, 17, 1], dtype=np.uint32)
    idx = rng.integers(0, rows, size=int(lengths.sum()), dtype=np.uint32)
    out = np.zeros(len(lengths) * dim * 8, dtype=np.uint8)
    bufs = [table.view(np.uint8).reshape(-1).copy(), idx.view(np.uint8).copy(), lengths.view(np.uint8).copy(), out]
    value, _ = programs.run_local(objects["sls"], bufs, cparam1=dim)
    assert value == len(lengths)
    offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    want = np.stack([table[idx[offs[b]:offs[b + 1]]].astype(np.int64).sum(0) for b in range(len(lengths))])
    np.testing.assert_array_equal(out.view("<i8").reshape(len(lengths), dim), want)
    bad = idx.copy()
    bad[0] = rows  # an index past the table: the program refuses it itself
    bufs[1] = bad.view(np.uint8).copy()
    assert programs.run_local(objects["sls"], bufs, cparam1=dim)[0] == 2**64 - 1


def test_q6_in_the_vm_over_contiguous_and_paged_records(objects):
    rows = lineitem.decode(lineitem.generate(rows=3000, page_size=None), page_size=None)
    flat = lineitem.generate(rows=3000, page_size=None)
    paged = lineitem.generate(rows=3000, page_size=8192)
    params = np.asarray(Q6, dtype="<i4").tobytes()
    want = q6_numpy(rows)
    assert want[0] > 0
    for data, page in ((flat, 0), (paged, 8192)):
        out = np.zeros(16, dtype=np.uint8)
        value, _ = programs.run_local(objects["lineitem_filter"], [data.copy(), out], params, cparam1=page)
        assert (value, int(out[8:].view("<i8")[0])) == want


@pytest.mark.parametrize("preset", ["cosmos-plus", "samsung-970pro"])
def test_q6_through_the_standard_commands_equals_duckdb(objects, preset):
    duckdb = pytest.importorskip("duckdb")
    n_rows, page = 4000, 8192
    data = lineitem.generate(rows=n_rows, page_size=page)
    rows = lineitem.decode(data, page_size=page)
    with make_device(preset) as dev:
        dev.write(0, data)
        nblocks = len(data) // dev.lba_bytes
        programs.load(dev, 1, objects["lineitem_filter"])
        programs.activate(dev, 1)
        programs.copy_to_slm(dev, 0, 0, nblocks)
        out_at = len(data)
        rsid = programs.create_range_set(dev, [(0, len(data)), (out_at, 16)])
        r = programs.execute(dev, 1, range_set=rsid, params=np.asarray(Q6, dtype="<i4").tobytes(), cparam1=page)
        out = programs.read_slm(dev, out_at, 16).view("<i8")
    con = duckdb.connect()
    con.register("lineitem", {n: rows[n] for n in ("l_shipdate", "l_discount", "l_quantity", "l_extendedprice")})
    count, total = con.execute(
        "SELECT count(*), sum(l_extendedprice::HUGEINT * l_discount) FROM lineitem WHERE l_shipdate >= ? AND "
        "l_shipdate < ? AND l_discount BETWEEN ? AND ? AND l_quantity < ?", list(Q6)).fetchone()
    assert count > 0
    assert (r.value, int(out[0]), int(out[1])) == (count, count, int(total))
    assert r.instructions > n_rows * 10


def test_in_storage_and_host_paths_agree(objects):
    from nearflash.programs.compare import compare

    data = lineitem.generate(rows=2000, page_size=8192)
    with make_device() as dev:
        dev.write(0, data)
        r = compare(dev, objects["lineitem_filter"], 0, len(data) // dev.lba_bytes, out_bytes=16,
                    params=np.asarray(Q6, dtype="<i4").tobytes(), cparam1=8192)
    assert r["in_storage"]["value"] == r["host"]["value"] > 0
    assert r["in_storage"]["instructions"] == r["host"]["instructions"]
    assert bytes(r["in_storage"]["output"]) == r["host"]["output"]
    assert r["time_ratio"] > 0 and r["energy_ratio"] > 0
