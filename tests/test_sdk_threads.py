"""One `Device` shared by threads: every call holds the device's lock, so each thread gets its own completions
(before the lock, two writers on the synchronous queue took each other's completions: "completion lost")."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from nearflash import Device

TINY = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 32, "pages_per_block": 16,
        "over_provisioning": "30%"}


@pytest.fixture
def fast_switching():
    """Threads switch every microsecond, so that a call is interrupted between its submit and its wait."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as e:  # noqa: BLE001 - collected and re-raised by the test
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_writes_and_reads_from_four_threads_each_see_their_own_data(fast_switching):
    dev = Device(None, overrides=TINY)

    def worker(t: int) -> None:
        for i in range(200):
            lba = 64 * t + i % 32
            block = np.full(dev.lba_bytes, 16 * t + i % 16, dtype=np.uint8)
            dev.write(lba, block)
            assert (dev.read(lba, 1) == block).all(), f"thread {t} read another thread's block at LBA {lba}"
            if i % 50 == 0:
                dev.flush()

    errors = run_threads(worker, 4)
    assert not errors, errors[0]
    dev.verify()
    assert dev.report().ops["write"].count == 800


def test_a_call_from_another_thread_waits_for_the_call_in_progress(monkeypatch):
    """Deterministic: another thread writes between this thread's submit and its wait (without the lock it took
    this thread's completion, and this one's wait found none)."""
    dev = Device(None, overrides=TINY)
    native, others = dev.native, []

    class SubmitThenLetAnotherThreadIn:
        def __getattr__(self, name):
            return getattr(native, name)

        def submit_write(self, *args):
            native.submit_write(*args)
            if not others:
                t = threading.Thread(target=dev.write, args=(7, np.full(dev.lba_bytes, 7, dtype=np.uint8)))
                others.append(t)
                t.start()
                t.join(timeout=0.3)  # with the lock it waits for this call; without it, it runs to its end now

    monkeypatch.setattr(dev, "_dev", SubmitThenLetAnotherThreadIn())  # white-box: the hook sits under the SDK
    dev.write(3, np.full(dev.lba_bytes, 3, dtype=np.uint8))
    others[0].join()
    monkeypatch.setattr(dev, "_dev", native)
    assert dev.read(3, 1)[0] == 3 and dev.read(7, 1)[0] == 7


def test_queues_of_different_threads_and_the_block_api_interleave_safely(fast_switching):
    dev = Device(None, overrides=TINY)
    dev.write(0, np.arange(64 * 4096, dtype=np.uint64).view(np.uint8)[: 64 * 4096])

    def worker(t: int) -> None:
        if t == 0:
            for i in range(100):
                dev.write(200 + i % 20, np.full(4096, i, dtype=np.uint8))
            return
        q = dev.queue(depth=8)
        out = np.empty(4096, dtype=np.uint8)
        for i in range(100):
            if q.in_flight == q.depth:
                q.wait()
            q.submit_read(i % 64, 1, out if i % 10 == 0 else None)
        assert len(q.wait_all()) > 0 and q.in_flight == 0
        q.close()

    errors = run_threads(worker, 3)
    assert not errors, errors[0]
    assert dev.read(200, 1)[0] == 80 and dev.read(219, 1)[0] == 99
