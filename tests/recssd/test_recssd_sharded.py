"""RecSSD on an Array: tables spread across drives and one table split by rows, the host adding the split table's
partial sums; both paths give numpy's EmbeddingBag sums, NDP moves far fewer bytes across the shared host than the
baseline's page reads, and bad input is refused before any drive works."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import nearflash
from nearflash.array import DeviceSpec
from nearflash.errors import InvalidArgument
from nearflash.recssd import sls_reference, sharded

from conftest import SMALL


def array(n=3):
    return nearflash.Array(n, "cosmos-plus", overrides=dict(SMALL))


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(5)
    tables = [rng.standard_normal((rows, dim), dtype=np.float32) for rows, dim in ((900, 32), (400, 16), (300, 32), (500, 8))]
    batches = []
    for _ in range(3):
        batch = []
        for t in tables:
            sizes = rng.integers(0, 9, 6)  # empty bags too
            batch.append((rng.integers(0, len(t), sizes.sum()), np.concatenate([[0], np.cumsum(sizes)[:-1]])))
        batches.append(batch)
    return tables, batches


@pytest.fixture(scope="module")
def runs(model):
    tables, batches = model
    return {path: sharded.run(array(), tables, batches, path, split=0) for path in ("ndp", "baseline")}


@pytest.mark.parametrize("path", ["ndp", "baseline"])
def test_spread_and_split_tables_sum_as_numpy(model, runs, path):
    tables, batches = model
    res = runs[path]
    for b, batch in enumerate(batches):
        for t, (ids, offs) in enumerate(batch):
            assert np.allclose(res.pooled[b][t], sls_reference(tables[t], ids, offs), rtol=1e-5, atol=1e-5), (b, t)


def test_placement_spreads_whole_tables_and_splits_one(runs):
    parts = [s["parts"] for s in runs["ndp"].shards]
    # Tables 1, 2, 3 round robin; table 0's 900 rows in three ranges, one per drive.
    assert parts == [[(1, 0, 400), (0, 0, 300)], [(2, 0, 300), (0, 300, 300)], [(3, 0, 500), (0, 600, 300)]]
    assert sharded.placement([10, 10], 3) == [[sharded.Part(0, 0, 10, 0)], [sharded.Part(1, 0, 10, 0)], []]


def test_ndp_moves_fewer_bytes_and_only_the_split_table_costs_host_cpu(runs, model):
    tables, batches = model
    ndp, base = runs["ndp"].report.whole, runs["baseline"].report.whole
    pooled_bytes = sum(6 * t.shape[1] * 4 for t in tables) * len(batches)
    split_bytes = 3 * 6 * 32 * 4 * len(batches)  # table 0's partials from each of 3 drives
    assert ndp["bytes"]["to_host"] == pooled_bytes + 2 * 6 * 32 * 4 * len(batches)
    assert base["bytes"]["to_host"] > 4 * ndp["bytes"]["to_host"] and base["bytes"]["to_host"] % 4096 == 0
    cpu_ns = ndp["utilisation"]["host_cpu"] * ndp["elapsed_ns"] * ndp["host"]["host.cpu_cores"]
    assert cpu_ns == pytest.approx(split_bytes * ndp["host"]["cpu.partial_sum_ns_per_byte"], rel=1e-3)
    assert runs["ndp"].batches_per_s > 0


def test_worker_processes_give_the_same_report(model, runs):
    tables, batches = model
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        res = sharded.run(array(), tables, batches, "ndp", split=0, executor=ex)
    assert res.report.to_dict() == runs["ndp"].report.to_dict()
    assert all(np.array_equal(a, b) for x, y in zip(res.pooled, runs["ndp"].pooled) for a, b in zip(x, y))


@pytest.mark.parametrize("call, match", [
    (lambda t, b: sharded.run(nearflash.Array([DeviceSpec("cosmos-plus", overrides=dict(SMALL)),
                                               DeviceSpec("searssd")]), t, b), "mixes"),
    (lambda t, b: sharded.run(array(), t, b, "dram"), "path"),
    (lambda t, b: sharded.run(array(), t, b, split=4), "split"),
    (lambda t, b: sharded.run(array(), t, b, split="0"), "split"),
    (lambda t, b: sharded.run(array(), [t[0][:2]] + t[1:], b, split=0), "fewer"),
    (lambda t, b: sharded.run(array(), t[0], b), "tables"),
    (lambda t, b: sharded.run(array(), [], b), "tables"),
    (lambda t, b: sharded.run(array(), [np.zeros(5, np.float32)], b), "2-D"),
    (lambda t, b: sharded.run(array(), t, [b[0][:2]]), "gives 2"),
    (lambda t, b: sharded.run(array(), t, [[(np.array([900]), np.array([0]))] + b[0][1:]]), "outside"),
    (lambda t, b: sharded.run(array(), t, [[(np.array([1.5]), np.array([0]))] + b[0][1:]]), "integer"),
    (lambda t, b: sharded.run(array(), t, [[(np.array([1, 2]), np.array([1]))] + b[0][1:]]), "offsets"),
    (lambda t, b: sharded.run(array(), t, [[(np.array([1, 2]), np.array([0, 3]))] + b[0][1:]]), "offsets"),
    (lambda t, b: sharded.run("array", t, b), "Array"),
])
def test_bad_arguments_are_refused(model, call, match):
    tables, batches = model
    with pytest.raises((InvalidArgument, TypeError, ValueError), match=match):
        call(tables, batches)
