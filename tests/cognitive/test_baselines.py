"""The modelled baselines (B-CPU, B-GPU, B-FPGA, B-DLG-x) and Table 6's energy: parts add up, costs move the way the
data path says, and the fig11 / served experiments run end to end on small settings."""

import json
import shutil

import pytest

from nearflash.cli import main
from nearflash.cognitive import baselines as bl

from cognitive_fixtures import DATA

M = {"cssd": 3e-3, "cpu_hash": 1e-3, "cpu_search": 2e-4, "read_page": 1.8e-4, "read_weights": 2.2e-4, "pages": 20.0,
     "host_pages": 15.0,
     "weight_bytes": 84880, "image_bytes": 784, "flops": 2.3e6, "layers": 10, "npe_ddr": 9e-5, "gse": 6e-5}


def test_parts_and_data_paths():
    p = bl.params()
    parts = bl.latencies(M, p)
    assert set(parts) == set(bl.CONFIGS)
    assert parts["Cognitive SSD"] == {"device": M["cssd"]}
    # every host-side baseline pays the same weight and page reads through the kernel stack, each page once
    for c in ("B-CPU", "B-GPU", "B-FPGA", "B-DLG-x"):
        assert parts[c]["read pages"] == pytest.approx(M["host_pages"] * M["read_page"])
        assert parts[c]["read weights"] == M["read_weights"]
    # B-DLG-x ships each page over PCIe to the board: more pages, more PCIe time; the others' PCIe does not change
    more = bl.latencies({**M, "pages": 40.0}, p)
    assert more["B-DLG-x"]["PCIe"] > parts["B-DLG-x"]["PCIe"] and more["B-GPU"]["PCIe"] == parts["B-GPU"]["PCIe"]
    # a faster GPU (more FLOP/s) or a slower PCIe shows in the parts they feed
    fast = bl.latencies(M, bl.params(gpu_flops=2 * p["gpu_flops"]))
    assert fast["B-GPU"]["hash (GPU)"] < parts["B-GPU"]["hash (GPU)"]
    slow = bl.latencies(M, bl.params(fpga_pcie_bw=p["fpga_pcie_bw"] / 4))
    assert slow["B-FPGA"]["PCIe"] > parts["B-FPGA"]["PCIe"]
    with pytest.raises(ValueError, match="gpu_flop"):
        bl.params(gpu_flop=1)


def test_energy_is_power_times_busy_time():
    lat = {c: 0.01 * (i + 1) for i, c in enumerate(bl.CONFIGS)}
    en = bl.energy(lat)
    for c, l in lat.items():
        idle, active = bl.POWER_W[c]
        assert en[c]["energy_j"] == pytest.approx(active * l)
        assert en[c]["dynamic_energy_j"] == pytest.approx((active - idle) * l)
        assert en[c]["qps_per_w"] == pytest.approx(1 / l / active)
    # Table 6 as printed: the paper's 34.4% and 63.0% active-power cuts follow from it
    assert 1 - bl.POWER_W["Cognitive SSD"][1] / bl.POWER_W["B-CPU"][1] == pytest.approx(0.344, abs=5e-4)
    assert 1 - bl.POWER_W["Cognitive SSD"][1] / bl.POWER_W["B-GPU"][1] == pytest.approx(0.630, abs=5e-4)


def test_npe_on_board_ddr_is_not_slower_than_on_flash_channels():
    ddr = bl.npe_seconds("fashion", 48, 1, 12.8e9, 100e6)
    flash = bl.npe_seconds("fashion", 48, 8, 200e6, 100e6)
    assert 0 < ddr <= flash
    assert bl.network_flops([{"layer": "conv1", "compute_cycles": 10.0, "weight_bytes": 0.0},
                             {"layer": "fc1", "compute_cycles": 0.0, "weight_bytes": 100.0}]) == 2 * 256 * 10 + 200


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
def test_fig11_quick(tmp_path):
    argv = ["experiment", "cognitive", "fig11", "--quick", "--out", str(tmp_path), "--set", "db=600",
            "--set", "queries=4", "--set", "ts=10,40"]
    assert main(argv) == 0
    out = json.loads((tmp_path / "cognitive" / "fig11.json").read_text())
    lat = out["data"]["latency_s"]["fashion"]
    assert set(lat) == {"10", "40"} and all(v > 0 for t in lat.values() for v in t.values())
    # B-CPU pays for everything on the host: slower than the Cognitive SSD
    assert all(t["B-CPU"] > t["Cognitive SSD"] for t in lat.values())
    # Hash-AlexNet: 60 MB of weights cross the host for every baseline query; the device reads them from flash
    alex, costs = out["data"]["latency_s"]["hash_alexnet"], out["data"]["costs"]
    assert costs["hash_alexnet"]["weight_bytes"] > 500 * costs["fashion"]["weight_bytes"]
    assert all(t[b] > t["Cognitive SSD"] for t in alex.values() for b in ("B-CPU", "B-FPGA", "B-DLG-x"))
    assert (tmp_path / "cognitive" / "fig11_latency_qps.png").exists()
    # B-CPU's CPU parts are counted work x the host_* costs: the MACs of the Fashion CNN x host_mac_time
    costs = out["data"]["costs"]["fashion"]
    assert costs["macs"] == 1121280 and costs["cpu_hash"] == pytest.approx(costs["macs"] * bl.host_cost("host_mac_time"))
    per_t = out["data"]["measured"]["per_t"]
    assert all(0 < m["host_pages"] <= m["pages"] for m in per_t), "the host reads each page once per query"
    marks = {c["metric"]: c for c in out["comparisons"]}
    assert marks["hash_alexnet: latency reduction of the Cognitive SSD vs B-CPU"]["paper_input"]
    assert not marks["fashion: latency reduction of the Cognitive SSD vs B-CPU"]["paper_input"]
    assert all(c["paper_input"] for m, c in marks.items() if "QPS/W" in m or "active power" in m)


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
def test_served_quick(tmp_path):
    if shutil.which("ab") is None:
        pytest.skip("ApacheBench (`ab`, Debian apache2-utils) is not installed")
    argv = ["experiment", "cognitive", "served", "--quick", "--out", str(tmp_path), "--set", "db=400",
            "--set", "requests=30", "--set", "ts=5"]
    assert main(argv) == 0
    out = json.loads((tmp_path / "cognitive" / "served.json").read_text())
    table = next(t for t in out["tables"] if t["name"].startswith("ApacheBench"))
    row = dict(zip(table["columns"], table["rows"][0]))
    assert row["ab req/s"] > 0 and row["failed or non-2xx"] == 0 and row["device ms (modelled, per query)"] > 0


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
def test_fig9_quick_costs_the_cpu_by_counted_work_through_a_page_cache(tmp_path):
    argv = ["experiment", "cognitive", "fig9", "--quick", "--out", str(tmp_path), "--set", "db=600",
            "--set", "queries=4", "--set", "ts=10,40"]
    assert main(argv) == 0
    out = json.loads((tmp_path / "cognitive" / "fig9.json").read_text())
    tables = {t["name"].split(" (")[0].split(":")[0]: [dict(zip(t["columns"], r)) for r in t["rows"]] for t in out["tables"]}
    main_rows = tables["Graph search per query"]
    for r in main_rows:
        # brute force: every code once, at the reference machine's cost per code
        assert r["CPU brute force ms"] == pytest.approx(600 * bl.host_cost("host_hamming_time") * 1e3)
        # a page cache kept across queries misses no more than one emptied before each; neither re-reads in a query
        assert r["CPU graph ms (DRAM)"] <= r["CPU graph ms (SSD, warm page cache)"] <= r["CPU graph ms (SSD, cold per query)"]
        assert 0 < r["recall vs brute % (ids)"] <= r["recall vs brute % (ties interchangeable)"] <= 100
    side = tables["The CPU side"]
    plain_pages = -(-600 // 63)
    assert all(0 < r["SSD pages (warm cache)"] <= r["SSD pages (cold cache)"] <= plain_pages for r in side)
    rule = tables["Issue 27"]
    assert all(r["precision % (converged)"] >= 0.97 * r["precision % (count 4T)"] for r in rule)
