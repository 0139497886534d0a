"""Computational-programs experiments: ``nearflash experiment programs <name>|all [--quick] [--set key=value]``.

- ``compare``: each C example (Q6 filter over lineitem, grep, SparseLengthsSum) in storage and on the host path,
  on cosmos-plus and samsung-970pro: time, energy and their ratios, same answer on both paths.
- ``scaling``: Execute Program time against counted instructions as the work grows: the fitted ns per instruction
  beside the preset's CPI / clock (what the model promises).

``--set`` options: ``presets=cosmos-plus,samsung-970pro``, ``rows=<lineitem rows>``, ``text_kib=<grep input>``."""

from __future__ import annotations

from nearflash.programs.experiments import compare, scaling

EXPERIMENTS = {
    "compare": ("C examples in storage vs on the host path (time, energy)", compare.run_compare),
    "scaling": ("Execute Program time vs counted instructions (fitted ns/instruction vs the preset's CPI/clock)",
                scaling.run_scaling),
}
