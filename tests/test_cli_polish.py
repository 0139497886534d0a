"""Everyday behaviour of the command line: a closed pipe ends it quietly, and progress is drawn for a person at a
terminal but never into JSON, pipes or CI logs."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from nearflash import progress

CLI = [sys.executable, "-m", "nearflash.cli"]
BENCH = ["bench", "--set", "channels=2", "--set", "chips_per_channel=1", "--size", "64m", "--ios", "4000",
         "--iodepth", "8"]


def test_reader_that_goes_away_ends_the_output_quietly():
    p = subprocess.Popen([*CLI, "presets", "--show", "cosmos-plus"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before the CLI has printed anything: its first write meets a closed pipe
    _, err = p.communicate(timeout=60)
    assert err == b"", err.decode()
    assert p.returncode == 141  # 128 + SIGPIPE, as `yes | head` reports


def test_pipe_into_head_shows_no_traceback():
    cmd = " ".join([*CLI, "presets", "--show", "cosmos-plus", "|", "head", "-n", "2"])
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 2
    assert p.stderr == "", p.stderr


def on_terminal(args: list[str], **env: str) -> str:
    """Runs the CLI with stdout and stderr on a pseudo-terminal; returns what a person would have seen."""
    master, slave = pty.openpty()
    e = {k: v for k, v in os.environ.items() if k not in ("CI", "NEARFLASH_NO_PROGRESS")}
    e.update(TERM="xterm-256color", COLUMNS="100", **env)
    p = subprocess.Popen([*CLI, *args], stdin=slave, stdout=slave, stderr=slave, env=e)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert p.wait(timeout=120) == 0
    return b"".join(chunks).decode(errors="replace")


def test_bench_and_preconditioning_show_progress_on_a_terminal():
    out = on_terminal([*BENCH, "--fill", "sequential"])
    assert "preconditioning" in out and "simulating" in out
    assert "simulated I/Os per second" in out


@pytest.mark.parametrize("extra, env", [(["--json"], {}), ([], {"CI": "true"}), ([], {"NEARFLASH_NO_PROGRESS": "1"})])
def test_no_progress_in_json_ci_or_when_disabled(extra, env):
    out = on_terminal([*BENCH, "--fill", "sequential", *extra], **env)
    assert "simulating" not in out and "preconditioning" not in out
    if extra:
        assert json.loads(out[out.index("{"):])["ios"] == 4000


def test_no_progress_when_stderr_is_not_a_terminal():
    p = subprocess.run([*CLI, *BENCH], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "simulating" not in p.stderr + p.stdout and p.stderr == ""


@pytest.mark.parametrize("value, shown", [("", True), ("0", True), ("false", True), ("true", False), ("1", False)])
def test_ci_variable(monkeypatch, value, shown):
    monkeypatch.setenv("CI", value)
    monkeypatch.delenv("NEARFLASH_NO_PROGRESS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert progress.enabled() is shown
    assert progress.enabled(json_output=True) is False
    with progress.bar("x", 10, json_output=True) as cb:
        assert cb is None
    assert list(progress.track(iter([1, 2, 3]), "t", 3, json_output=True)) == [1, 2, 3]


def test_sweep_shows_progress_on_a_terminal_only(tmp_path):
    pytest.importorskip("pandas", reason="sweeps need pandas (pip install 'nearflash[sweep]')")
    spec = tmp_path / "s.toml"
    spec.write_text('[base]\noverrides = { channels = 2, chips_per_channel = 1 }\n'
                    '[workload]\nios = 100\nsize = "8m"\n[grid]\niodepth = [2]\n')
    out = on_terminal(["sweep", str(spec), "--out", str(tmp_path / "a"), "--jobs", "1"])
    assert "sweep (0 done before)" in out and "1 point over" in out
    out = on_terminal(["sweep", str(spec), "--out", str(tmp_path / "b"), "--jobs", "1"], CI="true")
    assert "done before)" not in out and "1 point over" in out
