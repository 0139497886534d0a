"""The `Report`: what a run measured, in virtual time (latency percentiles, IOPS, bandwidth, bytes over the host
link, NAND operations, FTL figures, energy by component, resource utilisation)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OpStats:
    """One command class (read, write, flush, trim, admin, vendor)."""

    count: int
    errors: int
    bytes: int
    iops: float
    bandwidth_mb_s: float
    latency_us: dict[str, float]

    @property
    def p50_us(self) -> float:
        return self.latency_us["p50_us"]

    @property
    def p99_us(self) -> float:
        return self.latency_us["p99_us"]


def _op_stats(ops: dict[str, Any]) -> dict[str, OpStats]:
    return {name: OpStats(o["count"], o["errors"], o["bytes"], o["iops"], o["bandwidth_mb_s"], o["latency"])
            for name, o in ops.items()}


def _op_line(name: str, o: OpStats, indent: str) -> str:
    lat = o.latency_us
    return (f"{indent}{name:6} {o.count:>9} cmds  {o.iops:>11,.0f} IOPS  {o.bandwidth_mb_s:>9.1f} MB/s  "
            f"lat us p50 {lat['p50_us']:.1f} p99 {lat['p99_us']:.1f} p99.9 {lat['p999_us']:.1f} max {lat['max_us']:.1f}"
            + (f"  errors {o.errors}" if o.errors else ""))


class Report:
    """Wraps the device's report (the same JSON as the vendor statistics log page)."""

    def __init__(self, data: dict[str, Any]):
        self.data = data

    @classmethod
    def from_json(cls, text: str) -> "Report":
        return cls(json.loads(text))

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.data, **kw)

    @property
    def preset(self) -> str:
        return self.data["preset"]

    @property
    def elapsed_s(self) -> float:
        """Virtual time of the measurement window."""
        return self.data["elapsed_ns"] * 1e-9

    @property
    def ops(self) -> dict[str, OpStats]:
        return _op_stats(self.data["ops"])

    def op(self, name: str) -> OpStats:
        try:
            return self.ops[name]
        except KeyError:
            raise KeyError(f"no {name!r} commands in this report (have {sorted(self.ops)})") from None

    @property
    def queues(self) -> dict[int, dict[str, Any]]:
        """Per I/O queue (by id): its 'priority' (urgent, high, medium, low) and its commands' 'ops' by class."""
        return {int(q): {"priority": r["priority"], "ops": _op_stats(r["ops"])}
                for q, r in self.data.get("queues", {}).items()}

    @property
    def priorities(self) -> dict[str, dict[str, OpStats]]:
        """Per queue priority class (the queues of each together): commands by class."""
        return {p: _op_stats(ops) for p, ops in self.data.get("priorities", {}).items()}

    @property
    def suspension(self) -> dict[str, dict[str, float]]:
        """Program and erase suspension: per kind, 'suspensions', 'ops_suspended', 'suspended_ns' (time from the
        suspend commands to the end of the resumes), 'max_per_op' and 'per_op' (suspensions per operation
        suspended)."""
        out = {}
        for kind, k in self.data["sched"]["suspension"].items():
            out[kind] = {**k, "per_op": k["suspensions"] / k["ops_suspended"] if k["ops_suspended"] else 0.0}
        return out

    @property
    def link_bytes(self) -> dict[str, int]:
        """Bytes over the host link: 'to_device' (host writes, SQE fetches) and 'to_host'."""
        h = self.data["host"]
        return {"to_device": h["link_bytes_down"], "to_host": h["link_bytes_up"]}

    @property
    def nand(self) -> dict[str, int]:
        return self.data["nand"]

    @property
    def ftl(self) -> dict[str, Any]:
        return self.data["ftl"]

    @property
    def waf(self) -> float:
        return self.data["ftl"]["waf"]

    @property
    def energy_j(self) -> dict[str, float]:
        """Energy by component (dynamic and static), joules."""
        e = self.data["energy"]
        return {**{f"{k}": v for k, v in e["dynamic_j"].items()}, **{f"{k} (static)": v for k, v in e["static_j"].items()}}

    @property
    def total_energy_j(self) -> float:
        return self.data["energy"]["total_j"]

    @property
    def utilisation(self) -> dict[str, float]:
        """Mean busy fraction of each resource group."""
        return {u["name"]: u["mean"] for u in self.data["utilisation"]}

    @property
    def extensions(self) -> dict[str, Any]:
        return self.data.get("extensions", {})

    def summary(self, suspension: bool = False) -> str:
        """A readable multi-line summary; per queue and per priority when there is more than one, and suspension's
        figures when any operation was suspended or `suspension` (it was on)."""
        lines = [f"preset {self.preset}: {self.elapsed_s * 1e3:.3f} ms of virtual time"]
        lines += [_op_line(name, o, "  ") for name, o in self.ops.items()]
        queues, prios = self.queues, self.priorities
        if len(queues) > 1:
            for q, r in queues.items():
                lines.append(f"  queue {q} ({r['priority']}):")
                lines += [_op_line(name, o, "    ") for name, o in r["ops"].items()]
        if len(prios) > 1:
            for p, ops in prios.items():
                lines.append(f"  priority {p}:")
                lines += [_op_line(name, o, "    ") for name, o in ops.items()]
        susp = self.suspension
        if suspension or any(k["suspensions"] for k in susp.values()):
            n = self.nand
            done = {"program": n["pages_programmed"], "erase": n["blocks_erased"]}
            for kind, k in susp.items():
                lines.append(
                    f"  {kind} suspension: {k['suspensions']:,} suspensions of {k['ops_suspended']:,} operations "
                    f"({k['per_op']:.2f} per operation suspended, at most {k['max_per_op']}; {done[kind]:,} "
                    f"{'pages programmed' if kind == 'program' else 'blocks erased'}), "
                    f"{k['suspended_ns'] / 1e6:.3f} ms suspended")
        lb = self.link_bytes
        n = self.nand
        lines.append(f"  host link: {lb['to_host'] / 1e6:.1f} MB to host, {lb['to_device'] / 1e6:.1f} MB to device")
        lines.append(
            f"  NAND: {n['pages_read']} pages read, {n['pages_programmed']} programmed, {n['blocks_erased']} erased; "
            f"WAF {self.waf:.2f}"
        )
        busy = sorted(self.utilisation.items(), key=lambda kv: -kv[1])[:4]
        lines.append("  busiest: " + ", ".join(f"{k} {v:.0%}" for k, v in busy))
        lines.append(f"  energy: {self.total_energy_j:.4f} J")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Report(preset={self.preset!r}, elapsed_s={self.elapsed_s:.6f}, ops={sorted(self.ops)})"
