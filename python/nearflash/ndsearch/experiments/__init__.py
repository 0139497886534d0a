"""NDSearch's paper figures: ``nearflash experiment ndsearch <name>|all [--quick] [--set key=value]``.

Each writes JSON + Markdown + PNG with our numbers beside the paper's (see ``nearflash.experiment``);
``nearflash experiment ndsearch --help`` lists the ``--set`` keys each reads (datasets, n, queries, ef, ...)."""

from __future__ import annotations

from nearflash.ndsearch.experiments import baselines, scale, scheduling, throughput

EXPERIMENTS = {
    "fig13": ("Fig. 13: SearSSD throughput on the device vs CPU in-memory search measured in the same run, and the "
              "DeepStore (DS-c, DS-cp) and SmartSSD-only baselines on the same trace",
              throughput.run_fig13),
    "fig14": ("Fig. 14: page access ratio with and without degree-ascending BFS reordering (random BFS beside)",
              scheduling.run_fig14),
    "fig15": ("Fig. 15: dynamic allocating and speculative searching: page accesses and speed-up",
              scheduling.run_fig15),
    "fig16": ("Fig. 16: ablation from bare SearSSD through reordering, multi-plane mapping, dynamic allocating and "
              "speculation, beside the CPU and DS-cp", baselines.run_fig16),
    "fig17": ("Fig. 17: time breakdown of a SearSSD batch on the device", throughput.run_fig17),
    "fig18": ("Fig. 18: hard-decision ECC failure sweep (soft decode on the FTL) on the device", throughput.run_fig18),
    "fig19": ("Fig. 19: batch-size sweep of SearSSD on the device", throughput.run_fig19),
    "fig20": ("Fig. 20: energy efficiency (queries per joule) of SearSSD, the baselines and the CPU",
              baselines.run_energy),
    "scale": ("Issue 12's scale goal: one 2048-query SearSSD batch over a 10M-vector synthetic set (timing-only), "
              "wall time, CPU time and peak memory beside the goal (10 min, 8 GiB)", scale.run_scale),
}
