"""The benchmarks' CPU-placement flags (`benches/nbd_fio.py --pin`, `benches/simspeed.py --cpu`) refuse what they
cannot do, naming the flag, before anything runs."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

BENCHES = Path(__file__).resolve().parent.parent / "benches"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    sys.path.insert(0, str(BENCHES))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCHES))
    return mod


@pytest.fixture
def nbd_fio(monkeypatch):
    mod = load("nbd_fio")
    monkeypatch.setattr(mod, "PIN", {"fio": [], "server": []})
    return mod


def test_pin_places_fio_and_the_servers_on_the_first_two_allowed_cpus(nbd_fio, monkeypatch):
    monkeypatch.setattr(nbd_fio.os, "sched_getaffinity", lambda pid: {5, 3, 9})
    monkeypatch.setattr(nbd_fio.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    assert nbd_fio.pin(True) == {"fio": 3, "server": 5}
    assert nbd_fio.PIN == {"fio": ["taskset", "-c", "3"], "server": ["taskset", "-c", "5"]}


@pytest.mark.parametrize("on", [None, False])
def test_pin_is_off_by_default_on_one_cpu_and_when_asked(nbd_fio, monkeypatch, on):
    monkeypatch.setattr(nbd_fio.os, "sched_getaffinity", lambda pid: {0} if on is None else {0, 1})
    assert nbd_fio.pin(on) is None
    assert nbd_fio.PIN == {"fio": [], "server": []}


def test_pin_refuses_one_cpu(nbd_fio, monkeypatch):
    monkeypatch.setattr(nbd_fio.os, "sched_getaffinity", lambda pid: {2})
    with pytest.raises(SystemExit, match=r"--pin needs two CPUs; this process may use 1 \(\[2\]\)"):
        nbd_fio.pin(True)
    assert nbd_fio.PIN == {"fio": [], "server": []}


def test_pin_refuses_a_machine_without_taskset(nbd_fio, monkeypatch):
    monkeypatch.setattr(nbd_fio.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(nbd_fio.shutil, "which", lambda tool: None)
    with pytest.raises(SystemExit, match="--pin needs taskset"):
        nbd_fio.pin(True)
    assert nbd_fio.pin(None) is None, "the default leaves an unpinnable machine unpinned"


@pytest.mark.parametrize("value, message", [("99", r"--cpu 99: this process may run on CPUs \["),
                                            ("-1", r"--cpu -1: this process may run on CPUs \["),
                                            ("one", "invalid int value: 'one'"), ("", "invalid int value")])
def test_simspeed_refuses_a_cpu_it_may_not_use(value, message, capsys, monkeypatch):
    simspeed = load("simspeed")
    placed = []
    monkeypatch.setattr(simspeed.os, "sched_setaffinity", lambda pid, cpus: placed.append(cpus))
    with pytest.raises(SystemExit) as e:
        simspeed.main(["--cpu", value, "--only", "nothing-matches"])
    assert e.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert placed == [], "nothing was pinned"


def test_simspeed_pins_to_an_allowed_cpu(monkeypatch, tmp_path):
    simspeed = load("simspeed")
    placed = []
    monkeypatch.setattr(simspeed.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(simspeed.os, "sched_setaffinity", lambda pid, cpus: placed.append(cpus))
    assert simspeed.main(["--cpu", "1", "--only", "nothing-matches", "--out", str(tmp_path)]) == 0
    assert placed == [{1}]
