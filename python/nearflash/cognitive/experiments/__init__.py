"""Cognitive SSD's paper tables: ``nearflash experiment cognitive <name>|all [--quick] [--set key=value]``.

``nearflash experiment cognitive --help`` lists each experiment's ``--set`` keys (db, queries, ts, ...)."""

from __future__ import annotations

from nearflash.cognitive.experiments import fig8, fig9, fig11, served, table2, table3, table5

EXPERIMENTS = {
    "table2": ("Table 2: fio-like 128 KiB I/O bandwidth while DLG-x hashes, Method A (blocking) vs B (polling) vs peak",
               table2.run_table2),
    "table3": ("Table 3 and Sec. 4.3: precision@T and flash pages per query, plain vs two-hop layout, on Fashion-MNIST",
               table3.run_table3),
    "fig8": ("Fig. 8: precision@T of the deep hashing against LSH and ITQ on GIST features (and raw pixels)",
             fig8.run_fig8),
    "fig9": ("Fig. 9: DLG-x graph search (device) vs brute force and CPU graph search (counted work x host costs, a "
             "host page cache), recall and precision, the search rule against the count rule", fig9.run_fig9),
    "fig11": ("Fig. 11 and Table 6: latency and QPS vs T, Cognitive SSD vs B-CPU/B-GPU/B-FPGA/B-DLG-x (modelled), "
              "energy per query and QPS/W from Table 6's powers", fig11.run_fig11),
    "table5": ("Table 5 and Eqs. 2-4: DLG-x hashing latency (NPE model) beside the B-CPU model (MACs x host cost)",
               table5.run_table5),
    "served": ("Served mode: ApacheBench on the HTTP endpoint (requests/s, latency percentiles) beside the direct call",
               served.run_served),
}
