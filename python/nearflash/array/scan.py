"""A table of int64 values striped over an array, scanned on the host path: every device reads its chunks
sequentially at a queue depth, the bytes cross the shared host, and host CPU cores filter and sum them (count and sum
of the values above a threshold); the host merges the shards' partial results.

    python -m nearflash.array.scan --devices 1,2,4,8,16      # throughput vs N at quick sizes, with the formula's knee
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Optional, Sequence

import numpy as np

from nearflash.array.array import Array, Shard
from nearflash.array.host import ArrayReport
from nearflash.array.placement import Striped
from nearflash.device import _count
from nearflash.errors import InvalidArgument


def chunk_values(seed: int, chunk: int, nbytes: int) -> np.ndarray:
    """The table's values in logical chunk `chunk` (the same whichever device holds it)."""
    return np.random.default_rng((seed, chunk)).integers(0, 1 << 20, nbytes // 8, dtype=np.int64)


def _check_sizes(lba: int, table_bytes: int, chunk_bytes: int, io_bytes: int) -> None:
    for name, v in (("table_bytes", table_bytes), ("chunk_bytes", chunk_bytes), ("io_bytes", io_bytes)):
        if v % lba:
            raise InvalidArgument(f"{name} must be a multiple of the device's {lba}-byte blocks, got {v}")


def load(shard: Shard, layout: Striped, table_bytes: int, seed: int) -> None:
    """Writes this device's stripes of the table, then starts a new measurement window."""
    dev = shard.device
    for e in layout.extents(shard.index, table_bytes):
        dev.write(e.offset // dev.lba_bytes, chunk_values(seed, e.logical // layout.chunk_bytes, e.nbytes))
    dev.reset_stats()


def host_scan(shard: Shard, table_bytes: int, chunk_bytes: int, io_bytes: int, depth: int, threshold: int,
              scan_ns_per_byte: float, seed: int) -> tuple[int, int]:
    """One shard of the host path: loads its stripes, reads them back at `depth` commands of `io_bytes`, and filters
    each command's bytes on the host; returns (count, sum) of its values above `threshold`."""
    dev = shard.device
    _check_sizes(dev.lba_bytes, table_bytes, chunk_bytes, io_bytes)
    layout = Striped(shard.devices, chunk_bytes)
    load(shard, layout, table_bytes, seed)
    shard.start_ns = dev.now_ns
    ios = [(e.offset + off, min(io_bytes, e.nbytes - off))
           for e in layout.extents(shard.index, table_bytes) for off in range(0, e.nbytes, io_bytes)]
    q = dev.queue(depth)
    count = total = 0
    nxt = 0
    while nxt < len(ios) or q.in_flight:
        while nxt < len(ios) and q.in_flight < depth:
            off, n = ios[nxt]
            q.submit_read(off // dev.lba_bytes, n // dev.lba_bytes, np.empty(n, dtype=np.uint8))
            nxt += 1
        c = q.wait()
        values = c.data.view(np.int64)
        hit = values[values > threshold]
        count, total = count + hit.size, total + int(hit.sum())
        shard.transfer(c.time_ns, c.data.nbytes, cpu_ns=math.ceil(c.data.nbytes * scan_ns_per_byte))
    q.close()
    return count, total


def run(array: Array, table_bytes: int, *, chunk_bytes: int = 1 << 20, io_bytes: int = 128 << 10, depth: int = 8,
        threshold: int = 1 << 19, seed: int = 7, executor: Any = None) -> tuple[ArrayReport, tuple[int, int]]:
    """Scans a striped table on `array`'s host path; returns the array's report and the merged (count, sum)."""
    args = (_count("table_bytes", table_bytes, 1), _count("chunk_bytes", chunk_bytes, 1),
            _count("io_bytes", io_bytes, 1), _count("depth", depth, 1, 1024), _count("threshold", threshold, 0),
            array.host["scan_ns_per_byte"], _count("seed", seed, 0))
    report, parts = array.run(host_scan, *args, executor=executor)
    return report, (sum(p[0] for p in parts), sum(p[1] for p in parts))


def scaling(ns: Sequence[int], per_device_bytes: int, host: Optional[dict[str, Any]] = None,
            preset: str = "cosmos-plus", **kw: Any) -> list[dict[str, Any]]:
    """Throughput vs N (each device holding `per_device_bytes`), beside the formula min(N x B1, limit) where B1 is
    the one-device throughput and limit the host path's saturation point from the host parameters."""
    rows, b1 = [], None
    for n in ns:
        array = Array(n, preset, host=host)
        report, _ = run(array, n * per_device_bytes, **kw)
        b1 = b1 if b1 is not None else report.throughput_gb_s
        limit, by = array.host.host_path_limit_gb_s(array.host["scan_ns_per_byte"])
        rows.append({"devices": n, "throughput_gb_s": report.throughput_gb_s, "formula_gb_s": min(n * b1, limit),
                     "limit_gb_s": limit, "limit_by": by, "knee_devices": limit / b1,
                     "busiest": report.whole["busiest"],
                     "busiest_utilisation": report.whole["utilisation"][report.whole["busiest"]]})
    return rows


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nearflash.array.scan", description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="1,2,4,8,16", help="comma-separated N values")
    ap.add_argument("--mib-per-device", type=int, default=8)
    ap.add_argument("--preset", default="cosmos-plus")
    ap.add_argument("--uplink", type=float, default=None, help="override the switch uplink (GB/s)")
    a = ap.parse_args(argv)
    host = {"uplink_bandwidth": a.uplink} if a.uplink else None
    rows = scaling([int(x) for x in a.devices.split(",")], a.mib_per_device << 20, host, a.preset)
    r0 = rows[0]
    print(f"host path limit {r0['limit_gb_s']:.2f} GB/s ({r0['limit_by']}); knee at N = {r0['knee_devices']:.1f}")
    print("| N | measured GB/s | formula min(N x B1, limit) GB/s | busiest shared resource |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['devices']} | {r['throughput_gb_s']:.3f} | {r['formula_gb_s']:.3f} | "
              f"{r['busiest']} ({r['busiest_utilisation']:.0%}) |")


if __name__ == "__main__":
    main()
