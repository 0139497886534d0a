"""Fixtures and helpers of the NBD export tests: a small device image, `nearflash serve` started as a user would (a
process on a Unix socket, stopped at the end), and unmodified Debian clients driven with time limits.

A module of its own rather than a conftest.py: other tests import names from tests/conftest.py as `conftest`, which a
second conftest module would shadow. Test modules import the fixtures they use from here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from nearflash import Device
from nearflash.errors import InvalidArgument
from nearflash.nbd import ServeOptions, command, launch
from nearflash.nbd.stats import status_path

#: A 51 MiB device (1 channel x 1 chip x 2 planes x 64 blocks x 32 pages of 16 KiB, 20% spare): whole-export copies
#: stay quick, and an ext4 image fits with room to spare.
NBD_DEVICE = {"channels": 1, "chips_per_channel": 1, "blocks_per_plane": 64, "pages_per_block": 32,
              "over_provisioning": "20%"}

#: Seconds any client may take; a hang fails the test instead of stalling the suite.
CLIENT_TIMEOUT_S = 60


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian: nbdkit libnbd-bin qemu-utils fio e2fsprogs; scripts/env.sh "
                    f"installs them)")
    if shutil.which("nbdkit") is None:
        pytest.skip("needs nbdkit (Debian: nbdkit)")
    try:
        launch.find_plugin()
    except InvalidArgument as e:
        pytest.skip(str(e))


def run(cmd: list[str], check: bool = True, **kw: Any) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, **kw)
    if check:
        assert p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p


def qemu_io(uri: str, *commands: str, check: bool = True, readonly: bool = False) -> subprocess.CompletedProcess:
    """qemu-io on the export; fails on any failed command or pattern mismatch."""
    cmd = ["qemu-io", "-f", "raw", *(["-r"] if readonly else [])]
    for c in commands:
        cmd += ["-c", c]
    p = run([*cmd, uri], check=check)
    if check:
        assert "failed" not in p.stdout + p.stderr, p.stdout + p.stderr  # "write failed", "verification failed"
    return p


def nearflash_cli(*args: str, **kw: Any) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "nearflash.cli", *args], check=False, **kw)


class Server:
    """`nearflash serve IMAGE --unix SOCK` (or `--port PORT`) as a process (it becomes nbdkit: the pid nbdkit writes
    is the process's), or the nbdkit command line `argv` itself (what `serve` would run, with plugin parameters that
    `serve` leaves at their defaults)."""

    def __init__(self, image: Path, sock: Optional[Path], *extra: str, port: Optional[int] = None,
                 argv: Optional[list[str]] = None):
        self.image, self.sock, self.port = image, sock, port
        where = ["--port", str(port)] if port is not None else ["--unix", str(sock)]
        cmd = argv or [sys.executable, "-m", "nearflash.cli", "serve", str(image), *where, *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        pidfile = image / "serve.pid"
        # nbdkit writes its pid file once it listens (a stale one may be there until `serve` removes it).
        while not (pidfile.exists() and pidfile.read_text().strip() == str(self.proc.pid)):
            if self.proc.poll() is not None:
                raise AssertionError(f"nearflash serve exited {self.proc.returncode}: {self.proc.stderr.read()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError("nearflash serve did not become ready in 30 s")
            time.sleep(0.05)

    @property
    def uri(self) -> str:
        return f"nbd://127.0.0.1:{self.port}" if self.port is not None else f"nbd+unix:///?socket={self.sock}"

    def status(self) -> dict[str, Any]:
        return json.loads(status_path(self.image).read_text())

    def wait_status(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 10) -> dict[str, Any]:
        """The status file once `pred` holds (the plugin rewrites it a few times a second)."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status()
            if pred(st):
                return st
            assert time.monotonic() < deadline, f"status never matched: {st['requests']}"
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM: nbdkit closes the image cleanly."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("nbdkit ignored SIGTERM for 20 s") from None
        self.proc.stdout.close()
        self.proc.stderr.close()

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=20)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def image(tmp_path: Path) -> Path:
    d = tmp_path / "img"
    Device(d, overrides=NBD_DEVICE).close()
    return d


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """Starts servers (stopped at the end); sockets live in a short directory (sun_path holds 108 bytes)."""
    need("nbdkit")
    servers: list[Server] = []
    sockdir = Path(tempfile.mkdtemp(prefix="nf-nbd-", dir="/tmp"))
    counter = iter(range(1000))

    def start(image: Path, *extra: str, sock: Optional[Path] = None, port: Optional[int] = None,
              plugin: Optional[tuple[dict[str, Any], list[str]]] = None) -> Server:
        """`plugin`: (ServeOptions' fields, plugin parameters): nbdkit started directly with the command `nearflash
        serve` runs for those options (on a Unix socket), and the parameters after it (`extra` then unused)."""
        sock = None if port else sock or sockdir / f"s{next(counter)}"
        argv = None
        if plugin is not None:
            assert not extra and port is None, "plugin= takes ServeOptions' fields instead of flags"
            fields, params = plugin
            argv = [*command(ServeOptions(str(image), unix=str(sock), **fields))[0], *params]
        s = Server(image, sock, *extra, port=port, argv=argv)
        servers.append(s)
        return s

    yield start
    for s in servers:
        if s.proc.returncode is None:
            s.stop()
    shutil.rmtree(sockdir, ignore_errors=True)


def snapshot(path: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file under `path`: shows that a refused command changed nothing."""
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}
