"""nearflash.Array: placement, the shared-host combiner, one process vs worker processes, and the host path's
saturation point against the formula from the host parameters."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nearflash
from nearflash.array import (Array, DeviceSpec, HostModel, KeyRange, Replicated, ShardResult, Striped, Transfer,
                             combine)
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
    lambda: Array([DeviceSpec()], images="/tmp/x"), lambda: Array(2, host={"nope": 1}), lambda: Array(1, closed_loop=-1),
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


@pytest.mark.parametrize("path, closed_loop", [("host", 0), pytest.param("in_storage", 0, marks=needs_clang),
                                               ("host", 4)])
def test_worker_processes_give_the_one_process_report(path, closed_loop):
    array = Array(3, host={"uplink_bandwidth": 1.0})
    one, answer = scan.run(array, 6 * 64 * KIB, path=path, closed_loop=closed_loop, **SMALL)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        many, answer_many = scan.run(array, 6 * 64 * KIB, path=path, executor=pool, closed_loop=closed_loop, **SMALL)
    assert many.to_dict() == one.to_dict()
    assert ("closed_loop" in one.whole) == bool(closed_loop)  # an open-loop report is the first slice's
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
    closed, _ = scan.run(array, 4 * 64 * KIB, closed_loop=3, **SMALL)
    try:
        many, answer_ray = scan.run(array, 4 * 64 * KIB, executor=ray_exec, **SMALL)
        closed_ray, _ = scan.run(array, 4 * 64 * KIB, executor=ray_exec, closed_loop=3, **SMALL)
    finally:
        ray_exec.shutdown()
    assert many.to_dict() == one.to_dict() and answer_ray == answer
    assert closed_ray.to_dict() == closed.to_dict()


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
    (0, 8, "up", 0), (0, 8, "to_host", []), (0, 2, "to_host", [1, 1, 1]), (0, 8, "to_host", [5, -1]),
    (0, 8, "to_host", [1.5]),
])
def test_a_shard_refuses_bad_transfers(done_ns, nbytes, direction, cpu_ns):
    with pytest.raises(InvalidArgument):
        Array(1).run(_bad_transfer, done_ns, nbytes, direction, cpu_ns)


def _each(shard, done_ns, nbytes, direction="to_host"):
    shard.transfer_each(done_ns, nbytes, direction)


@pytest.mark.parametrize("done_ns, nbytes, direction", [
    ([-1, 5], 8, "to_host"), ([0.5], 8, "to_host"), ([[1, 2]], 8, "to_host"), (["1"], 8, "to_host"),
    ([1, 2], 0, "to_host"), ([1, 2], "8", "to_host"), ([1], 8, "up"), (None, 8, "to_host"),
])
def test_a_shard_refuses_bad_transfers_each(done_ns, nbytes, direction):
    with pytest.raises(InvalidArgument):
        Array(1).run(_each, done_ns, nbytes, direction)


def _booked(shard, times, each):
    t0 = shard.device.now_ns
    if each:
        return shard.transfer_each(np.array([t0 + t for t in times]), 100)
    return max(shard.transfer(t0 + t, 100) for t in times) if times else t0


@pytest.mark.parametrize("closed_loop", [0, 2])
def test_transfers_each_are_as_many_single_transfers(closed_loop):
    times = [5, 5, 70, 3000, 3000, 3001]
    (each, got_each), (one, got_one) = (Array(1, host={"uplink_bandwidth": 0.01}).run(
        _booked, times, e, closed_loop=closed_loop) for e in (True, False))
    assert each.to_dict() == one.to_dict() and each.deliveries == one.deliveries and got_each == got_one
    assert each.whole["transfers"] == 6 and each.whole["bytes"]["to_host"] == 600
    nothing, _ = Array(1).run(_booked, [], True)
    assert nothing.whole["transfers"] == 0


def _tasks(shard, cores_seen):
    cores_seen.append(shard.cores)
    shard.transfer(shard.device.now_ns, 10, cpu_ns=[1000, 1000, 1000])


def test_a_transfers_cpu_tasks_run_side_by_side_with_their_share_of_the_bytes():
    seen = []
    report, _ = Array(1, host={"cpu_cores": 2, "latency": 0}).run(_tasks, seen)
    assert seen == [2]  # the shard knows the shared host's cores
    w = report.whole
    # 10 B in shares of 3, 3, 4 B; two tasks run at once, the third after them: 2,000 ns of CPU past the bytes.
    assert w["transfers"] == 3 and w["bytes"]["to_host"] == 10
    assert w["utilisation"]["host_cpu"] * w["elapsed_ns"] * 2 == pytest.approx(3000)
    assert 2000 < w["elapsed_ns"] < 2100


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


# --- the Rust combiner keeps the first slice's reports ----------------------------------------------------------------
def _python_combine(results, host):
    """The first slice's Python combiner (main at 984b4a1), kept as the oracle the Rust one must match exactly; since
    then a stage is busy for its own time carrying the bytes only (not while a slower upstream paces it), and
    "busiest" is "none" when nothing was busy."""
    import heapq
    import math

    class Fifo:
        def __init__(self, bytes_per_ns):
            self.bytes_per_ns, self.free_ns, self.busy_ns = bytes_per_ns, 0, 0

        def carry(self, start_ns, upstream_end_ns, nbytes):
            start = max(start_ns, self.free_ns)
            own = math.ceil(nbytes / self.bytes_per_ns)
            end = max(start + own, upstream_end_ns)
            self.busy_ns += own
            self.free_ns = end
            return start, end

    dirs = ("to_host", "to_device")
    stages = {d: [Fifo(host["uplink_bandwidth"]), Fifo(host["root_complex_bandwidth"])] for d in dirs}
    dram, cores, cpu_busy, latency = Fifo(host["dram_bandwidth"]), [(0, i) for i in range(host.cpu_cores)], 0, int(host["latency"])
    order = sorted((t.t_ns, r.device, seq, t) for r in results for seq, t in enumerate(r.transfers))
    delivered, delay = {r.device: 0 for r in results}, {r.device: 0 for r in results}
    for t_ns, dev, _, t in order:
        start, end = t_ns + latency, t_ns + latency
        for stage in (*stages[t.direction], dram):
            start, end = stage.carry(start, end, t.nbytes)
        if t.cpu_ns:
            free, core = heapq.heappop(cores)
            end = max(end, free) + t.cpu_ns
            cpu_busy += t.cpu_ns
            heapq.heappush(cores, (end, core))
        delivered[dev] = max(delivered[dev], end)
        delay[dev] += end - t_ns
    elapsed = max([0] + [r.end_ns for r in results] + list(delivered.values()))
    moved = {d: sum(t.nbytes for r in results for t in r.transfers if t.direction == d) for d in dirs}
    util = {"uplink_to_host": stages["to_host"][0].busy_ns, "uplink_to_device": stages["to_device"][0].busy_ns,
            "root_complex_to_host": stages["to_host"][1].busy_ns, "root_complex_to_device": stages["to_device"][1].busy_ns,
            "host_dram": dram.busy_ns, "host_cpu": cpu_busy / host.cpu_cores}
    util = {k: (v / elapsed if elapsed else 0.0) for k, v in util.items()}
    whole = {"devices": len(results), "elapsed_ns": elapsed, "bytes": moved, "transfers": len(order),
             "throughput_gb_s": (moved["to_host"] + moved["to_device"]) / elapsed if elapsed else 0.0,
             "utilisation": util, "busiest": max(util, key=lambda k: util[k]) if max(util.values()) > 0 else "none",
             "host": {p: v.value for p, v in host.params.items()}}
    devices = [{"device": r.device, "preset": r.preset, "own_end_ns": r.end_ns, "delivered_end_ns": delivered[r.device],
                "transfers": len(r.transfers),
                "bytes_to_host": sum(t.nbytes for t in r.transfers if t.direction == "to_host"),
                "bytes_to_device": sum(t.nbytes for t in r.transfers if t.direction == "to_device"),
                "mean_host_delay_ns": delay[r.device] / len(r.transfers) if r.transfers else 0.0, "report": r.report}
               for r in sorted(results, key=lambda r: r.device)]
    return {"whole": whole, "devices": devices}


_transfer = st.tuples(st.integers(0, 10**6), st.integers(1, 1 << 22), st.sampled_from(["to_host", "to_device"]),
                      st.integers(0, 10**5))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2 * 10**6), st.lists(_transfer, max_size=25)), min_size=1, max_size=6),
       st.sampled_from([{}, {"uplink_bandwidth": 0.7, "cpu_cores": 2}, {"latency": 0, "dram_bandwidth": 1.3},
                        {"root_complex_bandwidth": 0.25, "cpu_cores": 1}]))
def test_the_rust_combiner_gives_the_first_slices_reports_exactly(shards, overrides):
    results = [ShardResult(d, "p", [Transfer(*t) for t in ts], end, {}, None) for d, (end, ts) in enumerate(shards)]
    host = HostModel(overrides)
    assert combine(results[::-1], host).to_dict() == _python_combine(results, host)


@pytest.mark.parametrize("transfers, match", [
    ([(-1, 8)], "integers"), ([(0.5, 8)], "integers"), ([(0, "8")], "integers"), ([(0, 0)], "no bytes"),
    ([(0, 8, "to_host", -1)], "integers"), ([(2**64, 8)], "integers"),
])
def test_the_combiner_refuses_damaged_shard_results(transfers, match):
    with pytest.raises(InvalidArgument, match=match):
        combine([result(0, transfers)], HostModel())
    with pytest.raises(InvalidArgument, match="label 0"):
        combine([result(0, []), result(0, [])], HostModel())


# --- replication ----------------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 7), st.integers(1, 64), st.integers(0, 3000))
def test_replication_keeps_k_copies_on_distinct_devices_in_distinct_slots(devices, copies, chunk, total):
    copies = min(copies, devices)
    layout = Replicated(devices, copies, chunk)
    held = {d: layout.extents(d, total) for d in range(devices)}
    chunks = -(-total // chunk)
    for d, extents in held.items():
        offsets = [e.offset for e in extents]
        assert len(set(offsets)) == len(offsets) and offsets == sorted(offsets)  # distinct slots, in device order
        for e in extents:
            assert (d, e.offset) in layout.copies_of(e.logical)
        # the same as walking every chunk's copies (extents visits only the device's own chunks)
        walked = sorted((o, c * chunk) for c in range(chunks) for dd, o in layout.copies_of(c * chunk) if dd == d)
        assert [(e.offset, e.logical) for e in extents] == walked
    assert sum(len(x) for x in held.values()) == chunks * copies
    for c in range(chunks):
        assert len({d for d, _ in layout.copies_of(c * chunk)}) == copies


def test_replicated_reads_go_to_the_least_loaded_copy_deterministically():
    layout = Replicated(3, 2, 100)
    # Chunk 0 lives on devices 0 and 1, chunk 1 on 1 and 2, chunk 2 on 2 and 0.
    assert [d for d, _ in layout.copies_of(150)] == [1, 2]
    route = [layout.route(c * 100, 100)[0] for c in (0, 0, 0, 1, 2)]
    assert route == [0, 1, 0, 2, 2] and layout.load == [200, 100, 200]
    again = Replicated(3, 2, 100)
    assert [again.route(c * 100, 100)[0] for c in (0, 0, 0, 1, 2)] == route
    with pytest.raises(InvalidArgument, match="crosses"):
        layout.route(90, 20)
    for make in (lambda: Replicated(2, 3, 8), lambda: Replicated(2, 0, 8), lambda: Replicated(2, 1, 0),
                 lambda: layout.route(0, 0), lambda: layout.copies_of(-1), lambda: layout.extents(3, 10)):
        with pytest.raises(InvalidArgument):
            make()


def _replicated_reads(shard, total, chunk, copies):
    """Writes this device's copies, then reads what the routing (the same on every device) sends to it."""
    dev, layout = shard.device, Replicated(shard.devices, copies, chunk)
    for e in layout.extents(shard.index, total):
        dev.write(e.offset // dev.lba_bytes, scan.chunk_values(3, e.logical // chunk, e.nbytes))
    mine = [(c * chunk, off) for c in range(total // chunk) for d, off in [layout.route(c * chunk, chunk)]
            if d == shard.index]
    got = {}
    for logical, off in mine:
        got[logical] = dev.read(off // dev.lba_bytes, chunk // dev.lba_bytes).view(np.int64)
        shard.transfer(dev.now_ns, chunk)
    return got


def test_a_replicated_table_reads_back_from_the_chosen_copies():
    chunk, total = 8 * KIB, 12 * 8 * KIB
    report, parts = Array(3).run(_replicated_reads, total, chunk, 2)
    got = {k: v for p in parts for k, v in p.items()}
    assert sorted(got) == [c * chunk for c in range(12)]
    for c in range(12):
        assert np.array_equal(got[c * chunk], scan.chunk_values(3, c, chunk))
    assert [d["transfers"] for d in report.devices] == [4, 4, 4]  # balanced over the copies
    assert [d["report"]["ops"]["write"]["bytes"] for d in report.devices] == [8 * chunk] * 3  # two copies each


# --- back-pressure: closed-loop rounds ------------------------------------------------------------------------------
def _latency_us(report):
    return [d["report"]["ops"]["read"]["latency"]["mean_us"] for d in report.devices]


def test_a_closed_loop_host_waits_for_the_saturated_uplink():
    # Four cosmos-plus devices behind a 2 GB/s uplink (each alone reads ~1.4 GB/s): the uplink is saturated.
    array = Array(4, host={"uplink_bandwidth": 2.0})
    args = (4 * 512 * KIB,)
    open_loop, answer = scan.run(array, *args, **SMALL)
    closed, answer_closed = scan.run(Array(4, host={"uplink_bandwidth": 2.0}, closed_loop=10), *args, **SMALL)
    assert answer_closed == answer
    loop = closed.whole["closed_loop"]
    assert loop["converged"] and 1 <= loop["rounds"] <= 10 and loop["max_change_ns"] == 0
    # The uplink carried the same bytes at its rate: throughput within a few percent (the host now closes its queue
    # after consuming the last bytes), never above the uplink.
    assert closed.throughput_gb_s == pytest.approx(open_loop.throughput_gb_s, rel=0.06)
    assert closed.throughput_gb_s <= 2.0
    # Commands no longer pile up in a device while the uplink is behind: shorter device latencies, shorter waits at
    # the host, and each device's own clock runs until its host has consumed its last bytes.
    assert all(c < o for c, o in zip(_latency_us(closed), _latency_us(open_loop)))
    assert all(c["mean_host_delay_ns"] < o["mean_host_delay_ns"] for c, o in zip(closed.devices, open_loop.devices))
    assert all(d["own_end_ns"] >= d["delivered_end_ns"] for d in closed.devices)


@pytest.mark.parametrize("rounds", [-1, 1.5, "2", True, 1001])
def test_bad_closed_loop_rounds_are_refused(rounds):
    with pytest.raises(InvalidArgument, match="closed_loop"):
        Array(1).run(_bad_transfer, 0, 8, "to_host", 0, closed_loop=rounds)
