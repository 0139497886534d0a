"""The array's shared host (PCIe switch uplink, root complex, host DRAM, host CPU cores) and the combiner that
replays every device's host-visible transfers through it on one array clock.

Each device simulates its shard on its own clock and records its host-visible transfers (:class:`Transfer`); the
combiner replays them in one deterministic order, (device time, device index, sequence), through FIFO stages, so the
one-process and the multi-process array give the same report. What this leaves out: a saturated uplink does not
push back into a device's queue (docs/arrays.md bounds the effect)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from nearflash.device import _count, _real
from nearflash.errors import InvalidArgument
from nearflash.tomlfile import read_toml

HOST_TOML = Path(__file__).with_name("host.toml")
DIRECTIONS = ("to_host", "to_device")


@dataclass(frozen=True)
class Param:
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class PathCost:
    """What one unit of a path's work (a byte scanned, a query) costs the shared host: bytes to the host and to the
    device, host CPU ns; and what one device alone does on that path (`device_rate`, units/s, derived from its preset;
    None when the preset cannot tell, e.g. a program's instruction count, and `device_rate_why` says how)."""

    to_host_bytes: float
    to_device_bytes: float = 0.0
    cpu_ns: float = 0.0
    device_rate: Optional[float] = None
    device_rate_why: str = ""

    def __post_init__(self) -> None:
        for name in ("to_host_bytes", "to_device_bytes", "cpu_ns"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InvalidArgument(f"PathCost.{name} must be a finite number >= 0, got {v!r}")
        r = self.device_rate
        if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r) and r > 0)):
            raise InvalidArgument(f"PathCost.device_rate must be a finite number > 0 or None, got {r!r}")


class HostModel:
    """The shared host's parameters (``host.toml`` beside this module), each with its unit and source; `overrides`
    replace values by leaf name (``uplink_bandwidth=8``)."""

    def __init__(self, overrides: Optional[dict[str, Any]] = None):
        table = read_toml(HOST_TOML, "array host model")
        self.params: dict[str, Param] = {}
        for section, entries in table.items():
            for name, p in entries.items():
                self.params[f"{section}.{name}"] = Param(float(p["value"]), p["unit"], p["source"])
        if overrides is not None and not isinstance(overrides, dict):
            raise InvalidArgument(f"host overrides must be a dict of parameter name -> value, got {type(overrides).__name__}")
        for name, value in (overrides or {}).items():
            path = self._path(name)
            old = self.params[path]
            v = float(_count(name, value, 1)) if old.unit == "count" else _real(name, value)
            low_ok = v >= 0 if old.unit == "ns" else v > 0
            if not (math.isfinite(v) and low_ok):
                raise InvalidArgument(f"host parameter {name} must be a finite positive number of {old.unit}, got {value!r}")
            self.params[path] = Param(v, old.unit, "override")

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

    def limit(self, cost: "PathCost") -> tuple[float, str]:
        """The most units/s of a path's work the shared host can take (inf when a unit costs it nothing), and the
        resource that sets it: min(uplink / b_up, root complex / b_up, DRAM / (b_up + b_down), cores / c), where
        the uplink and root complex are full duplex (the busier direction counts) and DRAM carries both."""
        up = max(cost.to_host_bytes, cost.to_device_bytes)
        both = cost.to_host_bytes + cost.to_device_bytes
        limits = {"switch uplink": self["uplink_bandwidth"] * 1e9 / up if up else math.inf,
                  "root complex": self["root_complex_bandwidth"] * 1e9 / up if up else math.inf,
                  "host DRAM": self["dram_bandwidth"] * 1e9 / both if both else math.inf,
                  "host CPU": self.cpu_cores * 1e9 / cost.cpu_ns if cost.cpu_ns else math.inf}
        name = min(limits, key=lambda k: limits[k])
        return limits[name], name

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
class _Fifo:
    """A bandwidth server that carries one transfer at a time, in arrival order."""

    bytes_per_ns: float
    free_ns: int = 0
    busy_ns: int = 0
    bytes: int = 0

    def carry(self, start_ns: int, upstream_end_ns: int, nbytes: int) -> tuple[int, int]:
        """Cut-through: the transfer starts when it arrives and this stage is free, and ends no earlier than its
        upstream stage ended (a slower upstream paces it). Returns (start, end)."""
        start = max(start_ns, self.free_ns)
        end = max(start + math.ceil(nbytes / self.bytes_per_ns), upstream_end_ns)
        self.busy_ns += end - start
        self.bytes += nbytes
        self.free_ns = end
        return start, end


@dataclass
class ArrayReport:
    """The array's report: `whole` (elapsed time on the array clock, bytes, throughput, each shared resource's
    utilisation and the bottleneck) and `devices` (one entry per device, with its own report)."""

    whole: dict[str, Any]
    devices: list[dict[str, Any]] = field(default_factory=list)

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
    stages = {d: [_Fifo(host["uplink_bandwidth"]), _Fifo(host["root_complex_bandwidth"])] for d in DIRECTIONS}
    dram = _Fifo(host["dram_bandwidth"])
    cores = [(0, i) for i in range(host.cpu_cores)]
    cpu_busy = 0
    latency = int(host["latency"])
    order = sorted((t.t_ns, r.device, seq, t) for r in results for seq, t in enumerate(r.transfers))
    delivered = {r.device: 0 for r in results}
    delay = {r.device: 0 for r in results}
    for t_ns, dev, _, t in order:
        if t.direction not in DIRECTIONS:
            raise InvalidArgument(f"transfer direction must be one of {DIRECTIONS}, got {t.direction!r}")
        start, end = t_ns + latency, t_ns + latency
        for stage in (*stages[t.direction], dram):
            start, end = stage.carry(start, end, t.nbytes)
        if t.cpu_ns:
            free, core = heapq.heappop(cores)
            end = max(end, free) + t.cpu_ns
            cpu_busy += t.cpu_ns
            heapq.heappush(cores, (end, core))
        delivered[dev] = max(delivered[dev], end)
        delay[dev] += end - t_ns
    elapsed = max([0] + [r.end_ns for r in results] + list(delivered.values()))
    moved = {d: sum(t.nbytes for r in results for t in r.transfers if t.direction == d) for d in DIRECTIONS}
    util = {
        "uplink_to_host": stages["to_host"][0].busy_ns,
        "uplink_to_device": stages["to_device"][0].busy_ns,
        "root_complex_to_host": stages["to_host"][1].busy_ns,
        "root_complex_to_device": stages["to_device"][1].busy_ns,
        "host_dram": dram.busy_ns,
        "host_cpu": cpu_busy / host.cpu_cores,
    }
    util = {k: (v / elapsed if elapsed else 0.0) for k, v in util.items()}
    whole = {
        "devices": len(results),
        "elapsed_ns": elapsed,
        "bytes": moved,
        "transfers": len(order),
        "throughput_gb_s": (moved["to_host"] + moved["to_device"]) / elapsed if elapsed else 0.0,
        "utilisation": util,
        "busiest": max(util, key=lambda k: util[k]),
        "host": {p: v.value for p, v in host.params.items()},
    }
    devices = [
        {
            "device": r.device,
            "preset": r.preset,
            "own_end_ns": r.end_ns,
            "delivered_end_ns": delivered[r.device],
            "transfers": len(r.transfers),
            "bytes_to_host": sum(t.nbytes for t in r.transfers if t.direction == "to_host"),
            "bytes_to_device": sum(t.nbytes for t in r.transfers if t.direction == "to_device"),
            "mean_host_delay_ns": delay[r.device] / len(r.transfers) if r.transfers else 0.0,
            "report": r.report,
        }
        for r in sorted(results, key=lambda r: r.device)
    ]
    return ArrayReport(whole, devices)
