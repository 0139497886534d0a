"""NICE's host library over a device with the firmware attached: a mke2fs image written through the block interface,
open with permission checks, NICE_Write / NICE_Read results equal to the host computing on the same file."""

from __future__ import annotations

import os
import subprocess
import zlib

import numpy as np
import pytest

from nearflash import Device
from nearflash._native import InvalidArgument
from nearflash.nice.host import NiceHost

SMALL = {"channels": "2", "chips_per_channel": "1", "blocks_per_plane": "96", "pages_per_block": "64",
         "over_provisioning": "25", "write_buffer": "256KiB"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    (root / "d").mkdir()
    emb = np.random.default_rng(5).integers(-3000, 3000, size=(800, 12), dtype=np.int16)
    wide = np.array([[2**31 - 1] * 4, [0] * 4, [-(2**31)] * 4], dtype="<i4")
    files = {"/d/data.bin": os.urandom(70_000), "/d/emb.bin": emb.tobytes(), "/d/wide.bin": wide.tobytes(),
             "/open.txt": b"anyone may read this\n", "/secret": b"owner only\n"}
    for p, d in files.items():
        (root / p.lstrip("/")).write_bytes(d)
    os.chmod(root / "secret", 0o600)
    img = tmp_path_factory.mktemp("img") / "fs.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(root), str(img), "4M"], check=True)
    dev = Device(preset="nice-zu7eg", overrides=SMALL)
    dev.attach("nice")
    dev.write(0, img.read_bytes())
    return dev, files


def test_in_storage_results_equal_the_host_on_the_same_file(setup):
    dev, files = setup
    h = NiceHost(dev, uid=0)
    for path, content in files.items():
        h.open(path, os.O_RDONLY)
        h.nice_write(path, "crc32")
        r = h.nice_read(path)
        assert (r["op"], r["size"], r["value"]) == (1, len(content), zlib.crc32(content)), path
        h.nice_write(path, "sum")
        assert h.nice_read(path)["value"] == sum(content), path


def test_hostile_calls_get_clear_errors(setup):
    dev, _ = setup
    h = NiceHost(dev, uid=1000)
    with pytest.raises(FileNotFoundError):
        h.open("/no/such/file")
    with pytest.raises(PermissionError, match="may not open"):
        h.open("/secret")
    with pytest.raises(InvalidArgument, match="flag"):
        h.open("/open.txt", 12345)
    with pytest.raises(InvalidArgument, match="absolute"):
        h.open("relative.txt")
    with pytest.raises(InvalidArgument, match="not open"):
        h.nice_read("/open.txt")
    h.open("/open.txt")
    with pytest.raises(InvalidArgument, match="op must be"):
        h.nice_write("/open.txt", "rm -rf")
    with pytest.raises(InvalidArgument, match="uid"):
        NiceHost(dev, uid=-1)


def test_nice_k_in_storage_equals_a_numpy_brute_force(setup):
    dev, files = setup
    emb = np.frombuffer(files["/d/emb.bin"], dtype="<i2").reshape(-1, 12).astype(np.int64)
    q = np.arange(12) * 250 - 1500
    h = NiceHost(dev)
    h.open("/d/emb.bin")
    h.nice_write("/d/emb.bin", "knn", query=q, k=20, bits=16)
    got = h.nice_read("/d/emb.bin")["neighbours"]
    d = ((emb - q) ** 2).sum(axis=1)
    order = np.lexsort((np.arange(len(d)), d))[:20]
    assert got[:, 1].tolist() == order.tolist() and got[:, 0].tolist() == d[order].tolist()
    h.nice_write("/d/emb.bin", "knn", query=q, k=np.int64(20), bits=16)  # a numpy integer is an integer
    assert h.nice_read("/d/emb.bin")["neighbours"].tolist() == got.tolist()
    for bad in [dict(query=[1.5] * 12, k=3), dict(query=q, k=0), dict(query=q, k=3, bits=8), dict(query=[2**40] * 12, k=3),
                dict(query=[40_000] * 12, k=3, bits=16), dict(query=q, k=True), dict(query=q, k=2.0)]:
        with pytest.raises(InvalidArgument):
            h.nice_write("/d/emb.bin", "knn", **bad)


def test_nice_k_in_storage_is_exact_on_full_range_int32(setup):
    dev, _ = setup
    h = NiceHost(dev)
    h.open("/d/wide.bin")
    h.nice_write("/d/wide.bin", "knn", query=[-(2**31)] * 4, k=3, bits=32)
    got = h.nice_read("/d/wide.bin")["neighbours"]
    # Distances 0, 2^64 and 4 (2^32 - 1)^2: the 64-bit result field saturates the last two, the ranking is exact.
    assert got[:, 1].tolist() == [2, 1, 0] and got[:, 0].tolist() == [0, 2**64 - 1, 2**64 - 1]


def test_a_batch_of_queries_in_one_pass_equals_numpy_per_query_and_bad_batches_are_refused(setup):
    from nearflash.errors import NvmeError

    dev, files = setup
    emb = np.frombuffer(files["/d/emb.bin"], dtype="<i2").reshape(-1, 12).astype(np.int64)
    qs = np.random.default_rng(9).integers(-3000, 3000, size=(40, 12))
    h = NiceHost(dev)
    h.open("/d/emb.bin")
    h.nice_write("/d/emb.bin", "knn", query=qs, k=25, bits=16)
    r = h.nice_read("/d/emb.bin")
    assert r["op"] == 7 and r["value"] == 40 and r["neighbours"].shape == (40, 25, 2)
    for q, got in zip(qs, r["neighbours"]):
        d = ((emb - q) ** 2).sum(axis=1)
        order = np.lexsort((np.arange(len(d)), d))[:25]
        assert got[:, 1].tolist() == order.tolist() and got[:, 0].tolist() == d[order].tolist()
    before = dev.read(0, 1024).tobytes()
    with pytest.raises(InvalidArgument, match="non-empty"):
        h.nice_write("/d/emb.bin", "knn", query=np.zeros((0, 12), dtype=np.int64), k=5)
    with pytest.raises(NvmeError, match="NICE_Write /d/emb.bin"):  # 257 > the unit's 256-query buffer
        h.nice_write("/d/emb.bin", "knn", query=np.zeros((257, 12), dtype=np.int64), k=5)
    assert dev.read(0, 1024).tobytes() == before, "the image is intact"
    # The batch bound before the refusals is still bound.
    assert h.nice_read("/d/emb.bin")["value"] == 40
