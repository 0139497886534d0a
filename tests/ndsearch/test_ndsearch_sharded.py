"""NDSearch on an Array: shards of one set on SearSSD devices, the host merging their top-k. The merged answer is
checked against brute force, against each shard's own answer, and across executors; bad input is refused before any
device works."""

from concurrent.futures import ProcessPoolExecutor
import multiprocessing

import numpy as np
import pytest

import nearflash
from nearflash.array import DeviceSpec, topk
from nearflash.errors import InvalidArgument
from nearflash.ndsearch import ground_truth, recall_at, sharded

SMALL = dict(channels=2, chips_per_channel=2, blocks_per_plane=32, pages_per_block=16, page_size="4KiB",
             over_provisioning=40, write_buffer="256KiB", ext_reserved_blocks=2)
GRAPH = sharded.Graph(R=8, ef_construction=40)


def clustered(rng, n, dim=12):
    centres = rng.uniform(-4, 4, (8, dim))
    return (centres[rng.integers(0, 8, n)] + rng.uniform(-1, 1, (n, dim))).astype(np.float32)


def array(n=3, **kw):
    return nearflash.Array(n, "searssd", overrides=SMALL, **kw)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    return clustered(rng, 900), clustered(rng, 40)


@pytest.fixture(scope="module")
def three(data):
    base, q = data
    return sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16)


def test_merged_top_k_reaches_brute_force_recall(data, three):
    base, q = data
    _, truth = ground_truth(base, q, 10, "l2")
    assert recall_at(three.ids, truth, 10) >= 0.95
    assert three.ids.shape == (40, 10) and three.distances.dtype == np.float32
    # Nearest first, and the distances are the true ones of the ids returned.
    assert np.all(np.diff(three.distances, axis=1) >= 0)
    true_d = ((base[three.ids] - q[:, None, :]) ** 2).sum(axis=2)
    assert np.allclose(three.distances, true_d, rtol=1e-4, atol=1e-3)


def test_each_shard_answers_its_own_ids_and_the_host_pays_the_merge(data, three):
    base, q = data
    assert [(s["first"], s["rows"]) for s in three.shards] == [(0, 300), (300, 300), (600, 300)]
    whole = three.report.whole
    # Every batch's answers cross back (k x 8 bytes per query per shard) and queries cross out to every shard.
    assert whole["bytes"]["to_host"] == 3 * 40 * 10 * 8
    assert whole["bytes"]["to_device"] == 3 * q.nbytes
    cpu_ns = whole["utilisation"]["host_cpu"] * whole["elapsed_ns"] * whole["host"]["host.cpu_cores"]
    assert cpu_ns == pytest.approx(3 * 40 * 10 * whole["host"]["cpu.topk_merge_ns_per_candidate"], rel=1e-6)
    assert three.qps > 0 and three.energy_j > 0
    assert all(d["report"]["extensions"]["ndsearch"]["stats"]["queries"] == 40 for d in three.report.devices)


def test_the_host_path_reads_blocks_across_the_shared_host_and_answers_the_same(data, three):
    base, q = data
    host = sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16, path="host")
    assert np.array_equal(host.ids, three.ids) and np.array_equal(host.distances, three.distances)
    whole = host.report.whole
    assert whole["bytes"]["to_host"] == 4096 * sum(s["reads"] for s in host.shards) > 50 * three.report.whole["bytes"]["to_host"]
    # The host's cores pay the search itself (distances and expansions at the costed CPU baseline's costs), then
    # the merge.
    cpu_ns = whole["utilisation"]["host_cpu"] * whole["elapsed_ns"] * whole["host"]["host.cpu_cores"]
    merge = 3 * 40 * 10 * whole["host"]["cpu.topk_merge_ns_per_candidate"]
    search = sum(s["search_cpu_ns"] for s in host.shards)
    assert cpu_ns == pytest.approx(search + merge, rel=5e-3) and search > 10 * merge  # whole ns per task


def test_the_host_search_cpu_is_the_cpu_baselines_counted_work():
    from nearflash.ndsearch import Index, searssd

    rng = np.random.default_rng(5)
    ix = Index(128, "l2", R=8, ef_construction=40)
    ix.add(clustered(rng, 600, 128), threads=1)
    p = {name: float(v.split()[0]) for name, v, _, _ in searssd.host_parameters()}
    one = sharded.search_cpu_ns(ix, 1, 0)
    # One distance over 128 float32 elements: 8 AVX-512 steps of cpu_step_cycles plus the overhead, at 3.1 GHz; an
    # expansion's cycles on top; linear in the counts (a 600-vector set fits the last-level cache: no misses).
    assert one == pytest.approx((8 * p["cpu_step_cycles"] + p["cpu_distance_overhead"]) / 3.1)
    assert sharded.search_cpu_ns(ix, 0, 1) == pytest.approx(p["cpu_hop_cycles"] / 3.1)
    assert sharded.search_cpu_ns(ix, 300, 20) == pytest.approx(300 * one + 20 * sharded.search_cpu_ns(ix, 0, 1))


def test_one_device_gives_its_deployment_s_answer(data):
    base, q = data
    res = sharded.search(array(1), base[:300], q, k=5, ef=24, graph=GRAPH, batch=16)
    ix = nearflash.ndsearch.Index(12, "l2", R=8, ef_construction=40)
    ix.add(base[:300], threads=1)
    d, i = ix.search(q, 5, ef=24)
    assert np.array_equal(res.ids, i) and np.array_equal(res.distances, d)


def test_k_beyond_a_shard_takes_from_the_others_and_beyond_the_set_pads(data):
    base, q = data
    res = sharded.search(array(3), base[:12], q[:4], k=6, ef=16, graph=GRAPH)
    _, truth = ground_truth(base[:12], q[:4], 6, "l2")
    assert recall_at(res.ids, truth, 6) == 1.0  # 4 vectors a shard, 6 asked: exact at this size
    res = sharded.search(array(3), base[:12], q[:4], k=15, ef=16, graph=GRAPH)
    assert np.all(res.ids[:, 12:] == -1) and np.all(np.isinf(res.distances[:, 12:]))
    assert sorted(res.ids[0, :12]) == list(range(12))


def test_worker_processes_give_the_same_report(data, three):
    base, q = data
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        res = sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16, executor=ex)
    assert np.array_equal(res.ids, three.ids) and np.array_equal(res.distances, three.distances)
    strip = lambda r: {**r.to_dict(), "devices": [{k: v for k, v in d.items()} for d in r.devices]}  # noqa: E731
    assert strip(res.report) == strip(three.report)


def test_graphs_are_cached_per_shard(tmp_path):
    base = sharded.Synthetic("sift-like", 600, seed=1)
    q = nearflash.ndsearch.synthetic("sift-like", 8, seed=1, queries=True)
    first = sharded.search(array(2), base, q, k=5, ef=24, graph=GRAPH, cache_dir=tmp_path)
    again = sharded.search(array(2), base, q, k=5, ef=24, graph=GRAPH, cache_dir=tmp_path)
    assert [s["loaded"] for s in first.shards] == [False, False] and [s["loaded"] for s in again.shards] == [True, True]
    assert np.array_equal(first.ids, again.ids) and first.report.to_dict() == again.report.to_dict()


def test_merge_is_order_free_and_ties_go_to_the_smaller_id():
    a = (np.array([[1.0, 2.0]], np.float32), np.array([[7, 3]]))
    b = (np.array([[1.0, np.inf]], np.float32), np.array([[5, -1]]))
    for parts in ((a, b), (b, a)):
        d, i = topk.merge(parts, 3)
        assert i.tolist() == [[5, 7, 3]] and d.tolist() == [[1.0, 1.0, 2.0]]
    d, i = topk.merge((b,), 3)
    assert i.tolist() == [[5, -1, -1]] and np.isinf(d[0, 1:]).all()


@pytest.mark.parametrize("call, match", [
    (lambda b, q: sharded.search(nearflash.Array([DeviceSpec("searssd", overrides=SMALL),
                                                  DeviceSpec("cosmos-plus")]), b, q), "mixes"),
    (lambda b, q: sharded.search(array(), b, q, k=0), "k"),
    (lambda b, q: sharded.search(array(), b, q, k="10"), "k"),
    (lambda b, q: sharded.search(array(), b, q, ef=-1), "ef"),
    (lambda b, q: sharded.search(array(), b, q[:, :5]), "columns"),
    (lambda b, q: sharded.search(array(), b, q[:0]), "at least one"),
    (lambda b, q: sharded.search(array(), b.tolist(), q), "base"),
    (lambda b, q: sharded.search(array(), b[:2], q), "every shard"),
    (lambda b, q: sharded.search(array(), b.astype(np.float64), q), "base"),
    (lambda b, q: sharded.search("array", b, q), "Array"),
    (lambda b, q: sharded.search(array(), b, q, graph={"R": 8}), "Graph"),
    (lambda b, q: sharded.search(array(), b, q, batch=0), "batch"),
    (lambda b, q: sharded.search(array(), b, q, path="gpu"), "path"),
    (lambda b, q: sharded.Graph(kind="ivf"), "kind"),
    (lambda b, q: sharded.Synthetic("mnist", 10), "name"),
    (lambda b, q: sharded.Synthetic("sift-like", 0), "n"),
    (lambda b, q: topk.merge([], 3), "at least one"),
    (lambda b, q: topk.even_split(2, 3), "at least one"),
])
def test_bad_arguments_are_refused(data, call, match):
    base, q = data
    with pytest.raises((InvalidArgument, TypeError, ValueError), match=match):
        call(base, q)


def test_a_shard_too_large_for_its_reserved_area_is_refused_naming_it(data):
    base, q = data
    tiny = {**SMALL, "channels": 1, "chips_per_channel": 1, "ext_reserved_blocks": 1, "pages_per_block": 2}
    # 1 x 1 x 2 LUNs x 2 planes x 1 reserved block x 2 pages x 85 vectors of 48 B per 4 KiB page.
    assert sharded.device_capacity(DeviceSpec("searssd", overrides=tiny), 48) == 680
    with pytest.raises(nearflash.NearflashError, match="reserved"):
        sharded.search(nearflash.Array(1, "searssd", overrides=tiny), base, q, graph=GRAPH)
    sharded.search(nearflash.Array(2, "searssd", overrides=tiny), base, q[:2], graph=GRAPH)  # 450 a device fits


def test_a_killed_resumable_search_restarts_at_the_shards_it_had_not_finished(data, three, tmp_path):
    base, q = data
    res_dir = tmp_path / "results"
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        whole = nearflash.array.Resumable(res_dir, ex)
        first = sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16, executor=whole)
    assert (whole.loaded, whole.ran) == (0, 3)
    assert np.array_equal(first.ids, three.ids) and first.report.to_dict() == three.report.to_dict()
    # A run killed while on shard 1 leaves shard 0's result (a result is written whole, or not at all).
    kept = sorted(res_dir.glob("shard-*.pkl"))
    assert [p.name[:11] for p in kept] == ["shard-00000", "shard-00001", "shard-00002"]
    for p in kept[1:]:
        p.unlink()
    again = nearflash.array.Resumable(res_dir)
    fn, args = sharded.work(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16)
    assert again.pending(nearflash.array.run_shard, *array().jobs(fn, args)) == [1, 2]
    resumed = sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16, executor=again)
    assert (again.loaded, again.ran) == (1, 2)
    assert np.array_equal(resumed.ids, three.ids) and np.array_equal(resumed.distances, three.distances)
    assert resumed.report.to_dict() == three.report.to_dict() and resumed.shards[0] == first.shards[0]
    modelled = ("first", "rows", "deploy_ns", "search_ns", "energy_j", "index_bytes")
    assert [[s[k] for k in modelled] for s in resumed.shards] == [[s[k] for k in modelled] for s in first.shards]
    # Other arguments are another run: nothing of this one is reused.
    other = nearflash.array.Resumable(res_dir)
    sharded.search(array(), base, q, k=10, ef=24, graph=GRAPH, batch=16, executor=other)
    assert (other.loaded, other.ran) == (0, 3)
    # A damaged result is refused by name, not half-used.
    kept[0].write_bytes(b"not a result")
    with pytest.raises(nearflash.errors.InvalidValue, match="shard-00000.*delete it"):
        sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16,
                       executor=nearflash.array.Resumable(res_dir))


def test_the_exact_answers_merged_from_every_shard_are_the_whole_sets(data):
    base, q = data
    res = sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16, truth_queries=25)
    d, i = ground_truth(base, q[:25], 10, "l2")
    assert np.array_equal(res.truth[1], i) and np.allclose(res.truth[0], d, rtol=1e-6)
    assert sharded.search(array(), base, q, k=10, ef=32, graph=GRAPH, batch=16).truth is None
    assert set(res.shards[0]["cpu_s"]) == {"graph", "deploy", "search", "ground_truth"}
    assert all(v >= 0 for s in res.shards for v in s["cpu_s"].values())


def test_the_driver_prints_its_estimate_before_searching_and_resumes(tmp_path, capsys):
    import json

    args = ["--n", "900", "--devices", "3", "--R", "8", "--ef-construction", "40", "--queries", "24",
            "--truth-queries", "20", "--ef", "32", "--cache", str(tmp_path / "c"), "--results", str(tmp_path / "r"),
            "--probe-queries", "8", *[f"--set={k}={v}" for k, v in SMALL.items()]]
    assert sharded.main([*args, "--out", str(tmp_path / "a.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    est = json.loads(lines[0])["estimate"]
    assert est["shards"] == 3 and est["probe_queries"] == 8 and est["cpu_s"] > 0
    assert set(est["probe_cpu_s"]) == {"graph", "deploy", "search", "ground_truth"}
    assert sharded.main([*args, "--out", str(tmp_path / "b.json")]) == 0  # every shard kept: nothing to probe
    assert json.loads(capsys.readouterr().out.splitlines()[0])["estimate"]["shards"] == 0
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert b["shards_resumed"] == 3 and a["shards_resumed"] == 0
    same = ("recall@10", "qps", "elapsed_ns", "energy_j", "shards", "peak_rss_bytes_per_worker", "cpu_s_by_phase")
    assert {k: a[k] for k in same} == {k: b[k] for k in same} and a["recall@10"] >= 0.9
