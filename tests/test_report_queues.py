"""Reports per I/O queue and per queue priority, suspension's figures, and submission-queue arbitration set from the
command line."""

from __future__ import annotations

import subprocess
import sys

from nearflash import Device

TINY = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 32, "pages_per_block": 16,
        "over_provisioning": "30%"}


def test_the_report_splits_commands_per_queue_and_per_priority():
    dev = Device(None, overrides=TINY, materialise=False)
    high, low1, low2 = dev.queue(16, priority="high"), dev.queue(16, priority="low"), dev.queue(16, priority="low")
    for q, first in [(high, 0), (low1, 100), (low2, 200)]:
        for i in range(6 if q is high else 4):
            q.submit_read(first + i, 1)
    for q in (high, low1, low2):
        q.wait_all()
    r = dev.report()
    qs = r.queues
    assert {q: v["priority"] for q, v in qs.items()} == {high.qid: "high", low1.qid: "low", low2.qid: "low"}
    assert [qs[q.qid]["ops"]["read"].count for q in (high, low1, low2)] == [6, 4, 4]
    assert {p: ops["read"].count for p, ops in r.priorities.items()} == {"high": 6, "low": 8}
    merged = r.priorities["low"]["read"]
    assert merged.bytes == 8 * dev.lba_bytes and merged.p99_us >= min(qs[low1.qid]["ops"]["read"].p99_us,
                                                                       qs[low2.qid]["ops"]["read"].p99_us)
    text = r.summary()
    assert f"queue {high.qid} (high):" in text and "priority low:" in text
    assert "suspension" not in text, "nothing was suspended and suspension was not said to be on"
    assert "program suspension: 0 suspensions" in r.summary(suspension=True)
    assert r.suspension["program"] == {"suspensions": 0, "ops_suspended": 0, "suspended_ns": 0, "max_per_op": 0,
                                       "per_op": 0.0}


def test_bench_prints_per_queue_figures_and_suspension_when_on():
    tiny = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    p = subprocess.run([sys.executable, "-m", "nearflash.cli", "bench", *tiny, "--rw", "randrw", "--rwmixread", "0.7",
                        "--numjobs", "2", "--iodepth", "8", "--fill", "random", "--size", "90%", "--ios", "3000",
                        "--set", "nand.suspend=program", "--set", "nvme.arbitration=weighted",
                        "--set", "nvme.fetch_window=4"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "queue 1 (medium):" in p.stdout and "queue 2 (medium):" in p.stdout
    assert "program suspension:" in p.stdout and "erase suspension:" in p.stdout
    bad = subprocess.run([sys.executable, "-m", "nearflash.cli", "bench", "--set", "nvme.arbitration=wrr",
                          "--ios", "10"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "round_robin or weighted" in bad.stderr
