"""The array's shared host (PCIe switch uplink, root complex, host DRAM, host CPU cores) and the combiner that
replays every device's host-visible transfers through it on one array clock: Python faces over the Rust crate
``nearflash-array`` (its ``host.toml`` holds the parameters with units and sources; ``combine.rs`` the replay).

Each device simulates its shard on its own clock and records its host-visible transfers (:class:`Transfer`); the
combiner replays them in one deterministic order, (device time, device index, sequence), through FIFO stages, so the
one-process and the multi-process array give the same report. What this leaves out: a saturated uplink does not
push back into a device's queue (docs/arrays.md bounds the effect)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from nearflash._native import array as _native
from nearflash.device import _real
from nearflash.errors import InvalidArgument

DIRECTIONS = ("to_host", "to_device")


@dataclass(frozen=True)
class Param:
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class PathCost:
    """What one unit of a path's work (a byte scanned, a query searched on one shard) costs the shared host: bytes to
    the host and to the device, host CPU ns; host CPU ns paid once per query whatever the devices it spans
    (`cpu_ns_per_query`: a query is one unit on each of N devices, e.g. hashing it on the host, so a unit costs
    `cpu_ns + cpu_ns_per_query / N`); and what one device alone does on that path (`device_rate`, units/s, derived
    from its preset; None when the preset cannot tell, e.g. a program's instruction count, and `device_rate_why`
    says how)."""

    to_host_bytes: float
    to_device_bytes: float = 0.0
    cpu_ns: float = 0.0
    device_rate: Optional[float] = None
    device_rate_why: str = ""
    cpu_ns_per_query: float = 0.0

    def __post_init__(self) -> None:
        for name in ("to_host_bytes", "to_device_bytes", "cpu_ns", "cpu_ns_per_query"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InvalidArgument(f"PathCost.{name} must be a finite number >= 0, got {v!r}")
        r = self.device_rate
        bad = isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r) and r > 0)
        if r is not None and bad:
            raise InvalidArgument(f"PathCost.device_rate must be a finite number > 0 or None, got {r!r}")


class HostModel:
    """The shared host's parameters (``crates/nearflash-array/host.toml``), each with its unit and source;
    `overrides` replace values by leaf name (``uplink_bandwidth=8``) or full path. Plain data (picklable): the
    native calls rebuild the host from the overrides."""

    def __init__(self, overrides: Optional[dict[str, Any]] = None):
        if overrides is not None and not isinstance(overrides, dict):
            raise InvalidArgument(
                f"host overrides must be a dict of parameter name -> value, got {type(overrides).__name__}")
        self.overrides: list[tuple[str, float]] = []
        for name, value in (overrides or {}).items():
            if not isinstance(name, str):
                raise InvalidArgument(f"host parameter names are strings, got {name!r}")
            self.overrides.append((name, _real(name, value)))
        self.params = {path: Param(value, unit, source)
                       for path, value, unit, source in _native.host_params(self.overrides)}

    def _path(self, name: Any) -> str:
        hits = [p for p in self.params if isinstance(name, str) and (p == name or p.endswith("." + name))]
        if len(hits) != 1:
            raise InvalidArgument(f"unknown array host parameter {name!r}; have {sorted(self.params)}")
        return hits[0]

    def __getitem__(self, name: str) -> float:
        return self.params[self._path(name)].value

    @property
    def cpu_cores(self) -> int:
        return int(self["cpu_cores"])

    def limit(self, cost: PathCost, devices: float = 1) -> tuple[float, str]:
        """The most units/s of a path's work the shared host can take on `devices` devices (inf when a unit costs it
        nothing), and the resource that sets it: min(uplink / b_up, root complex / b_up, DRAM / (b_up + b_down),
        cores / (c + c_q / N)), where the uplink and root complex are full duplex (the busier direction counts) and
        DRAM carries both."""
        n = _real("devices", devices)
        if not (math.isfinite(n) and n >= 1):
            raise InvalidArgument(f"devices must be a finite number >= 1, got {devices!r}")
        return _native.host_limit(self.overrides, cost.to_host_bytes, cost.to_device_bytes, cost.cpu_ns,
                                  cost.cpu_ns_per_query, n)

    def knee(self, cost: PathCost, device_rate: float) -> tuple[float, str]:
        """The knee N*: where N devices of `device_rate` units/s each reach the host's limit (N x B1 = limit(N)),
        and the resource that sets it; 0 when the per-query CPU alone binds from the first device, inf when
        nothing binds (docs/arrays.md, "The saturation point")."""
        rate = _real("device_rate", device_rate)
        if not (math.isfinite(rate) and rate > 0):
            raise InvalidArgument(f"device_rate must be a finite number > 0, got {device_rate!r}")
        return _native.host_knee(self.overrides, cost.to_host_bytes, cost.to_device_bytes, cost.cpu_ns,
                                 cost.cpu_ns_per_query, rate)

    def host_path_limit_gb_s(self, cpu_ns_per_byte: float = 0.0) -> tuple[float, str]:
        """The saturation throughput in GB/s of a host path that moves every byte to the host and spends
        `cpu_ns_per_byte` of host CPU on it, and the resource that sets it."""
        limit, name = self.limit(PathCost(1.0, 0.0, cpu_ns_per_byte))
        return limit / 1e9, name

    def table(self) -> list[tuple[str, float, str, str]]:
        return [(p, v.value, v.unit, v.source) for p, v in self.params.items()]


@dataclass(frozen=True)
class Transfer:
    """One host-visible event of a device: `nbytes` crossing its host link `direction`, done on the device's own
    clock at `t_ns` (relative to its shard's start), followed by `cpu_ns` of host CPU work on those bytes."""

    t_ns: int
    nbytes: int
    direction: str = "to_host"
    cpu_ns: int = 0


@dataclass
class ShardResult:
    """What one device's shard produced: its transfers, its own finish time, its device report and the shard's
    value for the host-side merge."""

    device: int
    preset: str
    transfers: list[Transfer]
    end_ns: int
    report: dict[str, Any]
    value: Any = None


@dataclass
class ArrayReport:
    """The array's report: `whole` (elapsed time on the array clock, bytes, throughput, each shared resource's
    utilisation and the bottleneck) and `devices` (one entry per device, with its own report)."""

    whole: dict[str, Any]
    devices: list[dict[str, Any]] = field(default_factory=list)
    #: Per device label, when each of its transfers was delivered on the array clock (in the order it made them):
    #: what a closed-loop round's shards wait for (not part of the report).
    deliveries: dict[int, list[int]] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"whole": self.whole, "devices": self.devices}

    @property
    def elapsed_ns(self) -> int:
        return self.whole["elapsed_ns"]

    @property
    def throughput_gb_s(self) -> float:
        return self.whole["throughput_gb_s"]


def combine(results: Sequence[ShardResult], host: HostModel) -> ArrayReport:
    """Replays every shard's transfers through the shared host on one array clock (every shard starts at 0)."""
    shards = []
    for r in results:
        for t in r.transfers:
            if t.direction not in DIRECTIONS:
                raise InvalidArgument(f"transfer direction must be one of {DIRECTIONS}, got {t.direction!r}")
        transfers = [(t.t_ns, t.nbytes, t.direction == "to_device", t.cpu_ns) for t in r.transfers]
        shards.append((r.device, r.end_ns, transfers))
    try:
        elapsed, transfers, to_host, to_device, util, busiest, delivered = _native.combine(host.overrides, shards)
    except (TypeError, OverflowError) as e:
        raise InvalidArgument(f"shard results must carry device labels and transfer times, bytes and CPU ns as "
                              f"integers >= 0: {e}") from None
    whole = {
        "devices": len(results),
        "elapsed_ns": elapsed,
        "bytes": {"to_host": to_host, "to_device": to_device},
        "transfers": transfers,
        "throughput_gb_s": (to_host + to_device) / elapsed if elapsed else 0.0,
        "utilisation": dict(util),
        "busiest": busiest,
        "host": {p: v.value for p, v in host.params.items()},
    }
    by_device = {r.device: r for r in results}
    devices = [
        {
            "device": device,
            "preset": by_device[device].preset,
            "own_end_ns": by_device[device].end_ns,
            "delivered_end_ns": end,
            "transfers": len(by_device[device].transfers),
            "bytes_to_host": sum(t.nbytes for t in by_device[device].transfers if t.direction == "to_host"),
            "bytes_to_device": sum(t.nbytes for t in by_device[device].transfers if t.direction == "to_device"),
            "mean_host_delay_ns": mean_delay,
            "report": by_device[device].report,
        }
        for device, end, mean_delay, _ in delivered
    ]
    return ArrayReport(whole, devices, {device: each for device, _, _, each in delivered})
