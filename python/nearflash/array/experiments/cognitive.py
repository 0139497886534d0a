"""Cognitive SSD sharded over an array (nearflash.cognitive.sharded) as the shared scaling experiment:
``nearflash experiment array cognitive``. Each device holds `rows_per_device` Fashion-MNIST images (an array of N
devices serves N x that many); every query is searched on every shard and the host keeps the T nearest by Hamming
distance. A unit is one query searched on one shard.

In storage: each drive hashes the query with its DLG-x and searches its graph with its GSE (the image out, its code
and T ids back, the merge on host cores). Host path: the paper's B-CPU on the array - the host hashes every query
once on its own cores (the network's MACs x ``host_mac_time``: a cost per query, not per shard, so a unit's share of
it falls as 1 / N) and searches every shard's graph itself over pages read from the drives (neighbour steps x
``host_graph_step_time``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nearflash.array import scaling
from nearflash.array.array import Array
from nearflash.array.host import ArrayReport, PathCost
from nearflash.cognitive import sharded
from nearflash.cognitive.data import fashion_mnist
from nearflash.cognitive.pipeline import DlgIndex
from nearflash.errors import InvalidArgument
from nearflash.experiment import Experiment, Options
from nearflash.array.experiments.common import note_uplink, uplink_host
from nearflash.programs.experiments.common import option

#: --quick: a small Cosmos+ (4 channels x 2 chips, 64 blocks of 32 pages a plane) with room for a shard's graph.
QUICK = dict(channels=4, chips_per_channel=2, blocks_per_plane=64, pages_per_block=32, over_provisioning=25,
             write_buffer="1MiB", ext_reserved_blocks=8)
#: Full size: the cosmos-plus preset with 8 reserved blocks a plane for DLG-x's weights and the shard's graph.
FULL = dict(ext_reserved_blocks=8)
#: --quick: a switch uplink of 1 GB/s puts the host path's knee inside N = 1..8 (one device reads ~0.35 GB/s of pages).
QUICK_UPLINK = 1.0
#: Fashion-MNIST's training set: the most images an array's database holds.
TRAIN_IMAGES = 60_000


def run_cognitive(exp: Experiment, opts: Options) -> None:
    ns = option(opts, "devices", [1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 64])
    rows = option(opts, "rows_per_device", 100, 900)
    nq = option(opts, "queries", 16, 128)
    t = option(opts, "t", 10, 10)
    calibration = option(opts, "calibration", 50, 100)
    uplink = option(opts, "uplink", QUICK_UPLINK, 0.0)
    if ns[-1] * rows > TRAIN_IMAGES:
        raise InvalidArgument(f"{ns[-1]} devices x rows_per_device={rows} exceeds Fashion-MNIST's {TRAIN_IMAGES} images")
    host = uplink_host(uplink)
    overrides = QUICK if opts.quick else FULL
    database, _ = fashion_mnist("train", ns[-1] * rows)
    queries, _ = fashion_mnist("test", nq)

    def make(n: int) -> Array:
        return Array(n, "cosmos-plus", seed=opts.seed, host=host, overrides=overrides)

    def work(array: Array, path: str, executor: Any) -> tuple[ArrayReport, float]:
        n = len(array)
        res = sharded.search(array, database[: n * rows], queries, t, calibration=calibration, seed=opts.seed,
                             executor=executor, path=path)
        return res.report, float(nq * n)

    # Before any device runs: the host path's pages and steps per query come from the host search's own counted
    # work on shard 0 (the same index it builds), its hashing from the network's MACs.
    index = DlgIndex(database[:rows], calibration=database[:calibration], k=min(25, rows - 1), seed=opts.seed)
    c = sharded.HostCosts.of(index)
    _, st = index.graph.host_search(index.hash(queries), min(t, rows), "two_hop", max(index.graph.pages("two_hop"), 1),
                                    True, index.seed)
    pages, steps = float(np.mean(st["pages_read"])), float(np.mean(st["neighbour_steps"]))
    merge = t * make(1).host["topk_merge_ns_per_candidate"]
    costs = {"host": PathCost(pages * c.page_bytes, 0.0, steps * c.step_ns + merge, cpu_ns_per_query=c.hash_ns_per_query),
             "in_storage": PathCost(8 + 4 * t, sharded.PIXELS, merge)}
    exp.note(f"Each device holds {rows} Fashion-MNIST training images ({'small ' if opts.quick else ''}cosmos-plus, "
             f"8 reserved blocks a plane); {nq} test images as queries, T {t}, K-NN graph degree 25, two-hop layout, "
             f"int8 scales calibrated on the database's first {calibration} images on every shard. The host path "
             f"reads {pages:.1f} pages of {c.page_bytes} B per query and shard ({steps:.0f} neighbour steps x "
             f"{c.step_ns:g} ns), and hashes each query once ({index.net.macs():,} MACs x host_mac_time = "
             f"{c.hash_ns_per_query / 1e3:.0f} us of host CPU): B-CPU's costs (nearflash.cognitive.baselines), "
             "counted on shard 0 before measuring.")
    note_uplink(exp, uplink)
    scaling.run(exp, scaling.Scaling(f"Cognitive SSD sharded, {rows} images per device", "query x shard", work, costs,
                                     ("k queries x shards/s", 1e3)), ns, make)
