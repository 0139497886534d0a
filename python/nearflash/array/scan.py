"""A table of int64 values striped over an array and scanned for the count and sum of the values above a
threshold, on either path; the host merges the shards' partial results.
- host path: every device reads its chunks sequentially at a queue depth, the bytes cross the shared host, and host
  CPU cores filter and sum them;
- in storage: every device copies each piece from flash into its Subsystem Local Memory and runs the
  ``threshold_sum`` computational program (examples/programs) on its controller; only 16 bytes per piece reach
  the host.

    python -m nearflash.array.scan --devices 1,2,4,8,16      # throughput vs N at quick sizes, with the formula's knee
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Optional, Sequence

import numpy as np

from nearflash import _native
from nearflash.array import programs
from nearflash.array.array import Array, Shard
from nearflash.array.host import ArrayReport, HostModel, PathCost
from nearflash.array.scaling import Scaling, check_ns
from nearflash.array.placement import Striped
from nearflash.device import _count, preset_params
from nearflash.errors import ConfigError, InvalidArgument
from nearflash.programs import api, example


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
    ios = _pieces(shard, layout, table_bytes, io_bytes)
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


def _pieces(shard: Shard, layout: Striped, table_bytes: int, io_bytes: int) -> list[tuple[int, int]]:
    """(device byte offset, bytes) of each command's piece of this device's stripes, in order."""
    return [(e.offset + off, min(io_bytes, e.nbytes - off))
            for e in layout.extents(shard.index, table_bytes) for off in range(0, e.nbytes, io_bytes)]


def in_storage_scan(shard: Shard, table_bytes: int, chunk_bytes: int, io_bytes: int, depth: int, threshold: int,
                    scan_ns_per_byte: float, seed: int, program: bytes) -> tuple[int, int]:
    """One shard in storage: loads its stripes, then for each piece a Memory Copy from flash into SLM and an
    Execute Program of `program` (threshold_sum) on it, one piece at a time (nearflash.array.programs); the host
    reads 16 bytes per piece and adds them up. `depth` is unused: the programs' host library runs one command at a
    time."""
    dev = shard.device
    _check_sizes(dev.lba_bytes, table_bytes, chunk_bytes, io_bytes)
    layout = Striped(shard.devices, chunk_bytes)
    job = programs.Job(program, 16, cparam1=threshold)
    dev.attach("programs")
    api.load(dev, programs.PIND, program)
    api.activate(dev, programs.PIND)
    load(shard, layout, table_bytes, seed)
    shard.start_ns = dev.now_ns
    pieces = [(off // dev.lba_bytes, n // dev.lba_bytes, n) for off, n in _pieces(shard, layout, table_bytes, io_bytes)]
    return count_and_sum(programs.in_storage(shard, job, pieces, scan_ns_per_byte))


def count_and_sum(outputs: list[tuple[int, np.ndarray]]) -> tuple[int, int]:
    """The host's merge of threshold_sum's outputs (u64 count, i64 sum each)."""
    parts = [out.view(np.int64) for _, out in outputs]
    return sum(int(p[0]) for p in parts), sum(int(p[1]) for p in parts)


PATHS = {"host": host_scan, "in_storage": in_storage_scan}

#: PCIe generation -> (GT/s per lane, line coding), as the core's `Config::link_bandwidth`.
_PCIE = {1: (2.5, 0.8), 2: (5.0, 0.8), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130)}


def read_rate(preset: str, overrides: Optional[dict[str, Any]] = None) -> tuple[float, str]:
    """One device's sequential-read bound (B/s) from its preset, and what sets it: min(host link = PCIe line rate x
    lanes x link_efficiency, channels x channel rate x width, dies x page / t_read). An upper bound: the host path
    reads at a finite queue depth, so it falls somewhat short (docs/arrays.md)."""
    p = {k: v for k, v, *_ in _native.preset_params(preset, [(k, str(v)) for k, v in (overrides or {}).items()])}
    if p["host.interface"] != "pcie":
        raise InvalidArgument(f"read_rate knows PCIe links only; preset {preset!r} has {p['host.interface']!r}")
    gt, coding = _PCIE.get(int(p["host.pcie_gen"]), (64.0, 242 / 256))
    link = gt * 1e9 * coding / 8 * int(p["host.pcie_lanes"]) * float(p["host.link_efficiency"])
    channels = int(p["nand.channels"]) * float(p["nand.channel_rate"]) * 1e6 * int(p["nand.channel_width"]) / 8
    dies = int(p["nand.channels"]) * int(p["nand.chips_per_channel"]) * int(p["nand.dies_per_chip"])
    planes = int(p["nand.planes_per_die"]) if p["nand.multi_plane"] == "true" else 1
    arrays = dies * planes * float(p["nand.page_size"]) * 1024 / (float(p["nand.t_read"]) * 1e-6)
    bounds = {"host link": link, "flash channels": channels, "flash dies": arrays}
    by = min(bounds, key=lambda k: bounds[k])
    return bounds[by], by


def scaling_work(preset: str, host: HostModel, per_device_bytes: int, **kw: Any) -> Scaling:
    """The striped scan as the shared scaling experiment's work: a unit is one table byte; each array of N devices
    scans N x `per_device_bytes`. Host path: every byte crosses the shared host and costs `scan_ns_per_byte` of
    host CPU, one device reads at its preset's sequential-read bound; in storage: 16 B and a 16 B merge per piece
    of `io_bytes`, and one device's rate is not predicted (it is the threshold_sum program's instruction count)."""
    io_bytes = kw.get("io_bytes", 128 << 10)
    c = host["scan_ns_per_byte"]
    rate, by = read_rate(preset)
    costs = {"host": PathCost(1.0, 0.0, c, rate, f"the preset's sequential-read bound ({by})"),
             "in_storage": PathCost(16 / io_bytes, 0.0, 16 * c / io_bytes, None)}

    def work(array: Array, path: str, executor: Any) -> tuple[ArrayReport, float]:
        report, _ = run(array, len(array) * per_device_bytes, path=path, executor=executor, **kw)
        return report, float(len(array) * per_device_bytes)

    return Scaling(f"striped int64 scan ({preset}, {per_device_bytes >> 20} MiB per device)", "table byte", work,
                   costs, ("GB/s", 1e9))


def run(array: Array, table_bytes: int, *, chunk_bytes: int = 1 << 20, io_bytes: int = 128 << 10, depth: int = 8,
        threshold: int = 1 << 19, seed: int = 7, path: str = "host", executor: Any = None,
        closed_loop: Optional[int] = None) -> tuple[ArrayReport, tuple[int, int]]:
    """Scans a striped table on `array` by `path` ("host" or "in_storage"); returns the array's report and the
    merged (count, sum). `closed_loop`: rounds of back-pressure from the shared host (:meth:`Array.run`)."""
    if path not in PATHS:
        raise InvalidArgument(f"path must be one of {sorted(PATHS)}, got {path!r}")
    args = (_count("table_bytes", table_bytes, 1), _count("chunk_bytes", chunk_bytes, 1),
            _count("io_bytes", io_bytes, 1), _count("depth", depth, 1, 1024), _count("threshold", threshold, 0),
            array.host["scan_ns_per_byte"], _count("seed", seed, 0))
    if path == "in_storage":
        args = (*args, example("threshold_sum"))
    report, parts = array.run(PATHS[path], *args, executor=executor, closed_loop=closed_loop)
    return report, (sum(p[0] for p in parts), sum(p[1] for p in parts))


def scaling(ns: Sequence[int], per_device_bytes: int, host: Optional[dict[str, Any]] = None,
            preset: str = "cosmos-plus", **kw: Any) -> list[dict[str, Any]]:
    """Host-path throughput vs N (each device holding `per_device_bytes`) in GB/s of table scanned, beside the
    formula min(N x B1, limit) where B1 is the one-device throughput and limit the host path's saturation point from
    the host parameters. (With path="in_storage" the formula does not apply: its shared-host traffic is 16 B a piece.)"""
    rows, b1 = [], None
    for n in ns:
        array = Array(n, preset, host=host)
        report, _ = run(array, n * per_device_bytes, **kw)
        scanned = n * per_device_bytes / report.elapsed_ns
        b1 = b1 if b1 is not None else scanned
        limit, by = array.host.host_path_limit_gb_s(array.host["scan_ns_per_byte"])
        rows.append({"devices": n, "throughput_gb_s": scanned, "formula_gb_s": min(n * b1, limit),
                     "limit_gb_s": limit, "limit_by": by, "knee_devices": limit / b1,
                     "busiest": report.whole["busiest"],
                     "busiest_utilisation": report.whole["utilisation"].get(report.whole["busiest"], 0.0)})
    return rows


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nearflash.array.scan", description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="1,2,4,8,16", help="comma-separated N values")
    ap.add_argument("--mib-per-device", type=int, default=8)
    ap.add_argument("--preset", default="cosmos-plus")
    ap.add_argument("--uplink", type=float, default=None, help="override the switch uplink (GB/s)")
    a = ap.parse_args(argv)
    try:
        ns = check_ns([_count("--devices", int(x) if x.strip().lstrip("-").isdigit() else x, 1, 4096)
                       for x in a.devices.split(",")])
        mib = _count("--mib-per-device", a.mib_per_device, 1, 1 << 20)
        if a.uplink is not None and not (math.isfinite(a.uplink) and a.uplink > 0):
            raise InvalidArgument(f"--uplink must be a positive number of GB/s, got {a.uplink}")
        host = {"uplink_bandwidth": a.uplink} if a.uplink is not None else None
        preset_params(a.preset)  # the preset and the host parameters, checked before anything runs
        Array(1, a.preset, host=host)
    except (InvalidArgument, ConfigError) as e:
        ap.error(str(e))
    rows = scaling(ns, mib << 20, host, a.preset)
    isc = scaling(ns, mib << 20, host, a.preset, path="in_storage")
    r0 = rows[0]
    print(f"host path limit {r0['limit_gb_s']:.2f} GB/s ({r0['limit_by']}); knee at N = {r0['knee_devices']:.1f}")
    print("| N | host path GB/s | formula min(N x B1, limit) GB/s | busiest shared resource | in storage GB/s |")
    print("|---|---|---|---|---|")
    for r, i in zip(rows, isc):
        print(f"| {r['devices']} | {r['throughput_gb_s']:.3f} | {r['formula_gb_s']:.3f} | "
              f"{r['busiest']} ({r['busiest_utilisation']:.0%}) | {i['throughput_gb_s']:.3f} |")


if __name__ == "__main__":
    main()
