"""The walk-through's worked example: byte histograms counted in the device equal numpy's over the same blocks,
and bad requests are refused with the device's reason."""

import numpy as np
import pytest

from nearflash import Device, NvmeError
from nearflash.errors import InvalidArgument
from nearflash.histogram import Histogram, parameters


@pytest.fixture
def dev():
    with Device(None, "cosmos-plus", channels=2, chips_per_channel=1, blocks_per_plane=64, over_provisioning=25) as d:
        yield d


def test_counts_match_numpy(dev):
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, size=40 * dev.lba_bytes, dtype=np.uint8)
    data[: dev.lba_bytes] = 0xAB  # a skewed block, so that a swapped count shows
    dev.write(10, data)
    h = Histogram(dev)
    assert np.array_equal(h.counts(10, 40), np.bincount(data, minlength=256))
    assert np.array_equal(h.counts(12, 3), np.bincount(data[2 * dev.lba_bytes : 5 * dev.lba_bytes], minlength=256))
    assert h.last_latency_ns > 0
    never_written = h.counts(1000, 2)
    assert never_written[0] == 2 * dev.lba_bytes and never_written.sum() == never_written[0]


def test_the_firmware_books_its_work(dev):
    dev.write(0, np.ones(64 * dev.lba_bytes, dtype=np.uint8))
    h = Histogram(dev, instructions_per_byte=30)
    h.counts(0, 64)
    slow = h.last_latency_ns
    other = Device(None, "cosmos-plus", channels=2, chips_per_channel=1, blocks_per_plane=64, over_provisioning=25)
    other.write(0, np.ones(64 * dev.lba_bytes, dtype=np.uint8))
    fast = Histogram(other, instructions_per_byte=1)
    fast.counts(0, 64)
    assert slow > fast.last_latency_ns, "ten times the instructions per byte take longer"
    assert dev.report().data["utilisation"], "the read and the count are on the device's resources"


def test_bad_requests_are_refused_with_a_reason(dev):
    h = Histogram(dev, max_blocks=8)
    with pytest.raises(NvmeError) as e:
        h.counts(0, 9)
    assert e.value.status == "Invalid Field in Command" and "1 to 8" in e.value.reason
    with pytest.raises(NvmeError) as e:
        h.counts(dev.lbas - 1, 2)
    assert e.value.status == "LBA Out of Range" and e.value.reason
    for bad, what in [(-1, "lba"), (1.5, "lba"), (True, "lba")]:
        with pytest.raises(InvalidArgument, match=what):
            h.counts(bad, 1)
    with pytest.raises(InvalidArgument, match="nblocks"):
        h.counts(0, 0)
    with pytest.raises(NvmeError, match="Invalid Field"):
        dev.command(h.opcode, out=np.zeros(100, np.uint8), cdw12=1)  # a result buffer of the wrong size


def test_a_moved_opcode_is_the_one_the_library_sends(dev):
    dev.write(0, np.full(dev.lba_bytes, 7, dtype=np.uint8))
    h = Histogram(dev, opcode=0xA7)
    assert h.opcode == 0xA7 and h.counts(0, 1)[7] == dev.lba_bytes
    with pytest.raises(NvmeError, match="Invalid Command Opcode"):
        dev.command(0xA0, out=np.zeros(1024, np.uint8), cdw12=1)


def test_parameters_are_checked_at_attach(dev):
    assert {p[0] for p in parameters()} == {"opcode", "instructions_per_byte", "max_blocks"}
    for bad in [dict(max_blocks=0), dict(opcode=0x10), dict(colour=1)]:
        with pytest.raises(Exception, match=next(iter(bad))):
            Histogram(dev, **bad)
    assert "histogram" not in dev.report().extensions
