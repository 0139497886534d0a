"""Fig. 5: the SLS operator alone, tables in host DRAM vs on a conventional SSD, over a range of batch sizes
(paper §3.2: one table of 1M rows, dim 32, 80 lookups per bag; 'three orders of magnitude longer latencies' on the
SSD, from PCIe software overheads and ~10K IOPS of random 4 KiB reads against ~1 GB/s from DRAM).

Each batch size runs `n` SLS calls of fresh uniform ids on one device per path (no host cache: the figure shows the
operator, not a cache in front of it); we report the mean latency per call and its spread over the calls."""

from __future__ import annotations

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.recssd.embeddings import TableSpec
from nearflash.recssd.experiments.common import device_for, ms, option, spread
from nearflash.recssd.inputs import fixed_offsets
from nearflash.recssd.system import RecSSD
from nearflash._native import recssd as _rs

TABLE = TableSpec(1_000_000, 32, 80)  # paper §3.2: 1M rows, dim 32, 80 lookups per table
#: Paper: 'three orders of magnitude' (read from the figure's log axis; no number in the text).
PAPER_SLOWDOWN = 1000.0


def _latencies(path: str, batch: int, n: int, seed: int) -> np.ndarray:
    """Virtual-time latency of `n` SLS calls of `batch` bags on a fresh device."""
    dev = device_for([TABLE], "packed")
    rs = RecSSD(dev, [TABLE], seed=seed, params={"ssd_cache": False})
    rs.set_lru_rows(0)
    out = np.empty(n)
    for i in range(n):
        ids = _rs.uniform_bags(TABLE.rows, batch, TABLE.lookups, seed * 100_003 + i)
        t0 = dev.now_ns
        rs.sls(0, ids, fixed_offsets(batch, TABLE.lookups), path)
        out[i] = dev.now_ns - t0
    return out


def run_fig5(exp: Experiment, opts: Options) -> None:
    batches = option(opts, "batches", [1, 8], [1, 2, 4, 8, 16, 32, 64])
    n = option(opts, "n", 5, 40)
    rows, data = [], {}
    for b in exp.steps(batches):
        dram = _latencies("dram", b, n, opts.seed)
        ssd = _latencies("baseline", b, n, opts.seed)
        slow = ssd / dram
        data[str(b)] = {"dram_ns": spread(dram), "ssd_ns": spread(ssd), "slowdown": spread(slow)}
        rows.append([b, ms(dram.mean()), ms(ssd.mean()), float(np.mean(slow)), float(np.percentile(slow, 5)),
                     float(np.percentile(slow, 95))])
    exp.record("points", data)
    exp.table(f"SLS latency per call (ms), mean of {n} calls, and SSD / DRAM", ["batch", "DRAM", "SSD",
              "SSD / DRAM (mean)", "p5", "p95"], rows)
    dram = ("DRAM side at the paper's own 1 GB/s random-read rate (section 3.2); paper: 'three orders of magnitude' "
            "(our reading: 1000x)")
    exp.compare("SSD / DRAM SLS latency (smallest over batch sizes)", min(r[3] for r in rows), PAPER_SLOWDOWN, "x",
                dram, paper_input=True, reference="paper-derived")
    exp.compare("SSD / DRAM SLS latency (largest over batch sizes)", max(r[3] for r in rows), PAPER_SLOWDOWN, "x",
                dram, paper_input=True, reference="paper-derived")
    exp.compare("SSD random-read rate at the largest batch", TABLE.lookups * batches[-1] / (rows[-1][2] * 1e-3), 10_000,
                "reads/s", "paper: ~10K IOPS (one 4 KiB read per lookup)")
    exp.note("SSD = the conventional path: one synchronous 4 KiB read per lookup over the polled user-space stack, "
             "no host cache, packed rows; DRAM = the same bags summed in host memory at the paper's 1 GB/s random "
             f"read rate (section 3.2). Uniform ids, {n} calls per batch size on one device per path (spread: p5-p95 "
             "over the calls).")
    fig, (ax, ax2) = exp.figure("fig5_sls_ssd_vs_dram", width=10, height=4, ncols=2)
    x = [str(b) for b in batches]
    ax.plot(x, [r[1] for r in rows], marker="o", label="DRAM")
    ax.plot(x, [r[2] for r in rows], marker="s", label="SSD (conventional)")
    ax.set_yscale("log")  # latencies three orders of magnitude apart (not shares)
    ax.set_xlabel("batch size")
    ax.set_ylabel("SLS latency per call (ms, log)")
    ax.legend()
    mean = np.array([r[3] for r in rows])
    ax2.errorbar(x, mean, yerr=[mean - [r[4] for r in rows], np.array([r[5] for r in rows]) - mean], marker="o",
                 capsize=3, label="ours (mean, p5-p95)")
    ax2.axhline(PAPER_SLOWDOWN, color="black", ls="--", lw=0.8, label="paper (~1000x)")
    ax2.set_ylim(0, max(PAPER_SLOWDOWN, float(max(r[5] for r in rows))) * 1.15)
    ax2.set_xlabel("batch size")
    ax2.set_ylabel("SSD / DRAM")
    ax2.legend(fontsize=8)
