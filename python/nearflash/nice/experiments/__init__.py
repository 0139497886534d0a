"""NICE's paper figures: ``nearflash experiment nice <name>|all [--quick] [--set key=value]``.

Each experiment writes JSON + Markdown + PNG with our numbers beside the paper's (see ``nearflash.experiment``);
``nearflash experiment nice --help`` lists the ``--set`` keys each reads."""

from __future__ import annotations

from nearflash.nice.experiments import fig12, fig13, fig14, fig16, fig17

EXPERIMENTS = {
    "fig12": ("Fig. 12: file locating, NICE vs HOST-ISC vs FSR-ISC, FTL-cache hit and miss, path depth 1-20",
              fig12.run_fig12),
    "fig13": ("Fig. 13: ordinary read throughput under ISC load, with and without coroutine scheduling",
              fig13.run_fig13),
    "fig14": ("Figs. 14-15: NNS latency and throughput vs D with NICE-K, against the host CPU", fig14.run_fig14),
    "fig16": ("Fig. 16: MobileNetV2 on NICE-C by batch, against FSR-C and the host CPU, latency and energy",
              fig16.run_fig16),
    "fig17": ("Fig. 17: LeNet on NICE-C by batch (Fashion-MNIST), against FSR-C and the host CPU, latency and energy",
              fig17.run_fig17),
}
