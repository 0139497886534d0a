"""A write that fails because the host's storage is full (an in-memory device past its memory limit, or an image on a
full file system) raises HostIoError (errno ENOSPC), and the failed command does not stay in flight: flush, reads
and the queues go on (before, `flush()` said "queue 16 has commands in flight")."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nearflash
from nearflash import Device, HostIoError, InvalidArgument

TINY = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 32, "pages_per_block": 16,
        "over_provisioning": "30%"}


def fill(dev: Device) -> int:
    """Writes 16 blocks at a time from LBA 0 until the storage is full; returns the LBA that failed."""
    block = np.full(16 * dev.lba_bytes, 7, dtype=np.uint8)
    for lba in range(0, dev.lbas - 16, 16):
        try:
            dev.write(lba, block)
        except HostIoError as e:
            assert e.errno == errno.ENOSPC, e
            return lba
    pytest.fail("the storage never filled")


def test_after_a_full_memory_limit_flush_reads_and_queues_go_on():
    dev = Device(None, overrides=TINY, memory_limit=1 << 20)
    failed = fill(dev)
    assert 0 < failed <= 256, "1 MiB holds 256 blocks"
    dev.flush()  # not "queue N has commands in flight"
    assert (dev.read(0, failed) == 7).all(), "what was written before is intact"
    q = dev.queue(depth=4)
    with pytest.raises(HostIoError, match="full"):
        q.submit_write(failed, np.ones(16 * dev.lba_bytes, dtype=np.uint8))
    assert q.in_flight == 1, "the failed command completes, with Internal Error"
    (c,) = q.wait_all(raise_errors=False)
    assert not c.ok and c.sc == 0x06 and q.in_flight == 0
    dev.flush()
    with pytest.raises(HostIoError, match="full"):
        dev.write(failed, np.ones(16 * dev.lba_bytes, dtype=np.uint8))
    assert (dev.read(0, 16) == 7).all() and q.in_flight == 0
    dev.close()


def test_memory_limit_is_checked():
    for bad in (0, -1, "1MiB", 1.5):
        with pytest.raises(InvalidArgument, match="memory_limit"):
            Device(None, overrides=TINY, memory_limit=bad)


def test_memory_limit_is_for_in_memory_devices_only(tmp_path):
    with pytest.raises(InvalidArgument, match="memory_limit"):
        Device(tmp_path / "d", overrides=TINY, memory_limit=1 << 20)
    assert not (tmp_path / "d").exists()


FULL_DISK = textwrap.dedent("""
    import json, sys
    import numpy as np
    from nearflash import Device, HostIoError
    dev = Device(sys.argv[1], overrides=json.loads(sys.argv[2]))
    block = np.full(16 * dev.lba_bytes, 7, dtype=np.uint8)
    failed = None
    for lba in range(0, dev.lbas - 16, 16):
        try:
            dev.write(lba, block)
        except HostIoError as e:
            failed = (lba, e.errno)
            break
    dev.flush()
    ok = bool((dev.read(0, failed[0]) == 7).all())
    print(json.dumps({"failed": failed, "intact": ok}))
""")


def test_an_image_on_a_full_file_system(tmp_path):
    """A real ENOSPC: the image on a 600 KiB tmpfs mounted in a private mount namespace (as root, or as a user
    where unprivileged user namespaces are allowed); skipped where neither is."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1) to mount a small tmpfs in a private mount namespace")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    cmd = f"mount -t tmpfs -o size=600k tmpfs {mnt} && exec {sys.executable} {script} {mnt / 'dev'} '{json_overrides()}'"
    r = subprocess.run([unshare, "-rm", "sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    if "mount" in r.stderr and r.returncode != 0 and "Traceback" not in r.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    import json

    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["failed"][1] == errno.ENOSPC and out["failed"][0] > 0 and out["intact"]


def json_overrides() -> str:
    import json

    return json.dumps(TINY)
