"""NDSearch's paper comparisons do not move with this machine's load (issue 22 section 1), in the shape of
`tests/test_baselines_deterministic.py`: one quick Fig. 13 run (which divides by the CPU, the GPU and the CPU + SSD
baselines) twice, the second beside CPU-burning processes, and every comparison - metric, our value, the paper
column - comes out identical."""

from __future__ import annotations

import subprocess
import sys

import matplotlib.pyplot as plt

from nearflash.experiment import Experiment, Options
from nearflash.ndsearch.experiments import EXPERIMENTS


def _comparisons(tmp_path, name: str) -> dict[str, tuple]:
    title, run = EXPERIMENTS["fig13"]
    exp = Experiment("ndsearch", "fig13", title, tmp_path / name)
    try:
        run(exp, Options(quick=True, seed=1, extra={"n": "1500", "queries": "128"}))
    finally:
        plt.close("all")
    return {c.metric: (c.ours, c.paper, c.comparable, c.reference) for c in exp.comparisons}


def test_fig13_comparisons_do_not_move_with_load(tmp_path):
    quiet = _comparisons(tmp_path, "quiet")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = _comparisons(tmp_path, "loaded")
    finally:
        for p in burners:
            p.kill()
            p.wait()
    assert any("costed" in m for m in quiet), "the host baselines are among the comparisons"
    assert loaded == quiet, {m: (quiet[m], loaded.get(m)) for m in quiet if quiet[m] != loaded.get(m)}
