"""A NICE handle whose file was deleted and replaced at the same inode number and head LBA: the firmware runs the op on
the new file, and the host library raises StaleHandleError instead of returning that file's answer (before, a
deleted file's handle returned the CRC of the new file). The image is changed with debugfs as the kernel would:
the new file gets a new i_generation."""

from __future__ import annotations

import errno
import shutil
import subprocess
import zlib

import pytest

from nearflash import Device
from nearflash.nice.host import NiceHost, StaleHandleError

pytestmark = pytest.mark.skipif(shutil.which("mke2fs") is None or shutil.which("debugfs") is None,
                                reason="needs e2fsprogs (mke2fs, debugfs): apt-get install e2fsprogs")

SMALL = {"channels": "2", "chips_per_channel": "1", "blocks_per_plane": "96", "pages_per_block": "64",
         "over_provisioning": "25", "write_buffer": "256KiB"}
OLD = b"the file open saw\n" * 300


def debugfs(img, cmd: str) -> str:
    return subprocess.run(["debugfs", "-R", cmd, str(img)], check=True, capture_output=True, text=True).stdout


def debugfs_write(img, *cmds: str) -> None:
    req = img.with_suffix(".cmds")
    req.write_text("\n".join(cmds) + "\n")
    subprocess.run(["debugfs", "-w", "-f", str(req), str(img)], check=True, capture_output=True)


def place(img) -> tuple[int, int]:
    """(inode, first block) of /a.txt or its replacement /c.txt."""
    name = "/c.txt" if "c.txt" in debugfs(img, "ls -l /") else "/a.txt"
    ino = int(debugfs(img, f"stat {name}").split("Inode:")[1].split()[0])
    return ino, int(debugfs(img, f"blocks {name}").split()[0])


@pytest.fixture
def replaced(tmp_path):
    """A device holding /a.txt, an open handle on it, and a function that replaces it with /c.txt (new content of
    `size` bytes, generation `generation`) at the same inode and head block and writes the image again."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_bytes(OLD)
    img = tmp_path / "fs.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(root), str(img), "4M"], check=True)
    dev = Device(preset="nice-zu7eg", overrides=SMALL)
    dev.attach("nice")
    dev.write(0, img.read_bytes())
    h = NiceHost(dev)
    h.open("/a.txt")
    before = place(img)

    def replace(content: bytes, generation: int) -> bytes:
        src = tmp_path / "new.txt"
        src.write_bytes(content)
        debugfs_write(img, "rm /a.txt", f"write {src} c.txt", f"sif /c.txt generation {generation}")
        assert place(img) == before, "debugfs reused the inode number and the head block"
        dev.write(0, img.read_bytes())
        return content

    return dev, h, replace


def test_the_handle_works_until_the_file_is_replaced(replaced):
    dev, h, replace = replaced
    h.nice_write("/a.txt", "crc32")
    r = h.nice_read("/a.txt")
    assert (r["value"], r["size"], r["generation"]) == (zlib.crc32(OLD), len(OLD), 0)
    new = replace(b"another user's file\n" * 200, generation=7)
    h.nice_write("/a.txt", "crc32")
    with pytest.raises(StaleHandleError) as e:
        h.nice_read("/a.txt")
    assert e.value.errno == errno.ESTALE and "generation 7" in str(e.value) and "open the file again" in str(e.value)
    fresh = NiceHost(dev)
    fresh.open("/c.txt")
    fresh.nice_write("/c.txt", "crc32")
    assert fresh.nice_read("/c.txt")["value"] == zlib.crc32(new)


def test_same_inode_same_size_new_generation_is_stale(replaced):
    _, h, replace = replaced
    replace(bytes(reversed(OLD)), generation=1)
    h.nice_write("/a.txt", "sum")
    with pytest.raises(StaleHandleError, match="generation 1"):
        h.nice_read("/a.txt")


def test_same_inode_and_generation_but_another_size_is_stale(replaced):
    _, h, replace = replaced
    replace(OLD[:1000], generation=0)  # a tool that sets no generation: the size still tells
    h.nice_write("/a.txt", "crc32")
    with pytest.raises(StaleHandleError, match="1000 bytes"):
        h.nice_read("/a.txt")
