"""Memory per simulated device: arrays of large sparse devices (issue 26: 64 devices of 4 TB each must fit).

A device without an image keeps its mapping table, OOB area and data in anonymous mappings that reserve no swap, so
it costs the host only the pages written (plus per-block bookkeeping); a device with an image directory keeps them
in sparse files. This measures the peak RSS of N devices of a given capacity, all open at once in one process, each
writing and reading back a little data, and of the striped scan on an array of them (one device at a time, as the
array's in-process executor runs shards):

    python -m nearflash.array.memory --devices 64 --tb 4 --preset samsung-970pro
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from typing import Any, Optional, Sequence

import numpy as np

from nearflash.array import scan
from nearflash.array.array import Array
from nearflash.device import Device, _count
from nearflash.errors import ConfigError, InvalidArgument


def peak_rss_mib() -> float:
    """This process's peak resident set so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def capacity_overrides(preset: str, tb: float) -> dict[str, Any]:
    """Overrides that give devices of `preset` at least `tb` TB (1e12 B) of user capacity, by blocks per plane (the
    geometry's other counts, the page size and the over-provisioning kept)."""
    with Device(None, preset, materialise=False) as dev:
        blocks = int(dev.param("nand.blocks_per_plane").split()[0])
        capacity = dev.lbas * dev.lba_bytes
    return {"nand.blocks_per_plane": math.ceil(blocks * tb * 1e12 / capacity)}


def open_all(devices: int, preset: str, overrides: dict[str, Any], mib: int) -> dict[str, Any]:
    """Opens `devices` in-memory devices at once, writes `mib` MiB to each and reads it back; returns the capacity
    per device, the peak RSS before and after, and the growth per device."""
    before = peak_rss_mib()
    t0 = time.time()
    devs = [Device(None, preset, seed=1 + i, overrides=overrides) for i in range(devices)]
    data = np.arange(mib << 17, dtype=np.int64)
    try:
        for dev in devs:
            dev.write(0, data)
            if not np.array_equal(dev.read(0, data.nbytes // dev.lba_bytes).view(np.int64), data):
                raise AssertionError("a device read back other data than it was written")
        capacity = devs[0].lbas * devs[0].lba_bytes
    finally:
        for dev in devs:
            dev.close()
    after = peak_rss_mib()
    return {"devices": devices, "capacity_tb": capacity / 1e12, "mib_each": mib, "rss_before_mib": before,
            "rss_peak_mib": after, "per_device_mib": (after - before) / devices, "wall_s": time.time() - t0}


def array_scan(devices: int, preset: str, overrides: dict[str, Any], mib: int) -> dict[str, Any]:
    """The host-path striped scan of `mib` MiB per device on an array of them; peak RSS and the array's figures."""
    before = peak_rss_mib()
    t0 = time.time()
    report, _ = scan.run(Array(devices, preset, overrides=overrides), devices * (mib << 20))
    return {"devices": devices, "rss_before_mib": before, "rss_peak_mib": peak_rss_mib(),
            "throughput_gb_s": report.throughput_gb_s, "wall_s": time.time() - t0}


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m nearflash.array.memory", description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=64)
    ap.add_argument("--tb", type=float, default=4.0, help="user capacity of each device, TB")
    ap.add_argument("--preset", default="samsung-970pro")
    ap.add_argument("--mib-per-device", type=int, default=1, help="data each device writes and reads")
    a = ap.parse_args(argv)
    try:
        n, mib = _count("--devices", a.devices, 1, 4096), _count("--mib-per-device", a.mib_per_device, 1, 1 << 20)
        if not (math.isfinite(a.tb) and a.tb > 0):
            raise InvalidArgument(f"--tb must be a positive number of TB, got {a.tb}")
        overrides = capacity_overrides(a.preset, a.tb)
    except (InvalidArgument, ConfigError) as e:
        ap.error(str(e))
    print(f"{a.preset} with {overrides}: start at {peak_rss_mib():.0f} MiB peak RSS")
    s = array_scan(n, a.preset, overrides, mib)
    print(f"striped scan on {n} devices, {mib} MiB each (one device at a time): peak RSS {s['rss_peak_mib']:.0f} MiB, "
          f"{s['throughput_gb_s']:.2f} GB/s, {s['wall_s']:.1f} s wall")
    o = open_all(n, a.preset, overrides, mib)
    print(f"{n} devices of {o['capacity_tb']:.2f} TB open at once, {mib} MiB written and read back on each: peak RSS "
          f"{o['rss_peak_mib']:.0f} MiB ({o['per_device_mib']:.1f} MiB per device), {o['wall_s']:.1f} s wall")


if __name__ == "__main__":
    main()
