"""NICE through the block export: a real ext4 image (mke2fs -d) copied in by an unmodified `nbdcopy`, then an
unmodified `qemu-io` invokes in-storage computing with an ordinary Write and Read at a hyper-address (LBA >= C):
the Read returns the firmware's result, equal to the host computing on the same file."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "nbd"))  # the NBD tests' fixtures module

from nbd_helpers import need, qemu_io, run
from nbd_helpers import image, serve  # noqa: F401  (fixtures)


def _ext4(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    files = {
        "/a/b/data.bin": bytes((i * 31 + 7) % 251 for i in range(50_000)),
        "/readme.txt": b"NICE reads this file in storage\n" * 40,
    }
    for p, d in files.items():
        (tree / p.lstrip("/")).write_bytes(d)
    img = tmp_path / "ext4.img"
    run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(tree), str(img), "8M"])
    return img, files


def _head_block(img: Path, path: str) -> int:
    out = subprocess.run(["debugfs", "-R", f"blocks {path}", str(img)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def _hexdump(text: str, n: int) -> bytes:
    """The first `n` bytes of a `qemu-io read -v` dump ("offset:  xx xx ...  ascii")."""
    out = bytearray()
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]{8}:\s+((?:[0-9a-f]{2} ){1,16})", line)
        if m:
            out += bytes(int(x, 16) for x in m.group(1).split())
        if len(out) >= n:
            break
    return bytes(out[:n])


def test_qemu_io_at_a_hyper_address_gets_the_in_storage_result(image, serve, tmp_path):
    need("nbdcopy", "qemu-io", "mke2fs", "debugfs")
    img, files = _ext4(tmp_path)
    s = serve(image, "--ext", "nice")
    st = s.status()
    assert st["extensions"] == ["nice"]
    lba_bytes = st["lba_bytes"]
    assert lba_bytes == 4096
    cap = st["lbas"] // 2  # the device advertises twice its capacity
    run(["nbdcopy", "--flush", str(img), s.uri])
    for path, content in files.items():
        hyper = (cap + _head_block(img, path)) * lba_bytes
        # NICE_Write: op 1 (CRC-32) as a fill pattern; NICE_Read: an ordinary read of one block there.
        p = qemu_io(s.uri, f"write -P 1 {hyper} 4k", f"read -v {hyper} 4k")
        op, size, _inode, value = struct.unpack("<IQIQ", _hexdump(p.stdout, 24))
        assert (op, size) == (1, len(content)), path
        assert value == zlib.crc32(content), f"{path}: the in-storage CRC equals the host's"
    # An invocation at a hyper-address that is no file's first block is refused, and the image is intact.
    bad = qemu_io(s.uri, f"read -v {(cap + 1) * lba_bytes} 4k", check=False)
    assert "failed" in bad.stdout + bad.stderr or bad.returncode != 0
    for path, content in files.items():  # ordinary reads below C see the file's own bytes
        p = qemu_io(s.uri, f"read -v {_head_block(img, path) * lba_bytes} 64")
        assert _hexdump(p.stdout, 64) == content[:64], path
