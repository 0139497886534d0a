"""The paper's reproduction targets, asserted at small scale within bounds the calibrated model meets (the
experiments report them exactly), and a smoke run of every experiment."""

import json

import numpy as np
import pytest

from nearflash.experiment import Experiment, Options
from nearflash.recssd.experiments import EXPERIMENTS, fig5, fig6, fig8, fig10


def test_sls_operator_str_and_seq_match_the_paper():
    # Paper 6.1 / Fig. 8: STR up to 4x faster than the baseline with roughly half of the FTL's time in Translation;
    # SEQ slightly slower than the baseline, Translation over half.
    str_base = fig8._point("str", 4, "baseline", 1)["total_ns"]
    str_ndp = fig8._point("str", 4, "ndp", 1)
    seq_base = fig8._point("seq", 4, "baseline", 1)["total_ns"]
    seq_ndp = fig8._point("seq", 4, "ndp", 1)
    assert 3.0 < str_base / str_ndp["total_ns"] < 6.0
    assert 0.6 < seq_base / seq_ndp["total_ns"] < 1.0

    def share(fw):
        return fw["translation_ns"] / (fw["translation_ns"] + fw["flash_read_ns"])

    assert 0.35 < share(str_ndp["fw"]) < 0.75
    assert share(seq_ndp["fw"]) > 0.9
    fw = str_ndp["fw"]
    assert fw["pages_from_flash"] == 320 and fw["translation_ns"] > 0 and fw["config_process_ns"] > 0


def test_sls_alone_is_orders_of_magnitude_slower_on_the_ssd():
    # Paper 3.2 / Fig. 5: one table (1M x dim 32, 80 lookups): SSD latencies three orders of magnitude above DRAM.
    dram, ssd = fig5._latencies("dram", 2, 2, 1), fig5._latencies("baseline", 2, 2, 1)
    assert 300 < (ssd / dram).min() and (ssd / dram).max() < 3000
    # About 10K random reads per second on the SSD (one synchronous 4 KiB read per lookup).
    assert 4_000 < 160 / (ssd.mean() * 1e-9) < 20_000


def test_caching_targets_at_low_and_high_locality():
    exp = Experiment("recssd", "t", "t", "/tmp")
    # Paper 6.3: baseline LRU hits ~84% (K = 0) and ~28% (K = 2); the baseline wins at high locality with the SSD
    # cache only; static partitioning gives RecSSD its gain at low locality, its hit rate tending to 25%.
    low = fig10.point(exp, "RM1", 2.0, 8, 16, 40, 1)
    high = fig10.point(exp, "RM1", 0.0, 8, 16, 40, 1)
    assert abs(high["baseline"]["lru_hit_rate"] - 0.84) < 0.08
    assert abs(low["baseline"]["lru_hit_rate"] - 0.28) < 0.08
    speed = {k: p["baseline"]["latency_ns"] / p["ndp_partition"]["latency_ns"] for k, p in (("low", low), ("high", high))}
    assert speed["low"] > 1.05 and speed["low"] > 2 * speed["high"]
    assert abs(low["ndp_partition"]["partition_hit_rate"] - 0.25) < 0.06
    # Profiled on a separate trace (the batches before the measured ones), the partition holds about its share of
    # the lines at either locality; K = 0's bursts favour it only when it profiles the measured run itself.
    assert abs(high["ndp_partition"]["partition_hit_rate"] - 0.25) < 0.06
    same = fig10.point(exp, "RM1", 0.0, 8, 16, 40, 1, profile_on="same")
    assert same["ndp_partition"]["partition_hit_rate"] > high["ndp_partition"]["partition_hit_rate"]
    assert 0.0 < low["ndp_cache"]["ssd_cache_hit_rate"] < high["ndp_cache"]["ssd_cache_hit_rate"]


def test_the_baseline_wins_at_high_locality_against_the_ssd_cache_only():
    # Paper 6.3: at high locality (K = 0) the host's LRU cache beats NDP with the SSD-side cache only.
    high = fig10.point(Experiment("recssd", "t", "t", "/tmp"), "RM1", 0.0, 8, 16, 40, 1)
    assert high["baseline"]["latency_ns"] < high["ndp_cache"]["latency_ns"]


def test_static_partitioning_gains_most_on_rm3():
    # Paper 6.3: with static partitioning RecSSD reaches 2x (RM3, with few lookups per table, gains most).
    p = fig10.point(Experiment("recssd", "t", "t", "/tmp"), "RM3", 2.0, 8, 16, 40, 1)
    assert 1.4 < p["baseline"]["latency_ns"] / p["ndp_partition"]["latency_ns"] < 2.5
    assert p["baseline"]["latency_ns"] / p["ndp_cache"]["latency_ns"] < 1.6


def test_mlp_dominated_models_run_at_dram_speed_once_the_host_lru_is_warm():
    # Paper 3.3 / Fig. 6: NCF 1.01x slower on the SSD than in DRAM. Its 100K-row tables use 781 trace lines, all of
    # which a warm 2,000-row host LRU holds; cold, the first touch of each line goes to the SSD.
    exp = Experiment("recssd", "t", "t", "/tmp")

    def slowdown(warm_lookups):
        dram, _ = fig6._cached("NCF", 16, 3, warm_lookups, 1, "dram", exp)
        ssd, _ = fig6._cached("NCF", 16, 3, warm_lookups, 1, "baseline", exp)
        return ssd.mean_latency_ns / dram.mean_latency_ns, ssd.lru_hit_rate

    warm, hits = slowdown(6000)
    assert abs(warm - 1.0) < 0.15 and hits == 1.0
    cold, _ = slowdown(0)
    assert cold > 1.5


SMOKE = {
    "fig5": {"batches": "1,2", "n": "2"},
    "fig6": {"models": "NCF", "batch": "4", "n": "2", "warm_lookups": "100"},
    "fig8": {"batches": "1,2"},
    "fig9": {"models": "NCF", "batches": "2", "n": "1"},
    "fig10": {"models": "RM3", "ks": "2", "batches": "2", "budget": "2000", "warm_lookups": "200"},
    "fig11": {"batch": "2", "dims": "16,32", "tables": "1,2", "lookups": "10,20", "precisions": "fp32,fp16,int8"},
    "calibrate": {"loads": "60", "accesses": "48", "budget": "2000"},
}


def _rows(data: dict) -> dict:
    return {c["metric"]: c for c in data["comparisons"]}


def _marks_fig5(rows: dict) -> None:
    slow = rows["SSD / DRAM SLS latency (smallest over batch sizes)"]
    # the DRAM side runs at the paper's 1 GB/s, the 1000x is our reading of "three orders of magnitude"
    assert slow["paper_input"] and slow["reference"] == "paper-derived" and not slow["prediction"]
    assert rows["SSD random-read rate at the largest batch"]["prediction"]


def _marks_fig6(rows: dict) -> None:
    ncf = rows["NCF: SSD / DRAM time"]  # 100 warm-up lookups: lines of the trace stay unread
    assert ncf["paper_input"] and not ncf["comparable"] and "warm-up of 100 lookups" in ncf["why_not_comparable"]


def _marks_fig10(rows: dict) -> None:
    for metric in ("SSD cache only: best speed-up at K = 2", "with static partitioning: best speed-up",
                   "with static partitioning: best speed-up at K = 2"):
        r = rows[metric]  # RM3 at batch 2 only: the paper's maxima are over RM1-3 and batches up to 32
        assert r["fitted"] and not r["comparable"] and "RM1, RM2, RM3" in r["why_not_comparable"], metric
    assert rows["baseline host-LRU hit rate, K = 2"]["prediction"]


def _marks_calibrate(rows: dict) -> None:
    assert rows["best uncached_load on the grid"]["reference"] == "fit"
    held = [r for m, r in rows.items() if m.startswith("held out")]
    assert len(held) == 6 and all(r["fitted"] and not r["comparable"] and not r["prediction"] for r in held)


#: Issue 22 section 3: what each smoke run must mark (fitted, paper inputs, what the paper column holds, and rows
#: a run this small cannot compare).
MARKS = {"fig5": _marks_fig5, "fig6": _marks_fig6, "fig10": _marks_fig10, "calibrate": _marks_calibrate}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiments_write_json_markdown_and_png(tmp_path, name):
    title, run = EXPERIMENTS[name]
    exp = Experiment("recssd", name, title, tmp_path)
    run(exp, Options(quick=True, seed=1, extra=SMOKE[name]))
    paths = exp.write()
    data = json.loads(paths["json"].read_text())
    assert data["comparisons"] and data["tables"] and data["notes"]
    assert all(c["ours"] is not None and np.isfinite(c["ours"]) for c in data["comparisons"])
    assert any(p.suffix == ".png" for p in paths.values())
    assert "paper" in paths["markdown"].read_text()
    if name in MARKS:
        MARKS[name](_rows(data))
