"""Paper comparisons do not move with this machine's load (issue 22 section 1): one quick experiment per system runs
twice, the second time beside CPU-burning processes, and every comparison comes out identical - the metric, our
value and the paper column. A baseline a comparison divides by is counted work x a sourced per-operation cost,
never this machine's wall clock (which an experiment may print beside it as "this host", outside the comparisons).

Each case is an experiment whose comparisons divide by a host baseline, at sizes that keep the file near a minute.
A case still on the wall clock is marked ``xfail(strict=True)`` naming who makes it deterministic, so that the mark
fails (and must go) the moment it passes."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from nearflash.experiment import Experiment, Options, load_experiments

#: Processes spinning on the CPU during the second run (the CI machine has two cores).
BURNERS = 2


def _e2fsprogs() -> bool:
    return shutil.which("mke2fs") is not None and shutil.which("debugfs") is not None


#: (system, experiment, --set options): the experiment whose comparisons divide by a host baseline.
CASES = [
    pytest.param("issd", "costs", {}, id="issd-costs"),
    pytest.param("issd", "columnar", {"rows": "10000", "host_rows": "100000"}, id="issd-columnar"),
    pytest.param("recssd", "fig5", {}, id="recssd-fig5"),
    pytest.param("ndsearch", "fig13", {}, id="ndsearch-fig13",
                 marks=pytest.mark.xfail(strict=True, reason="CPU in-memory search timed on this machine (nds)")),
    # Fig. 11 is Cognitive's headline B-CPU comparison, but its quick run takes 15-20 s here (reading Hash-AlexNet's
    # weights through the device, deploying 300+ images); Table 5 divides by the same host hashing in about 1 s.
    pytest.param("cognitive", "table5", {}, id="cognitive-table5",
                 marks=pytest.mark.xfail(strict=True, reason="host int8 hashing timed on this machine (cog)")),
    pytest.param("nice", "fig14", {}, id="nice-fig14",
                 marks=pytest.mark.skipif(not _e2fsprogs(), reason="needs Debian's e2fsprogs (scripts/env.sh)")),
]


@contextmanager
def cpu_burners(n: int = BURNERS) -> Iterator[None]:
    """`n` processes spinning on the CPU for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def comparisons(system: str, name: str, extra: dict[str, Any], out: Path) -> dict[str, tuple]:
    """`{metric: (ours, paper)}` of one quick run (nothing written)."""
    import matplotlib.pyplot as plt

    title, run = load_experiments(system)[name]
    exp = Experiment(system, name, title, out)
    try:
        run(exp, Options(quick=True, seed=1, extra=dict(extra)))
    finally:
        plt.close("all")
    metrics = [c.metric for c in exp.comparisons]
    assert len(set(metrics)) == len(metrics), f"{system} {name}: a metric appears twice: {metrics}"
    return {c.metric: (c.ours, c.paper) for c in exp.comparisons}


def _same(a: Any, b: Any) -> bool:
    nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return a == b or nan


@pytest.mark.parametrize("system,name,extra", CASES)
def test_comparisons_do_not_move_with_load(tmp_path, system, name, extra):
    quiet = comparisons(system, name, extra, tmp_path / "quiet")
    assert quiet, f"{system} {name} made no comparisons"
    with cpu_burners():
        loaded = comparisons(system, name, extra, tmp_path / "loaded")
    assert list(loaded) == list(quiet), f"{system} {name}: different metrics under load"
    moved = {m: (quiet[m], loaded[m]) for m in quiet
             if not all(_same(x, y) for x, y in zip(quiet[m], loaded[m]))}
    assert not moved, f"{system} {name}: comparisons moved with the machine's load (quiet, loaded): {moved}"


def test_burners_really_load_the_machine():
    """The loaded run is loaded: the burners spin while the block runs and are gone after it."""
    import os
    import time

    def busy_ticks() -> int:
        with open("/proc/stat") as f:
            user, nice_, system_ = (int(v) for v in f.readline().split()[1:4])
        return user + nice_ + system_

    if not os.path.exists("/proc/stat"):
        pytest.skip("no /proc/stat on this system")
    with cpu_burners(1):
        t0, b0 = time.monotonic(), busy_ticks()
        time.sleep(0.5)
        busy = (busy_ticks() - b0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
    assert busy >= 0.5, f"one burner should keep at least half a core busy, measured {busy:.2f} cores"
