"""Measures the reference host's costs once and prints them as the ``issd`` preset's ``[ext.reference_host]``
section (``nearflash.issd.reference_host``): what the iSSD experiments charge for the host path where a comparison
divides by it, so that no comparison moves with the load of the machine an experiment runs on.

Per kernel, on one core (the script re-runs itself with ``RAYON_NUM_THREADS=1``; DuckDB with ``threads = 1``):

* the ten Table 1 kernels (``nearflash.issd.characterise``): cycles per input byte, the best of ``--rounds``
  rounds of ``--repeat`` runs of the host path (``mode="chunked"``) over about ``--bytes``, timed in process CPU
  time (so that time other jobs hold the core does not count; caches and memory bandwidth stay shared) at the
  nominal clock of /proc/cpuinfo, or counted by perf_event_open where the machine has a PMU; instructions per byte
  counted by callgrind where valgrind is installed (exact, independent of the machine's speed);
* the columnar experiment's two queries (its "1%" scan and TPC-H Q6) over a ``--rows`` lineitem table, on row pages
  (``rows_scan``, ``rows_filter_sum``) and on columnar pages (``col_scan``, ``col_filter_sum``): cycles per byte of
  pages read;
* DuckDB running the columnar experiment's two queries on the same rows: cycles per table row.

Not a test; run it on a quiet machine and paste its output into ``presets/issd.toml`` (then rebuild: presets are
embedded)::

    .venv/bin/python benches/issd_reference_host.py [--rounds 3] [--repeat 7] [--bytes 40000000] [--rows 1000000]
                                                    [--no-ipb]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time

PAGE = 8192


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.+)", f.read())
        return m.group(1).strip() if m else platform.processor() or "unknown CPU"
    except OSError:
        return platform.processor() or "unknown CPU"


def cpu_time(fn, repeat: int) -> tuple[float, object]:
    """The least CPU time of the whole process (all its threads) over `repeat` calls of `fn`: on a shared machine
    the time other jobs hold the core is not counted, as a wall clock would (caches and memory stay shared)."""
    from nearflash.issd.experiments.columnar import best_time

    return best_time(fn, repeat, time.process_time)


def timed_round(repeat: int, nbytes: int, rows: int, hz: float, hw: bool, seed: int = 1) -> dict:
    """One round of every timed figure: cycles per byte (and, with counters, instructions per byte) of each
    kernel, DuckDB's cycles per row; `what` says over which input."""
    from nearflash._native import issd as _issd
    from nearflash.issd import columnar, kernels, lineitem
    from nearflash.issd.characterise import inputs
    from nearflash.issd.experiments import columnar as col_exp
    from nearflash.issd.experiments.costs import measure as measure_kernel

    out: dict = {"cpb": {}, "ipb": {}, "what": {}, "per_row": {}}
    for name, (spec, pages) in inputs(nbytes, seed).items():
        if hw:  # user-space cycles counted on the thread
            t, counts = measure_kernel(spec, pages, repeat, hw)
        else:
            t, counts = cpu_time(lambda: kernels.run(spec, pages, PAGE, mode="chunked"), repeat)[0], None
        out["cpb"][name] = counts["cycles"] / len(pages) if counts else t * hz / len(pages)
        out["what"][name] = f"the host path (chunked, one core) over {len(pages) / 1e6:.0f} MB of its Table 1 input"
        if counts:
            out["ipb"][name] = counts["instructions"] / len(pages)
    records = lineitem.generate(rows=rows, page_size=None, comment_pool="compact")
    pages = _issd.pack_records(records, lineitem.RECORD_SIZE, PAGE)
    table = columnar.from_records(records, PAGE)
    con, sql = col_exp.duckdb_lineitem(records, threads=1)
    if con is None:
        raise SystemExit("duckdb is not installed (pip install 'nearflash[peers]'): the reference needs it")
    per = f"pages of a {rows:,}-row lineitem table, one core, per byte of pages read"
    queries = (("scan 1%", kernels.spec("scan"), "scan"), ("Q6", kernels.spec("filter_sum"), "q6"))
    for query, row_spec, duck_key in queries:
        col_spec = columnar.columnar(row_spec, rows)
        t_row, r = cpu_time(lambda: kernels.run(row_spec, pages, PAGE, mode="chunked"), repeat)
        t_col, c = cpu_time(lambda: columnar.run(col_spec, table, PAGE), repeat)
        t_duck, _ = cpu_time(lambda: con.execute(sql[query]).fetchall(), repeat)
        if r["encoded"] != c["encoded"]:
            raise AssertionError(f"{query}: row and columnar answers differ")
        out["cpb"]["rows_" + row_spec["kernel"]] = t_row * hz / r["input_bytes"]
        out["what"]["rows_" + row_spec["kernel"]] = f"row {per}"
        out["cpb"][col_spec["kernel"]] = t_col * hz / c["input_bytes"]
        out["what"][col_spec["kernel"]] = f"columnar {per}"
        out["per_row"][duck_key] = t_duck * hz / rows
    return out


def measure(rounds: int, repeat: int, nbytes: int, rows: int, ipb: bool, seed: int = 1) -> dict:
    """The best of `rounds` timed rounds per figure (a shared machine is quiet at some moments), and the
    instruction counts (callgrind, once: they do not depend on the load)."""
    from nearflash.issd import counters
    from nearflash.issd.characterise import count_instructions, valgrind_available
    from nearflash.issd.experiments.costs import clock_hz

    hz, clock_src = clock_hz()
    hw = counters.available()
    out: dict = {"clock_hz": hz, "clock_source": clock_src, "counters": hw, "rounds": rounds, "rows": rows,
                 "load": [os.getloadavg()[0]]}
    for i in range(rounds):
        r = timed_round(repeat, nbytes, rows, hz, hw, seed)
        print(f"round {i + 1}: " + ", ".join(f"{k} {v:.3g}" for k, v in r["cpb"].items()) + " cycles/B; DuckDB "
              + ", ".join(f"{k} {v:.3g}" for k, v in r["per_row"].items()) + " cycles/row", file=sys.stderr)
        if i == 0:
            out.update(r)
        for key in ("cpb", "ipb", "per_row"):
            for k, v in r[key].items():
                out[key][k] = min(out[key][k], v)
    out["load"].append(os.getloadavg()[0])
    if ipb and not hw and valgrind_available():
        for name in [k for k in out["cpb"] if k in out["what"] and "Table 1" in out["what"][k]]:
            instructions, n = count_instructions(name, 1_000_000, seed)
            out["ipb"][name] = instructions / n
        out["ipb_method"] = "callgrind instruction counts, 1 MB per kernel"
    elif hw:
        out["ipb_method"] = "perf_event_open instruction counts"
    return out


def toml(m: dict, repeat: int) -> str:
    """The preset section, each figure with its unit and source (date, method, machine)."""
    day = datetime.date.today().isoformat()
    where = f"{_cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    best = f"best of {m['rounds']} rounds of {repeat} runs"
    timed = (f"counted by perf_event_open (user-space cycles), {best}" if m["counters"] else
             f"{best}, one thread, process CPU time (time other jobs held the core excluded) x the nominal clock")
    lines = [
        "[ext.reference_host]",
        f'machine = {{ value = "{where}", unit = "text", source = "the reference machine, measured {day} by '
        f'benches/issd_reference_host.py, load average {m["load"][0]:.1f} at the start and {m["load"][1]:.1f} at the '
        f'end of the timed rounds (a shared machine: the best of each figure counts)" }}',
        f'clock = {{ value = {m["clock_hz"] / 1e9:.4g}, unit = "GHz", source = "{m["clock_source"]} of the reference '
        f'machine on {day}: the stored cycles are seconds x this clock" }}',
    ]
    for k, v in m["cpb"].items():
        lines.append(f'{k}_cpb = {{ value = {v:.4g}, unit = "cycles/B", source = "measured {day} by '
                     f'benches/issd_reference_host.py on the reference machine: {timed}, {m["what"][k]}" }}')
    for k, v in m["ipb"].items():
        lines.append(f'{k}_ipb = {{ value = {v:.4g}, unit = "instructions/B", source = "counted {day} by '
                     f'benches/issd_reference_host.py: {m.get("ipb_method", "")} of the host path (chunked)" }}')
    for k, v in m["per_row"].items():
        lines.append(f'duckdb_{k}_cycles_per_row = {{ value = {v:.4g}, unit = "cycles", source = "measured {day} by '
                     f'benches/issd_reference_host.py on the reference machine: DuckDB (threads = 1) running the '
                     f'columnar experiment\'s {"1% scan" if k == "scan" else "Q6"} SQL on a {m["rows"]:,}-row lineitem '
                     f'table, {best}, process CPU time, per table row" }}')
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs per figure in a round (the best counts)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over every figure (the best counts)")
    ap.add_argument("--bytes", type=int, default=40_000_000, help="input of each Table 1 kernel")
    ap.add_argument("--rows", type=int, default=1_000_000, help="lineitem rows of the row / columnar / DuckDB costs")
    ap.add_argument("--no-ipb", action="store_true", help="skip the callgrind instruction counts (about a minute)")
    a = ap.parse_args(argv)
    if os.environ.get("RAYON_NUM_THREADS") != "1":  # one core: the pool is sized when the module loads
        env = {**os.environ, "RAYON_NUM_THREADS": "1"}
        return subprocess.run([sys.executable, os.path.abspath(__file__), *(argv or sys.argv[1:])], env=env).returncode
    m = measure(a.rounds, a.repeat, a.bytes, a.rows, not a.no_ipb)
    sys.stdout.write(toml(m, a.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
