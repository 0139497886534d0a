"""The fit behind the two calibrated firmware costs (docs/recssd.md, Calibration): a grid over the strongly-ordered
load latency (``uncached_load``, Translation's cost per element) and the register accesses of GreedyFTL's per-page
handling (``page_sched_register_accesses``), each point scored against six of the paper's observations:

* Fig. 8 (batch 8): STR speed-up ~4x; Translation ~half of the FTL's time; SEQ slightly slower than the baseline
  (taken as 0.85x);
* Fig. 9: RM1 up to 7x (batch 8, naive);
* Fig. 10: RM3 at K = 2, batch 8: up to 1.5x with the SSD cache only, 2x with the static partition.

Score = sum of squared relative errors (log ratios; the share as (share - 0.5) / 0.5), equal weights. The load
latency is only searched within its physical range (60-120 ns)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.recssd.experiments import fig8, fig10
from nearflash.recssd.experiments.common import model_setup, option, run, uniform_batches
from nearflash.recssd.models import SPECS
from nearflash.recssd.system import parameters

#: The two fitted parameters.
FITTED = ("uncached_load", "page_sched_register_accesses")
#: The paper's observations the fit aims at: (name, target, how the error is measured).
TARGETS = (("STR", 4.0, "log"), ("share", 0.5, "relative"), ("SEQ", 0.85, "log"), ("RM1", 7.0, "log"),
           ("partition", 2.0, "log"), ("cache", 1.5, "log"))


def _fig8(pattern: str, batch: int, params: dict[str, Any]) -> tuple[float, float]:
    """(speed-up, Translation share) of one Fig. 8 point under `params`."""
    base = fig8._point(pattern, batch, "baseline", 0, params)["total_ns"]
    ndp = fig8._point(pattern, batch, "ndp", 0, params)
    fw = ndp["fw"]
    return base / ndp["total_ns"], fw["translation_ns"] / (fw["translation_ns"] + fw["flash_read_ns"])


def _rm1(batch: int, params: dict[str, Any], exp: Experiment) -> float:
    times = {}
    for path in ("baseline", "ndp"):
        s = model_setup("RM1", placement="one_row_per_page", params={"ssd_cache": False, **params}, seed=0, exp=exp)
        s.system.set_lru_rows(0)
        times[path] = float(np.mean(run(s, uniform_batches(s.spec, batch, 1, 0), path, pipelined=False).latency_ns))
        del s
    return times["baseline"] / times["ndp"]


def evaluate(params: dict[str, Any], exp: Experiment, batch: int = 8, budget: int = 300_000) -> dict[str, float]:
    """The six observables under `params` (firmware overrides)."""
    str_speed, share = _fig8("str", batch, params)
    seq_speed, _ = _fig8("seq", batch, params)
    n, warm = fig10.batch_counts(SPECS["RM3"], batch, budget, 20_000)
    p = fig10.point(exp, "RM3", 2.0, batch, n, warm, 0, params)
    b = p["baseline"]["latency_ns"]
    return {"STR": str_speed, "share": share, "SEQ": seq_speed, "RM1": _rm1(batch, params, exp),
            "partition": b / p["ndp_partition"]["latency_ns"], "cache": b / p["ndp_cache"]["latency_ns"]}


def score(values: dict[str, float], keys: tuple[str, ...] | None = None) -> float:
    """Sum of squared errors over the targets `keys` (default all six)."""
    err = [math.log(values[k] / t) if how == "log" else (values[k] - t) / t for k, t, how in TARGETS
           if keys is None or k in keys]
    return float(sum(e * e for e in err))


#: Held-out checks: fit on one figure's targets, predict the other figures' (names of TARGETS).
SPLITS = (("fit on Fig. 8, predict Figs. 9-10", ("STR", "share", "SEQ"), ("RM1", "partition", "cache")),
          ("fit on Figs. 9-10, predict Fig. 8", ("RM1", "partition", "cache"), ("STR", "share", "SEQ")))
#: What the "paper" column of each target holds: SEQ's 0.85 is our reading of "slightly slower" (no number given).
REFERENCE = {k: "paper-derived" if k == "SEQ" else "paper" for k, _, _ in TARGETS}
WHERE = {"STR": "Fig. 8 STR speed-up", "share": "Fig. 8 Translation share", "SEQ": "Fig. 8 SEQ speed-up",
         "RM1": "Fig. 9 RM1 speed-up", "partition": "Fig. 10 partition speed-up", "cache": "Fig. 10 cache speed-up"}


def held_out(exp: Experiment, data: dict[str, dict[str, float]], default: str) -> None:
    """For each split, the grid point that best fits the training targets, and what it predicts for the others
    (`default`: the grid key of the crate's fitted defaults)."""
    paper = {k: t for k, t, _ in TARGETS}
    rows = []
    # With one grid point nothing is chosen on the training targets: the "prediction" is made at that point, and if it
    # is the crate's default it is the six-target fit itself (a --quick run's grid).
    one = len(data) == 1
    for name, train, test in SPLITS:
        best = min(data, key=lambda p: score(data[p], train))
        v = data[best]
        for k in test:
            rows.append([name, best, score(v, train), WHERE[k], v[k], paper[k], (v[k] - paper[k]) / paper[k]])
            exp.compare(f"held out ({name}): {WHERE[k]}", v[k], paper[k], "x" if k != "share" else "fraction",
                        f"predicted at {best} (uncached_load ns / register accesses), not fitted to this figure",
                        fitted=one and best == default, reference=REFERENCE[k], comparable=not one,
                        why_not_comparable=f"the grid has one point ({best}), so nothing is held out"
                        + (": it is the crate default, fitted to all six targets" if best == default else ""))
    exp.table("Held-out check: fit on some figures, predict the others", ["split", "best point (load/accesses)",
              "training score", "predicted target", "predicted", "paper", "deviation"], rows)
    exp.note("Held-out check: the grid point that best fits one figure's targets is used to predict the other figures' "
             "(not fitted to them); with both splits the deviation shows how far the calibration carries beyond what "
             "it was fitted to. The grid is coarse (4 x 4 points in the full run), so the predictions move in steps.")


def run_calibrate(exp: Experiment, opts: Options) -> None:
    loads = option(opts, "loads", [60.0], [60.0, 75.0, 90.0, 110.0])
    accesses = option(opts, "accesses", [48.0], [20.0, 35.0, 48.0, 65.0])
    budget = option(opts, "budget", 20_000, 300_000)
    defaults = {name: float(default) for name, default, _, _ in parameters() if name in FITTED}
    rows, data = [], {}
    for load, n in exp.steps([(load, n) for load in loads for n in accesses]):
        params = {"uncached_load": load, "page_sched_register_accesses": n}
        v = evaluate(params, exp, budget=budget)
        s = score(v)
        data[f"{load:g}/{n:g}"] = {**v, "score": s}
        rows.append([load, n, *(v[k] for k, _, _ in TARGETS), s])
    exp.table("Observables and score per grid point", ["uncached_load (ns)", "register accesses",
              *(f"{k} (paper {t:g})" for k, t, _ in TARGETS), "score"], rows)
    exp.record("grid", data)
    best = min(rows, key=lambda r: r[-1])
    exp.compare("best uncached_load on the grid", best[0], defaults["uncached_load"], "ns",
                "paper column = the crate default (the value this calibration fitted)", fitted=True, reference="fit")
    exp.compare("best page_sched_register_accesses on the grid", best[1], defaults["page_sched_register_accesses"],
                "count", "paper column = the crate default (the value this calibration fitted)", fitted=True,
                reference="fit")
    exp.compare("best score", best[-1], None, "", fitted=True)
    for (k, t, _), v in zip(TARGETS, best[2:-1]):
        exp.compare(f"fitted on all six: {WHERE[k]}", v, t, "x" if k != "share" else "fraction",
                    "at the best grid point of the six-target fit", fitted=True, reference=REFERENCE[k])
    held_out(exp, data, f"{defaults['uncached_load']:g}/{defaults['page_sched_register_accesses']:g}")
    exp.note("Targets: " + "; ".join(f"{k} {t:g} ({how} error)" for k, t, how in TARGETS) + ". Fig. 8 at batch 8, "
             f"RM1 naive at batch 8, Fig. 10 RM3 at K = 2 and batch 8 ({budget:,} lookups per configuration).")
    exp.note("The load latency is searched within its physical range (60-120 ns) only: below it the fit would go "
             "lower still, SEQ asking for cheaper Translation and the page handling absorbing the rest.")
    fig, ax = exp.figure("calibrate_grid", width=6, height=4)
    for load in loads:
        pts = [data[f"{load:g}/{n:g}"]["score"] for n in accesses]
        ax.plot(accesses, pts, marker="o", label=f"uncached_load {load:g} ns")
    ax.set_xlabel("page_sched_register_accesses")
    ax.set_ylabel("score (sum of squared relative errors)")
    ax.legend(fontsize=7)
