"""The scaling experiment every system shares: a system's work on arrays of N devices, on the in-storage path and the
host path, with each path's saturation point predicted from the preset and host parameters BEFORE anything is
measured (docs/arrays.md, "The saturation point"), then measured; written as JSON + Markdown + PNG through
:class:`nearflash.experiment.Experiment`.

A system describes its work once (:class:`Scaling`): a function that runs it on an array by one path and returns the
array's report and the units of work done (bytes scanned, queries answered, ...), and per path what a unit costs the
shared host (:class:`PathCost`: bytes each way, host CPU ns) and what one device alone delivers by its preset
(`device_rate`, units/s). The prediction is then

    X(N) = min(N x B1, L(N)),   L(N) = min(U / b_up, R / b_up, D / (b_up + b_down), C / (c + c_q / N))

and the knee N* where N x B1 = L(N): min(U / b_up, R / b_up, D / (b_up + b_down)) / B1, or, where the CPU binds,
(C - B1 c_q) / (B1 c); with b_up / b_down the bytes per unit to the host / to the device (the uplink and root
complex are full duplex, so the busier direction counts), c the host CPU ns per unit, c_q the host CPU ns paid once
per query whatever the devices it spans (a unit is one query on one device), U, R, D, C the uplink, root complex,
DRAM and host cores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from nearflash.array.array import Array
from nearflash.array.host import ArrayReport, HostModel, PathCost
from nearflash.device import _count
from nearflash.errors import InvalidArgument
from nearflash.experiment import Experiment

PATHS = ("host", "in_storage")
#: A path has flattened at N when it delivers less than this share of N x its one-device throughput.
FLAT = 0.9
#: A shared stage is saturated (the cause of a flattening) when busy at least this share of the elapsed time: a stage
#: that sets the pace runs 88-99% busy in the full-size runs (the shards' first commands fill the pipeline while it
#: idles), the flattenings no stage caused show at most 67% (docs/arrays.md).
SATURATED = 0.8


@dataclass(frozen=True)
class Scaling:
    """A system's work for the scaling experiment.

    `run(array, path, executor)` runs the work on `array` by `path` ("host" or "in_storage") and returns the array's
    report and the units of work done; `unit` names one unit ("B", "query"); rates are shown in `display` units
    (name, units/s per display unit), e.g. ("GB/s", 1e9)."""

    name: str
    unit: str
    run: Callable[[Array, str, Any], tuple[ArrayReport, float]]
    costs: dict[str, PathCost]
    display: tuple[str, float] = ("units/s", 1.0)

    def __post_init__(self) -> None:
        if sorted(self.costs) != sorted(PATHS):
            raise InvalidArgument(f"Scaling.costs must give both paths {PATHS}, got {sorted(self.costs)}")


def predict(work: Scaling, host: HostModel, ns: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Per path, before measuring: the shared host's limit (units/s) at the largest N and what sets it, the limit at
    every N (`limits`: it depends on N only through a cost paid once per query), the one-device rate from the preset
    (or None) and the knee N* where N x that rate meets the limit."""
    out = {}
    for path in PATHS:
        cost = work.costs[path]
        limit, by = host.limit(cost, ns[-1])
        knee = host.knee(cost, cost.device_rate)[0] if cost.device_rate else None
        out[path] = {"limit": limit, "limit_by": by, "limits": {str(n): host.limit(cost, n)[0] for n in ns},
                     "device_rate": cost.device_rate, "knee_devices": knee, "device_rate_why": cost.device_rate_why}
    return out


def _curve(host: HostModel, cost: PathCost, b1: float, n: float) -> float:
    """The predicted throughput at n devices of b1 units/s each: min(n x b1, L(n))."""
    return min(n * b1, host.limit(cost, n)[0])


def _point(n: int, path: str, report: ArrayReport, units: float) -> dict[str, Any]:
    w = report.whole
    return {"devices": n, "path": path, "units": units, "elapsed_ns": report.elapsed_ns,
            "rate": units * 1e9 / report.elapsed_ns if report.elapsed_ns else 0.0,
            "busiest": w["busiest"], "busiest_utilisation": w["utilisation"].get(w["busiest"], 0.0),
            "utilisation": w["utilisation"], "bytes": w["bytes"],
            **({"closed_loop": w["closed_loop"]} if "closed_loop" in w else {})}


def flattening(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether a path has flattened by its largest N, and why: ``share`` of linear scaling from one device it
    delivers there; ``knee``, the N at which linear scaling would reach that throughput, given only when the path
    is below FLAT of linear AND a shared stage is the cause (busy at least SATURATED of the time there); otherwise
    None, and ``cause`` says what was found (no flattening, or the busiest shared stage not saturated: the devices'
    own pace, e.g. the slowest shard's). Needs N = 1 among the points."""
    one = next((p["rate"] for p in points if p["devices"] == 1), None)
    last = max(points, key=lambda p: p["devices"])
    share = last["rate"] / (last["devices"] * one) if one else 0.0
    if not one or share >= FLAT:
        return {"knee": None, "share": share, "cause": f"not flattened ({share:.0%} of linear at N = "
                                                       f"{last['devices']})"}
    stage, busy = last.get("busiest", "none"), last.get("busiest_utilisation", 0.0)
    if stage != "none" and busy >= SATURATED:
        return {"knee": last["rate"] / one, "share": share, "cause": f"{stage} ({busy:.0%} busy)"}
    return {"knee": None, "share": share,
            "cause": f"{share:.0%} of linear at N = {last['devices']} with no shared stage saturated (busiest: "
                     f"{stage}, {busy:.0%}): the devices' own pace, not the host"}


def measured_knee(points: list[dict[str, Any]]) -> Optional[float]:
    """:func:`flattening`'s knee: the N at which linear scaling from one device would reach the throughput of the
    largest N, where a saturated shared stage has flattened the path by then; None otherwise."""
    return flattening(points)["knee"]


def crossing(host: list[dict[str, Any]], isc: list[dict[str, Any]]) -> Optional[int]:
    """The smallest measured N at which the in-storage path delivers at least the host path's throughput."""
    by_n = {p["devices"]: p["rate"] for p in host}
    return next((p["devices"] for p in sorted(isc, key=lambda p: p["devices"]) if p["rate"] >= by_n[p["devices"]]),
                None)


def sweep(work: Scaling, ns: Sequence[int], make: Callable[[int], Array], *, executor: Any = None,
          on_point: Optional[Callable[[], None]] = None) -> dict[str, list[dict[str, Any]]]:
    """Runs `work` on `make(n)` for every n in `ns` by both paths; returns the points per path."""
    points: dict[str, list[dict[str, Any]]] = {p: [] for p in PATHS}
    for n in ns:
        for path in PATHS:
            array = make(n)
            report, units = work.run(array, path, executor)
            points[path].append(_point(n, path, report, units))
            if on_point is not None:
                on_point()
    return points


def check_ns(ns: Any) -> list[int]:
    """A strictly increasing list of device counts starting at 1 (the one-device point is every ratio's base)."""
    if not isinstance(ns, (list, tuple)) or not ns:
        raise InvalidArgument(f"devices must be a non-empty list of counts, got {ns!r}")
    out = [_count("devices", n, 1, 4096) for n in ns]
    if out[0] != 1 or any(a >= b for a, b in zip(out, out[1:])):
        raise InvalidArgument(f"devices must start at 1 and increase, got {out}")
    return out


def run(exp: Experiment, work: Scaling, ns: Sequence[int], make: Callable[[int], Array], *,
        executor: Any = None) -> dict[str, Any]:
    """The whole experiment: predicts, measures, compares, tabulates and plots into `exp`; returns what it recorded.
    `make(n)` builds the array of n devices (all with the same shared host parameters)."""
    ns = check_ns(list(ns))
    host = make(1).host
    pred = predict(work, host, ns)
    exp.record("prediction", pred)  # recorded before the first measurement
    exp.record("host", {p: v for p, v, *_ in host.table()})
    done = [0]

    def step() -> None:
        done[0] += 1
        if exp.on_progress is not None:
            exp.on_progress(done[0], 2 * len(ns))

    points = sweep(work, ns, make, executor=executor, on_point=step)
    exp.record("points", points)
    name, scale = work.display
    _compare(exp, work, host, pred, points, ns)
    _table(exp, work, host, pred, points, name, scale)
    _plot(exp, work, host, pred, points, name, scale)
    return {"prediction": pred, "points": points}


def _one(points: list[dict[str, Any]]) -> float:
    return points[0]["rate"]


def _compare(exp: Experiment, work: Scaling, model: HostModel, pred: dict[str, dict[str, Any]],
             points: dict[str, list[dict[str, Any]]], ns: list[int]) -> None:
    name, scale = work.display
    host, isc = pred["host"], pred["in_storage"]
    for path, label in (("host", "host path"), ("in_storage", "in storage")):
        p = pred[path]
        if p["device_rate"] is not None:
            exp.compare(f"{label}: one device", _one(points[path]) / scale, p["device_rate"] / scale, name,
                        p["device_rate_why"], reference="model", better="higher")
    b1 = host["device_rate"] or _one(points["host"])
    from_measured = "" if host["device_rate"] else " (B1 measured at N = 1: the preset does not give it)"
    knee = model.knee(work.costs["host"], b1)[0]
    past = ns[-1] >= 1.5 * knee
    why = f"the largest N ({ns[-1]}) is not past 1.5 x the predicted knee ({knee:.1f})"
    exp.compare("host path: saturation throughput", points["host"][-1]["rate"] / scale, host["limit"] / scale, name,
                f"set by the {host['limit_by']}, from the host parameters", reference="model", comparable=past,
                why_not_comparable=why)
    flat = flattening(points["host"])
    exp.compare("host path: knee", flat["knee"], knee, "devices",
                f"predicted N* where N x B1 = L(N){from_measured}; measured: throughput at N = {ns[-1]} over the "
                f"one-device throughput, where a saturated shared stage flattened it ({flat['cause']})",
                reference="model", comparable=past, why_not_comparable=why)
    cross = model.knee(work.costs["host"], isc["device_rate"] or _one(points["in_storage"]))[0]
    from_isc = "" if isc["device_rate"] else " (in-storage B1 measured at N = 1: the preset does not give it)"
    crossed = crossing(points["host"], points["in_storage"])
    exp.compare("in storage passes the host path at N", crossed, cross,
                "devices", f"predicted: where N x the in-storage one-device throughput meets the host path's limit "
                f"L(N){from_isc}; measured: the smallest N run where it is at least the host path's", reference="model",
                comparable=crossed is not None or ns[-1] >= cross,
                why_not_comparable=f"the largest N ({ns[-1]}) is below {cross:.1f}")
    exp.note(f"{work.name}: a unit is one {work.unit}. Host path per unit: {_cost(work.costs['host'])}; in storage: "
             f"{_cost(work.costs['in_storage'])}. In storage the shared host's limit is "
             f"{isc['limit'] / scale:.4g} {name} (the {isc['limit_by']}): its own host-side merge.")


def _cost(c: PathCost) -> str:
    once = f", {c.cpu_ns_per_query:.4g} ns host CPU once per query" if c.cpu_ns_per_query else ""
    return (f"{c.to_host_bytes:.4g} B to the host, {c.to_device_bytes:.4g} B to the device, {c.cpu_ns:.4g} ns host "
            f"CPU{once}")


def _table(exp: Experiment, work: Scaling, model: HostModel, pred: dict[str, dict[str, Any]],
           points: dict[str, list[dict[str, Any]]], name: str, scale: float) -> None:
    rows = []
    b1 = pred["host"]["device_rate"] or _one(points["host"])
    for h, i in zip(points["host"], points["in_storage"]):
        n = h["devices"]
        rows.append([n, round(h["rate"] / scale, 4), round(_curve(model, work.costs["host"], b1, n) / scale, 4),
                     f"{h['busiest']} ({h['busiest_utilisation']:.0%})", round(i["rate"] / scale, 4),
                     f"{i['busiest']} ({i['busiest_utilisation']:.0%})"])
    exp.table(f"throughput vs N ({name})", ["N", "host path", "predicted min(N x B1, limit)", "host path busiest",
                                             "in storage", "in storage busiest"], rows)


def _plot(exp: Experiment, work: Scaling, model: HostModel, pred: dict[str, dict[str, Any]],
          points: dict[str, list[dict[str, Any]]], name: str, scale: float) -> None:
    fig, ax = exp.figure(f"{exp.name}-scaling")
    ns = [p["devices"] for p in points["host"]]
    host = pred["host"]
    b1 = host["device_rate"] or _one(points["host"])
    ax.plot(ns, [p["rate"] / scale for p in points["host"]], "o-", label="host path (measured)")
    ax.plot(ns, [p["rate"] / scale for p in points["in_storage"]], "s-", label="in storage (measured)")
    dense = sorted({*ns, *(x / 4 for x in range(4, 4 * ns[-1] + 1))})
    ax.plot(dense, [_curve(model, work.costs["host"], b1, n) / scale for n in dense], "--", color="grey",
            label=f"host path predicted (limit: {host['limit_by']})")
    knee = model.knee(work.costs["host"], b1)[0]
    ax.axvline(knee, color="grey", linestyle=":", label=f"predicted knee N* = {knee:.1f}")
    mk = measured_knee(points["host"])
    if mk is not None:
        ax.plot([mk], [points["host"][-1]["rate"] / scale], "r*", markersize=12, label=f"measured knee {mk:.1f}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("devices N")
    ax.set_ylabel(f"throughput ({name})")
    ax.set_title(work.name)
    ax.legend(fontsize=7)
