"""`nice.lookup_via`: the ext4 lookup through a read(lba) callable (the host library's open() over the device), equal
to the image lookup and debugfs, reading only the blocks the walk needs; hostile callables get clear errors."""

from __future__ import annotations

import os
import subprocess

import pytest

from nearflash import Device, nice
from nearflash._native import ImageError, InvalidArgument
from nearflash.nice.host import NiceHost

SMALL = {"channels": "2", "chips_per_channel": "1", "blocks_per_plane": "96", "pages_per_block": "64",
         "over_provisioning": "25", "write_buffer": "256KiB"}


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    d = root / "a" / "b" / "c"
    d.mkdir(parents=True)
    (d / "f.bin").write_bytes(os.urandom(20_000))
    for i in range(40):
        (root / f"filler{i}.dat").write_bytes(os.urandom(8192))
    os.chmod(d / "f.bin", 0o640)
    img = tmp_path_factory.mktemp("img") / "fs.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(root), str(img), "4M"], check=True)
    return img


def _reader(img):
    data = img.read_bytes()
    return lambda lba: data[lba * 4096 : (lba + 1) * 4096]


def test_equals_the_image_lookup_and_reads_only_the_walk(image):
    r = nice.lookup_via(_reader(image), "/a/b/c/f.bin")
    ino, levels, lbas = nice.lookup(image, "/a/b/c/f.bin")
    assert (r["inode"], r["levels"], r["lbas"], r["size"]) == (ino, levels, lbas, 20_000)
    assert r["mode"] & 0o777 == 0o640 and not r["is_dir"]
    total = os.path.getsize(image) // 4096
    assert 4 <= len(set(r["reads"])) <= 16 < total, r["reads"]


def test_hostile_callables_and_paths(image):
    with pytest.raises(InvalidArgument, match="callable"):
        nice.lookup_via(42, "/a")
    with pytest.raises(InvalidArgument, match="bytes"):
        nice.lookup_via(lambda lba: b"short", "/a/b/c/f.bin")

    def boom(lba):
        raise RuntimeError(f"disk gone at {lba}")

    with pytest.raises(RuntimeError, match="disk gone"):
        nice.lookup_via(boom, "/a/b/c/f.bin")
    with pytest.raises(ImageError):
        nice.lookup_via(lambda lba: bytes(4096), "/a")
    with pytest.raises(FileNotFoundError):
        nice.lookup_via(_reader(image), "/a/b/nope")
    with pytest.raises(InvalidArgument, match="sector_size"):
        nice.lookup_via(_reader(image), "/a", sector_size=1000)


def test_host_open_reads_a_few_blocks_not_the_file_system(image):
    dev = Device(preset="nice-zu7eg", overrides=SMALL)
    dev.attach("nice")
    dev.write(0, image.read_bytes())
    h = NiceHost(dev, uid=0)
    assert "read" not in dev.report().ops
    head = h.open("/a/b/c/f.bin")
    assert head == nice.lookup(image, "/a/b/c/f.bin")[2][0]
    assert 4 <= len(h.last_open_reads) <= 16, h.last_open_reads
    assert dev.report().op("read").count == len(h.last_open_reads), "one device Read per block the walk needs"
