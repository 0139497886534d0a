"""Arrays of devices: ``nearflash experiment array <name>|all [--quick] [--set key=value]``.

Every experiment here is the shared scaling experiment (:mod:`nearflash.array.scaling`) on one system's work:
throughput vs N devices on the in-storage path and the host path, the host path's knee predicted from the preset
and host parameters before measuring, then measured (JSON + Markdown + PNG).

- ``issd``: a striped int64 table scanned for the count and sum above a threshold (:mod:`nearflash.array.scan`):
  host reads and host-side filtering vs the ``threshold_sum`` program on every device.
- ``programs``: TPC-H Q6 (``lineitem_filter.c``) on every drive's local lineitem partition with a host-side
  reduction (:mod:`nearflash.array.programs`): the same program in storage or on the shared host's cores.

- ``recssd``: one embedding table per drive, SparseLengthsSum batches over all of them
  (:mod:`nearflash.recssd.sharded`): RecSSD's baseline (host reads a 4 KiB page per row) vs NDP.
- ``ndsearch``: a shard of sift-like vectors per device, every query on every shard, top-k merged on the host
  (:mod:`nearflash.ndsearch.sharded`): CPU + SSD (DiskANN-style reads) vs SearSSD.
- ``cognitive``: a shard of Fashion-MNIST images per device, every query on every shard, the T nearest kept on the
  host (:mod:`nearflash.cognitive.sharded`): B-CPU (the host hashes each query once and searches every shard's
  graph over pages read from the drives) vs each drive's DLG-x and GSE.

``--set`` options (issd): ``devices=1,2,4,...`` (starting at 1), ``mib_per_device``, ``preset``, ``uplink`` (GB/s: the
switch uplink, to move the knee)."""

from __future__ import annotations

from nearflash.array.experiments import cognitive, issd, ndsearch, programs, recssd

EXPERIMENTS = {
    "issd": ("iSSD striped scan on arrays: throughput vs N devices, host path vs in storage, the knee predicted and "
             "measured", issd.run_issd),
    "programs": ("TPC-H Q6 on every drive's local data, reduced on the host: throughput vs N devices, the same "
                 "program in storage or on the host", programs.run_programs),
    "recssd": ("RecSSD tables spread across drives: SLS lookups/s vs N devices, baseline host reads vs NDP",
               recssd.run_recssd),
    "ndsearch": ("NDSearch sharded: queries x shards/s vs N devices, CPU + SSD reads vs SearSSD with a host top-k merge",
                 ndsearch.run_ndsearch),
    "cognitive": ("Cognitive SSD sharded: queries x shards/s vs N devices, B-CPU (host hashing and graph search over "
                  "pages read from the drives) vs DLG-x + GSE in every drive with a host merge", cognitive.run_cognitive),
}
