"""The analytic model: the digest's derived checks and the paper's Fig. 7-10 statements."""

import pytest

from nearflash import InvalidArgument
from nearflash.issd import model


def close(a, b, rel=0.01):
    return abs(a - b) <= rel * abs(b)


@pytest.fixture(scope="module")
def params():
    return model.parameters()


def test_host_bandwidths_are_813_552_219_8258(params):
    # [derived] B_host = n_host_cpu x 3.2 GHz / CPB_host with 8 CPUs
    expect = {"linear_regression": 813e6, "string_match": 552e6, "kmeans": 219e6, "scan": 8258e6}
    host = next(c for c in params["configs"] if c["name"] == "HOST-8G")
    for p in params["profiles"]:
        assert close(host["n_host_cpu"] * host["f_host_cpu"] / p["cpb_host"], expect[p["name"]])
    # through Eq. 1: compute-bound kernels reach it on every link
    for cfg in ("HOST-SATA", "HOST-4G", "HOST-8G"):
        assert close(model.bandwidth(cfg, "kmeans", 64), 219e6)
        assert close(model.bandwidth(cfg, "string_match", 64), 552e6)


def test_linear_regression_iso_performance_needs_50_4_and_15_2_fmcs():
    pts = {(p["n_host_cpu"], p["accelerated"]): p["channels"] for p in model.fig8("linear_regression", 600e6)}
    assert close(pts[(16, False)], 50.4) and close(pts[(16, True)], 15.2)
    # per-channel rates behind them: 11.9 and 39.6 MB/s
    assert close(model.bandwidth("iSSD-400", "linear_regression", 1), 11.9e6)
    assert close(model.bandwidth("iSSD-XL", "linear_regression", 1), 39.6e6)


def test_scan_reaches_12_8_gb_s_at_32_channels():
    for p in model.fig9("scan"):
        assert close(p["issd_only"], 12.8e9) and close(p["combined"], 12.8e9)
    e = model.evaluate("iSSD-XL", "scan", 32)
    assert close(e["bandwidth"], 12.8e9) and e["bottleneck"] in ("nand2fmc", "fmc")


def test_partitioning_adds_host_and_issd_for_linear_regression():
    four = next(p for p in model.fig9("linear_regression") if p["n_host_cpu"] == 4)
    assert 1.6e9 < four["combined"] < 1.7e9  # "nearly 1,700 MB/s" over a 600 MB/s link
    assert close(four["combined"], four["host_only"] + four["issd_only"], rel=0.2)
    part = model.partition("iSSD-XL", "linear_regression", 32, config_overrides={"r_host": 600e6, "n_host_cpu": 4})
    assert part["bound"] == "balanced" and 0 < part["fraction_issd"] < 1


def test_fig7_shapes():
    rows = model.fig7("scan")
    xl = {r["n_ch"]: r["bandwidth"] for r in rows if r["config"] == "iSSD-XL"}
    assert xl[40] < xl[48] and close(xl[64], xl[48], rel=1e-9)  # saturates above 48 FMCs
    kmeans = {(r["config"], r["n_ch"]): r["bandwidth"] for r in model.fig7("kmeans")}
    assert kmeans[("iSSD-XL", 24)] > kmeans[("HOST-8G", 24)] > kmeans[("iSSD-XL", 16)]
    for n in (8, 16, 32, 64):
        assert close(kmeans[("HOST-SATA", n)], kmeans[("HOST-8G", n)])  # the link does not matter


def test_energy_breakdown_and_savings():
    for k in model.KERNELS:
        (_, host), (_, plain), (_, xl) = model.fig10(k)
        total = lambda e: sum(v for _, v in e["per_byte"])  # noqa: E731
        assert close(total(host), host["epb_comp"] + host["epb_xfer"], rel=1e-9)
        assert total(host) > 3 * total(plain) > 3 * total(xl)
        comps = dict(host["per_byte"])
        assert comps["fmc_processor"] == 0 and comps["host_cpu"] > 0
    sm = dict(model.energy("HOST-SATA", "string_match", 8)["per_byte"])
    assert close(sm["host_cpu"], 0.82e-9 * 54.0)  # E_CPU x IPB = 44.3 nJ/B
    e = model.energy("iSSD-400", "scan", 8, energy_overrides={"p_static": 2.0})
    assert close(e["e_static"], 2.0 * e["t_total"]) and close(e["e_total"], e["e_dyn"] + e["e_static"])


def test_overrides_and_errors():
    base = model.bandwidth("iSSD-400", "scan", 8)
    assert close(model.bandwidth("iSSD-400", "scan", 8, config_overrides={"f_fmc": 800e6}), 2 * base)
    with pytest.raises(InvalidArgument, match="unknown configuration"):
        model.evaluate("iSSD-9000", "scan", 8)
    with pytest.raises(InvalidArgument, match="no model profile"):
        model.evaluate("iSSD-400", "sort", 8)
    with pytest.raises(InvalidArgument, match="unknown kernel profile parameter"):
        model.evaluate("iSSD-400", "scan", 8, kernel_overrides={"gamma": 1})
    with pytest.raises(InvalidArgument, match="positive"):
        model.evaluate("iSSD-400", "scan", 0)
    with pytest.raises(InvalidArgument, match="partitioning needs an iSSD"):
        model.partition("HOST-SATA", "scan", 8)
