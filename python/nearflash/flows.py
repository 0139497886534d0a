"""Flows: request streams run together on one device, each on its own submission queue, as MQSim's scenarios run
its flows (Tavakkol et al., FAST'18). Trace replay (`replay`) is a run of one flow.

    results = nearflash.run_flows([
        {"name": "reads", "trace": "web.trace", "mode": "open"},                 # a trace, arrival times kept
        {"name": "writes", "rw": "randwrite", "bs": "4k", "iodepth": 8, "ios": 20000, "size": "10%"},
    ], alone=True)
    results["flows"][0]["all"]["device_response_time"]["p99_us"], results["slowdown"], results["fairness"]

A flow is a dict (or a `[[flow]]` table of a scenario file, `load_scenario`):

- a trace: ``trace`` (a path; relative paths are taken from the scenario file's folder), ``mode`` ``open``
  (default: arrival times kept, multiplied by ``time_scale``) or ``closed`` (``iodepth`` requests in flight, times
  ignored), the reading options of `nearflash.traces.TraceOptions` (``format``, ``sector_size``, ``time_unit``,
  ``blk_event``, ``trace_device``, ``skip_bad``, ``repeat``, ``limit``), ``offset`` (bytes added to every request)
  and ``wrap`` (fold requests past the flow's span into it; without it they are an error);
- a synthetic job, as `nearflash bench` runs one: ``rw``, ``bs``, ``ios``, ``rwmixread``, ``seed``, closed loop at
  ``iodepth`` (default 32) or open loop at ``rate`` requests per second;
- for both: ``start`` and ``size`` (the flow's span of the device: bytes, or a share of the capacity as "50%"; a
  synthetic flow's default is 16 GiB, as bench's, cut to the device; a span given must fit), ``queue_depth`` (commands its queue holds; default the device's
  maximum) and ``priority`` (urgent, high, medium, low, default medium: the flow's queue's QPRIO, the class of its
  commands' flash work and write-buffer admissions; docs/workloads.md).

Per flow, MQSim's figures: request counts, IOPS, bytes and bandwidth, read and write; device response time (from
submission to completion) and end-to-end delay (from arrival, so host-side waiting for a full queue counts), with
mean, minimum, percentiles and maximum; the mean and highest queue depth. With ``alone=True`` every flow also runs
by itself on a fresh device prepared the same way, and each flow's slowdown S = (mean device response time
together) / (alone) and the fairness F = min S / max S are reported, as MQSim's FAST'18 study computes them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from nearflash import _native, progress
from nearflash.device import Device
from nearflash.errors import InvalidArgument
from nearflash.report import Report
from nearflash.traces import U32_MAX, U64_MAX, TraceOptions, as_options, as_path
from nearflash.tomlfile import read_toml

TRACE_KEYS = {"trace", "format", "sector_size", "time_unit", "blk_event", "trace_device", "skip_bad", "repeat",
              "limit", "time_scale", "offset", "wrap"}
SYNTHETIC_KEYS = {"rw", "bs", "ios", "rwmixread", "seed", "rate"}
COMMON_KEYS = {"name", "mode", "iodepth", "start", "size", "queue_depth", "priority"}
RW = ("read", "write", "randread", "randwrite", "randrw")
PRIORITIES = ("urgent", "high", "medium", "low")
FILLS = ("none", "sequential", "random")
#: A synthetic flow's span when none is given (as `nearflash bench --size`).
DEFAULT_SYNTHETIC_SIZE = 16 << 30
DEFAULT_IODEPTH = 32
#: Bytes filled past the flows' reach (at least a flash page: preconditioning fills whole pages, rounded down).
FILL_MARGIN = 1 << 20


@dataclass
class DeviceSetup:
    """The device a run starts from: a fresh in-memory device of `preset` (or the image at `path`) and, when it is
    fresh, filled with `fill` ("sequential", "random" or "none") up to `fill_size` (bytes, or a share of the
    capacity; None: as far as the flows reach, so that their reads find data, as MQSim preconditions what a trace
    addresses); `data`: store and move real data (default timing only)."""

    preset: str = "cosmos-plus"
    seed: int = 1
    overrides: dict[str, Any] = field(default_factory=dict)
    path: Optional[str] = None
    fill: str = "sequential"
    fill_size: Optional[Union[int, float]] = None
    data: bool = False

    def check(self) -> None:
        if not isinstance(self.preset, str) or not self.preset:
            raise InvalidArgument(f"preset must be a preset's name or a .toml file, got {self.preset!r}")
        _int("seed", self.seed, 0, U64_MAX)
        if self.path is not None:
            as_path("path", self.path)
        if self.fill not in FILLS:
            raise InvalidArgument(f"fill must be one of {', '.join(FILLS)}, got {self.fill!r}")
        if self.fill_size is not None and _share_or_bytes("fill_size", self.fill_size) == 0:
            # As `--fill-size 0` is refused: a fill of nothing is fill = "none", said so.
            raise InvalidArgument("fill_size must be positive (fill = 'none' fills nothing), got 0")
        if not isinstance(self.data, bool):
            raise InvalidArgument(f"data must be true or false, got {self.data!r}")
        if not isinstance(self.overrides, dict):
            raise InvalidArgument(f"overrides must be a table of parameter = value, got {self.overrides!r}")

    def open(self) -> Device:
        """The device, not yet filled (see `fill_for`)."""
        self.check()
        if self.path is not None:
            return Device(self.path, preset=self.preset, seed=self.seed, materialise=self.data,
                          **({"overrides": self.overrides} if self.overrides else {}))
        return Device(None, preset=self.preset, seed=self.seed, materialise=self.data, overrides=self.overrides)

    def fill_for(self, dev: Device, reach: int, json_output: bool = True) -> None:
        """Fills a fresh `dev` as asked (`reach`: bytes the flows address, for fill_size None)."""
        if self.fill_size is not None:
            size = _share_or_bytes("fill_size", self.fill_size)
            if isinstance(size, int) and size > dev.capacity_bytes:
                raise InvalidArgument(f"fill_size {self.fill_size!r} is more than the device's "
                                      f"{dev.capacity_bytes} bytes")
            share = _fraction_of(dev, size)
        else:
            # Filled a flash page at a time (rounded down): a margin of a page covers the last one reached.
            share = _fraction_of(dev, reach + FILL_MARGIN) if reach else 0.0
        if self.fill == "none" or share <= 0 or dev.report().ftl["occupancy"] != 0:
            return
        with progress.spinner(f"preconditioning {share:.1%} ({self.fill})", json_output):
            dev.precondition(share, self.fill, overwrite=1.0, seed=self.seed)


def _share_or_bytes(name: str, v: Any) -> Union[int, float]:
    """A size: bytes (int, or "16g"), or a share of the capacity (a float in (0, 1], or "50%")."""
    from nearflash.cli import parse_span

    if isinstance(v, str):
        try:
            return parse_span(v)
        except argparse.ArgumentTypeError as e:
            raise InvalidArgument(f"{name}: {e}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidArgument(f"{name} must be bytes or a share of the capacity (e.g. '16g', '50%', 0.5), got {v!r}")
    if isinstance(v, float) and not 0 < v <= 1:
        raise InvalidArgument(f"{name} as a share of the capacity must be in (0, 1], got {v}")
    if isinstance(v, int) and v < 0:
        raise InvalidArgument(f"{name} must not be negative, got {v}")
    return v


def _fraction_of(dev: Device, size: Union[int, float]) -> float:
    return min(1.0, size) if isinstance(size, float) else min(1.0, size / dev.capacity_bytes)


def _bytes(name: str, v: Any) -> int:
    from nearflash.cli import parse_size

    if isinstance(v, str):
        try:
            return parse_size(v, minimum=0)
        except argparse.ArgumentTypeError as e:
            raise InvalidArgument(f"{name}: {e}") from None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= U64_MAX:
        raise InvalidArgument(f"{name} must be a number of bytes below 2^64 (e.g. 4096 or '4k'), got {v!r}")
    return v


def _int(name: str, v: Any, low: int = 1, high: int = U32_MAX) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise InvalidArgument(f"{name} must be an integer >= {low} (and at most {high}), got {v!r}")
    return v


def _positive(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
        raise InvalidArgument(f"{name} must be a positive number, got {v!r}")
    return float(v)


def flow_spec(flow: dict[str, Any], dev: Device, base_dir: Optional[Path] = None) -> dict[str, Any]:
    """The native flow (JSON-ready) for a flow dict on `dev`; raises InvalidArgument naming the flow and key."""
    if not isinstance(flow, dict):
        raise InvalidArgument(f"a flow is a dict (a [[flow]] table), got {type(flow).__name__}")
    name = flow.get("name")
    if not isinstance(name, str) or not name or "," in name or not name.isprintable():
        raise InvalidArgument(f"every flow needs a name (a string without commas), got {name!r}")
    where = f"flow {name!r}"
    is_trace, is_synthetic = "trace" in flow, "rw" in flow
    if is_trace == is_synthetic:
        raise InvalidArgument(f"{where}: give either trace (a trace file) or rw (a synthetic job), not "
                              f"{'both' if is_trace else 'neither'}")
    allowed = COMMON_KEYS | (TRACE_KEYS if is_trace else SYNTHETIC_KEYS)
    unknown = sorted(set(flow) - allowed)
    if unknown:
        raise InvalidArgument(f"{where}: unknown key(s) {', '.join(unknown)}; a {'trace' if is_trace else 'synthetic'} "
                              f"flow has {', '.join(sorted(allowed))}")
    lba = dev.lba_bytes

    start = _bytes(f"{where}: start", flow.get("start", 0))
    if start % lba:
        raise InvalidArgument(f"{where}: start {start} is not a multiple of the {lba} B LBA")
    if start >= dev.capacity_bytes:
        raise InvalidArgument(f"{where}: start {start} is past the device's {dev.capacity_bytes} bytes")
    room = dev.capacity_bytes - start
    size = _share_or_bytes(f"{where}: size", flow.get("size", DEFAULT_SYNTHETIC_SIZE if is_synthetic else room))
    size_bytes = int(size * dev.capacity_bytes) if isinstance(size, float) else size
    if "size" in flow and size_bytes > room:
        # Only the default span (16 GiB, as bench's) is cut to the device; a span given is never cut silently.
        raise InvalidArgument(f"{where}: size {flow['size']!r} from start {start} runs past the device's "
                              f"{dev.capacity_bytes} bytes (at most {room} bytes from there)")
    size_bytes = min(size_bytes, room)
    span = [start // lba, size_bytes // lba]
    if span[1] == 0:
        raise InvalidArgument(f"{where}: size {size!r} holds no {lba} B LBA")

    priority = flow.get("priority")
    if priority is not None and priority not in PRIORITIES:
        raise InvalidArgument(f"{where}: priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    queue_depth = flow.get("queue_depth")
    if queue_depth is not None:
        queue_depth = _int(f"{where}: queue_depth", queue_depth)

    mode = flow.get("mode", "open" if is_trace or "rate" in flow else "closed")
    if mode not in ("open", "closed"):
        raise InvalidArgument(f"{where}: mode must be 'open' (arrival times kept) or 'closed' (a queue depth), got {mode!r}")
    if mode == "open" and "iodepth" in flow:
        raise InvalidArgument(f"{where}: iodepth applies to closed-loop flows (mode = 'closed'); an open-loop flow's "
                              f"requests arrive at their times (queue_depth bounds its queue)")
    if mode == "closed" and ("time_scale" in flow or "rate" in flow):
        raise InvalidArgument(f"{where}: time_scale and rate apply to open-loop flows, this one is closed loop")
    if mode == "open" and is_synthetic and "rate" not in flow:
        raise InvalidArgument(f"{where}: an open-loop synthetic flow needs a rate (requests per second)")
    if mode == "open":
        timing = {"open": {"time_scale": _positive(f"{where}: time_scale", flow.get("time_scale", 1.0))}}
    else:
        timing = {"closed": {"iodepth": _int(f"{where}: iodepth", flow.get("iodepth", DEFAULT_IODEPTH))}}

    spec: dict[str, Any] = {"name": name, "timing": timing, "priority": priority, "queue_depth": queue_depth}
    if is_trace:
        try:
            path = as_path("trace", flow["trace"])
        except InvalidArgument as e:
            raise InvalidArgument(f"{where}: {e}") from None
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        opts = TraceOptions(**{("device" if k == "trace_device" else k): flow[k] for k in
                               ("format", "sector_size", "time_unit", "blk_event", "trace_device", "skip_bad",
                                "repeat", "limit") if k in flow})
        try:
            source = opts.source(path)
        except InvalidArgument as e:
            raise InvalidArgument(f"{where}: {e}") from None
        wrap = flow.get("wrap", False)
        if not isinstance(wrap, bool):
            raise InvalidArgument(f"{where}: wrap must be true or false, got {wrap!r}")
        spec["source"] = {"trace": source}
        spec["mapping"] = {"offset": _bytes(f"{where}: offset", flow.get("offset", 0)), "wrap": wrap, "span": span}
    else:
        rw = flow["rw"]
        if rw not in RW:
            raise InvalidArgument(f"{where}: rw must be one of {', '.join(RW)}, got {rw!r}")
        bs = _bytes(f"{where}: bs", flow.get("bs", 4096))
        if bs == 0 or bs % lba:
            raise InvalidArgument(f"{where}: bs {bs} is not a positive multiple of the {lba} B LBA")
        mix = flow.get("rwmixread", 0.5)
        if isinstance(mix, bool) or not isinstance(mix, (int, float)) or not 0 <= mix <= 1:
            raise InvalidArgument(f"{where}: rwmixread must be a number in [0, 1], got {mix!r}")
        if "rwmixread" in flow and rw != "randrw":
            raise InvalidArgument(f"{where}: rwmixread applies to rw = 'randrw', not {rw!r}")
        synthetic = {
            "rw": rw, "bs": bs, "ios": _int(f"{where}: ios", flow.get("ios", 10_000), high=U64_MAX), "span": span,
            "seed": _int(f"{where}: seed", flow.get("seed", 1), 0, U64_MAX), "rwmixread": float(mix),
            "rate_iops": _positive(f"{where}: rate", flow["rate"]) if "rate" in flow else None,
        }
        if span[1] < bs // lba:
            raise InvalidArgument(f"{where}: size {size_bytes} bytes holds no {bs} B request")
        spec["source"] = {"synthetic": synthetic}
        spec["mapping"] = {"offset": 0, "wrap": False, "span": None}
    return spec


def _result(raw: str) -> dict[str, Any]:
    r = json.loads(raw)
    r["report"] = Report(r["report"])
    return r


def reach(spec: dict[str, Any], lba_bytes: int) -> int:
    """Bytes from LBA 0 to the end of what a flow (its native spec) addresses."""
    m, src = spec["mapping"], spec["source"]
    if "synthetic" in src:
        first, count = src["synthetic"]["span"]
        return (first + count) * lba_bytes
    first, count = m["span"]
    if m["wrap"]:
        return (first + count) * lba_bytes
    end, _ = _native.workloads.trace_extent(json.dumps(src["trace"]))
    return min(first * lba_bytes + m["offset"] + end, (first + count) * lba_bytes)


def run_on(dev: Device, specs: list[dict[str, Any]], *, data: bool = False,
           latencies: Optional[Union[str, os.PathLike]] = None, json_output: bool = True,
           label: str = "simulating") -> dict[str, Any]:
    """Runs flows (native specs, `flow_spec`) together on `dev` (its statistics reset first; `data`: move real data);
    returns {"flows": [...], "report": Report, "requests", "wall_s", "sim_requests_per_s"}."""
    if latencies is not None and not as_path("latencies", latencies).parent.is_dir():
        raise InvalidArgument(f"latencies: folder {Path(latencies).parent} does not exist")
    with progress.bar(label, 1_000_000, json_output) as cb:
        raw = _native.workloads.run_flows(dev.native, json.dumps(specs), data=data,
                                latencies=None if latencies is None else str(latencies), progress=cb)
    return _result(raw)


def _prepared(setup: DeviceSetup, flows: list[dict[str, Any]], base: Optional[Path], json_output: bool,
              fill_reach: Optional[int] = None) -> tuple[Device, list[dict[str, Any]], int]:
    """A device as `setup` says, filled as far as `flows` reach (or `fill_reach` bytes), their native specs, and
    the reach used."""
    if not isinstance(flows, (list, tuple)) or not flows:
        raise InvalidArgument("flows must be a non-empty list of flow dicts")
    dev = setup.open()
    try:
        specs = [flow_spec(f, dev, base) for f in flows]
        names = [s["name"] for s in specs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise InvalidArgument(f"two flows are named {dup!r}")
        if fill_reach is None:
            auto = setup.fill != "none" and setup.fill_size is None
            fill_reach = max(reach(s, dev.lba_bytes) for s in specs) if auto else 0
        setup.fill_for(dev, fill_reach, json_output)
    except BaseException:
        dev.close()
        raise
    return dev, specs, fill_reach


def run_flows(flows: list[dict[str, Any]], device: Optional[DeviceSetup] = None, *, alone: bool = False,
          base_dir: Optional[Union[str, os.PathLike]] = None, latencies: Optional[Union[str, os.PathLike]] = None,
          json_output: bool = True) -> dict[str, Any]:
    """Runs `flows` together on a device prepared as `device` says; with `alone`, each also by itself on a fresh
    device prepared the same way, with slowdown and fairness (module docstring)."""
    setup = DeviceSetup() if device is None else device
    if not isinstance(setup, DeviceSetup):
        raise InvalidArgument(f"device must be a nearflash.DeviceSetup or None, got {type(setup).__name__}")
    if not isinstance(alone, bool):
        raise InvalidArgument(f"alone must be true or false, got {alone!r}")
    setup.check()
    base = as_path("base_dir", base_dir) if base_dir is not None else None
    if alone and setup.path is not None:
        raise InvalidArgument("alone runs start each flow on a fresh device: give a preset, not an image path")
    dev, specs, filled = _prepared(setup, flows, base, json_output)
    with dev:
        together = run_on(dev, specs, data=setup.data, latencies=latencies, json_output=json_output)
    if not alone:
        return together
    solo = []
    for i, f in enumerate(flows):
        dev, one, _ = _prepared(setup, [f], base, json_output, fill_reach=filled)  # the same fill as together
        with dev:
            solo.append(run_on(dev, one, data=setup.data, json_output=json_output,
                               label=f"alone: {f['name']} ({i + 1} of {len(flows)})")["flows"][0])
    together["alone"] = solo
    together["slowdown"], together["fairness"] = slowdown_and_fairness(together["flows"], solo)
    return together


def slowdown_and_fairness(shared: list[dict[str, Any]], alone: list[dict[str, Any]]) -> tuple[dict[str, float], float]:
    """MQSim (FAST'18): slowdown S_i = mean response time of flow i together / alone; fairness F = min S / max S
    (1: every flow slowed alike; near 0: one flow bears the interference)."""
    s = {}
    for t, a in zip(shared, alone):
        rt_t, rt_a = t["all"]["device_response_time"]["mean_us"], a["all"]["device_response_time"]["mean_us"]
        s[t["name"]] = rt_t / rt_a if rt_a > 0 else math.nan
    vals = [v for v in s.values() if math.isfinite(v)]
    fairness = min(vals) / max(vals) if vals and max(vals) > 0 else math.nan
    return s, fairness


# --- scenario files ----------------------------------------------------------------------------------------------

SCENARIO_KEYS = {"name", "device", "flow"}
DEVICE_KEYS = {"preset", "seed", "overrides", "fill", "fill_size", "data"}


@dataclass
class Scenario:
    name: str
    device: DeviceSetup
    flows: list[dict[str, Any]]
    base_dir: Path


def parse_scenario(data: dict[str, Any], base_dir: Path) -> Scenario:
    """A scenario from its TOML tables: `name`, `[device]` (DeviceSetup's fields) and `[[flow]]` tables."""
    if not isinstance(data, dict):
        raise InvalidArgument("a scenario is a table")
    unknown = set(data) - SCENARIO_KEYS
    if unknown:
        raise InvalidArgument(f"unknown key(s) {', '.join(sorted(unknown))}; a scenario has name, [device] and [[flow]]")
    name = data.get("name", "flows")
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"name must be a non-empty string, got {name!r}")
    dev = data.get("device", {})
    if not isinstance(dev, dict):
        raise InvalidArgument(f"[device] must be a table, got {type(dev).__name__}")
    bad = set(dev) - DEVICE_KEYS
    if bad:
        raise InvalidArgument(f"[device]: unknown key(s) {', '.join(sorted(bad))}; it has {', '.join(sorted(DEVICE_KEYS))}")
    if "seed" in dev:
        _int("[device] seed", dev["seed"], 0, U64_MAX)
    if "preset" in dev and not isinstance(dev["preset"], str):
        raise InvalidArgument(f"[device] preset must be a name or a .toml file, got {dev['preset']!r}")
    setup = DeviceSetup(**dev)
    if isinstance(setup.fill_size, str):
        setup.fill_size = _share_or_bytes("[device] fill_size", setup.fill_size)
    setup.check()
    fl = data.get("flow")
    if not isinstance(fl, list) or not fl or not all(isinstance(f, dict) for f in fl):
        raise InvalidArgument("a scenario needs [[flow]] tables (at least one)")
    return Scenario(name, setup, fl, base_dir)


def load_scenario(path: Union[str, os.PathLike]) -> Scenario:
    p = as_path("path", path)
    return parse_scenario(read_toml(p, "scenario file"), p.resolve().parent)


# --- trace replay ------------------------------------------------------------------------------------------------


def replay(trace: Union[str, os.PathLike], device: Optional[DeviceSetup] = None, *, mode: str = "open",
           time_scale: Optional[float] = None, iodepth: Optional[int] = None, offset: Union[int, str] = 0,
           wrap: bool = False,
           queue_depth: Optional[int] = None, options: Optional[TraceOptions] = None,
           latencies: Optional[Union[str, os.PathLike]] = None, json_output: bool = True) -> dict[str, Any]:
    """Replays a trace on a device prepared as `device` says: open loop (arrival times x `time_scale`) or closed
    loop (`iodepth` requests in flight, default 32). `time_scale` (default 1) with a closed loop, or `iodepth`
    with an open one, is refused, not ignored. Returns bench's result (``report``, ``requests``, ``wall_s``,
    ``sim_requests_per_s``) with the flow's figures (``flow``) and what the trace held (``trace``)."""
    opts = as_options(options)
    flow: dict[str, Any] = {"name": "replay", "trace": trace, "mode": mode, "offset": offset, "wrap": wrap}
    if time_scale is not None:
        flow["time_scale"] = time_scale
    if iodepth is not None:
        flow["iodepth"] = iodepth
    if queue_depth is not None:
        flow["queue_depth"] = queue_depth
    for k, v in vars(opts).items():
        if v != getattr(TraceOptions(), k):
            flow["trace_device" if k == "device" else k] = v
    r = run_flows([flow], device, latencies=latencies, json_output=json_output)
    f = r.pop("flows")[0]
    r["flow"] = f
    r["trace"] = f.get("trace")
    return r
