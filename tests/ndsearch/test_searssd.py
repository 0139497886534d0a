"""SearSSD modelled on the host: its ids and distances equal the host search's; reordering and dynamic
allocating cut page accesses and time; speculation is used; parameters carry sources; bad arguments are refused."""

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash.ndsearch import Index, searssd, synthetic

GEOM = {"luns": 8, "planes_per_lun": 2, "blocks_per_plane": 64, "pages_per_block": 16, "page_bytes": 2048}


@pytest.fixture(scope="module")
def setup():
    base = synthetic("sift-like", 3000, seed=4)[:, :32]
    q = synthetic("sift-like", 64, seed=4, queries=True)[:, :32]
    ix = Index(32, "l2", dtype="uint8", R=10, ef_construction=60)
    ix.add(base)
    return ix, q


def test_results_equal_host_search_and_scheduling_helps(setup):
    ix, q = setup
    hd, hi = ix.search(q, 10, ef=32)
    reps = {}
    for reorder, dynamic in (("none", False), ("degree", False), ("random", False), ("degree", True)):
        rep, d, i = searssd.batch(ix, q, 10, 32, reorder=reorder, dynamic=dynamic, geometry=GEOM)
        assert np.array_equal(i, hi) and np.array_equal(d, hd)
        reps[(reorder, dynamic)] = rep
    assert reps[("degree", False)]["page_access_ratio"] < reps[("none", False)]["page_access_ratio"]
    assert reps[("degree", True)]["page_access_ratio"] < reps[("degree", False)]["page_access_ratio"]
    assert reps[("degree", True)]["total_ns"] < reps[("degree", False)]["total_ns"]
    assert reps[("degree", False)]["bandwidth"] < reps[("none", False)]["bandwidth"]
    spec, _, si = searssd.batch(ix, q, 10, 32, params={"speculate": 4}, geometry=GEOM)
    assert np.array_equal(si, hi) and spec["speculation_used"] > 0


def test_parameters_have_units_and_sources():
    ps = {p[0]: p for p in searssd.parameters()}
    assert ps["logic_clock"][2] == "MHz" and "800" in ps["logic_clock"][1]
    assert all(p[3] for p in ps.values())


def test_bad_arguments(setup):
    ix, q = setup
    with pytest.raises(InvalidArgument, match="reorder"):
        searssd.batch(ix, q, reorder="rcm")
    with pytest.raises(InvalidArgument, match="unknown parameter"):
        searssd.batch(ix, q, params={"warp_drive": 1}, geometry=GEOM)
    with pytest.raises(InvalidArgument, match="ecc_fail_probability"):
        searssd.batch(ix, q, params={"ecc_fail_probability": 2}, geometry=GEOM)
    with pytest.raises(InvalidArgument, match="geometry"):
        searssd.batch(ix, q, geometry={"luns": 0})
    with pytest.raises(InvalidArgument, match="blocks per plane"):
        searssd.batch(ix, q, geometry={**GEOM, "blocks_per_plane": 1, "pages_per_block": 1})
    with pytest.raises(InvalidArgument, match="uint8"):
        searssd.batch(ix, q.astype(np.float32))
    n = ix.ntotal
    _, d, i = searssd.batch(ix, q[:3], k=n + 2, ef=8, geometry=GEOM)  # beyond the index: padded, as Index.search
    assert (i[:, n:] == -1).all() and np.isinf(d[:, n:]).all() and (i[:, :n] >= 0).all()
    with pytest.raises(InvalidArgument, match="k"):
        searssd.batch(ix, q, k=0)
    with pytest.raises(InvalidArgument, match="index"):
        searssd.batch("not an index", q)


def test_baselines_equal_the_host_search_and_are_slower(setup):
    ix, q = setup
    hd, hi = ix.search(q, 10, ef=32)
    geom = dict(GEOM, luns=64)  # 8 channels: more channel bandwidth than the FPGA link
    reps = {}
    for d in searssd.DESIGNS:
        rep, dd, di = searssd.batch(ix, q, 10, 32, geometry=geom, design=d)
        assert np.array_equal(di, hi) and np.array_equal(dd, hd), d
        assert rep["design"] == d and rep["energy_j"] > 0
        reps[d] = rep
    assert len({r["page_reads"] for r in reps.values()}) == 1  # same trace and allocation for every placement
    assert reps["searssd"]["qps"] > reps["ds-cp"]["qps"] > reps["ds-c"]["qps"]
    assert reps["ds-cp"]["qps"] > reps["smartssd-only"]["qps"]
    assert reps["searssd"]["queries_per_joule"] > reps["ds-cp"]["queries_per_joule"]
    single, _, si = searssd.batch(ix, q, 10, 32, geometry=geom, multiplane=False)
    assert np.array_equal(si, hi) and single["read_ops"] > reps["searssd"]["read_ops"]
    # a costlier page sense costs the page-moving designs energy, not time
    dear, _, _ = searssd.batch(ix, q, 10, 32, geometry=geom, design="ds-c", baseline={"e_page_sense": 50})
    assert dear["energy_j"] > reps["ds-c"]["energy_j"] and dear["total_ns"] == reps["ds-c"]["total_ns"]
    ps = {p[0]: p for p in searssd.baseline_parameters()}
    assert ps["ds_mac_budget"][1].split()[0] == "1024" and all(p[3] for p in ps.values())


@pytest.mark.parametrize("kw, match", [
    ({"design": "deepstore"}, "design must be one of"),
    ({"design": 3}, "design must be one of"),
    ({"baseline": [1]}, "baseline must be a dict"),
    ({"multiplane": "no"}, "multiplane must be True or False"),
    ({"baseline": {"no_such": 1}}, "no_such"),
    ({"baseline": {"ds_mac_budget": 0}}, "ds_mac_budget"),
    ({"baseline": {"p_ssd": "hot"}}, "p_ssd"),
])
def test_bad_baseline_arguments_are_refused(setup, kw, match):
    ix, q = setup
    with pytest.raises(InvalidArgument, match=match):
        searssd.batch(ix, q, 10, 32, geometry=GEOM, **kw)
