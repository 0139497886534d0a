"""The shared scaling experiment (nearflash.array.scaling): the host's limit per unit of work, the knee predicted
before measuring, the measured knee and crossing, and `nearflash experiment array issd --quick` end to end."""

import json
import math

import pytest

from nearflash import cli
from nearflash.array import Array, HostModel, PathCost, scaling, scan
from nearflash.errors import InvalidArgument
from nearflash.programs import have_clang

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
    assert scaling.measured_knee(flat) == pytest.approx(3.1)  # 31 / 10
    assert scaling.measured_knee(_points([(1, 10.0), (2, 19.5), (4, 38.0)])) is None  # still within 90% of linear
    isc = _points([(1, 2.0), (2, 4.0), (4, 30.0), (8, 60.0)])
    assert scaling.crossing(flat, isc) == 4
    assert scaling.crossing(flat, _points([(1, 1.0), (2, 2.0), (4, 4.0), (8, 8.0)])) is None


def test_the_prediction_uses_the_one_device_rate_and_the_limit():
    work = scaling.Scaling("x", "B", lambda a, p, e: None,
                           {"host": PathCost(1.0, 0.0, 0.0, 2e9, "preset"), "in_storage": PathCost(0.001)})
    pred = scaling.predict(work, HostModel({"uplink_bandwidth": 5}))
    assert pred["host"]["limit"] == 5e9 and pred["host"]["knee_devices"] == 2.5
    assert pred["in_storage"]["limit"] == 5e12 and pred["in_storage"]["knee_devices"] is None


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
    assert (out / "issd.md").exists() and (out / "scaling.png").stat().st_size > 0
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
