"""`Device.write_zeroes`: NVMe Write Zeroes from the SDK (used by the NBD export for NBD_CMD_WRITE_ZEROES)."""

from __future__ import annotations

import numpy as np
import pytest

import nearflash
from nearflash.errors import InvalidArgument, NvmeError

DEV = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 64, "pages_per_block": 32,
       "over_provisioning": "20%"}


@pytest.fixture
def dev():
    with nearflash.Device(None, overrides=DEV) as d:
        yield d


def test_zeroes_and_deallocates(dev):
    data = np.full(4096 * 32, 0xA5, np.uint8)
    dev.write(0, data)
    used = dev.identify()["namespace_used_lbas"]
    dev.write_zeroes(4, 8)
    back = dev.read(0, 32).reshape(32, 4096)
    assert (back[4:12] == 0).all() and (back[:4] == 0xA5).all() and (back[12:] == 0xA5).all()
    dev.write_zeroes(16, 8, deallocate=True)
    assert (dev.read(16, 8) == 0).all()
    assert dev.identify()["namespace_used_lbas"] == used - 8, "deallocated blocks are no longer in use"
    writes = dev.report().ops["write"].count
    link = dev.report().link_bytes["to_device"]
    dev.write_zeroes(100, 64)
    r = dev.report()
    assert r.ops["write"].count == writes + 1, "one command"
    assert r.link_bytes["to_device"] - link < 4096, "no data crosses the link"


def test_more_than_one_command_worth():
    dev = nearflash.Device(None, overrides={**DEV, "blocks_per_plane": 256})
    n = (1 << 16) + 10  # NLB is 16 bits: two commands
    dev.write(n - 1, np.full(4096 * 2, 7, np.uint8))
    before = dev.report().ops["write"].count
    dev.write_zeroes(0, n)
    assert dev.report().ops["write"].count == before + 2
    assert (dev.read(n - 1, 2).reshape(2, 4096)[0] == 0).all() and (dev.read(n, 1) == 7).all()


@pytest.mark.parametrize("lba, n, err, msg", [
    (0, 0, InvalidArgument, r"nblocks 0 is out of range \(allowed >= 1\)"),
    (0, -3, InvalidArgument, r"nblocks -3 is out of range"),
    (-1, 4, InvalidArgument, r"lba -1 is out of range \(allowed >= 0\)"),
    (1.5, 4, InvalidArgument, "lba must be an integer"),
    (0, "4", InvalidArgument, "nblocks must be an integer"),
    (True, 4, InvalidArgument, "lba must be an integer"),
    (None, 4, InvalidArgument, "lba must be an integer"),
    ("END", 2, NvmeError, "LBA Out of Range"),
    ("END", 1 << 40, NvmeError, "LBA Out of Range"),
])
def test_wrong_arguments_change_nothing(dev, lba, n, err, msg):
    dev.write(dev.lbas - 1, np.full(4096, 9, np.uint8))
    before = dev.report().data["ops"]["write"]["count"]
    if lba == "END":
        lba = dev.lbas - 1
    with pytest.raises(err, match=msg):
        dev.write_zeroes(lba, n)
    assert (dev.read(dev.lbas - 1, 1) == 9).all()
    assert dev.report().data["ops"]["write"]["count"] == before
