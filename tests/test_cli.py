"""The nearflash command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nearflash.cli import main, parse_offset, parse_size


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nearflash.cli", *args], capture_output=True, text=True, timeout=300)


def test_parse_size():
    assert parse_size("4k") == 4096 and parse_size("128K") == 131072 and parse_size("16g") == 16 << 30
    assert parse_size("1MiB") == 1 << 20 and parse_size("512") == 512 and parse_size("4KB") == 4096
    assert parse_size("1.5k") == 1536 and parse_size("1e3") == 1000 and parse_size(str(2**64 - 1)) == 2**64 - 1


@pytest.mark.parametrize("text, msg", [
    ("inf", "not a size"), ("-inf", "not a size"), ("nan", "not a size"), ("snan", "not a size"),
    ("1e400", "below 2^64"), (str(2**64), "below 2^64"), ("16777216t", "below 2^64"),
    ("0.3k", "307.2 bytes"), ("1.7", "whole number of bytes"), ("0", "positive"), ("-4k", "positive"),
])
def test_parse_size_refuses_what_is_no_byte_count(text, msg):
    """Found by the audit: 'inf' and '1e400' raised OverflowError out of argparse (a traceback), and fractions of a
    byte were cut silently ('1.7' -> 1 byte, '0.3k' -> 307)."""
    import argparse
    import re

    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(msg)):
        parse_size(text)


def test_an_offset_may_be_zero():
    """Found by the audit: `nearflash replay --offset 0` was refused ("size must be positive"), 0 being the default."""
    assert parse_offset("0") == 0 and parse_offset("0k") == 0 and parse_offset("4k") == 4096
    p = run("bench", "--bs", "inf", "--ios", "10")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "argument --bs: not a size" in p.stderr


def test_presets_show(capsys):
    assert main(["presets", "--show", "samsung-970pro"]) == 0
    out = capsys.readouterr().out
    assert "NVMeVirt" in out and "nand.t_prog" in out


def test_bench_json_reports_virtual_and_wall_figures():
    p = run("bench", "--set", "channels=4", "--set", "chips_per_channel=2", "--size", "256m", "--ios", "3000",
            "--iodepth", "16", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["ios"] == 3000 and r["sim_ios_per_s"] > 0
    assert r["report"]["ops"]["read"]["count"] == 3000


def test_bench_text_summary_and_writes():
    p = run("bench", "--set", "channels=4", "--size", "128m", "--rw", "randwrite", "--bs", "16k", "--ios", "2000")
    assert p.returncode == 0, p.stderr
    assert "write" in p.stdout and "simulated I/Os per second" in p.stdout


def test_bench_span_as_share_of_capacity_reaches_gc_steady_state():
    tiny = ["--set", "channels=2", "--set", "chips_per_channel=1", "--set", "blocks_per_plane=64",
            "--set", "pages_per_block=32", "--set", "over_provisioning=20%"]
    p = run("bench", *tiny, "--rw", "randwrite", "--fill", "random", "--size", "90%", "--ios", "20000", "--json")
    assert p.returncode == 0, p.stderr
    ftl = json.loads(p.stdout)["report"]["ftl"]
    assert ftl["gc_runs"] > 0 and ftl["waf"] > 1.5, ftl
    assert ftl["gc_stalls"] == 0, "incremental GC keeps pace at 90% fill"
    assert abs(ftl["occupancy"] - 0.9) < 0.02


@pytest.mark.parametrize("args, msg", [
    (["bench", "--set", "nope=1"], "unknown parameter"),
    (["bench", "--bs", "1000", "--ios", "10"], "not a multiple"),
    (["bench", "--size", "120%"], "share of the capacity"),
    (["bench", "--size", "x%"], "not a percentage"),
    (["bench", "--size", "4", "--ios", "10"], "holds no 4096 B block"),
    # found by the audit: --rwmixread was silently ignored unless --rw randrw
    (["bench", "--rw", "randread", "--rwmixread", "0.9", "--ios", "10"], "--rwmixread applies to --rw randrw"),
    # a duration beyond u64 nanoseconds was saturated and the reads it timed wrapped (reported at 43.7 us)
    (["bench", "--set", "nand.t_read=1e30s", "--ios", "10"], "above 1 day"),
    (["bench", "--set", "nand.page_size=1e20B", "--ios", "10"], "8 PiB"),
])
def test_errors_are_messages_not_tracebacks(args, msg):
    p = run(*args)
    assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr


def test_create_and_info(tmp_path):
    d = tmp_path / "img"
    p = run("create", str(d), "--set", "channels=2", "--precondition", "0.01")
    assert p.returncode == 0, p.stderr
    p = run("info", str(d), "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["identify"]["namespace_used_lbas"] > 0
    assert run("create", str(d)).returncode == 2
