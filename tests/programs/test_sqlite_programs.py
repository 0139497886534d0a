"""SQLite B-tree programs that read flash (issue 25): a database built by Python's sqlite3, written to the device
as a file's blocks; the in-storage lookup by rowid and the predicate scan give sqlite3's answers, and so does the
host path (the same program, each read a Read command, with and without a warm cache of the interior pages);
hostile reads stop with their status and leave the device usable."""

from __future__ import annotations

import sqlite3
import struct

import numpy as np
import pytest

from nearflash import programs
from nearflash.errors import InvalidArgument
from nearflash.programs import ProgramError
from nearflash.programs import sqlite as sq

from programs_fixtures import dev, make_device, objects  # noqa: F401  (fixtures)

LBA = 64  # where the file starts on the device
OUT = 1 << 16  # SLM bytes for a record


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """3,000 rows in 512-byte pages (a 3-level tree), every 101st row on overflow pages."""
    path = tmp_path_factory.mktemp("sqlite") / "t.db"
    sq.build(path, 3000, page_size=512, seed=5, big_every=101, big_bytes=1500)
    return path, sq.open_image(path, 4096)


def _place(dev, image) -> list[tuple[int, int]]:
    dev.write(LBA, np.frombuffer(image.image, np.uint8))
    return [(LBA, len(image.image) // dev.lba_bytes)]


def _lookup(dev, image, flash, rowid):
    r = programs.execute(dev, 1, [(0, OUT)], flash=flash, params=image.params(), cparam1=rowid, cparam2=image.root)
    if r.value >= sq.UNSUPPORTED:
        return r, None
    return r, sq.decode_record(programs.read_slm(dev, 0, r.value).tobytes())


def test_lookups_by_rowid_in_storage_equal_sqlite3_overflow_pages_included(dev, objects, db):  # noqa: F811
    path, image = db
    assert image.depth() == 3 and image.page_size == 512
    flash = _place(dev, image)
    programs.load(dev, 1, objects["sqlite_lookup"])
    programs.activate(dev, 1)
    con = sqlite3.connect(path)
    rng = np.random.default_rng(1)
    last = con.execute("SELECT max(rowid) FROM t").fetchone()[0]
    ids = [int(x) for x in rng.integers(1, last + 50, 150)] + [101 + 101 // 6, 7, 0, last]  # a big row, a gap
    found = 0
    for rowid in ids:
        r, rec = _lookup(dev, image, flash, rowid)
        want = sq.row_of(con, rowid)
        if want is None:
            assert r.value == sq.NOT_FOUND, rowid
            continue
        found += 1
        assert sq.record_as_row(rec, rowid) == want, rowid
    assert found > 100
    stats = dev.report().extensions["programs"]["stats"]
    assert stats["flash_read_errors"] == 0 and stats["flash_reads"] >= 3 * len(ids)
    # the big row: its 1500 bytes come from the leaf and its overflow pages (more reads than the tree's depth)
    r, rec = _lookup(dev, image, flash, 101 + 100 // 6)
    assert len(rec[2]) == 1500 and dev.report().extensions["programs"]["stats"]["last_flash_reads"] > 3
    # without parameters the program reads the file's header first: one more read, same answer
    r2 = programs.execute(dev, 1, [(0, OUT)], flash=flash, cparam1=5, cparam2=image.root)
    assert sq.record_as_row(sq.decode_record(programs.read_slm(dev, 0, r2.value).tobytes()), 5) == sq.row_of(con, 5)


def test_a_lookup_waits_for_one_flash_read_per_level(objects, db):  # noqa: F811
    path, image = db
    dev = make_device()
    flash = _place(dev, image)
    programs.load(dev, 1, objects["sqlite_lookup"])
    programs.activate(dev, 1)
    dev.flush()  # the pages on flash, not in the write buffer
    r, _ = _lookup(dev, image, flash, 5)
    stats = dev.report().extensions["programs"]["stats"]
    assert stats["last_flash_reads"] == image.depth()
    # the helper reads are transactions of the programs' flash class (issue 23), not of the command's queue
    assert dev.report().data["sched"]["classes"]["programs.exec"]["transactions"] >= image.depth()
    # each level's read waits for the one before: the run lasts at least depth x a page's sensing (cosmos-plus:
    # nand.t_read = 60 us)
    assert dev.param("nand.t_read").startswith("60")
    assert image.depth() * 60_000 < r.latency_ns < image.depth() * 200_000, r.latency_ns
    dev.close()


def test_the_scan_counts_and_sums_what_sqlite3_does(dev, objects, db):  # noqa: F811
    path, image = db
    flash = _place(dev, image)
    programs.load(dev, 2, objects["sqlite_scan"])
    programs.activate(dev, 2)
    con = sqlite3.connect(path)
    for lo, hi, op, value in [(1, 10**9, ">", 0), (200, 1700, "<=", 50), (1000, 1000, "=", 0), (3000, 90, "<", 0),
                              (-5, 400, "!=", 17)]:
        params = image.params() + struct.pack("<qqIIq", lo, hi, 1, sq.OPS[op], value)
        r = programs.execute(dev, 2, [(0, 16)], flash=flash, params=params, cparam2=image.root)
        count, total = programs.read_slm(dev, 0, 16).view("<i8")
        want = con.execute(f"SELECT count(*), coalesce(sum(a), 0) FROM t WHERE rowid BETWEEN ? AND ? AND a {op} ?",
                           (lo, hi, value)).fetchone()
        assert (r.value, int(count), int(total)) == (want[0], want[0], want[1]), (lo, hi, op, value)


def test_the_host_path_gives_the_same_answers_and_a_warm_cache_serves_the_interior_pages(objects, db):  # noqa: F811
    path, image = db
    dev = make_device()
    flash = _place(dev, image)
    con = sqlite3.connect(path)
    prog = objects["sqlite_lookup"]
    ids = [3, 500, 1201, 2400, 7]
    runs = [(image.params(), rowid, image.root) for rowid in ids]
    cold = programs.host_runs(dev, prog, flash, runs)
    warm_blocks = image.blocks_of_pages(image.interior_pages(), LBA, dev.lba_bytes)
    warm = programs.host_runs(dev, prog, flash, runs, warm=warm_blocks)
    for rowid, c, w in zip(ids, cold, warm):
        want = sq.row_of(con, rowid)
        assert c["fault"] is None and c["result"] == (sq.NOT_FOUND if want is None else c["result"])
        assert w["result"] == c["result"] and c["reads"] == w["reads"] == image.depth()
        # every interior page is cached (and leaves sharing a 4 KiB block with one: the page cache holds blocks)
        assert c["cache_hits"] == 0 and w["cache_hits"] >= image.depth() - 1
        assert w["latency_ns"] < c["latency_ns"]
    dev.close()


def test_reads_outside_the_ranges_or_over_budget_stop_the_run_and_leave_the_device_usable(objects):  # noqa: F811
    dev = make_device(read_budget=4)
    data = np.arange(8 * dev.lba_bytes, dtype=np.uint64).astype(np.uint8)
    dev.write(16, data)
    programs.load(dev, 1, objects["read_flash"])
    programs.activate(dev, 1)
    flash = [(16, 8)]
    assert programs.execute(dev, 1, [(0, 16)], flash=flash, cparam1=23, cparam2=4).value == 0
    assert (programs.read_slm(dev, 0, 16) == data[7 * dev.lba_bytes:7 * dev.lba_bytes + 16]).all()
    for lba, n, status, dw0 in [(24, 1, "LBA Out of Range", 6), (15, 1, "LBA Out of Range", 6),
                                (2**63, 1, "LBA Out of Range", 6), (16, 5, "Insufficient Resources", 7)]:
        with pytest.raises(ProgramError) as e:
            programs.execute(dev, 1, [(0, 16)], flash=flash, cparam1=lba, cparam2=n)
        assert (e.value.status, e.value.dw0) == (status, dw0), (lba, n, e.value)
    with pytest.raises(ProgramError) as e:  # no flash named at all
        programs.execute(dev, 1, [(0, 16)], cparam1=16)
    assert e.value.dw0 == 6
    for bad in ([(dev.lbas - 1, 2)], [(2**40, 1)]):  # past the namespace: refused before the run
        with pytest.raises(ProgramError) as e:
            programs.execute(dev, 1, [(0, 16)], flash=bad, cparam1=0)
        assert e.value.status == "Invalid Memory Range Set"
    with pytest.raises(InvalidArgument, match="at most 4 GiB"):
        programs.execute(dev, 1, [(0, 16)], flash=[(0, 1 << 20)], cparam1=0)
    for bad in ([(16, 0)], [(-1, 1)], [(16,)], "x", [("a", 1)]):
        with pytest.raises(InvalidArgument):
            programs.execute(dev, 1, [(0, 16)], flash=bad, cparam1=0)
    # the device still reads and writes, and the program still runs
    dev.write(0, np.full(dev.lba_bytes, 9, np.uint8))
    assert (dev.read(0, 1) == 9).all()
    assert programs.execute(dev, 1, [(0, 16)], flash=flash, cparam1=16).value == 0


def test_an_uncorrectable_page_is_an_error_the_program_sees(objects):  # noqa: F811
    dev = make_device()
    dev.write(16, np.full(8 * dev.lba_bytes, 3, np.uint8))
    dev.flush()
    programs.load(dev, 1, objects["read_flash"])
    programs.activate(dev, 1)
    dev.inject_errors(18, 100_000)
    r = programs.execute(dev, 1, [(0, 16)], flash=[(16, 8)], cparam1=18)
    assert r.value == 2**64 - 5, "NF_EIO"
    assert (programs.read_slm(dev, 0, 16) == 0).all(), "never the damaged data"
    assert dev.report().extensions["programs"]["stats"]["flash_read_errors"] == 1
    assert programs.execute(dev, 1, [(0, 16)], flash=[(16, 8)], cparam1=16).value == 0


def test_a_corrupt_page_pointer_is_reported_by_the_walk_and_the_device_stays_usable(dev, objects, db, tmp_path):  # noqa: F811
    path, image = db
    bad = bytearray(image.image)
    root = (image.root - 1) * image.page_size
    cell = struct.unpack_from(">H", bad, root + 12)[0]
    struct.pack_into(">I", bad, root + cell, 10**6)  # the first child: far past the file
    struct.pack_into(">I", bad, root + 8, image.root)  # the right-most child: the root itself (a loop)
    broken = sq.Database(bytes(bad), image.page_size, image.reserved, image.root, image.pages)
    flash = _place(dev, broken)
    programs.load(dev, 1, objects["sqlite_lookup"])
    programs.activate(dev, 1)
    assert _lookup(dev, broken, flash, 1)[0].value == sq.CORRUPT
    assert _lookup(dev, broken, flash, 10**9)[0].value == sq.CORRUPT, "a loop ends at the depth limit"
    flash_ok = _place(dev, image)
    assert _lookup(dev, image, flash_ok, 1)[1] is not None


def test_wrong_arguments_are_refused_by_name(dev, objects, tmp_path):  # noqa: F811
    prog = objects["read_flash"]
    for kwargs, says in [
        ({"flash": [], "runs": [(b"", 0, 0)]}, "flash"),
        ({"flash": [(0, 0)], "runs": [(b"", 0, 0)]}, "flash"),
        ({"flash": [(0, 1)], "runs": "x"}, "runs"),
        ({"flash": [(0, 1)], "runs": [(b"", 0)]}, "runs[0]"),
        ({"flash": [(0, 1)], "runs": [("p", 0, 0)]}, "runs[0] params"),
        ({"flash": [(0, 1)], "runs": [(b"", -1, 0)]}, "runs[0] cparam1"),
        ({"flash": [(0, 1)], "runs": [(b"", 0, 0)], "warm": "x"}, "warm"),
        ({"flash": [(0, 1)], "runs": [(b"", 0, 0)], "warm": [-3]}, "warm[0]"),
        ({"flash": [(dev.lbas, 1)], "runs": [(b"", 0, 0)]}, "namespace"),
    ]:
        with pytest.raises(InvalidArgument, match=r"(?i)" + says.replace("[", r"\[").replace("]", r"\]")):
            programs.host_runs(dev, prog, **kwargs)
    with pytest.raises(InvalidArgument, match="rows"):
        sq.build(tmp_path / "x.db", 0)
    with pytest.raises(InvalidArgument, match="page_size"):
        sq.build(tmp_path / "x.db", 10, page_size=1000)
    (tmp_path / "junk.db").write_bytes(b"not a database" * 20)
    with pytest.raises(InvalidArgument, match="not an SQLite database"):
        sq.open_image(tmp_path / "junk.db", 4096)
    with pytest.raises(InvalidArgument, match="range_set"):
        programs.execute(dev, 1, range_set=1, flash=[(0, 1)])
    # a host run whose program reads outside its range reports the fault, as in storage
    r = programs.host_runs(dev, prog, [(16, 1)], [(b"", 17, 1)])
    assert r[0]["fault"].startswith("read_outside") and r[0]["result"] is None


def test_a_sized_database_on_a_sparse_file_backed_image_gives_sqlite3s_answers(objects, tmp_path):  # noqa: F811
    # the GB path of `nearflash experiment programs sqlite --set gib=...` at 4 MiB: rows of a fixed size, the file
    # mapped (not read), the device an image on disk holding only the database's blocks, removed afterwards
    from nearflash.experiment import Options
    from nearflash.programs.experiments import sqlite as exp_sqlite

    path = tmp_path / "sized.db"
    sq.build(path, sq.rows_for(4 << 20), page_size=4096, text_bytes=sq.SIZED_TEXT_BYTES)
    assert 0.95 < path.stat().st_size / (4 << 20) < 1.1, "rows_for's 1 KiB of file per row"
    image_dir = tmp_path / "dev.img"
    with exp_sqlite._placed(path, "samsung-970pro", 1, image_dir) as (dev, image, wall):
        assert not isinstance(image.image, bytes), "a file of whole blocks is mapped"
        assert image.depth() == 3
        on_disk, apparent = wall["image_bytes_on_disk"], wall["image_bytes_apparent"]
        assert path.stat().st_size <= on_disk < path.stat().st_size + (64 << 20) < apparent / 100, "sparse"
        programs.load(dev, 1, objects["sqlite_lookup"])
        programs.activate(dev, 1)
        con = sqlite3.connect(path)
        flash = [(exp_sqlite.LBA, len(image.image) // dev.lba_bytes)]
        s = exp_sqlite._storage(dev, image, flash, [1, 2, 7, 3000, 4600, 10**6], con, check=True)
        assert s["wrong"] == 0 and s["reads"] == 6 * 3, "three levels read per lookup, found (1, 2, 3000, 4600) or not (7, 10**6)"
    assert not image_dir.exists()


@pytest.mark.parametrize("extra, says", [({"gib": "abc"}, "gib"), ({"gib": "-1"}, "gib"), ({"gib": "100"}, "gib"),
                                         ({"gib": "0"}, "gib")])
def test_the_sizes_of_the_gb_databases_are_checked(extra, says):
    from nearflash.experiment import Options
    from nearflash.programs.experiments import sqlite as exp_sqlite

    with pytest.raises(InvalidArgument, match=says):
        exp_sqlite.configs(Options(quick=True, extra=extra))
    sized = [c for c in exp_sqlite.configs(Options(quick=False)) if c.sized]
    assert [(c.page_size, c.rows) for c in sized] == [(8192, 2**20), (4096, 2**20), (8192, 3 * 2**20),
                                                      (4096, 3 * 2**20)]
    assert not [c for c in exp_sqlite.configs(Options(quick=True)) if c.sized]
    assert not [c for c in exp_sqlite.configs(Options(quick=False, extra={"gib": ""})) if c.sized]


def test_the_workdir_must_exist(tmp_path):
    from nearflash.experiment import Experiment, Options
    from nearflash.programs.experiments import sqlite as exp_sqlite

    exp = Experiment("programs", "sqlite", "t", tmp_path / "out")
    with pytest.raises(InvalidArgument, match="workdir"):
        exp_sqlite.run_sqlite(exp, Options(quick=True, extra={"workdir": str(tmp_path / "missing")}))
