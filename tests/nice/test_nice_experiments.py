"""`nearflash experiment nice ...`: each experiment's quick run writes JSON + Markdown + PNG with our numbers beside
the paper's, and the measured shapes hold (NICE locates in at most two flash reads at every depth while FSR-ISC's
reads grow with the depth; every NICE-K answer equals numpy, checked inside the experiment)."""

from __future__ import annotations

import json
import shutil

import pytest

from nearflash.experiment import Experiment, Options
from nearflash.nice.experiments import EXPERIMENTS

pytestmark = pytest.mark.skipif(shutil.which("mke2fs") is None or shutil.which("debugfs") is None,
                                reason="needs Debian's e2fsprogs (scripts/env.sh installs it)")


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiments_write_json_markdown_and_png(tmp_path, name):
    title, run = EXPERIMENTS[name]
    exp = Experiment("nice", name, title, tmp_path)
    run(exp, Options(quick=True, seed=1))
    paths = exp.write()
    assert paths["json"].exists() and paths["markdown"].exists() and paths[name].stat().st_size > 1000
    data = json.loads(paths["json"].read_text())
    assert data["comparisons"] and all(c["ours"] is not None for c in data["comparisons"])
    assert "paper" in paths["markdown"].read_text()


def test_fig12_nice_needs_two_reads_at_any_depth_and_fsr_one_more_per_level(tmp_path):
    title, run = EXPERIMENTS["fig12"]
    exp = Experiment("nice", "fig12", title, tmp_path)
    run(exp, Options(quick=True, seed=1, extra={"depths": "1,4,12"}))
    pts = exp.data["points"]
    assert [pts[f"miss/{d}"]["nice_flash_reads"] for d in (1, 4, 12)] == [2, 2, 2]
    assert [pts[f"hit/{d}"]["nice_flash_reads"] for d in (1, 4, 12)] == [0, 0, 0]
    fsr = [pts[f"miss/{d}"]["fsr_flash_reads"] for d in (1, 4, 12)]
    assert fsr[0] < fsr[1] < fsr[2] and fsr[2] >= 12, fsr
    for d in (4, 12):
        miss, hit = pts[f"miss/{d}"], pts[f"hit/{d}"]
        assert miss["nice_ns"] < miss["fsr_ns"] and miss["nice_ns"] < miss["host_ns"], (d, miss)
        assert hit["nice_ns"] < hit["fsr_ns"], (d, hit)
    assert pts["miss/12"]["fsr_ns"] / pts["miss/12"]["nice_ns"] > pts["miss/4"]["fsr_ns"] / pts["miss/4"]["nice_ns"]


def test_fig13_polling_firmware_loses_ordinary_throughput_that_coroutines_keep(tmp_path):
    title, run = EXPERIMENTS["fig13"]
    exp = Experiment("nice", "fig13", title, tmp_path)
    run(exp, Options(quick=True, seed=1, extra={"isc_iops": "0,8000", "bench_mib": "16"}))
    pts = exp.data["points"]
    co0, co, po0, po = (pts[f"8T/{s}/{r}"] for s in ("coroutine", "polling") for r in (0, 8000))
    assert co0["mb_per_s"] == po0["mb_per_s"], "without ISC load the two firmwares serve reads alike"
    assert co["polling_ms"] == 0 and po["polling_ms"] > 0
    loss_co, loss_po = 1 - co["mb_per_s"] / co0["mb_per_s"], 1 - po["mb_per_s"] / po0["mb_per_s"]
    assert loss_po > loss_co + 0.2, (loss_co, loss_po)
    assert co["isc_done"] > 0 and co["isc_shared_sectors"] > 0, "ISC requests in flight together share NAND reads"
