"""nearflash.Array: placement, the shared-host combiner, one process vs worker processes, and the host path's
saturation point against the formula from the host parameters."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nearflash
from nearflash.array import Array, DeviceSpec, HostModel, KeyRange, ShardResult, Striped, Transfer, combine
from nearflash.array import scan
from nearflash.errors import InvalidArgument
from nearflash.programs import have_clang

needs_clang = pytest.mark.skipif(not have_clang(), reason="the in-storage scan's program needs clang (Debian's clang)")

KIB = 1024
SMALL = dict(chunk_bytes=64 * KIB, io_bytes=32 * KIB, depth=4)


def reference(devices: int, table_bytes: int, chunk_bytes: int, threshold: int = 1 << 19, seed: int = 7):
    values = np.concatenate([scan.chunk_values(seed, c, min(chunk_bytes, table_bytes - c * chunk_bytes))
                             for c in range(-(-table_bytes // chunk_bytes))])
    hit = values[values > threshold]
    return hit.size, int(hit.sum())


# --- placement ----------------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 64), st.integers(0, 2000))
def test_striping_places_every_byte_once_where_locate_says(devices, chunk, total):
    layout = Striped(devices, chunk)
    seen = []
    for d in range(devices):
        for e in layout.extents(d, total):
            assert layout.locate(e.logical) == (d, e.offset)
            assert layout.locate(e.logical + e.nbytes - 1) == (d, e.offset + e.nbytes - 1)
            seen.append((e.logical, e.nbytes))
    seen.sort()
    assert sum(n for _, n in seen) == total
    assert all(a + n == b for (a, n), (b, _) in zip(seen, seen[1:]))


def test_key_ranges_split_keys_between_devices():
    kr = KeyRange.even(4, 0, 100)
    assert kr.bounds == [25, 50, 75]
    keys = np.array([0, 24, 25, 99, 50, 74])
    parts = kr.split(keys)
    assert [list(keys[p]) for p in parts] == [[0, 24], [25], [50, 74], [99]]
    assert [kr.device_of(k) for k in (0, 25, 75)] == [0, 1, 3]


@pytest.mark.parametrize("make", [
    lambda: Striped(0, 4096), lambda: Striped(2, 0), lambda: Striped("2", 4096), lambda: KeyRange([3, 3]),
    lambda: KeyRange.even(4, 0, 3), lambda: Striped(2, 4096).extents(2, 10), lambda: Striped(2, 8).locate(-1),
])
def test_bad_placement_is_refused(make):
    with pytest.raises(InvalidArgument):
        make()


# --- the combiner ---------------------------------------------------------------------------------------------------
def result(device, transfers, end=0):
    return ShardResult(device, "p", [Transfer(*t) for t in transfers], end, {}, None)


def test_combiner_queues_transfers_on_the_shared_uplink_in_device_time_order():
    host = HostModel({"uplink_bandwidth": 1, "root_complex_bandwidth": 100, "dram_bandwidth": 100, "latency": 0})
    # Two devices each deliver 1000 B at t=0 and t=500: at 1 B/ns the uplink carries them one after another.
    rep = combine([result(0, [(0, 1000), (500, 1000)]), result(1, [(0, 1000)])], host)
    assert rep.elapsed_ns == 3000
    assert rep.whole["utilisation"]["uplink_to_host"] == 1.0
    assert rep.whole["busiest"] == "uplink_to_host"
    assert [d["delivered_end_ns"] for d in rep.devices] == [3000, 2000]
    # Full duplex: a transfer to the device does not wait behind one to the host on the uplink; host DRAM, shared by
    # both directions, then carries it in 1000 B / 100 B/ns after the first.
    rep = combine([result(0, [(0, 1000), (0, 1000, "to_device")])], host)
    assert rep.elapsed_ns == 1010


def test_combiner_shares_host_cores():
    host = HostModel({"cpu_cores": 2, "latency": 0})
    rep = combine([result(d, [(0, 8, "to_host", 1000)]) for d in range(3)], host)
    assert rep.elapsed_ns == 2001  # two run at once, the third waits for a core
    assert rep.whole["utilisation"]["host_cpu"] == pytest.approx(3000 / 2 / 2001)


def test_combiner_refuses_unknown_directions():
    with pytest.raises(InvalidArgument, match="direction"):
        combine([result(0, [(0, 8, "sideways")])], HostModel())


@pytest.mark.parametrize("overrides, match", [
    ({"no_such": 1}, "unknown"), ({"bandwidth": 1}, "unknown"), ({"uplink_bandwidth": 0}, "positive"),
    ({"uplink_bandwidth": -1}, "positive"), ({"uplink_bandwidth": float("nan")}, "positive"),
    ({"uplink_bandwidth": "fast"}, "uplink_bandwidth"), ({"cpu_cores": 1.5}, "cpu_cores"), ([1], "dict"),
])
def test_bad_host_parameters_are_refused(overrides, match):
    with pytest.raises(InvalidArgument, match=match):
        HostModel(overrides)


def test_every_host_parameter_has_a_unit_and_a_source():
    for path, value, unit, source in HostModel().table():
        assert value > 0 and unit and len(source) > 20, path


# --- arrays of devices ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: Array(0), lambda: Array("3"), lambda: Array([]), lambda: Array([1, 2]),
    lambda: Array([DeviceSpec()], images="/tmp/x"), lambda: Array(2, host={"nope": 1}),
    lambda: Array(1).run("not a function"),
    lambda: scan.run(Array(1), 5000, **SMALL),  # not whole blocks
    lambda: scan.run(Array(1), 0, **SMALL),
    lambda: scan.run(Array(1), 4096, path="gpu", **SMALL),
])
def test_bad_arrays_are_refused(make):
    with pytest.raises(InvalidArgument):
        make()


def test_images_in_a_missing_directory_are_refused_naming_images(tmp_path):
    with pytest.raises(InvalidArgument, match="images"):
        Array(2, images=tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


def test_host_scan_finds_the_right_answer_and_reports_each_device():
    array = nearflash.Array(3)
    report, answer = scan.run(array, 5 * 64 * KIB, **SMALL)
    assert answer == reference(3, 5 * 64 * KIB, 64 * KIB)
    assert [d["bytes_to_host"] for d in report.devices] == [128 * KIB, 128 * KIB, 64 * KIB]
    assert report.whole["bytes"]["to_host"] == 5 * 64 * KIB
    assert all(d["report"]["ops"]["read"]["count"] == d["transfers"] for d in report.devices)
    assert report.elapsed_ns >= max(d["own_end_ns"] for d in report.devices)


@pytest.mark.parametrize("path", ["host", pytest.param("in_storage", marks=needs_clang)])
def test_worker_processes_give_the_one_process_report(path):
    array = Array(3, host={"uplink_bandwidth": 1.0})
    one, answer = scan.run(array, 6 * 64 * KIB, path=path, **SMALL)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        many, answer_many = scan.run(array, 6 * 64 * KIB, path=path, executor=pool, **SMALL)
    assert many.to_dict() == one.to_dict()
    assert answer_many == answer == reference(3, 6 * 64 * KIB, 64 * KIB)


def test_host_path_flattens_where_the_formula_says():
    per_device = 512 * KIB
    b1 = scan.scaling([1], per_device, **SMALL)[0]["throughput_gb_s"]
    uplink = 2.5 * b1  # the formula puts the knee at N = 2.5
    rows = scan.scaling([1, 2, 4, 6], per_device, host={"uplink_bandwidth": uplink}, **SMALL)
    assert rows[0]["limit_by"] == "switch uplink" and rows[0]["knee_devices"] == pytest.approx(2.5, rel=0.1)
    for r in rows:
        # Past the knee the uplink idles only while the shards' first reads fill the pipeline (about 10% of so
        # short a run); it never carries more than its bandwidth.
        assert r["throughput_gb_s"] == pytest.approx(r["formula_gb_s"], rel=0.12), r
        assert r["throughput_gb_s"] <= r["limit_gb_s"]
    assert rows[-1]["busiest"] == "uplink_to_host" and rows[-1]["busiest_utilisation"] > 0.9


def test_ray_workers_give_the_one_process_report():
    pytest.importorskip("ray", reason="Ray is the optional 'ray' extra (pip install 'nearflash[ray]')")
    from nearflash.array import RayExecutor

    array = Array(2)
    one, answer = scan.run(array, 4 * 64 * KIB, **SMALL)
    ray_exec = RayExecutor()
    try:
        many, answer_ray = scan.run(array, 4 * 64 * KIB, executor=ray_exec, **SMALL)
    finally:
        ray_exec.shutdown()
    assert many.to_dict() == one.to_dict() and answer_ray == answer


@needs_clang
def test_in_storage_scan_finds_the_right_answer_and_scales_past_the_host_paths_knee():
    per_device, kw = 256 * KIB, dict(SMALL, path="in_storage")
    one = scan.scaling([1], per_device, **kw)[0]["throughput_gb_s"]
    uplink = 2.5 * scan.scaling([1], per_device, **SMALL)[0]["throughput_gb_s"]
    report, answer = scan.run(Array(4, host={"uplink_bandwidth": uplink}), 4 * per_device, **kw)
    assert answer == reference(4, 4 * per_device, SMALL["chunk_bytes"])
    assert report.whole["bytes"]["to_host"] == 16 * 4 * per_device // SMALL["io_bytes"]  # 16 B a piece
    # Past the host path's knee (2.5 devices) the in-storage path still scales with N: its devices work alone.
    assert 4 * per_device / report.elapsed_ns == pytest.approx(4 * one, rel=0.02)


def _bad_transfer(shard, done_ns, nbytes, direction, cpu_ns):
    shard.transfer(done_ns, nbytes, direction, cpu_ns)


@pytest.mark.parametrize("done_ns, nbytes, direction, cpu_ns", [
    (-1, 8, "to_host", 0), (0, 0, "to_host", 0), (0, 8, "to_host", -5), (0.5, 8, "to_host", 0), (0, "8", "to_host", 0),
    (0, 8, "up", 0),
])
def test_a_shard_refuses_bad_transfers(done_ns, nbytes, direction, cpu_ns):
    with pytest.raises(InvalidArgument):
        Array(1).run(_bad_transfer, done_ns, nbytes, direction, cpu_ns)


def test_devices_keep_their_images_and_specs_mix_presets(tmp_path):
    array = Array(2, images=tmp_path)
    report, answer = scan.run(array, 4 * 64 * KIB, **SMALL)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev0", "dev1"]
    again, answer_again = scan.run(array, 4 * 64 * KIB, **SMALL)  # the images are opened now, not created
    assert answer_again == answer == reference(2, 4 * 64 * KIB, 64 * KIB)
    mixed = Array([DeviceSpec("cosmos-plus", seed=1), DeviceSpec("samsung-970pro", seed=2)])
    report, _ = scan.run(mixed, 4 * 64 * KIB, **SMALL)
    assert [d["preset"] for d in report.devices] == ["cosmos-plus", "samsung-970pro"]
    assert report.devices[0]["own_end_ns"] != report.devices[1]["own_end_ns"]
