"""SQLite databases for the in-storage B-tree programs (``examples/programs/sqlite_lookup.c``,
``sqlite_scan.c``): built by Python's ``sqlite3``, written to the device as a file's blocks (one contiguous
extent), and the pieces of the file format the host needs to check answers (records) and to warm its page cache
(which pages are interior). Format: https://sqlite.org/fileformat.html."""

from __future__ import annotations

import mmap
import os
import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from nearflash.errors import InvalidArgument

#: The example table: rowid alias, an integer column (the scan's predicate column, record column 1), text, real.
SCHEMA = "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL)"
#: Values the programs return for a missing row and for errors (sqlite_btree.h's NF_SQL_*).
NOT_FOUND, CORRUPT, IO, SMALL, UNSUPPORTED = (2**64 - 1 - k for k in range(5))
#: sqlite_scan's comparison operators, as its ``op`` parameter numbers them.
OPS = {"<": 0, "<=": 1, "=": 2, ">=": 3, ">": 4, "!=": 5}


def build(path: str | Path, rows: int, *, page_size: int = 4096, seed: int = 0, big_every: int = 0,
          big_bytes: int = 6000, text_bytes: int = 0) -> None:
    """Creates table ``t`` with ``rows`` rows (rowids 1..rows with gaps: every 7th rowid is skipped) at
    ``page_size``; every ``big_every``-th row (0: none) carries ``big_bytes`` of text, so that it spills onto
    overflow pages; the others' text is ``row <rowid>`` padded to ``text_bytes`` (rows of a fixed size, for
    databases of a given file size: :func:`rows_for`)."""
    if not isinstance(rows, int) or rows < 1:
        raise InvalidArgument(f"rows must be an int >= 1, got {rows!r}")
    if page_size not in [2**k for k in range(9, 17)]:
        raise InvalidArgument(f"page_size must be a power of two in 512..65536, got {page_size!r}")
    if not isinstance(text_bytes, int) or not 0 <= text_bytes <= 1 << 20:
        raise InvalidArgument(f"text_bytes must be an int in 0..{1 << 20}, got {text_bytes!r}")
    p = Path(path)
    if p.exists():
        p.unlink()
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(p)
    try:
        con.execute(f"PRAGMA page_size = {page_size}")
        con.execute("PRAGMA journal_mode = OFF")
        con.execute(SCHEMA)
        a = rng.integers(-(2**40), 2**40, rows)
        small = rng.integers(-100, 100, rows)
        c = rng.random(rows)

        def gen():
            for i in range(rows):
                rowid = i + 1 + i // 6  # skips every 7th rowid
                aval = int(a[i]) if i % 3 else int(small[i])  # 1..6-byte integers
                big = big_every and i % big_every == big_every - 1
                text = ("x" * big_bytes) if big else f"row {rowid}".ljust(text_bytes, ".")
                yield rowid, aval, text, float(c[i])

        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", gen())
        con.commit()
    finally:
        con.close()


#: Text per row of the sized databases (:func:`rows_for`): four rows fill a 4 KiB leaf page, eight an 8 KiB one.
SIZED_TEXT_BYTES = 900


def rows_for(nbytes: int) -> int:
    """Rows of ``SIZED_TEXT_BYTES`` text that make a database file of about ``nbytes`` (1 KiB of file per row at
    4 and 8 KiB pages, measured: 1.00-1.03 KiB)."""
    return max(1, nbytes // 1024)


@dataclass(frozen=True)
class Database:
    """A database file as the device holds it."""

    image: bytes | mmap.mmap  # the file, padded to whole blocks (a read-only map of a file that needs no padding)
    page_size: int
    reserved: int
    root: int  # table t's root page
    pages: int

    def params(self) -> bytes:
        """The programs' parameter prefix: page size and reserved bytes per page (what a host that opened the file
        knows from its header)."""
        return struct.pack("<II", self.page_size, self.reserved)

    def interior_pages(self) -> list[int]:
        """Page numbers of table t's interior pages (what a host keeps cached: the upper levels of the tree)."""
        out, todo = [], [self.root]
        while todo:
            n = todo.pop()
            pg = self.page(n)
            if pg[0] != 0x05:
                continue
            out.append(n)
            cells = struct.unpack_from(">H", pg, 3)[0]
            for i in range(cells):
                off = struct.unpack_from(">H", pg, 12 + 2 * i)[0]
                todo.append(struct.unpack_from(">I", pg, off)[0])
            todo.append(struct.unpack_from(">I", pg, 8)[0])
        return sorted(out)

    def depth(self) -> int:
        """Levels of table t's B-tree (a lone leaf root: 1)."""
        d, n = 1, self.root
        while (pg := self.page(n))[0] == 0x05:
            cells = struct.unpack_from(">H", pg, 3)[0]
            n = struct.unpack_from(">I", pg, struct.unpack_from(">H", pg, 12)[0] if cells else 8)[0]
            d += 1
        return d

    def page(self, n: int) -> bytes:
        return self.image[(n - 1) * self.page_size:n * self.page_size]

    def blocks_of_pages(self, pages: list[int], lba: int, lba_bytes: int) -> list[int]:
        """The device blocks holding ``pages`` of the file written at ``lba``."""
        out: set[int] = set()
        for n in pages:
            first = (n - 1) * self.page_size
            out.update(range(lba + first // lba_bytes, lba + (first + self.page_size - 1) // lba_bytes + 1))
        return sorted(out)


def open_image(path: str | Path, lba_bytes: int) -> Database:
    """Reads a database file, its header and table t's root page; the image is padded to ``lba_bytes``. A file of
    whole blocks is mapped, not read, so that a database of gigabytes is paged in only as it is used."""
    with open(path, "rb") as f:
        n = os.fstat(f.fileno()).st_size
        raw: bytes | mmap.mmap = (mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if n and n % lba_bytes == 0
                                  else f.read())
    if len(raw) < 100 or raw[:16] != b"SQLite format 3\x00":
        raise InvalidArgument(f"{str(path)!r} is not an SQLite database file")
    size = struct.unpack_from(">H", raw, 16)[0]
    size = 65536 if size == 1 else size
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT rootpage FROM sqlite_schema WHERE name = 't'").fetchone()
    finally:
        con.close()
    if row is None:
        raise InvalidArgument(f"{str(path)!r} has no table t")
    pad = (-len(raw)) % lba_bytes
    return Database(raw + bytes(pad) if pad else raw, size, raw[20], int(row[0]), len(raw) // size)


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = 0
    for k in range(8):
        v = (v << 7) | (b[i + k] & 0x7F)
        if not b[i + k] & 0x80:
            return v, i + k + 1
    return (v << 8) | b[i + 8], i + 9


def decode_record(payload: bytes) -> list[Any]:
    """The values of an SQLite record (https://sqlite.org/fileformat.html#record_format)."""
    hsize, i = _varint(payload, 0)
    types = []
    while i < hsize:
        t, i = _varint(payload, i)
        types.append(t)
    out: list[Any] = []
    at = hsize
    for t in types:
        if t == 0:
            out.append(None)
        elif 1 <= t <= 6:
            n = (1, 2, 3, 4, 6, 8)[t - 1]
            out.append(int.from_bytes(payload[at:at + n], "big", signed=True))
            at += n
        elif t == 7:
            out.append(struct.unpack_from(">d", payload, at)[0])
            at += 8
        elif t in (8, 9):
            out.append(t - 8)
        elif t >= 12:
            n = (t - 12) // 2
            body = payload[at:at + n]
            out.append(body.decode() if t % 2 else body)
            at += n
        else:
            raise InvalidArgument(f"record serial type {t} is reserved")
    return out


def row_of(con: sqlite3.Connection, rowid: int) -> Optional[list[Any]]:
    """Table t's row ``rowid`` as sqlite3 returns it, or None."""
    r = con.execute("SELECT * FROM t WHERE rowid = ?", (rowid,)).fetchone()
    return None if r is None else list(r)


def record_as_row(values: list[Any], rowid: int) -> list[Any]:
    """A record of table t as its row: the INTEGER PRIMARY KEY column is stored as NULL (it is the rowid)."""
    return [rowid] + values[1:]
