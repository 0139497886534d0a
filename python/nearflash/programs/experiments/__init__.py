"""Computational-programs experiments: ``nearflash experiment programs <name>|all [--quick] [--set key=value]``.

- ``compare``: each C example (Q6 filter over lineitem, grep, SparseLengthsSum) in storage and on the host path,
  on cosmos-plus and samsung-970pro: time, energy and their ratios, same answer on both paths.
- ``sqlite``: SQLite rowid lookups walking the table B-tree in storage vs the host path (cold, warm cache), depths
  2-4, answers checked against sqlite3 (``--set lookups=N,host_lookups=N``); the full run adds 1 and 3 GiB databases
  on sparse file-backed images (``--set gib=1,3``, ``gib=`` for none; ``workdir=DIR`` for where they are built).
- ``scaling``: Execute Program time against counted instructions as the work grows: the fitted ns per instruction
  beside the preset's CPI / clock (what the model promises).

``--set`` options: ``presets=cosmos-plus,samsung-970pro``, ``rows=<lineitem rows>``, ``text_kib=<grep input>``."""

from __future__ import annotations

from nearflash.programs.experiments import compare, scaling, sqlite

EXPERIMENTS = {
    "compare": ("C examples in storage vs on the host path (time, energy)", compare.run_compare),
    "scaling": ("Execute Program time vs counted instructions (fitted ns/instruction vs the preset's CPI/clock)",
                scaling.run_scaling),
    "sqlite": ("SQLite B-tree lookups in storage vs the host path, cold and warm (latency, throughput, energy)",
               sqlite.run_sqlite),
}
