"""What the device experiments share: a Cosmos+ with a DLG area large enough for the database's graph, and the
Fashion-MNIST database and queries."""

from __future__ import annotations

from typing import Any

import numpy as np

from nearflash import Device
from nearflash.cognitive.data import fashion_mnist, load_model
from nearflash.cognitive.ssd import CognitiveSSD

#: Cosmos+ (8 channels x 8 ways, 16 KiB pages, 256-page blocks) shrunk to 32 blocks per plane so that an
#: in-memory device is quick to create; GC's reserve needs the higher over-provisioning at that size.
GEOMETRY = dict(blocks_per_plane=32, over_provisioning=25)


def device(db_items: int, **overrides: Any) -> Device:
    """A device whose reserved blocks hold the weights and a two-hop graph of `db_items` vertices (one page each),
    with room to spare: the data area is (2 r - 1) blocks of 256 pages per die, 64 dies."""
    dies, ppb = 64, 256
    r = 1
    while ((2 * r - 1) * ppb - 2 * ppb // 8) * dies < db_items * 1.2:
        r += 1
    return Device(None, "cosmos-plus", ext_reserved_blocks=r, **{**GEOMETRY, **overrides})


def deployed(db_n: int, layout: str = "two_hop", method: str = "B", seed: int = 1, params: Any = None, **overrides: Any):
    """(CognitiveSSD with the shipped model and `db_n` train images deployed, db labels); `params` overrides the
    extension's parameters by name, `overrides` the device's."""
    db, labels = fashion_mnist("train", db_n)
    ssd = CognitiveSSD(device(db_n, **overrides), method=method, **(params or {}))
    ssd.deploy(load_model(), db, layout=layout, calibration=min(1000, db_n), seed=seed)
    return ssd, labels


def read_ms(device: Device, nbytes: int, repeat: int = 8) -> float:
    """Latency (ms) of reading `nbytes` of stored data through the host's kernel stack on `device` (one read command
    of whole blocks; mean of `repeat` reads of different places)."""
    blocks = -(-int(nbytes) // device.lba_bytes)
    device.write(0, np.arange(repeat * blocks * device.lba_bytes, dtype=np.uint64).astype(np.uint8))
    device.flush()
    device.advance(10_000_000)
    ns = []
    for i in range(repeat):
        t0 = device.now_ns
        device.read(blocks * i, blocks)
        ns.append(device.now_ns - t0)
    return float(np.mean(ns)) / 1e6
