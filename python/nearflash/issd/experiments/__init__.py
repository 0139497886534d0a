"""iSSD's paper figures: ``nearflash experiment issd <name>|all [--quick] [--set key=value]``.

Each experiment writes JSON + Markdown + PNG with our numbers beside the paper's (see ``nearflash.experiment``):
Eq. 1 (the analytic model) and execution-driven runs (real kernels on real data through the device). ``--set``
options: ``kernels=scan,kmeans`` (which kernels), ``target_ms=20`` (executed points' length at the model's
bandwidth), ``pages=<n>`` (the prototype's table size in 8 KiB pages), ``rows=<n>`` / ``host_rows=<n>`` (the columnar experiment's tables), ``bytes=<n>`` (the costs experiment's inputs)."""

from __future__ import annotations

from nearflash.issd.experiments import columnar, costs, fig7, fig8, fig9, fig10, kmeans, prototype

EXPERIMENTS = {
    "fig7": ("Fig. 7: throughput vs number of FMCs, six configurations, four kernels", fig7.run_fig7),
    "fig8": ("Fig. 8: iso-performance (FMCs to match 4/8/16 host CPUs)", fig8.run_fig8),
    "fig9": ("Fig. 9: partitioning between iSSD and host at 32 channels", fig9.run_fig9),
    "fig10": ("Fig. 10: energy per byte at 8 channels by component", fig10.run_fig10),
    "prototype": ("Sec. 4.3 prototype: 1 GB lineitem scan, 16 x 40 MB/s FMCs, SATA 250 MB/s", prototype.run_prototype),
    "kmeans": ("k-means over several iterations and seeds, in storage vs host, every step checked", kmeans.run_kmeans),
    "costs": ("Validation: host cycles and instructions per byte of the reference host vs Table 1 (this host beside), "
              "and Eq. 1 with the measured costs", costs.run_costs),
    "columnar": ("Beyond the paper: columnar lineitem pages vs rows, in storage and on the host", columnar.run_columnar),
}
