"""NDSearch sharded over an array (nearflash.ndsearch.sharded) as the shared scaling experiment:
``nearflash experiment array ndsearch``. Each device holds a shard of `rows_per_device` vectors of the synthetic
`sift-like` set (an array of N devices serves N x that many); every query is searched on every shard and the host
merges the top-k. A unit is one query searched on one shard. In storage: SearSSD (queries out, k x 8 B answers back,
the merge on host cores); host path: CPU + SSD (DiskANN-style), every 4 KiB block the search reads across the
shared host."""

from __future__ import annotations

from typing import Any

from nearflash.array import scaling
from nearflash.array.array import Array
from nearflash.array.host import ArrayReport, PathCost
from nearflash.experiment import Experiment, Options
from nearflash.ndsearch import diskann, sharded
from nearflash.ndsearch.datasets import synthetic
from nearflash.array.experiments.common import note_uplink, uplink_host
from nearflash.programs.experiments.common import option

#: A small SearSSD (2 channels x 2 chips x 2 LUNs x 2 planes, 4 KiB pages) whose reserved block holds a quick shard.
QUICK = dict(channels=2, chips_per_channel=2, blocks_per_plane=32, pages_per_block=16, page_size="4KiB",
             over_provisioning=40, write_buffer="256KiB", ext_reserved_blocks=2)
#: The searssd preset, one reserved block per plane of one page (65,536 sift-like vectors a device), as the large run.
FULL = dict(blocks_per_plane=24, pages_per_block=1, over_provisioning=40, ext_reserved_blocks=1)
#: --quick: a switch uplink of 2.5 GB/s puts the host path's knee inside N = 1..8.
QUICK_UPLINK = 2.5


def run_ndsearch(exp: Experiment, opts: Options) -> None:
    ns = option(opts, "devices", [1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 64])
    rows = option(opts, "rows_per_device", 2048, 65536)
    nq = option(opts, "queries", 128, 2048)
    k, ef = option(opts, "k", 10, 10), option(opts, "ef", 32, 24)
    uplink = option(opts, "uplink", QUICK_UPLINK, 0.0)
    host = uplink_host(uplink)
    overrides = QUICK if opts.quick else FULL
    graph = sharded.Graph(R=16, ef_construction=100, seed=opts.seed)
    q = synthetic("sift-like", nq, seed=opts.seed, queries=True)
    cache = opts.extra.get("cache")

    def make(n: int) -> Array:
        return Array(n, "searssd", seed=opts.seed, host=host, overrides=overrides)

    def work(array: Array, path: str, executor: Any) -> tuple[ArrayReport, float]:
        n = len(array)
        res = sharded.search(array, sharded.Synthetic("sift-like", n * rows, opts.seed), q, k, ef, graph=graph,
                             executor=executor, cache_dir=cache, path=path)
        return res.report, float(nq * n)

    # Bytes and CPU per unit on the host path come from the host search's own counted work on shard 0 (its
    # lock-step trace: the blocks a query reads, the distances and expansions it makes), known before any device
    # runs; a unit's merge is k candidates.
    ix, _ = sharded.shard_graph(sharded.Synthetic("sift-like", rows, opts.seed), 0, rows, graph, cache)
    blocks, search_ns = host_work_per_query(ix, q, k, ef)
    merge = k * make(1).host["topk_merge_ns_per_candidate"]
    costs = {"host": PathCost(blocks * 4096, 0.0, search_ns + merge, None),
             "in_storage": PathCost(k * 8, q.shape[1], merge, None)}
    exp.note(f"Each device holds {rows} sift-like vectors (HNSW R 16, ef_construction 100, built on one thread); "
             f"{nq} queries, k {k}, ef {ef}, searched on every shard. The host path reads {blocks:.1f} blocks of "
             f"4 KiB per query and shard (the host search's lock-step trace on shard 0, no DRAM node cache) and "
             f"spends {search_ns / 1e3:.1f} us of host CPU on its distances and expansions (the costed CPU "
             "baseline's per-operation costs, nearflash.ndsearch.sharded.search_cpu_ns) plus the merge.")
    note_uplink(exp, uplink)
    scaling.run(exp, scaling.Scaling(f"NDSearch sharded, {rows} vectors per device", "query x shard", work, costs,
                                     ("k queries x shards/s", 1e3)), ns, make)


def host_work_per_query(ix: Any, q: Any, k: int, ef: int) -> tuple[float, float]:
    """4 KiB blocks the CPU + SSD search of ``q`` reads per query (DiskANN's sector layout, no node cache) and the
    host CPU ns of its distances and expansions per query."""
    import nearflash

    cpu = [0.0]

    def count(_t: int, _blocks: int, distances: int, hops: int, _live: int) -> None:
        cpu[0] += sharded.search_cpu_ns(ix, distances, hops)

    with nearflash.Device(None, "cosmos-plus", materialise=False) as dev:
        npb = 4096 // diskann.node_bytes(ix)
        got = diskann.search_io(ix, q, min(k, ix.ntotal), ef, dev, npb, 0, on_round=count)
    return got.reads / len(q), cpu[0] / len(q)
