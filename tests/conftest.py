"""Shared fixtures: small device configurations keep behaviour tests fast."""

from __future__ import annotations

import json
import os
from pathlib import Path

# scripts/test.sh runs as many pytest workers as the machine has cores: a BLAS or OpenMP thread pool per worker
# (numpy's OpenBLAS, FAISS) would oversubscribe the cores and spin. Measured on the MiniLM and Cognitive model files
# at load ~12: 15.3 CPU-s with the default pools, 8.5 with one thread each (docs/development.md). Before numpy loads.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import pytest  # noqa: E402

#: A 1 GiB cosmos-plus: 4 channels x 2 ways x 2 planes x 64 blocks x 32 pages of 16 KiB.
SMALL = {
    "channels": 4,
    "chips_per_channel": 2,
    "blocks_per_plane": 64,
    "pages_per_block": 32,
    "over_provisioning": "20%",
}

#: A tiny device that fills (and garbage-collects) within a second.
TINY = {
    "channels": 2,
    "chips_per_channel": 1,
    "blocks_per_plane": 16,
    "pages_per_block": 16,
    "over_provisioning": "35%",
    "gc_start_free_blocks": 3,
    "gc_stop_free_blocks": 3,
    "write_buffer": "256KiB",
}


#: Seconds each test file took in a measured run (written by scripts/test_file_seconds.py from `--durations=0`).
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def pytest_collection_modifyitems(config, items):
    """The longest test files first (files without a figure after them, in collection order; a file's tests keep
    their order). scripts/test.sh runs the files on two workers (`--dist loadfile --no-loadscope-reorder`), each
    taking the next file when it is free: longest first, no long file starts last and holds one worker while the
    other idles."""
    try:
        seconds = json.loads(FILE_SECONDS.read_text())
    except (OSError, ValueError):
        return
    items.sort(key=lambda item: -float(seconds.get(item.nodeid.split("::")[0], 0.0)))


@pytest.fixture
def small() -> dict:
    return dict(SMALL)


@pytest.fixture
def tiny() -> dict:
    return dict(TINY)


@pytest.fixture
def candle_trainer():
    """`candle_trainer(*args)`: the candle trainer's command (`trainer_command(*args)`), or a skip where it is not
    built; outside CI a cargo build would compile candle, so the test is skipped there too."""

    def command(*args: str) -> list[str]:
        from nearflash.cognitive.train import trainer_command

        try:
            cmd = trainer_command(*args)
        except Exception:
            pytest.skip("trainer binary not built")
        if cmd[0] == "cargo" and not os.environ.get("CI"):
            pytest.skip("trainer binary not built (cargo would compile candle)")
        return cmd

    return command
