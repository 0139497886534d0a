"""The iSSD experiments run in quick mode, write JSON + Markdown + PNG, and put our figures beside the paper's."""

import json

import pytest

from nearflash.cli import main
from nearflash.experiment import Experiment, Options, load_experiments

EXPS = load_experiments("issd")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("issd")
    done = {}
    for name, (title, run) in EXPS.items():
        exp = Experiment("issd", name, title, out)
        run(exp, Options(quick=True))
        paths = exp.write()
        done[name] = (exp, paths)
    return done


def comparison(results, name, metric_start):
    exp, _ = results[name]
    return next(c for c in exp.comparisons if c.metric.startswith(metric_start))


def test_every_experiment_writes_json_markdown_and_png(results):
    assert set(EXPS) == {"fig7", "fig8", "fig9", "fig10", "prototype", "columnar", "costs", "kmeans"}
    for name, (exp, paths) in results.items():
        assert paths["json"].exists() and paths["markdown"].exists()
        assert any(p.suffix == ".png" and p.stat().st_size > 1000 for p in paths.values()), name
        doc = json.loads(paths["json"].read_text())
        assert doc["comparisons"] and doc["notes"], name
        assert all(c["ours"] is not None for c in doc["comparisons"]), name
        assert "| metric | ours | paper |" in paths["markdown"].read_text()


def test_fig7_reproduces_the_papers_trends(results):
    assert comparison(results, "fig7", "Eq. 1 vs executed: mean").ours <= 5.1
    assert comparison(results, "fig7", "Eq. 1 vs executed: max").ours <= 17.9
    wall = comparison(results, "fig7", "iSSD-XL scan stops scaling")
    assert wall.ours == 48 and wall.fitted and not wall.is_prediction  # fitted: agrees by construction
    assert comparison(results, "fig7", "iSSD-800 scan stops scaling").paper is None  # a prediction, not fitted
    # link-bound hosts: HOST-8G's scan runs at its link, twice HOST-4G's, not both at the 3.2 GB/s DRAM
    h4, h8 = comparison(results, "fig7", "HOST-4G scan").ours, comparison(results, "fig7", "HOST-8G scan").ours
    assert h4 == pytest.approx(4000, rel=0.1) and h8 == pytest.approx(8000, rel=0.15) and h8 > 1.5 * h4
    assert comparison(results, "fig7", "iSSD-XL k-means beats").ours == 24
    assert comparison(results, "fig7", "iSSD-XL string_match beats").ours == 40
    assert comparison(results, "fig7", "string_match stream-processor gain").ours == pytest.approx(37, abs=2)


def test_marks_say_what_is_fitted_and_what_the_paper_column_holds(results):
    """Issue 22 section 3: the calibrated wall is fitted in the JSON, a paper column computed by us from the paper's
    rates says so, a check against our own inputs is a paper input, and the paper's floors are directions."""
    doc = json.loads(results["fig7"][1]["json"].read_text())
    rows = {c["metric"]: c for c in doc["comparisons"]}
    assert rows["iSSD-XL scan stops scaling at (FMCs)"]["fitted"] is True
    assert rows["iSSD-XL scan stops scaling at (FMCs)"]["prediction"] is False
    assert rows["iSSD-800 scan stops scaling at (FMCs)"]["fitted"] is False
    assert rows["HOST-8G scan at 64 FMCs (link-bound reading)"]["reference"] == "paper-derived"
    derived = rows["HOST-8G kmeans (compute-bound)"]
    assert derived["reference"] == "paper-derived" and derived["paper_input"] is True
    assert rows["Eq. 1 vs executed: mean abs. error"]["better"] == "lower"
    assert comparison(results, "fig10", "executed: smallest").better == "higher"  # the paper's ">= 5x"
    bound = comparison(results, "prototype", "speed-up bound")
    assert bound.paper_input and bound.reference == "paper-derived" and not bound.is_prediction
    assert comparison(results, "prototype", "speed-up, executed").is_prediction
    assert comparison(results, "fig9", "scan, 4 CPUs, iSSD alone executed").reference == "paper-derived"


def test_fig8_iso_points_match_the_derived_counts(results):
    assert comparison(results, "fig8", "linear_regression 600 MB/s, 16 CPUs, FMC processors: FMCs (executed)").ours == pytest.approx(50.4, rel=0.03)
    assert comparison(results, "fig8", "linear_regression 600 MB/s, 16 CPUs, accelerated: FMCs (executed)").ours == pytest.approx(15.2, rel=0.05)


def test_fig9_partitioning_adds_host_and_issd(results):
    assert comparison(results, "fig9", "linear_regression, 4 CPUs, partitioned").ours == pytest.approx(1674, rel=0.01)
    assert comparison(results, "fig9", "static split / (host + iSSD)").ours > 0.85
    assert comparison(results, "fig9", "linear_regression, 4 CPUs, dynamic").ours > 1300


def test_fig10_and_prototype(results):
    assert comparison(results, "fig10", "executed: linear_regression HOST-SATA / iSSD-400").ours == pytest.approx(9, rel=0.1)
    assert comparison(results, "fig10", "executed: smallest").ours > 5
    assert 2.0 < comparison(results, "prototype", "speed-up, executed").ours <= 2.56
    assert comparison(results, "prototype", "speed-up bound").ours == pytest.approx(2.56)
    assert comparison(results, "prototype", "dynamic energy ratio").ours > 2


def test_columnar_pages_speed_up_in_storage_and_on_the_host(results):
    exp, _ = results["columnar"]
    runs = exp.data["in_storage"]
    assert runs and all(r["speedup"] > 1.5 and r["byte_ratio"] > 4 for r in runs)
    for h in exp.data["host"]:
        assert h["col_bytes"] * 4 < h["row_bytes"]
        # the compared host times are the reference host's costs x the counted bytes and rows, not the wall clock
        assert h["ref_col_s"] < h["ref_row_s"] and h["ref_duckdb_s"] > 0 and h["row_s"] > 0


def test_costs_compare_the_reference_host_and_show_this_host_beside(results):
    from nearflash.issd import reference_host

    exp, _ = results["costs"]
    cpb = exp.data["measured_cpb"]
    kernels = {"scan", "grep", "string_match", "word_count", "histogram", "linear_regression", "kmeans", "scalparc",
               "hop", "naive_bayes"}
    assert set(cpb) == set(exp.data["measured_ipb"]) == kernels, "all ten Table 1 kernels"
    assert cpb == {k: reference_host.cpb(k) for k in kernels}, "the comparisons use the stored reference costs"
    here = exp.data["this_host"]
    assert set(here["cpb"]) == kernels and all(v > 0 for v in here["cpb"].values()), "this host measured beside"
    assert set(here["ipb"]) == (kernels if here["hardware_counters"] else set())
    assert all(p["given"] > 0 and p["measured"] > 0 for p in exp.data["predictions"])
    cpb_rows = [c for c in exp.comparisons if "host CPB" in c.metric]
    assert len(cpb_rows) == 10 and all("MEASURED once on the reference host" in c.note for c in cpb_rows)


def test_every_reference_host_cost_has_a_unit_and_a_dated_source():
    from nearflash.issd import reference_host

    assert reference_host.clock_hz() > 1e8 and "cores" in reference_host.machine()
    for name in ("scan_cpb", "rows_filter_sum_cpb", "col_scan_cpb", "col_filter_sum_cpb", "kmeans_ipb",
                 "duckdb_scan_cycles_per_row", "duckdb_q6_cycles_per_row"):
        c = reference_host.cost(name)
        assert c.value > 0 and c.unit in ("cycles/B", "instructions/B", "cycles"), c
        assert "benches/issd_reference_host.py" in c.source and "20" in c.source, c  # the script and the date
    with pytest.raises(KeyError, match="no reference-host cost 'gpu_cpb'.*stored"):
        reference_host.cost("gpu_cpb")


def test_kmeans_iterates_over_seeds_and_fig10_reads_both_ways(results):
    exp, _ = results["kmeans"]
    runs = exp.data["runs"]
    assert len(runs) >= 2 and len({r["steps"][0]["sse"] for r in runs}) == len(runs)  # different seeds, data
    assert all(r["iterations"] >= 2 and r["speedup"] > 0 for r in runs)
    assert all(s["sse"] <= r["steps"][0]["sse"] for r in runs for s in r["steps"])  # Lloyd never raises the SSE
    summary = results["fig10"][0].data["summary"]
    assert {row[1] for row in summary} == {"with accelerators (iSSD-XL)", "without accelerators (iSSD-400)"}
    assert all("(" in row[2] and "(" in row[4] for row in summary)  # the kernels are named


def test_cli_runs_one_experiment(tmp_path, capsys):
    assert main(["experiment", "issd", "prototype", "--quick", "--out", str(tmp_path), "--set", "pages=2048"]) == 0
    assert "speed-up" in capsys.readouterr().out
    assert (tmp_path / "issd" / "prototype.json").exists()
