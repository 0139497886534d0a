"""Fixtures of the NBD export tests: a small device image and servers that are stopped at the end."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest
from nbd_helpers import NBD_DEVICE, Server, need

from nearflash import Device


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

    def start(image: Path, *extra: str, sock: Optional[Path] = None) -> Server:
        s = Server(image, sock or sockdir / f"s{next(counter)}", *extra)
        servers.append(s)
        return s

    yield start
    for s in servers:
        if s.proc.returncode is None:
            s.stop()
    shutil.rmtree(sockdir, ignore_errors=True)
