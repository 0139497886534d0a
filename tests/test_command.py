"""The public submission path: `Device.command` / `Queue.submit` send any command (a system's vendor commands
included) and return a typed `Completion`; a failed one raises `NvmeError` with its status, the device's reason,
the command and DW0 as fields. Host libraries use only this path: no private SDK call is reached from outside
`device.py`."""

import re
from pathlib import Path

import numpy as np
import pytest

import nearflash
from nearflash.device import Completion, sqe
from nearflash.errors import InvalidArgument, NvmeError

READ, WRITE = 0x02, 0x01


@pytest.fixture
def dev():
    with nearflash.Device(None, preset="cosmos-plus", channels=2, chips_per_channel=1, blocks_per_plane=64,
                          over_provisioning=25) as d:
        yield d


def rw(lba: int, nblocks: int) -> dict[str, int]:
    return {"cdw10": lba & 0xFFFFFFFF, "cdw11": lba >> 32, "cdw12": nblocks - 1}


def test_the_entry_carries_the_opcode_namespace_and_dwords_where_nvme_puts_them():
    e = sqe(0xC1, nsid=7, cdw2=2, cdw3=3, cdw10=10, cdw15=0xFFFFFFFF)
    assert len(e) == 64 and e[0] == 0xC1 and e[2:4] == b"\0\0"
    word = lambda i: int.from_bytes(e[4 * i : 4 * i + 4], "little")  # noqa: E731
    assert (word(1), word(2), word(3), word(10), word(15)) == (7, 2, 3, 10, 0xFFFFFFFF)
    assert all(word(i) == 0 for i in (4, 5, 6, 7, 8, 9, 11, 12, 13, 14))


def test_a_standard_command_through_the_public_path_moves_the_data(dev):
    data = np.arange(2 * dev.lba_bytes, dtype=np.uint64).view(np.uint8)[: 2 * dev.lba_bytes].copy()
    w = dev.command(WRITE, data, what="write 2 blocks", **rw(5, 2))
    assert isinstance(w, Completion) and w.ok and w.status == "Successful Completion" and w.reason is None
    assert w.latency_ns > 0 and w.data is None
    out = np.zeros(2 * dev.lba_bytes, dtype=np.uint8)
    r = dev.command(READ, out=out, **rw(5, 2))
    assert r.ok and r.data is out and np.array_equal(out, data)
    assert np.array_equal(dev.read(5, 2), data), "the same bytes the SDK's read sees"


def test_a_refused_command_raises_with_its_reason_as_a_field(dev):
    with pytest.raises(NvmeError) as e:
        dev.command(0xC7, what="probe", cdw10=1)
    assert (e.value.sct, e.value.sc, e.value.status) == (0, 0x01, "Invalid Command Opcode")
    assert e.value.command == "probe" and e.value.reason and "no attached extension claims it" in e.value.reason
    assert e.value.reason in str(e.value)
    # check=False hands the failed completion back instead.
    c = dev.command(0xC7, check=False, cdw10=1)
    assert not c.ok and c.reason == e.value.reason and c.what == "command 0xc7"
    with pytest.raises(NvmeError, match="LBA Out of Range") as e:
        dev.command(READ, out=np.zeros(dev.lba_bytes, dtype=np.uint8), **rw(dev.lbas, 1))
    assert e.value.reason


def test_a_ready_entry_is_sent_with_the_devices_command_id(dev):
    entry = bytearray(sqe(WRITE, **rw(0, 1)))
    entry[2:4] = (0xBEEF).to_bytes(2, "little")  # whatever the caller put there is replaced
    q = dev.queue(4)
    cid = q.submit(bytes(entry), np.full(dev.lba_bytes, 9, dtype=np.uint8))
    assert cid != 0xBEEF
    (c,) = q.wait_all()
    assert (c.cid, c.ok) == (cid, True) and c.what == "command 0x01"
    assert np.all(dev.read(0, 1) == 9)


def test_a_queues_command_keeps_the_completions_it_passes_for_the_next_reap(dev):
    q = dev.queue(8)
    read = q.submit_read(0, 1)
    c = q.command(WRITE, np.ones(dev.lba_bytes, dtype=np.uint8), **rw(3, 1))
    assert c.ok and q.in_flight == 1
    (r,) = q.wait_all() or q.reap()
    assert r.cid == read and q.in_flight == 0
    q.close()
    assert q.qid in [dev.queue(2, qid=q.qid).qid], "a closed queue's id can be used again"


def test_a_full_or_closed_queue_refuses_any_command():
    dev = nearflash.Device(None, preset="cosmos-plus", channels=2, chips_per_channel=1, blocks_per_plane=64,
                           over_provisioning=25, max_queues=2)
    q = dev.queue(2)
    q.submit(READ, **rw(0, 1))
    q.submit_read(1, 1)
    for call in (lambda: q.submit(READ, **rw(2, 1)), lambda: q.command(READ, **rw(2, 1))):
        with pytest.raises(InvalidArgument, match="queue 1 is full: 2 commands in flight, its depth 2"):
            call()
    assert q.in_flight == 2 and [c.what for c in q.wait_all()] == ["command 0x02", "read LBA 1"]
    q.close()
    for call in (lambda: q.submit(READ, **rw(0, 1)), lambda: q.command(READ, **rw(0, 1))):
        with pytest.raises(InvalidArgument, match="queue 1 is closed"):
            call()


def test_device_command_runs_on_a_borrowed_queue_when_no_id_is_free():
    dev = nearflash.Device(None, preset="cosmos-plus", channels=2, chips_per_channel=1, blocks_per_plane=64,
                           over_provisioning=25, max_queues=1)
    qid = dev.reserved_queue("lib", 8)  # the only id: the helpers borrow it while it is idle
    data = np.full(dev.lba_bytes, 9, dtype=np.uint8)
    assert dev.command(WRITE, data, **rw(4, 1)).ok and dev.sync_qid == qid
    got = dev.command(READ, out=np.zeros(dev.lba_bytes, np.uint8), **rw(4, 1))
    assert (got.data == 9).all() and got.latency_ns > 0
    with pytest.raises(NvmeError, match="vendor thing"):
        dev.command(0xC5, what="vendor thing")
    assert not dev.native.outstanding(qid), "nothing left on the borrowed queue"


def test_an_async_failure_carries_the_reason(dev):
    q = dev.queue(4)
    q.submit(0xC5, cdw10=3, what="vendor thing")
    (c,) = q.wait_all(raise_errors=False)
    assert not c.ok and c.what == "vendor thing" and "no attached extension claims it" in c.reason
    with pytest.raises(NvmeError) as e:
        c.check()
    assert (e.value.command, e.value.dw0) == ("vendor thing", c.dw0)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda d: d.command(0x100), "opcode"),
        (lambda d: d.command(-1), "opcode"),
        (lambda d: d.command("read"), "opcode"),
        (lambda d: d.command(READ, cdw16=1), "cdw16 is not a command dword"),
        (lambda d: d.command(READ, cdw10=2**32), "cdw10"),
        (lambda d: d.command(READ, cdw10=1.5), "cdw10"),
        (lambda d: d.command(READ, nsid=-1), "nsid"),
        (lambda d: d.command(b"\0" * 63), "64 bytes"),
        (lambda d: d.command(b"\0" * 64, cdw10=1), "not both"),
        (lambda d: d.command(WRITE, b"\0" * 4096, out=np.zeros(4096, np.uint8)), "not both"),
        (lambda d: d.command(READ, out=b"\0" * 4096), "out must be a writable numpy array"),
        (lambda d: d.command(READ, out=np.zeros(4096, np.uint8)[::2]), "contiguous"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(dev, call, match):
    before = dev.now_ns
    with pytest.raises(InvalidArgument, match=match):
        call(dev)
    assert dev.now_ns == before
    ro = np.zeros(4096, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(InvalidArgument, match="read-only"):
        dev.command(READ, out=ro, **rw(0, 1))


def test_no_host_library_reaches_the_sdks_private_calls():
    """Every system's host library and the tests go through the public path (`command`, `Queue.submit`, or
    `native` with `sync_qid` for a native host library): `_sync` and `._dev` stay inside device.py."""
    root = Path(__file__).resolve().parents[1]
    private = re.compile(r"\._sync\(|\b_sync_qid\b|\._dev\b|\._queues\b")
    offenders = []
    for f in sorted([*(root / "python" / "nearflash").rglob("*.py"), *(root / "tests").rglob("*.py")]):
        if f.name == "device.py" and f.parent.name == "nearflash" or f == Path(__file__).resolve():
            continue
        offenders += [f"{f.relative_to(root)}:{i}" for i, line in enumerate(f.read_text().splitlines(), 1) if private.search(line)]
    assert not offenders, f"private SDK calls outside device.py: {offenders}"
