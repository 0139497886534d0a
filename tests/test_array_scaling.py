"""The shared scaling experiment (nearflash.array.scaling): the host's limit per unit of work, the knee predicted
before measuring, the measured knee and crossing, and `nearflash experiment array issd --quick` end to end."""

import json
import math
import subprocess
import sys

import pytest

from nearflash import cli
import numpy as np

from nearflash.array import Array, HostModel, PathCost, programs, scaling, scan
from nearflash.errors import InvalidArgument
from nearflash.programs import example, have_clang

needs_clang = pytest.mark.skipif(not have_clang(), reason="the in-storage scan's program needs clang (Debian's clang)")


def test_the_host_limit_follows_each_resource_by_hand():
    host = HostModel({"uplink_bandwidth": 10, "root_complex_bandwidth": 20, "dram_bandwidth": 12, "cpu_cores": 4})
    # 2 B up per unit: uplink 10e9 / 2 = 5e9 units/s; DRAM 12e9 / 2 = 6e9; cores 4 / 1 ns = 4e9: the CPU sets it.
    assert host.limit(PathCost(2.0, 0.0, 1.0)) == (4e9, "host CPU")
    assert host.limit(PathCost(2.0, 0.0, 0.5)) == (5e9, "switch uplink")
    # Full duplex: 2 B up and 2 B down load the uplink with 2 B, DRAM (shared) with 4: 12e9 / 4 = 3e9.
    assert host.limit(PathCost(2.0, 2.0)) == (3e9, "host DRAM")
    assert host.limit(PathCost(0.0)) == (math.inf, "switch uplink")
    # The host path's GB/s limit of the first slice is the same formula at 1 B per unit.
    assert HostModel().host_path_limit_gb_s(0.125) == (pytest.approx(26.87), "switch uplink")


@pytest.mark.parametrize("kw", [
    dict(to_host_bytes=-1), dict(to_host_bytes=float("nan")), dict(to_host_bytes="8"), dict(to_host_bytes=True),
    dict(to_host_bytes=1, cpu_ns=-0.5), dict(to_host_bytes=1, to_device_bytes=float("inf")),
    dict(to_host_bytes=1, device_rate=0), dict(to_host_bytes=1, device_rate=-3.0), dict(to_host_bytes=1, device_rate="fast"),
])
def test_bad_path_costs_are_refused(kw):
    with pytest.raises(InvalidArgument, match="PathCost"):
        PathCost(**kw)


@pytest.mark.parametrize("ns", [[], [2, 4], [1, 1], [1, 4, 2], "1,2", [1, 0], [1, 2.5], None])
def test_bad_device_lists_are_refused(ns):
    with pytest.raises(InvalidArgument, match="devices"):
        scaling.check_ns(ns)


def test_a_scaling_work_must_cost_both_paths():
    with pytest.raises(InvalidArgument, match="both paths"):
        scaling.Scaling("x", "B", lambda a, p, e: None, {"host": PathCost(1.0)})


def _points(rates):
    return [{"devices": n, "rate": r} for n, r in rates]


def test_measured_knee_and_crossing_by_hand():
    flat = _points([(1, 10.0), (2, 20.0), (4, 30.0), (8, 31.0)])
    flat[-1].update(busiest="switch uplink", busiest_utilisation=0.97)
    assert scaling.measured_knee(flat) == pytest.approx(3.1)  # 31 / 10
    assert scaling.flattening(flat)["cause"] == "switch uplink (97% busy)"
    assert scaling.measured_knee(_points([(1, 10.0), (2, 19.5), (4, 38.0)])) is None  # still within 90% of linear
    # Below linear with no shared stage saturated: the devices' own pace (the slowest shard), not a knee.
    slow = _points([(1, 10.0), (2, 19.0), (4, 36.0), (8, 64.0)])
    slow[-1].update(busiest="switch uplink", busiest_utilisation=0.37)
    assert scaling.measured_knee(slow) is None
    assert "no shared stage saturated (busiest: switch uplink, 37%)" in scaling.flattening(slow)["cause"]
    isc = _points([(1, 2.0), (2, 4.0), (4, 30.0), (8, 60.0)])
    assert scaling.crossing(flat, isc) == 4
    assert scaling.crossing(flat, _points([(1, 1.0), (2, 2.0), (4, 4.0), (8, 8.0)])) is None


def test_the_prediction_uses_the_one_device_rate_and_the_limit():
    work = scaling.Scaling("x", "B", lambda a, p, e: None,
                           {"host": PathCost(1.0, 0.0, 0.0, 2e9, "preset"), "in_storage": PathCost(0.001)})
    pred = scaling.predict(work, HostModel({"uplink_bandwidth": 5}), [1, 2, 4])
    assert pred["host"]["limit"] == 5e9 and pred["host"]["knee_devices"] == 2.5
    assert pred["host"]["limits"] == {"1": 5e9, "2": 5e9, "4": 5e9}
    assert pred["in_storage"]["limit"] == 5e12 and pred["in_storage"]["knee_devices"] is None


def test_a_host_cost_paid_once_per_query_spreads_over_the_devices():
    host = HostModel({"cpu_cores": 4})
    # 1 ns per unit (a query on one shard) and 3 ns once per query (hashing it on the host): 1 + 3 / N per unit.
    cost = PathCost(0.0, 0.0, 1.0, cpu_ns_per_query=3.0)
    assert host.limit(cost) == (1e9, "host CPU") and host.limit(cost, 3) == (2e9, "host CPU")
    # N x B1 = L(N) at B1 = 0.5e9 units/s: N (0.5e9)(1 + 3 / N) = 4e9, N = 5
    assert host.knee(cost, 0.5e9) == (5.0, "host CPU")
    assert host.knee(cost, 2e9) == (0.0, "host CPU")  # hashing alone takes every core at one device's rate
    assert host.knee(PathCost(0.0, cpu_ns_per_query=3.0), 1e9)[0] == math.inf  # no per-unit cost: no knee
    assert host.knee(PathCost(2.0), 1e9) == (26.87 / 2, "switch uplink")  # byte limits: limit / B1
    work = scaling.Scaling("x", "query x shard", lambda a, p, e: None,
                           {"host": PathCost(0.0, 0.0, 1.0, 0.5e9, "preset", cpu_ns_per_query=3.0),
                            "in_storage": PathCost(1.0)})
    pred = scaling.predict(work, host, [1, 3, 8])
    assert pred["host"]["limits"] == {"1": 1e9, "3": 2e9, "8": 4e9 / (1 + 3 / 8)}
    assert pred["host"]["limit"] == 4e9 / (1 + 3 / 8) and pred["host"]["knee_devices"] == 5.0
    for bad in (0, 0.5, -1, float("nan"), "2"):
        with pytest.raises(InvalidArgument, match="devices"):
            host.limit(cost, bad)
    for bad in (0, -1.0, float("inf"), "fast"):
        with pytest.raises(InvalidArgument, match="device_rate"):
            host.knee(cost, bad)
    with pytest.raises(InvalidArgument, match="cpu_ns_per_query"):
        PathCost(1.0, cpu_ns_per_query=-1.0)


def test_read_rate_is_the_presets_link_by_hand():
    # samsung-970pro: PCIe 3.0 x4 = 8 GT/s x 128/130 / 8 x 4 lanes x 0.853125 = 3.36 GB/s (its flash: 8 x 800 MB/s).
    rate, by = scan.read_rate("samsung-970pro")
    assert rate == pytest.approx(3.36e9, rel=1e-4) and by == "host link"
    rate, by = scan.read_rate("samsung-970pro", {"nand.channels": 2})
    assert rate == pytest.approx(1.6e9) and by == "flash channels"


@needs_clang
def test_array_issd_quick_writes_the_prediction_the_points_and_the_plot(tmp_path, capsys):
    rc = cli.main(["experiment", "array", "issd", "--quick", "--out", str(tmp_path), "--set", "devices=1,2,4"])
    assert rc == 0, capsys.readouterr().err
    out = tmp_path / "array"
    assert (out / "issd.md").exists() and (out / "issd-scaling.png").stat().st_size > 0
    res = json.loads((out / "issd.json").read_text())
    # The prediction is written down before the first measurement: the record's keys keep their insertion order.
    assert list(res["data"])[:2] == ["prediction", "host"]
    host = res["data"]["prediction"]["host"]
    assert host["limit_by"] == "switch uplink" and host["knee_devices"] == pytest.approx(2.5, rel=0.01)
    rates = {p["devices"]: p["rate"] for p in res["data"]["points"]["host"]}
    assert rates[4] <= host["limit"] * 1.0001 < 4 * rates[1]  # flattened at the uplink, never above it
    comps = {c["metric"]: c for c in res["comparisons"]}
    knee = comps["host path: knee"]
    assert knee["reference"] == "model" and not knee["prediction"] and knee["comparable"]
    assert knee["ours"] == pytest.approx(knee["paper"], rel=0.15)
    assert comps["host path: one device"]["ours"] <= comps["host path: one device"]["paper"]  # the preset's bound
    isc = {p["devices"]: p["rate"] for p in res["data"]["points"]["in_storage"]}
    assert isc[4] == pytest.approx(4 * isc[1], rel=0.02)  # in storage: linear, its merge is 16 B a piece


# --- programs on every drive's local data ---------------------------------------------------------------------------
def _local_ints(shard, nbytes, piece):
    """Each drive's own int64 values (seeded by its index), in pieces of `piece` bytes."""
    dev = shard.device
    values = scan.chunk_values(11, shard.index, nbytes)
    dev.write(0, values)
    return [(off // dev.lba_bytes, piece // dev.lba_bytes, piece) for off in range(0, nbytes, piece)]


@needs_clang
@pytest.mark.parametrize("path", ["in_storage", "host"])
def test_a_program_runs_on_every_drives_local_data_and_the_host_reduces(path):
    nbytes, piece, threshold = 96 * 1024, 32 * 1024, 1 << 19
    job = programs.Job(example("threshold_sum"), 16, cparam1=threshold)
    report, (count, total) = programs.run(Array(3), job, _local_ints, nbytes, piece, path=path, reduce=scan.count_and_sum)
    values = np.concatenate([scan.chunk_values(11, d, nbytes) for d in range(3)])
    assert (count, total) == (int((values > threshold).sum()), int(values[values > threshold].sum()))
    per_device = 16 * 3 if path == "in_storage" else nbytes  # 3 pieces of 16 B each, or every byte
    assert [d["bytes_to_host"] for d in report.devices] == [per_device] * 3
    if path == "host":  # the program's instructions run on the shared host's cores
        assert report.whole["utilisation"]["host_cpu"] > 0


def _bad_piece(shard, piece):
    return [piece]


@pytest.mark.parametrize("make, match", [
    (lambda: programs.Job(b"", 16), "program"), (lambda: programs.Job(b"x", 0), "out_bytes"),
    (lambda: programs.Job(b"x", 16, "params"), "params"), (lambda: programs.Job(b"x", 16, cparam1=-1), "cparam1"),
    (lambda: programs.run(Array(1), "job", _bad_piece, (0, 1, 1)), "Job"),
    (lambda: programs.run(Array(1), programs.Job(b"x", 16), _bad_piece, (0, 1, 1), path="gpu"), "path"),
    (lambda: programs.run(Array(1), programs.Job(b"x", 16), "local"), "functions"),
    (lambda: programs.run(Array(1), programs.Job(b"x", 16), _bad_piece, (0, 1, 1), path="host", depth=0), "depth"),
    (lambda: programs.run(Array(1), programs.Job(b"x", 16), _bad_piece, (0, 1), path="host"), "piece 0"),
    (lambda: programs.run(Array(1), programs.Job(b"x", 16), _bad_piece, (-1, 1, 1), path="host"), "lba"),
    (lambda: programs.run(Array(1), programs.Job(b"x", 16), _bad_piece, (0, 1, 10**6), path="host"), "fit"),
    (lambda: programs.run(Array(1), programs.Job(b"x", 16), _bad_piece, (2**40, 1, 1), path="host"), "fit"),
])
def test_bad_program_jobs_and_pieces_are_refused(make, match):
    with pytest.raises(InvalidArgument, match=match):
        make()


@needs_clang
def test_array_programs_quick_checks_the_merged_answer_and_marks_the_model(tmp_path, capsys):
    rc = cli.main(["experiment", "array", "programs", "--quick", "--out", str(tmp_path), "--set", "devices=1,2,4"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "array" / "programs.json").read_text())
    assert (tmp_path / "array" / "programs-scaling.png").stat().st_size > 0
    assert all(c["reference"] == "model" and not c["prediction"] for c in res["comparisons"])
    host = res["data"]["prediction"]["host"]
    assert host["limit_by"] == "switch uplink" and 0 < res["data"]["points"]["host"][-1]["rate"] <= host["limit"]


# --- memory per simulated device ------------------------------------------------------------------------------------
def test_devices_of_4_tb_cost_the_host_only_what_they_hold():
    # In a fresh process (a clean peak RSS): four in-memory devices of 4 TB each open at once, 1 MiB written and read
    # back on each. Their mapping tables and OOB areas alone span ~5 GB of address space each, mapped without swap
    # reservation: a device must cost tens of MiB, not GBs (the figure for 64 devices is in docs/arrays.md).
    code = ("import json; from nearflash.array import memory as m; "
            "print(json.dumps(m.open_all(4, 'samsung-970pro', m.capacity_overrides('samsung-970pro', 4.0), 1)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert 4.0 <= r["capacity_tb"] < 4.1
    assert r["per_device_mib"] < 100, r


@pytest.mark.parametrize("argv, says", [(["--devices", "0"], "--devices"), (["--mib-per-device", "0"], "--mib-per-device"),
                                        (["--tb", "-1"], "--tb"), (["--tb", "nan"], "--tb"),
                                        (["--preset", "nosuch"], "nosuch")])
def test_the_memory_check_refuses_bad_sizes(argv, says, capsys):
    from nearflash.array import memory

    with pytest.raises(SystemExit) as e:
        memory.main(argv)
    assert e.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [(["--devices", "1,x"], "--devices"), (["--devices", "0"], "--devices"),
                                        (["--devices", "2,4"], "devices must start at 1"),
                                        (["--devices", "1,-2"], "--devices"), (["--mib-per-device", "0"], "--mib-per-device"),
                                        (["--uplink", "-1"], "--uplink"), (["--uplink", "nan"], "--uplink"),
                                        (["--preset", "nosuch"], "nosuch")])
def test_the_scan_cli_refuses_bad_input_naming_it(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        scan.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and "Traceback" not in err, err
