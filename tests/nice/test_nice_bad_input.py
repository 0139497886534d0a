"""Hostile and damaged input for NICE, end to end: a caller who may not read a file, a file changed or removed
between open and NICE_Read, a superblock or inode the firmware finds damaged. Each gets a clear error; nothing
outside the file is processed and the image is left as the host wrote it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import zlib

import numpy as np
import pytest

from nearflash import Device, nice
from nearflash.errors import InvalidArgument, NvmeError
from nearflash.nice.host import NiceHost

SMALL = {"channels": "2", "chips_per_channel": "1", "blocks_per_plane": "96", "pages_per_block": "64",
         "over_provisioning": "25", "write_buffer": "256KiB"}
FILES = {"/d/data.bin": bytes(range(256)) * 100, "/other.txt": b"another file\n", "/secret": b"owner only\n"}


@pytest.fixture()
def fs(tmp_path):
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    for p, d in FILES.items():
        (root / p.lstrip("/")).write_bytes(d)
    os.chmod(root / "secret", 0o600)
    subprocess.run(["debugfs", "-V"], capture_output=True, check=True)
    img = tmp_path / "fs.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(root), str(img), "4M"], check=True)
    # No metadata cache: every NICE_Read reads the head page and the inode from flash.
    dev = Device(preset="nice-zu7eg", overrides=SMALL)
    dev.attach("nice", ftl_cache_pages=0)
    dev.write(0, img.read_bytes())
    return dev, img


def _digest(dev: Device, n: int) -> str:
    return hashlib.sha256(bytes(dev.read(0, n))).hexdigest()


def _inode_sector(img, path: str) -> tuple[int, int]:
    out = subprocess.run(["debugfs", "-R", f"imap {path}", str(img)], capture_output=True, text=True, check=True).stdout
    blk, off = out.split("located at block ")[1].split(", offset 0x")
    return int(blk), int(off.strip(), 16)


def test_a_caller_who_may_not_read_the_file_is_refused_and_nothing_changes(fs):
    dev, img = fs
    n = os.path.getsize(img) // dev.lba_bytes
    before = _digest(dev, n)
    h = NiceHost(dev, uid=1000)
    with pytest.raises(PermissionError, match="may not open"):
        h.open("/secret")
    with pytest.raises(Exception, match="not open"):
        h.nice_read("/secret")
    assert dev.report().extensions["nice"]["invocations"] == 0, "nothing reached the device"
    assert _digest(dev, n) == before
    # The owner (root here) may.
    r = NiceHost(dev, uid=0)
    r.open("/secret")
    r.nice_write("/secret", "crc32")
    assert r.nice_read("/secret")["value"] == zlib.crc32(FILES["/secret"])


def test_a_file_rewritten_between_open_and_nice_read_is_processed_as_it_is_now(fs):
    dev, _ = fs
    h = NiceHost(dev)
    head = h.open("/d/data.bin")
    h.nice_write("/d/data.bin", "crc32")
    new = bytearray(FILES["/d/data.bin"])
    new[:4096] = b"\x5a" * 4096
    dev.write(head, np.frombuffer(bytes(new[:4096]), dtype=np.uint8))
    assert h.nice_read("/d/data.bin")["value"] == zlib.crc32(bytes(new)), "the page the host wrote after open"


def test_a_file_removed_between_open_and_nice_read_is_refused_clearly(fs):
    dev, img = fs
    h = NiceHost(dev)
    h.open("/d/data.bin")
    h.nice_write("/d/data.bin", "crc32")
    # The host frees the inode (mode 0, links 0), as unlink does, with an ordinary write of its sector.
    blk, off = _inode_sector(img, "/d/data.bin")
    sector = bytearray(dev.read(blk, 1).tobytes())
    sector[off : off + 2] = b"\0\0"
    sector[off + 0x1A : off + 0x1C] = b"\0\0"
    dev.write(blk, np.frombuffer(bytes(sector), dtype=np.uint8))
    with pytest.raises(NvmeError, match="changed or removed since open") as e:
        h.nice_read("/d/data.bin")
    assert e.value.status == "Invalid Field in Command"
    h.open("/other.txt")
    h.nice_write("/other.txt", "sum")
    assert h.nice_read("/other.txt")["value"] == sum(FILES["/other.txt"]), "other files are still served"


def test_a_damaged_superblock_stops_invocations_until_it_is_repaired_and_the_image_is_kept(fs):
    dev, img = fs
    h = NiceHost(dev)
    h.open("/other.txt")
    h.nice_write("/other.txt", "crc32")
    good = dev.read(0, 1).copy()
    bad = good.copy()
    bad[1024 + 56 : 1024 + 58] = 0  # the ext4 magic
    dev.write(0, bad)
    with pytest.raises(NvmeError, match="Invalid Field"):
        h.nice_read("/other.txt")
    n = os.path.getsize(img) // dev.lba_bytes
    whole = bytearray(img.read_bytes()[: n * dev.lba_bytes])
    whole[: dev.lba_bytes] = bad.tobytes()
    assert bytes(dev.read(0, n)) == bytes(whole), "the firmware changed nothing on the device"
    dev.write(0, good)
    h.nice_write("/other.txt", "crc32")
    assert h.nice_read("/other.txt")["value"] == zlib.crc32(FILES["/other.txt"]), "relearnt after the repair"


def test_an_unreadable_inode_sector_fails_the_read_and_returns_nothing(fs):
    dev, img = fs
    h = NiceHost(dev)
    h.open("/other.txt")
    h.nice_write("/other.txt", "crc32")
    blk, _ = _inode_sector(img, "/other.txt")
    dev.flush()
    dev.inject_errors(blk, 10_000)
    with pytest.raises(NvmeError, match="Unrecovered Read Error"):
        h.nice_read("/other.txt")
    # The host rewrites the sector (a fresh copy): served again.
    dev.write(blk, np.frombuffer(img.read_bytes()[blk * 4096 : (blk + 1) * 4096], dtype=np.uint8))
    assert h.nice_read("/other.txt")["value"] == zlib.crc32(FILES["/other.txt"])


@pytest.mark.parametrize("params", [{"ftl_cache_pages": -1}, {"ftl_cache_pages": "many"}, {"ftl_cache_pages": 2**21},
                                    {"cache": 4}, {"scheduling": "fifo"}, {"scheduling": 1}, {"shared_reads": "yes"},
                                    {"r5_cores": 3}, {"r5_clock": 0}, {"shared_buffer_pages": 1.5}])
def test_firmware_parameters_out_of_range_are_refused_and_nothing_is_attached(params):
    from nearflash.errors import ConfigError

    dev = Device(preset="nice-zu7eg", overrides=SMALL)
    lbas = dev.lbas
    with pytest.raises(ConfigError, match="nice"):
        dev.attach("nice", **params)
    assert dev.lbas == lbas and "nice" not in dev.report().extensions, "nothing attached, capacity not doubled"
    dev.attach("nice", ftl_cache_pages=0)
    assert dev.report().extensions["nice"]["capacity_lbas"] * 2 == dev.lbas


def test_a_refusal_carries_the_firmware_reason_from_the_error_log(fs):
    dev, _ = fs
    h = NiceHost(dev)
    h.open("/other.txt")
    with pytest.raises(NvmeError, match=r"NICE_Read /other.txt at hyper-address \d+: no NICE_Write bound an op to it "
                                        r"\(NICE_Read of the file at LBA \d+ before a NICE_Write bound an op to it\)") as e:
        h.nice_read("/other.txt")
    assert (e.value.sct, e.value.sc) == (0, 0x0C) and "before a NICE_Write" in e.value.reason
    # A NICE-K shape the file does not have: the firmware names the field and its allowed range.
    with pytest.raises(NvmeError, match=r"NICE-K over a file of 13 bytes: .*not a whole number of 6-byte vectors") as e:
        h.nice_write("/other.txt", "knn", query=np.zeros(3, dtype=np.int32), k=1)
        h.nice_read("/other.txt")
    entry = dev.error_log()[0]
    assert entry["reason"] in str(e.value) and entry["status"] == "Invalid Field in Command"
    h.nice_write("/other.txt", "sum")
    assert h.nice_read("/other.txt")["value"] == sum(FILES["/other.txt"]), "nothing changed by the refusals"


@pytest.mark.parametrize("call,what", [
    (lambda: nice.knn(np.zeros((5, 4), np.int16), np.zeros(4, np.int16), 1.5), "k must be an integer"),  # was k=1
    (lambda: nice.knn(np.zeros((5, 4), np.int16), np.zeros(4, np.int16), -1), "k -1 is out of range"),
    (lambda: nice.knn(np.zeros((5, 4), np.int16), np.zeros(4, np.int16), 4097), "k 4097 is out of range"),
    (lambda: nice.knn_timing(-1, 4, 16, 1), "n -1 is out of range"),
    (lambda: nice.knn_timing(10, -4, 16, 1), "dim -4 is out of range"),
    (lambda: nice.knn_timing(10, 4, 16, 0), "k 0 is out of range"),
    (lambda: nice.mobilenet_v2_timing(-1), "batch -1 is out of range"),
    (lambda: nice.lookup("/nonexistent.img", "/a", -1), "start_lba -1 is out of range"),
    (lambda: nice.lookup_via(lambda lba: bytes(4096), "/a", -3), "start_lba -3 is out of range"),
])
def test_module_functions_name_a_bad_count(call, what):
    """Negative counts were the binding's OverflowError, a fractional k silently truncated."""
    with pytest.raises(InvalidArgument, match=f"^{what}"):
        call()
