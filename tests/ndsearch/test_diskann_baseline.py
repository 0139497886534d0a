"""CPU + SSD (DiskANN-style) baseline: the node layout written through the host I/O path reads back as
[vector | degree | neighbour ids]; the batch search's reads follow the host search's trace (a larger cache reads
less, a larger ef reads more); bad arguments are refused."""

import numpy as np
import pytest

from nearflash import Device, InvalidArgument
from nearflash.ndsearch import Index, diskann


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(3)
    base = rng.integers(0, 255, size=(600, 32)).astype(np.uint8)
    ix = Index(32, "l2", dtype="uint8", R=8, ef_construction=32)
    ix.add(base)
    dev = Device(None, preset="searssd", overrides=dict(channels=2, chips_per_channel=2, blocks_per_plane=32,
                                                        pages_per_block=16, page_size="4KiB", over_provisioning=40))
    npb = diskann.write_layout(ix, base, dev)
    return ix, base, dev, npb, rng.integers(0, 255, size=(20, 32)).astype(np.uint8)


def test_layout_reads_back_as_nodes(setup):
    ix, base, dev, npb, _ = setup
    nb = diskann.node_bytes(ix)
    assert npb == 4096 // nb
    offsets, nbrs = ix.layer0_csr()
    for v in (0, 7, 599):
        block = dev.read(v // npb, 1)
        node = block[(v % npb) * nb: (v % npb + 1) * nb]
        assert np.array_equal(node[:32], base[v])
        deg = int(node[32:36].view("<u4")[0])
        assert deg == offsets[v + 1] - offsets[v]
        assert np.array_equal(node[36: 36 + 4 * deg].view("<u4"), nbrs[offsets[v]: offsets[v + 1]])


def test_reads_follow_the_trace(setup):
    ix, _, dev, npb, q = setup
    none = diskann.search_io(ix, q, 10, 16, dev, npb, cache_nodes=0)
    cached = diskann.search_io(ix, q, 10, 16, dev, npb, cache_nodes=200)
    wider = diskann.search_io(ix, q, 10, 48, dev, npb, cache_nodes=0)
    assert none.reads > cached.reads and cached.cache_hits > 0 and none.cache_hits == 0
    assert wider.reads > none.reads and none.io_ns > 0 and none.rounds > 2


def test_bad_arguments(setup):
    ix, base, dev, npb, q = setup
    with pytest.raises(InvalidArgument, match="rows"):
        diskann.write_layout(ix, base[:10], dev)
    with pytest.raises(InvalidArgument, match="larger than the index"):
        diskann.search_io(ix, q, 601, 16, dev, npb, 0)
    with pytest.raises(InvalidArgument):
        diskann.search_io(ix, q, 10, 16, dev, npb, -1)
    with pytest.raises(InvalidArgument, match="columns"):
        diskann.search_io(ix, q[:, :8], 10, 16, dev, npb, 0)
