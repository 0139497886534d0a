"""Fig. 9: NDP alone, end to end - RecSSD's speed-up over a conventional SSD per model, in the paper's naive
configuration (§6.2): no pipelining (one SLS worker, batch after batch), no caching (no host LRU, no SSD cache),
uniformly random ids, one embedding vector per 16 KiB page (§5). Paper: no benefit for MLP-dominated models, up to
7x for embedding-dominated ones."""

from __future__ import annotations

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.recssd.experiments.common import model_setup, ms, option, run, spread, uniform_batches
from nearflash.recssd.models import MODEL_NAMES

NAIVE = {"ssd_cache": False}
PLACEMENT = "one_row_per_page"


def speedups(exp: Experiment, models: list[str], batch_sizes: list[int], n: int, seed: int) -> dict:
    """Per model and batch size: baseline, NDP and DRAM time per batch (each path on its own fresh device)."""
    out: dict = {}
    for name, bs in exp.steps([(m, b) for m in models for b in batch_sizes]):
        times = {}
        for path in ("baseline", "ndp", "dram"):
            s = model_setup(name, placement=PLACEMENT, params=NAIVE, seed=seed, exp=exp)
            s.system.set_lru_rows(0)
            batches = uniform_batches(s.spec, bs, n, seed)
            r = run(s, batches, path, pipelined=False)
            times[path] = float(np.mean(r.latency_ns))
            times[f"{path}_batches"] = np.asarray(r.latency_ns, float).tolist()
            if path == "ndp":
                out.setdefault("firmware", {})[f"{name}/{bs}"] = r.firmware.get("stats", {})
            del s, r  # free the device (one-row-per-page RM2 maps 512 GiB) before building the next
        out[f"{name}/{bs}"] = times
    return out


def run_fig9(exp: Experiment, opts: Options) -> None:
    models = option(opts, "models", ["RM1", "RM3", "WND", "NCF"], list(MODEL_NAMES))
    batch_sizes = option(opts, "batches", [8], [1, 8, 64])
    n = option(opts, "n", 2, 8)
    data = speedups(exp, models, batch_sizes, n, opts.seed)
    rows = []
    for name in models:
        for bs in batch_sizes:
            t = data[f"{name}/{bs}"]
            per_batch = spread(np.asarray(t["baseline_batches"]) / np.asarray(t["ndp_batches"]))
            rows.append([name, bs, ms(t["dram"]), ms(t["baseline"]), ms(t["ndp"]), t["baseline"] / t["ndp"],
                         per_batch["p5"], per_batch["p95"]])
    exp.table(f"Latency per batch (ms) and RecSSD speed-up over the conventional SSD ({n} batches; p5-p95 of the "
              "per-batch ratios)", ["model", "batch", "DRAM", "baseline SSD", "RecSSD", "speed-up", "p5", "p95"], rows)
    exp.record("times_ns", {k: v for k, v in data.items() if k != "firmware"})
    exp.record("firmware", data.get("firmware", {}))
    best = max(rows, key=lambda r: r[5])
    exp.compare(f"best speed-up ({best[0]}, batch {best[1]})", best[5], 7.0, "x", "paper: 'up to 7x'",
                fitted=True)
    mlp_models = [r for r in rows if r[0] in ("WND", "MTWND", "DIN", "DIEN", "NCF")]
    if mlp_models:
        exp.compare("MLP-dominated models: mean speed-up", float(np.mean([r[5] for r in mlp_models])), 1.0, "x",
                    "paper: 'many models exist where NDP provides no observable benefits' (1.0 is our reading)",
                    reference="paper-derived")
    exp.note("Naive configuration: one SLS worker per model run (tables one after another, then the dense part), "
             "host LRU and SSD cache off, uniform ids (DLRM's random generator), one row per 16 KiB page; each path "
             f"runs on its own fresh device; {n} batches per point.")
    fig, ax = exp.figure("fig9_naive_speedup", width=9, height=4)
    x = np.arange(len(models))
    w = 0.8 / len(batch_sizes)
    for j, bs in enumerate(batch_sizes):
        ax.bar(x + (j - (len(batch_sizes) - 1) / 2) * w,
               [data[f"{m}/{bs}"]["baseline"] / data[f"{m}/{bs}"]["ndp"] for m in models], w, label=f"batch {bs}")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(x, models)
    ax.set_ylabel("RecSSD speed-up over conventional SSD")
    ax.set_yscale("log")
    ax.legend()
