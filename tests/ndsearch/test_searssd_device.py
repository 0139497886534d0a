"""SearSSD firmware on an emulated device: ``Index.deploy(device)`` then ``search`` returns exactly the host
search's ids and distances (many seeds, both graph kinds, metrics, reorderings, batch sizes and speculation); bad
input raises a clear exception and leaves the device and its deployment intact."""

import numpy as np
import pytest

from nearflash import Device, InvalidArgument
from nearflash.errors import NearflashError
from nearflash.ndsearch import Index, deploy

SMALL = dict(channels=2, chips_per_channel=2, blocks_per_plane=32, pages_per_block=16, page_size="4KiB",
             over_provisioning=40, write_buffer="256KiB")


def make_device(reserved=4, attach=True, **params):
    dev = Device(None, preset="searssd", overrides={**SMALL, "ext_reserved_blocks": reserved})
    if attach:
        dev.attach("ndsearch", **params)
    return dev


def clustered(rng, n, dim):
    centres = rng.uniform(-4, 4, (8, dim))
    return (centres[np.arange(n) % 8] + rng.uniform(-1, 1, (n, dim))).astype(np.float32)


@pytest.mark.parametrize("seed", range(6))
def test_in_storage_search_equals_host_search(seed):
    rng = np.random.default_rng(seed)
    dim = 12
    kind = ("hnsw", "vamana")[seed % 2]
    metric = ("l2", "cosine", "ip")[seed % 3] if kind == "hnsw" else "l2"
    ix = Index(dim, metric, kind=kind, R=10, ef_construction=40, seed=seed)
    ix.add(clustered(rng, 400, dim))
    q = clustered(rng, 25, dim)
    dev = make_device(batch=5 + seed, speculate=(seed % 2) * 3)
    dep = ix.deploy(dev, reorder=("degree", "random", "none")[seed % 3], seed=seed)
    assert dep.vectors == 400
    for k, ef in ((10, 24), (1, 8)):
        hd, hi = ix.search(q, k, ef=ef)
        dd, di = dep.search(q, k, ef=ef)
        assert np.array_equal(di, hi) and np.array_equal(dd, hd), (seed, k, ef)
        assert dd.dtype == np.float32 and di.dtype == np.int64 and di.shape == (25, k)
    assert dep.last_latency_ns > 0 and dep.last_batches == -(-25 // (5 + seed))
    fw = dev.report().extensions["ndsearch"]["stats"]
    assert fw["search_page_commands"] > 0 and fw["queries"] == 50


@pytest.fixture(scope="module")
def deployed():
    rng = np.random.default_rng(7)
    ix = Index(16, "l2", R=8, ef_construction=32)
    ix.add(clustered(rng, 300, 16))
    dev = make_device(reserved=1)
    dep = deploy(ix, dev)
    q = clustered(rng, 10, 16)
    return ix, dev, dep, q, dep.search(q, 5, ef=16)


def test_bad_queries_are_refused_and_change_nothing(deployed):
    ix, dev, dep, q, (d0, i0) = deployed
    with pytest.raises(InvalidArgument, match="columns"):
        dep.search(q[:, :8], 5)
    with pytest.raises(InvalidArgument, match="2-D"):
        dep.search(q[0], 5)
    with pytest.raises(InvalidArgument, match="NaN"):
        bad = q.copy()
        bad[3, 2] = np.nan
        dep.search(bad, 5)
    dd, di = dep.search(q[:4], 302, ef=16)  # beyond the index: padded, as Index.search
    assert (di[:, 300:] == -1).all() and np.isinf(dd[:, 300:]).all()
    with pytest.raises(InvalidArgument):
        dep.search(q, 0)
    with pytest.raises(InvalidArgument):
        dep.search(q, 5, ef=0)
    with pytest.raises(InvalidArgument, match="real numbers"):
        dep.search(np.array([["a"] * 16]), 5)
    d, i = dep.search(q, 5, ef=16)
    assert np.array_equal(i, i0) and np.array_equal(d, d0)


def test_too_large_index_and_missing_extension(deployed):
    ix, dev, dep, q, (d0, i0) = deployed
    big = Index(64, "l2", R=8, ef_construction=16)
    big.add(np.random.default_rng(1).normal(size=(4200, 64)).astype(np.float32))
    with pytest.raises(InvalidArgument, match="ext_reserved_blocks"):
        big.deploy(dev)
    d, i = dep.search(q, 5, ef=16)  # the earlier deployment still answers
    assert np.array_equal(i, i0) and np.array_equal(d, d0)
    dev.write(0, np.arange(4096, dtype=np.uint8))
    assert np.array_equal(dev.read(0, 1), np.arange(4096, dtype=np.uint8))
    dev.verify()
    bare = make_device(attach=False)
    with pytest.raises(InvalidArgument, match="attach"):
        ix.deploy(bare)
    with pytest.raises(InvalidArgument, match="empty"):
        Index(16, "l2").deploy(dev)
    with pytest.raises(InvalidArgument, match="reorder"):
        ix.deploy(dev, reorder="sideways")
    with pytest.raises(InvalidArgument, match="Device"):
        ix.deploy("not a device")
    assert issubclass(InvalidArgument, NearflashError)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_integer_vectors_equal_host_search(dtype):
    rng = np.random.default_rng(11)
    lo, hi_ = (0, 255) if dtype == "uint8" else (-128, 127)
    x = rng.integers(lo, hi_, size=(350, 24)).astype(dtype)
    q = rng.integers(lo, hi_, size=(20, 24)).astype(dtype)
    ix = Index(24, "l2", dtype=dtype, R=8, ef_construction=32)
    ix.add(x)
    dep = ix.deploy(make_device(batch=8))
    hd, hi = ix.search(q, 10, ef=20)
    dd, di = dep.search(q, 10, ef=20)
    assert np.array_equal(di, hi) and np.array_equal(dd, hd)
    with pytest.raises(InvalidArgument, match="dtype"):
        dep.search(q.astype(np.float32), 10)
