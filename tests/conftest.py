"""Shared fixtures: small device configurations keep behaviour tests fast."""

from __future__ import annotations

import pytest

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


@pytest.fixture
def small() -> dict:
    return dict(SMALL)


@pytest.fixture
def tiny() -> dict:
    return dict(TINY)
