"""Fixtures for the computational-programs tests (imported by each test module: a conftest.py here would shadow the
suite's top-level `conftest` module that other directories import): the C examples compiled once per session by clang
(skipped with the reason where clang is missing), and small devices with the ``programs`` extension attached."""

from __future__ import annotations

import pytest

import nearflash
from nearflash import programs


def _compiled(name: str) -> bytes:
    if not programs.have_clang():
        pytest.skip("clang is not installed (apt-get install clang): the C examples cannot be compiled")
    return programs.example(name)


@pytest.fixture(scope="session")
def objects() -> dict[str, bytes]:
    if not programs.have_clang():
        pytest.skip("clang is not installed (apt-get install clang): the C examples cannot be compiled")
    return {name: programs.example(name) for name in programs.EXAMPLES}


def make_device(preset: str = "cosmos-plus", **params):
    dev = nearflash.Device(None, preset=preset, seed=3)
    dev.attach("programs", **params)
    return dev


@pytest.fixture
def dev():
    d = make_device()
    yield d
    d.close()
