"""Hostile ids at the RecSSD API: float ids (which numpy would silently truncate) raise TypeError, ids outside a
table's rows InvalidArgument, in SLS calls, EmbeddingBag and static partitions; each names the argument and the
allowed range, and a refused call changes nothing."""

import numpy as np
import pytest

import nearflash
from nearflash import InvalidArgument
from nearflash.recssd import RecSSD, TableSpec

ROWS = 500


@pytest.fixture(scope="module")
def system():
    from conftest import SMALL

    dev = nearflash.Device(None, preset="cosmos-plus", stack="polled", **dict(SMALL))
    rng = np.random.default_rng(5)
    return RecSSD(dev, [rng.standard_normal((ROWS, 16), dtype=np.float32), TableSpec(200, 8, 4)])


@pytest.mark.parametrize("path", ["ndp", "baseline", "dram"])
@pytest.mark.parametrize("ids", [np.array([1.0, 2.0]), np.array([1.7, 2.2]), [1.5, 2], np.array([1, 2], np.float32)])
def test_float_indices_are_refused(system, path, ids):
    with pytest.raises(TypeError, match=r"indices.*integer"):
        system.sls(0, ids, [0], path)


def test_float_offsets_are_refused(system):
    with pytest.raises(TypeError, match=r"offsets.*integer"):
        system.sls(0, [1, 2], np.array([0.0]), "ndp")


@pytest.mark.parametrize("bad", [ROWS, ROWS + 7, 2**40])
def test_indices_past_the_table_are_refused_naming_the_range(system, bad):
    with pytest.raises(InvalidArgument, match=rf"indices.*{bad}.*0\.\.{ROWS - 1}"):
        system.sls(0, [1, bad], [0], "ndp")


def test_embedding_bag_refuses_float_input(system):
    bag = system.embedding_bag(0)
    with pytest.raises(TypeError, match=r"input.*integer"):
        bag(np.array([[1.0, 2.0]]))


def test_partition_ids_must_be_integers_in_range(system):
    before = system.sls(0, [1, 2, 3], [0], "ndp")
    with pytest.raises(TypeError, match=r"profiles\[0\].*integer"):
        system.set_partitions([np.array([1.5, 2.0]), np.arange(3)])
    with pytest.raises(InvalidArgument, match=rf"profiles\[0\].*{ROWS}.*0\.\.{ROWS - 1}"):
        system.set_partitions([np.array([1, ROWS]), np.arange(3)])
    with pytest.raises(InvalidArgument, match=r"profiles\[1\].*200.*0\.\.199"):
        system.set_partitions([np.arange(3), np.array([200])])
    with pytest.raises(ValueError, match=r"profiles.*2 tables"):
        system.set_partitions([np.arange(3)])
    # Nothing changed: no partition was installed by the refused calls.
    np.testing.assert_array_equal(system.sls(0, [1, 2, 3], [0], "ndp"), before)


def test_integer_like_inputs_still_work(system):
    a = system.sls(0, np.array([1, 2], np.int32), np.array([0], np.uint8), "dram")
    b = system.sls(0, [1, 2], [0], "dram")
    np.testing.assert_array_equal(a, b)
    system.set_partitions([np.array([1, 2], np.uint16), []])
    system.clear_partitions()
