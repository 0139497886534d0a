"""RecSSD's tables spread across drives (nearflash.recssd.sharded) as the shared scaling experiment:
``nearflash experiment array recssd``. Each device holds one embedding table (an array of N devices serves a model of
N tables); every batch pools `bags` bags of `lookups` ids from every table. A unit is one lookup (one row summed).
Host path: the baseline SSD, one 4 KiB read per row the host's LRU misses, every page across the shared host;
in storage: RecSSD's NDP, the ids (8 B a pair) to the drive and only the pooled sums back."""

from __future__ import annotations

import tomllib
from typing import Any

import numpy as np

from nearflash._native import recssd as _rs
from nearflash.array import scaling
from nearflash.array.array import Array
from nearflash.array.host import ArrayReport, PathCost
from nearflash.experiment import Experiment, Options
from nearflash.array.experiments.common import note_uplink, uplink_host
from nearflash.programs.experiments.common import option
from nearflash.recssd import sharded

#: --quick: a switch uplink of 0.5 GB/s puts the host path's knee inside N = 1..8 (cosmos-plus drives).
QUICK_UPLINK = 0.5


def batches(tables: int, rows: int, bags: int, lookups: int, count: int, seed: int) -> list[list[tuple]]:
    """`count` batches of `bags` bags of `lookups` uniform ids per table (the paper's uniform microbenchmark)."""
    rng = np.random.default_rng(seed)
    offsets = np.arange(bags, dtype=np.int64) * lookups
    return [[(rng.integers(0, rows, bags * lookups), offsets) for _ in range(tables)] for _ in range(count)]


def expected_reads(lookups: int, rows: int, lru_rows: int) -> float:
    """The baseline's expected page reads for `lookups` uniform ids over a table of `rows` rows behind a host LRU of
    `lru_rows` rows that starts empty, one read in flight (the artifact's queue depth 1, so a row read is in the LRU
    before the next lookup): under independent uniform references a lookup hits with probability (rows the LRU
    holds) / rows, and the LRU holds min(distinct rows seen so far, lru_rows)."""
    seen = rows * (1.0 - np.power(1.0 - 1.0 / rows, np.arange(lookups)))
    return float(lookups - np.minimum(seen, lru_rows).sum() / rows)


def lru_rows() -> int:
    """The host LRU's rows per table by default (``host_lru_rows``, RecSSD's parameters; no preset overrides it)."""
    return int(tomllib.loads(_rs.default_section())["host_lru_rows"]["value"])


def run_recssd(exp: Experiment, opts: Options) -> None:
    ns = option(opts, "devices", [1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 64])
    rows = option(opts, "rows", 8192, 65536)
    dim = option(opts, "dim", 32, 32)
    bags = option(opts, "bags", 16, 64)
    lookups = option(opts, "lookups", 40, 80)
    count = option(opts, "batches", 2, 4)
    preset = option(opts, "preset", "cosmos-plus", "cosmos-plus")
    uplink = option(opts, "uplink", QUICK_UPLINK, 0.0)
    host = uplink_host(uplink)
    rng = np.random.default_rng(opts.seed)
    table = rng.standard_normal((rows, dim), dtype=np.float32)

    def make(n: int) -> Array:
        return Array(n, preset, seed=opts.seed, host=host)

    def work(array: Array, path: str, executor: Any) -> tuple[ArrayReport, float]:
        n = len(array)
        res = sharded.run(array, [table] * n, batches(n, rows, bags, lookups, count, opts.seed),
                          "ndp" if path == "in_storage" else "baseline", executor=executor)
        return res.report, float(n * count * bags * lookups)

    pair = sharded.PAIR_BYTES + sharded.CONFIG_HEADER_BYTES / (bags * lookups)
    per_drive, lru = count * bags * lookups, lru_rows()
    miss = expected_reads(per_drive, rows, lru) / per_drive
    costs = {"host": PathCost(sharded.BASELINE_READ_BYTES * miss, 0.0, 0.0, None,
                              "one device's baseline rate is its random 4 KiB reads: measured at N = 1"),
             "in_storage": PathCost(dim * 4 / lookups, pair, 0.0, None)}
    exp.note(f"Each device holds one {rows} x {dim} fp32 table ({preset}); each of {count} batches pools {bags} bags "
             f"of {lookups} uniform ids from every table. The host path is RecSSD's baseline (a 4 KiB read per row "
             "its host LRU misses); in storage is NDP SparseLengthsSum, returning "
             f"{dim} x 4 B per bag. Each page crosses the shared host as its read completes on the drive.")
    exp.note(f"The host path's bytes per lookup are predicted as 4096 B x its expected LRU miss share, {miss:.2%}: "
             f"{per_drive} uniform lookups per drive over {rows} rows behind a host LRU of {lru} rows (host_lru_rows) "
             "that starts empty, a lookup hitting with probability min(distinct rows seen, LRU rows) / rows.")
    note_uplink(exp, uplink)
    scaling.run(exp, scaling.Scaling(f"RecSSD SLS, one table per drive ({preset})", "lookup", work, costs,
                                     ("M lookups/s", 1e6)), ns, make)
