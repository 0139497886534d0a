"""Host-path scan and TPC-H Q6 of nearflash's iSSD kernels against DuckDB, on the same lineitem rows with the same
predicates, measured in the same run (best of N wall-clock runs each, all cores on both sides).

    .venv/bin/python benches/issd_scan_duckdb.py [--sf 0.5] [--repeat 5]

Our side, two layouts of the same rows: the paper's row records (``kernels.run``: Map over 8 KiB pages of 150-byte
records on the rayon pool, then Reduce) and columnar pages (``columnar.run``: ``col_scan`` / ``col_filter_sum``
over only the named columns' pages, dense typed arrays, on the rayon pool). DuckDB's side: the same rows, decoded
into a native DuckDB table (columnar; loading is not timed), queried with SQL. All three answers are checked equal.
The ratio is ours / DuckDB's time-for-time (> 1: ours is faster). DuckDB is an optional dependency
(``pip install nearflash[peers]``); without it the benchmark says so and exits 0.

The row layout streams all 150 bytes of each row (152 with page headers) where DuckDB reads the 8-20 bytes of
the columns a query names; the columnar layout reads the same columns DuckDB does (without ``row_id``, which is
implicit in the row order). The script prints the bytes each side reads per row and this host's single-core
streaming roofline (numpy sum), measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from nearflash._native import issd as _issd
from nearflash.issd import columnar, kernels, lineitem

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roofline import roofline  # noqa: E402

PAGE = 8192
COLUMNS = ("l_partkey", "l_quantity", "l_shipdate", "l_discount", "l_extendedprice", "row_id")
SCAN_SQL = "SELECT l_quantity FROM lineitem WHERE l_partkey <= {t} ORDER BY row_id"
#: The columns each query makes DuckDB read (predicate, projection, order).
SCAN_COLUMNS = ("l_partkey", "l_quantity", "row_id")
Q6_COLUMNS = ("l_shipdate", "l_discount", "l_quantity", "l_extendedprice")
Q6_SQL = (
    "SELECT sum(l_extendedprice::HUGEINT * l_discount), count(*) FROM lineitem WHERE l_shipdate >= 8766 AND "
    "l_shipdate < 9131 AND l_discount BETWEEN 5 AND 7 AND l_quantity < 2400"
)


def best(fn, repeat: int) -> tuple[float, object]:
    t, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return t, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=0.5, help="TPC-H scale factor (SF 1: 6 M rows, 890 MB of pages)")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    try:
        import duckdb
    except ImportError:
        print("duckdb is not installed (pip install 'nearflash[peers]'): skipping the comparison")
        return 0
    records = lineitem.generate(scale_factor=a.sf, page_size=None, comment_pool="compact")
    pages = _issd.pack_records(records, lineitem.RECORD_SIZE, PAGE)
    table = columnar.from_records(records, PAGE)
    rows = lineitem.decode(pages, PAGE)
    n = len(rows)
    con = duckdb.connect()
    cols = {c: np.ascontiguousarray(rows[c]) for c in COLUMNS}
    con.register("src", cols)
    con.execute("CREATE TABLE lineitem AS SELECT * FROM src")
    partkey_max = round(200_000 * a.sf)
    threshold = round(0.01 * partkey_max)
    scan = kernels.scan_for_selectivity(0.01, partkey_max)
    q6 = kernels.spec("filter_sum")
    print(f"lineitem SF {a.sf}: {n:,} rows, {len(pages) / 1e6:.0f} MB of {PAGE} B pages; {os.cpu_count()} cores; duckdb {duckdb.__version__}")
    print(
        f"{'query':<6} {'layout':<9} {'ours s':>9} {'duckdb s':>9} {'ours Mrows/s':>13} {'duckdb Mrows/s':>15} "
        f"{'ours MB/s':>10} {'ours/duckdb':>12} {'B/row ours':>11} {'B/row duckdb':>13}"
    )
    ratios = {}
    for name, spec, sql, used in (
        ("scan", scan, SCAN_SQL.format(t=threshold), SCAN_COLUMNS),
        ("Q6", q6, Q6_SQL, Q6_COLUMNS),
    ):
        col_spec = columnar.columnar(spec, n)
        t_duck, duck = best(lambda: con.execute(sql).fetchall() if name == "Q6" else con.execute(sql).fetchnumpy(), a.repeat)
        duck_bytes = sum(cols[c].dtype.itemsize for c in used)
        for layout, run in (
            ("row", lambda: kernels.run(spec, pages, PAGE)),
            ("columnar", lambda: columnar.run(col_spec, table, PAGE)),
        ):
            t_ours, ours = best(run, a.repeat)
            if name == "scan":
                assert ours["data"] == duck["l_quantity"].astype("<i4").tobytes(), f"{layout} scan answers differ"
            else:
                assert (ours["sum"], ours["matched"]) == (int(duck[0][0]), duck[0][1]), f"{layout} Q6 answers differ"
            ratios[(name, layout)] = t_duck / t_ours
            print(
                f"{name:<6} {layout:<9} {t_ours:>9.4f} {t_duck:>9.4f} {n / t_ours / 1e6:>13.1f} {n / t_duck / 1e6:>15.1f} "
                f"{ours['input_bytes'] / t_ours / 1e6:>10.0f} {ratios[(name, layout)]:>12.2f} "
                f"{ours['input_bytes'] / n:>11.1f} {duck_bytes:>13}"
            )
    print("ours/duckdb > 1 means nearflash's host path is faster (same rows, same predicate, same answer)")
    print("ratios: " + ", ".join(f"{q} {l} {r:.2f}" for (q, l), r in ratios.items()))
    roof = roofline(a.repeat, 512)
    print(f"single-core streaming roofline here (numpy sum): {roof['sum_read_GBps']:.2f} GB/s; "
          f"{os.cpu_count()} cores on both sides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
