"""A fio-like bench job on a device, prepared as `nearflash bench` does it (span, default fill, preconditioning):
shared by the `bench` command and sweep points so both measure the same thing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from nearflash import progress
from nearflash.device import Device
from nearflash.errors import InvalidArgument

RW = ("read", "write", "randread", "randwrite", "randrw")
FILLS = ("none", "sequential", "random")


@dataclass
class BenchJob:
    rw: str = "randread"
    bs: int = 4096
    iodepth: Optional[int] = None  # None: 64, or the device's maximum if lower
    numjobs: int = 1
    ios: int = 200_000
    size: Union[int, float] = 16 << 30  # bytes, or a share of the capacity in (0, 1]
    fill: Optional[str] = None  # None: sequential for reads, none for writes
    data: bool = False
    rwmixread: float = 0.5
    seed: int = 1

    def check(self) -> None:
        """Raises InvalidArgument naming the first field with a wrong type or value."""

        def positive_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v > 0

        if not isinstance(self.rw, str) or self.rw not in RW:
            raise InvalidArgument(f"rw must be one of {', '.join(RW)}, got {self.rw!r}")
        if self.fill is not None and (not isinstance(self.fill, str) or self.fill not in FILLS):
            raise InvalidArgument(f"fill must be one of {', '.join(FILLS)}, got {self.fill!r}")
        for name in ("bs", "numjobs", "ios"):
            if not positive_int(getattr(self, name)):
                raise InvalidArgument(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.iodepth is not None and not positive_int(self.iodepth):
            raise InvalidArgument(f"iodepth must be a positive integer, got {self.iodepth!r}")
        if isinstance(self.size, float):
            if not 0 < self.size <= 1:
                raise InvalidArgument(f"size as a share of the capacity must be in (0, 1], got {self.size}")
        elif not positive_int(self.size):
            raise InvalidArgument(f"size must be a positive number of bytes or a share in (0, 1], got {self.size!r}")
        if not isinstance(self.data, bool):
            raise InvalidArgument(f"data must be true or false, got {self.data!r}")
        if isinstance(self.rwmixread, bool) or not isinstance(self.rwmixread, (int, float)) \
                or not 0 <= self.rwmixread <= 1:
            raise InvalidArgument(f"rwmixread must be a number in [0, 1], got {self.rwmixread!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InvalidArgument(f"seed must be a non-negative integer, got {self.seed!r}")


def run_bench(dev: Device, job: BenchJob, json_output: bool = True) -> dict[str, Any]:
    """Preconditions a fresh device as the job asks and runs it; returns `Device.bench`'s result plus the resolved
    `iodepth`, `span_bytes` and `fill`. Progress is drawn only where `nearflash.progress` allows it."""
    job.check()
    if job.bs % dev.lba_bytes:
        raise InvalidArgument(f"block size {job.bs} is not a multiple of the {dev.lba_bytes} B LBA")
    per_io = job.bs // dev.lba_bytes
    iodepth = job.iodepth or min(64, int(dev.param("nvme.max_queue_depth").split()[0]) - 1)
    share = isinstance(job.size, float)
    span_bytes = int(job.size * dev.capacity_bytes) if share else min(job.size, dev.capacity_bytes)
    lbas = span_bytes // dev.lba_bytes // per_io * per_io
    if lbas == 0:
        raise InvalidArgument(f"size: a span of {span_bytes} bytes holds no {job.bs} B block (bs)")
    fresh = dev.path is None or dev.report().ftl["occupancy"] == 0
    fill = job.fill if job.fill is not None else ("sequential" if job.rw in ("read", "randread", "randrw") else "none")
    if fresh and fill != "none":
        with progress.spinner(f"preconditioning {lbas / dev.lbas:.0%} ({fill})", json_output):
            dev.precondition(lbas / dev.lbas, fill, overwrite=1.0, seed=job.seed)
    with progress.bar("simulating", job.ios, json_output) as cb:
        r = dev.bench(job.rw, job.bs, iodepth, job.numjobs, job.ios, span=(0, lbas), seed=job.seed, data=job.data,
                      rwmixread=job.rwmixread, progress=cb)
    r.update(iodepth=iodepth, span_bytes=span_bytes, fill=fill)
    return r
