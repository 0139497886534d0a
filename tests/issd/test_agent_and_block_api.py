"""The iSSD host library and the plain block API on one device: the `Device` owns the queue ids, so the Initiator's
queue (reserved for it) and the synchronous helpers' and user queues never collide (before, the Initiator made queue
1 behind the Device's back and the next `queue()` failed with "creating queue 1 ... Invalid Queue Identifier")."""

import numpy as np
import pytest

import nearflash
from nearflash import InvalidArgument
from nearflash.issd import agent, kernels, lineitem

PAGE = 8192


@pytest.fixture(scope="module")
def pages():
    return lineitem.generate(rows=3000, page_size=PAGE, comment_pool="compact")


def block(dev, v):
    return np.full(2 * dev.lba_bytes, v, dtype=np.uint8)


def test_block_api_and_queues_around_the_agent_on_a_one_queue_sata_device(pages):
    dev, setup = agent.device("iSSD-400", n_ch=4)
    assert setup["preset"] == "issd" and dev.native.queue_depth(2) is None, "SATA: one I/O queue"
    ext = agent.write_input(dev, 0, pages, PAGE)
    end = dev.lbas - 2
    dev.write(end, block(dev, 5))  # the synchronous helpers borrow the idle Initiator queue
    first = agent.run(dev, kernels.spec("scan"), ext, PAGE)
    assert (dev.read(end, 2) == 5).all()
    q = dev.queue(depth=8)  # takes the only id: the idle Initiator queue is given up
    q.submit_read(end, 2)
    assert len(q.wait_all()) == 1
    with pytest.raises(InvalidArgument, match="no I/O queue is free for the iSSD Initiator"):
        agent.run(dev, kernels.spec("scan"), ext, PAGE)
    q.close()
    assert agent.run(dev, kernels.spec("scan"), ext, PAGE)["encoded"] == first["encoded"]
    dev.flush()
    dev.close()


def test_block_api_queues_and_agent_interleave_on_a_many_queue_device(pages):
    with nearflash.Device(None, preset="cosmos-plus", channels=4, blocks_per_plane=128) as dev:
        dev.attach("issd")
        ext = agent.write_input(dev, 0, pages, PAGE)
        q = dev.queue(depth=16)  # queue 1 (the Initiator's is reserved apart)
        end = dev.lbas - 2
        dev.write(end, block(dev, 9))
        q.submit_read(end, 2)
        ins = agent.run(dev, kernels.spec("scan"), ext, PAGE)
        host = agent.run(dev, kernels.spec("scan"), ext, PAGE, "conventional")
        assert ins["encoded"] == host["encoded"] and len(q.wait_all()) == 1
        held = set(dev.native.io_queue_ids())
        assert len(held) == 3 and q.qid in held and dev.reserved_queue(agent.QUEUE_OWNER, 64) in held
        q2 = dev.queue(depth=4)
        assert q2.qid not in held
        with pytest.raises(InvalidArgument, match="in use by the queue reserved for the iSSD Initiator"):
            dev.queue(depth=4, qid=dev.reserved_queue(agent.QUEUE_OWNER, 64))
        assert (dev.read(end, 2) == 9).all()
