"""Hostile ids at the RecSSD API: float ids (which numpy would silently truncate) raise TypeError, ids outside a
table's rows InvalidArgument, in SLS calls, EmbeddingBag and static partitions; each names the argument and the
allowed range, and a refused call changes nothing."""

import numpy as np
import pytest

import nearflash
from nearflash import InvalidArgument, recssd
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


@pytest.mark.parametrize("call,names", [
    (lambda s: s.sls(0, [[1, 2], [3, 4]], [0, 2]), "indices must be a 1-D array of ids, got shape (2, 2)"),
    (lambda s: s.sls(0, [1, 2], [[0]]), "offsets must be a 1-D array of ids"),
    (lambda s: s.sls(-1, [1], [0]), "table -1 is out of range (allowed 0 to 1)"),
    (lambda s: s.sls(2, [1], [0]), "table 2 is out of range"),
    (lambda s: s.sls("0", [1], [0]), "table must be an integer"),
    (lambda s: s.embedding_bag(7), "table 7 is out of range"),
    (lambda s: s.set_partitions([np.zeros((2, 2), np.int64), [1]]), "profiles[0] must be a 1-D array"),
    (lambda s: s.set_lru_rows(-1), "rows -1 is out of range"),
    (lambda s: s.set_lru_rows(2**70), "rows 1180591620717411303424 is out of range"),
], ids=lambda c: "")
def test_wrong_shapes_tables_and_counts_name_the_argument(system, call, names):
    """Before: a 2-D index array or a negative table was a TypeError or OverflowError from the binding, an unknown
    table for embedding_bag an IndexError."""
    with pytest.raises(InvalidArgument) as e:
        call(system)
    assert names in str(e.value)


@pytest.mark.parametrize("tables,kw,names", [
    ([], {}, "tables must be a non-empty list"),
    ([np.zeros((0, 8), np.float32)], {}, "tables[0]: a stored table must be a 2-D array of 1 or more rows"),
    ([np.zeros((8, 0), np.float32)], {}, "got shape (8, 0)"),
    ([np.zeros(8, np.float32)], {}, "got shape (8,)"),
    ([TableSpec(-5, 8, 1)], {}, "tables[0].rows -5 is out of range"),
    ([TableSpec(100, 8, 1), TableSpec(0, 8, 1)], {}, "tables[1].rows 0 is out of range"),
    ([TableSpec(100, -8, 1)], {}, "tables[0].dim -8"),
    ([TableSpec(100, 8, 1)], {"seed": -1}, "seed -1 is out of range"),
])
def test_empty_and_negative_tables_are_refused_before_the_device_is_touched(tables, kw, names):
    from conftest import SMALL

    dev = nearflash.Device(None, preset="cosmos-plus", materialise=False, **dict(SMALL))
    with pytest.raises(InvalidArgument) as e:
        RecSSD(dev, tables, **kw)
    assert names in str(e.value)
    assert "recssd" not in dev.report().extensions, "nothing attached"


@pytest.mark.parametrize("call,names", [
    (lambda: recssd.uniform_batch(recssd.SPECS["RM1"], -1, 0), "batch_size -1"),
    (lambda: recssd.uniform_batch(recssd.SPECS["RM1"], 4, -1), "seed -1"),
    (lambda: recssd.fixed_offsets(-3, 2), "batch_size -3"),
    (lambda: recssd.locality_batches(recssd.SPECS["RM1"], 4, -2, 1.0, 0), "batches -2"),
    (lambda: recssd.microbenchmark_ids("str", 1000, -4, 2), "dim -4"),
    (lambda: recssd.microbenchmark_ids("seq", 1000, 4, -2), "batch_size -2"),
], ids=lambda c: "")
def test_negative_counts_of_the_input_generators_name_the_argument(call, names):
    with pytest.raises(InvalidArgument) as e:
        call()
    assert names in str(e.value)
