"""The `Device` owns the I/O queue ids: its synchronous helpers' queue, its `Queue`s, queues reserved for native host
libraries and queues a native library made on its own never collide; a full queue says its real depth."""

from __future__ import annotations

import numpy as np
import pytest

from nearflash import Device, InvalidArgument

TINY = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 32, "pages_per_block": 16,
        "over_provisioning": "30%", "max_queues": 3}


def test_a_full_queue_reports_the_depth_it_was_made_with():
    dev = Device(None, overrides=TINY)
    q = dev.queue(depth=4)
    for i in range(4):
        q.submit_read(i, 1)
    with pytest.raises(InvalidArgument, match="queue 1 is full: 4 commands in flight, its depth 4"):
        q.submit_read(5, 1)
    with pytest.raises(InvalidArgument, match="full"):
        q.submit_write(5, np.zeros(4096, np.uint8))
    assert q.in_flight == 4 and len(q.wait_all()) == 4


def test_queue_ids_held_by_anyone_are_never_made_twice():
    dev = Device(None, overrides=TINY)
    dev.native.create_queue(1, 8)  # a native host library's own queue, unknown to the Device's bookkeeping
    dev.write(0, np.ones(4096, np.uint8))  # the synchronous helpers take the highest free id: 3
    assert dev.native.io_queue_ids() == [1, 3]
    q = dev.queue(depth=8)
    assert q.qid == 2, "not 1, which exists"
    assert dev.reserved_queue("lib", 16) == 3, "the idle helpers' queue is given up for it"
    assert dev.reserved_queue("lib", 99) == 3 and dev.native.queue_depth(3) == 16, "kept for its owner"
    assert (dev.read(0, 1) == 1).all(), "the helpers borrow an idle queue"
    with pytest.raises(InvalidArgument, match="qid 1 is in use by a queue a host library created"):
        dev.queue(depth=4, qid=1)
    with pytest.raises(InvalidArgument, match="qid 3 is in use by the queue reserved for lib"):
        dev.queue(depth=4, qid=3)
    q3 = dev.queue(depth=4)  # no id is free: the idle reservation is given up (made again when needed)
    assert q3.qid == 3 and dev.native.io_queue_ids() == [1, 2, 3]
    with pytest.raises(InvalidArgument, match="no I/O queue is free for lib: .* close one first"):
        dev.reserved_queue("lib", 16)
    q.close()
    assert dev.reserved_queue("lib", 16) == 2


def test_asking_for_the_helpers_queue_id_takes_it_over_and_closing_checks_in_flight():
    dev = Device(None, overrides=TINY)
    dev.flush()
    q = dev.queue(depth=4, qid=3)  # the helpers' id: given up, made again elsewhere
    dev.flush()
    assert dev.native.io_queue_ids() == [2, 3] and q.qid == 3
    q.submit_read(0, 1)
    with pytest.raises(InvalidArgument, match="1 commands in flight; wait_all"):
        q.close()
    q.wait_all()
    q.close()
    q.close()  # a second close does nothing
    assert dev.native.io_queue_ids() == [2]


@pytest.mark.parametrize("depth", [0, 1, -5, "16", 2.5, None])
def test_a_reservation_needs_an_int_depth_of_two_or_more(depth):
    dev = Device(None, overrides=TINY)
    with pytest.raises(InvalidArgument, match="depth"):
        dev.reserved_queue("lib", depth)
    assert dev.native.io_queue_ids() == [], "nothing made"
