"""The `nearflash` command: presets, create, info, serve, bench, replay, flows, trace, sweep, experiment, programs."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from decimal import Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import Any, Optional, Union

from nearflash import progress
from nearflash.device import Device, preset_description, preset_params, presets
from nearflash.errors import NearflashError

SIZE_SUFFIX = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, minimum: int = 1) -> int:
    """'4k', '128K', '16g', '1MiB', '4096', '1.5k' -> bytes (binary multiples, as fio): a whole number of bytes,
    at least `minimum` (1; 0 for offsets) and below 2^64."""
    t = text.strip().lower()
    for unit in ("ib", "b"):
        if t.endswith(unit) and len(t) > len(unit) and not t[: -len(unit)].isdigit():
            t = t[: -len(unit)]
            break
    if t.endswith("b") and t[:-1].isdigit():
        t = t[:-1]
    num = t.rstrip("kmgt")
    suffix = t[len(num):]
    try:
        # Exact decimal arithmetic: '0.3k' is 307.2 bytes (refused below), not 307, and 'inf' or '1e400' is not
        # a float overflow.
        with localcontext() as ctx:
            ctx.prec = max(64, len(num) + 16)
            exact = Decimal(num) * SIZE_SUFFIX[suffix]
    except (InvalidOperation, KeyError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4k, 128K, 16g)") from None
    if not exact.is_finite():
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4k, 128K, 16g)")
    if exact != exact.to_integral_value():
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {text!r} is {exact} bytes")
    value = int(exact)
    if value < minimum:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}" if minimum == 1
                                         else f"size must be at least {minimum}: {text!r}")
    if value >= 1 << 64:
        raise argparse.ArgumentTypeError(f"size {text!r} is not below 2^64 bytes")
    return value


def parse_offset(text: str) -> int:
    """A byte offset: a size as `parse_size` reads it, 0 included."""
    return parse_size(text, minimum=0)


def parse_span(text: str) -> Union[int, float]:
    """A size in bytes ('16g'), or a share of the device's capacity ('90%', as fio's size=) as a float in (0, 1]."""
    t = text.strip()
    if not t.endswith("%"):
        return parse_size(t)
    try:
        share = float(t[:-1]) / 100
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 90%)") from None
    if not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"a share of the capacity must be in (0%, 100%]: {text!r}")
    return share


def positive_int(text: str) -> int:
    """An integer >= 1 (queue depths, I/O and job counts)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def non_negative_int(text: str) -> int:
    """An integer >= 0 (byte counts that may be zero)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {v}")
    return v


def u64_int(text: str) -> int:
    """An integer in [0, 2**64) (a 64-bit command parameter)."""
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**64), got {v}")
    return v


def seed_int(text: str) -> int:
    """A seed: an integer in [0, 2**64)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"a seed is in [0, 2**64), got {v}")
    return v


def fraction(text: str) -> float:
    """A share in [0, 1] (nan and infinities refused)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 1.0:  # also false for nan
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return v


def parse_set(items: Optional[list[str]]) -> dict[str, str]:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise argparse.ArgumentTypeError(f"--set expects key=value, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def cmd_presets(a: argparse.Namespace) -> int:
    if a.show:
        rows = preset_params(a.show, parse_set(a.set))
        if a.json:
            print(json.dumps([dict(zip(("path", "value", "unit", "source"), r)) for r in rows], indent=2))
            return 0
        print(f"{a.show}: {preset_description(a.show)}")
        w = max(len(r[0]) for r in rows)
        for path, value, unit, source in rows:
            print(f"  {path:<{w}}  {value:>10} {unit:<10} {source}")
        return 0
    for name in presets():
        print(f"{name:16} {preset_description(name)}")
    return 0


def _open(a: argparse.Namespace, **kw: Any) -> Device:
    return Device(a.device, preset=a.preset, seed=a.seed, overrides=parse_set(a.set), **kw)


def cmd_create(a: argparse.Namespace) -> int:
    if (Path(a.path) / "state.json").exists():
        print(f"error: {a.path} already holds a device", file=sys.stderr)
        return 2
    if a.precondition is not None and not 0 < a.precondition <= 1:
        print(f"error: --precondition {a.precondition}: a fraction of the capacity in (0, 1]", file=sys.stderr)
        return 2
    path = Path(a.path)
    existed = path.exists()
    dev = Device(path, preset=a.preset, seed=a.seed, materialise=not a.timing_only, overrides=parse_set(a.set),
                 create=True)
    try:
        with dev:
            if a.precondition:
                with progress.spinner(f"preconditioning {a.precondition:.0%} ({a.fill})"):
                    dev.precondition(a.precondition, a.fill, seed=a.seed)
            print(f"created {dev!r}")
    except BaseException:
        _remove_image(path, existed)  # a create that fails leaves nothing behind
        raise
    return 0


def _remove_image(path: Path, keep_dir: bool) -> None:
    """Removes a device image this command just created (only the image's files)."""
    import shutil

    if not keep_dir:
        shutil.rmtree(path, ignore_errors=True)
        return
    for name in ("state.json", "nearflash.toml", "l2p.bin", "oob.bin", "data.bin", "checkpoint.bin", "trim.log",
                 "LOCK", "checkpoint.tmp", "state.tmp"):
        (path / name).unlink(missing_ok=True)


def cmd_repair(a: argparse.Namespace) -> int:
    r = Device.repair(a.path)
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        for line in r["actions"]:
            print(f"  {line}")
        for line in r["unrecoverable"]:
            print(f"  NOT RECOVERED: {line}")
        print(f"repaired {a.path}" + ("" if r["unrecoverable"] else ": nothing was lost"))
    return 1 if r["unrecoverable"] else 0


def cmd_info(a: argparse.Namespace) -> int:
    if a.path and _print_served(a):
        return 0
    if a.path:
        dev = Device(a.path, create=False)
    else:
        dev = Device(None, preset=a.preset, overrides=parse_set(a.set), materialise=False)
    with dev:
        ident = dev.identify()
        info = {"identify": ident, "capacity_gib": dev.capacity_bytes / 2**30, "smart": dev.smart()}
        if dev.recovery:
            info["recovery"] = dev.recovery
        if a.json:
            print(json.dumps(info, indent=2))
            return 0
        print(f"{ident['model']}  serial {ident['serial']}  firmware {ident['firmware']}")
        print(f"  namespace: {ident['namespace_lbas']} x {ident['lba_bytes']} B = {info['capacity_gib']:.1f} GiB "
              f"({ident['namespace_used_lbas']} LBAs in use), MDTS {ident['mdts_bytes'] // 1024} KiB")
        s = info["smart"]
        print(f"  SMART: spare {s['available_spare_pct']}%, wear {s['percentage_used']}%, media errors {s['media_errors']}")
        if dev.recovery:
            print(f"  recovered at open: {dev.recovery}")
        keys = ("nand.channels", "nand.chips_per_channel", "nand.planes_per_die", "nand.page_size", "nand.t_read",
                "nand.t_prog", "nand.channel_rate", "host.interface", "host.pcie_gen", "host.pcie_lanes")
        for p, v, u, _ in dev.params():
            if p in keys:
                print(f"  {p:24} {v} {u}")
    return 0


def _print_served(a: argparse.Namespace) -> bool:
    """`nearflash info` on a device that `nearflash serve` holds: the figures its server keeps up to date."""
    from nearflash.nbd import status
    from nearflash.report import Report

    st = status(a.path)
    if st is None:
        return False
    if a.json:
        print(json.dumps(st, indent=2))
        return True
    ident, req = st["identify"], st["requests"]
    print(f"{ident['model']}  serial {ident['serial']}  served by pid {st['pid']} at {st['address']}"
          f"{' (read-only)' if st['readonly'] else ''}")
    print(f"  export: {st['lbas']} x {st['lba_bytes']} B = {st['lbas'] * st['lba_bytes'] / 2**30:.2f} GiB, "
          f"virtual clock {st['now_ns'] / 1e9:.6f} s, extensions: {', '.join(st['extensions']) or 'none'}")
    print(f"  NBD requests: {req['read']} reads, {req['write']} writes ({req['fua_writes']} FUA), {req['flush']} "
          f"flushes, {req['trim']} trims, {req['zero']} zeroes, {req['errors']} errors; "
          f"{req['open_connections']} of {req['connections']} connections open")
    p = st.get("pacing")
    if isinstance(p, dict) and p.get("pace"):
        late = f"; {p['late']:,} of {p['replies']:,} replies late (>= {p['late_threshold_us']:g} us, worst " \
               f"{p['max_late_us']:,.0f} us)" if p["pace"] == "realtime" else ""
        print(f"  pace {p['pace']}: the device saw queue depth {p['mean_queue_depth']:.1f} on average in virtual time "
              f"({p['mean_in_flight_at_submission']:.1f} in flight at each submission, at most "
              f"{p['max_in_flight_at_submission']}; {p['late_submissions']:,} of {p['commands']:,} commands submitted "
              f"in the event loop's past){late}")
    print(Report(st["report"]).summary())
    return True


def cmd_serve(a: argparse.Namespace) -> int:
    from nearflash.nbd import ServeOptions, serve

    serve(ServeOptions(a.device, port=a.port, unix=a.unix, bind=a.bind, read_only=a.read_only, ext=a.ext or [],
                       seed=a.seed, pace=a.pace, serial=a.serial, reaction_lag=a.reaction_lag, threads=a.threads,
                       log=a.log))
    return 0  # not reached: serve() replaces this process with nbdkit


def cmd_bench(a: argparse.Namespace) -> int:
    from nearflash.workload import BenchJob, run_bench

    if a.rwmixread is not None and a.rw != "randrw":
        raise NearflashError(f"--rwmixread applies to --rw randrw, not {a.rw}")
    dev = _open(a, materialise=a.data)
    with dev:
        mix = 0.5 if a.rwmixread is None else a.rwmixread
        job = BenchJob(a.rw, a.bs, a.iodepth, a.numjobs, a.ios, a.size, a.fill, a.data, mix, a.seed)
        r = run_bench(dev, job, a.json)
        a.iodepth, span_bytes, fill = r["iodepth"], r["span_bytes"], r["fill"]
        rep = r["report"]
        if a.json:
            out = {k: v for k, v in r.items() if k not in ("report", "iodepth", "span_bytes", "fill")}
            out["report"] = rep.data
            print(json.dumps(out, indent=2))
            return 0
        print(f"nearflash bench: {a.rw} bs={a.bs} iodepth={a.iodepth} numjobs={a.numjobs} ios={a.ios} "
              f"span={span_bytes / 2**30:.1f} GiB fill={fill} data={'yes' if a.data else 'timing-only'}")
        print(rep.summary(suspension=dev.param("nand.suspend").split()[0] != "none"))
        print(f"  simulator: {r['ios']} I/Os in {r['wall_s']:.2f} s wall = {r['sim_ios_per_s']:,.0f} simulated I/Os per second")
    return 0


def _trace_options(a: argparse.Namespace) -> "Any":
    from nearflash.traces import TraceOptions

    return TraceOptions(format=a.format, sector_size=a.sector_size, time_unit=a.time_unit, blk_event=a.blk_event,
                        device=a.trace_device, skip_bad=a.skip_bad, repeat=getattr(a, "repeat", 1),
                        limit=getattr(a, "limit", None))


def _trace_line(st: dict[str, Any]) -> str:
    """What a trace held, in one line."""
    mib = lambda b: f"{b / 2**20:,.1f} MiB"  # noqa: E731
    parts = [f"{st['reads']:,} reads ({mib(st['read_bytes'])})", f"{st['writes']:,} writes ({mib(st['write_bytes'])})"]
    if st["flushes"]:
        parts.append(f"{st['flushes']:,} flushes")
    if st["trims"]:
        parts.append(f"{st['trims']:,} trims ({mib(st['trim_bytes'])})")
    return (f"{st['format']}, {st['requests']:,} requests: {', '.join(parts)}; "
            f"{st['duration_ns'] / 1e9:.3f} s from first to last arrival")


def _trace_notes(st: dict[str, Any]) -> list[str]:
    notes = []
    if st.get("skipped"):
        notes.append(f"skipped {st['skipped']:,} malformed lines (first: {st['first_skipped']})")
    if st.get("out_of_order"):
        notes.append(f"{st['out_of_order']:,} requests arrived before their predecessor: issued in file order")
    if st.get("filtered"):
        notes.append(f"{st['filtered']:,} requests of other devices left out")
    return notes


def _flow_table(flows: list[dict[str, Any]], slowdown: Optional[dict[str, float]] = None) -> list[str]:
    """MQSim's per-flow figures, one line per flow."""
    head = (f"  {'flow':<14} {'requests R/W':>17} {'IOPS R/W':>21} {'MB/s':>9} {'dev. resp. us mean/p99/max':>28} "
            f"{'end-to-end us mean/max':>23} {'QD mean/max':>12}" + (f" {'slowdown':>9}" if slowdown else ""))
    lines = [head]
    for f in flows:
        a, o = f["all"], f["ops"]
        r, w = o.get("read", {}), o.get("write", {})
        d, e = a["device_response_time"], a["end_to_end_delay"]
        lines.append(
            f"  {f['name'][:14]:<14} {r.get('requests', 0):>8,}/{w.get('requests', 0):<8,} "
            f"{r.get('iops', 0):>10,.0f}/{w.get('iops', 0):<10,.0f} {a['bandwidth_mb_s']:>9,.1f} "
            f"{d['mean_us']:>9,.1f}/{d['p99_us']:>8,.1f}/{d['max_us']:>9,.1f} {e['mean_us']:>11,.1f}/{e['max_us']:>11,.1f} "
            f"{f['mean_queue_depth']:>7.1f}/{f['max_queue_depth']:<4}"
            + (f" {slowdown[f['name']]:>9.3f}" if slowdown else ""))
        if a["errors"]:
            lines.append(f"  {'':14} {a['errors']:,} requests failed")
        m = f["mapping"]
        if any(m.values()):
            lines.append(f"  {'':14} {m['widened']:,} widened to whole LBAs, {m['wrapped']:,} wrapped, "
                         f"{m['split']:,} split into several commands")
    return lines


def _simulator_line(r: dict[str, Any]) -> str:
    return (f"  simulator: {r['requests']:,} requests in {r['wall_s']:.2f} s wall = "
            f"{r['sim_requests_per_s']:,.0f} simulated requests per second")


def _setup(a: argparse.Namespace) -> "Any":
    from nearflash.flows import DeviceSetup

    return DeviceSetup(preset=a.preset, seed=a.seed, overrides=parse_set(a.set), path=a.device, fill=a.fill,
                       fill_size=a.fill_size, data=a.data)


def cmd_replay(a: argparse.Namespace) -> int:
    from nearflash.flows import DEFAULT_IODEPTH, replay

    r = replay(a.trace, _setup(a), mode=a.mode, time_scale=a.time_scale, iodepth=a.iodepth, offset=a.offset,
               wrap=a.wrap, queue_depth=a.queue_depth, options=_trace_options(a), latencies=a.latencies,
               json_output=a.json)
    if a.json:
        out = {k: v for k, v in r.items() if k != "report"}
        out["report"] = r["report"].data
        print(json.dumps(out, indent=2))
        return 0
    how = (f"open loop, times x {1.0 if a.time_scale is None else a.time_scale:g}" if a.mode == "open"
           else f"closed loop, iodepth {a.iodepth or DEFAULT_IODEPTH}")
    print(f"nearflash replay: {a.trace} ({_trace_line(r['trace'])}); {how}")
    for note in _trace_notes(r["trace"]):
        print(f"  {note}")
    print(r["report"].summary())
    print("\n".join(_flow_table([r["flow"]])))
    print(_simulator_line(r))
    if a.latencies:
        print(f"  wrote per-request latencies to {a.latencies}")
    return 0


def cmd_flows(a: argparse.Namespace) -> int:
    from nearflash.flows import load_scenario, run_flows

    sc = load_scenario(a.scenario)
    if a.seed is not None:
        sc.device.seed = a.seed
    r = run_flows(sc.flows, sc.device, alone=a.alone, base_dir=sc.base_dir, latencies=a.latencies, json_output=a.json)
    if a.json:
        out = {k: v for k, v in r.items() if k != "report"}
        out["report"] = r["report"].data
        print(json.dumps(out, indent=2))
        return 0
    print(f"nearflash flows: {sc.name} ({len(sc.flows)} flows on {sc.device.preset}, fill {sc.device.fill})")
    print(r["report"].summary())
    print("\n".join(_flow_table(r["flows"], r.get("slowdown"))))
    if "fairness" in r:
        print(f"  fairness (min slowdown / max slowdown, MQSim FAST'18): {r['fairness']:.3f}")
    print(_simulator_line(r))
    return 0


def cmd_trace(a: argparse.Namespace) -> int:
    from nearflash.traces import convert_trace, read_trace

    if a.trace_command == "convert":
        r = convert_trace(a.input, a.output, a.to, _trace_options(a), sector_size=a.out_sector_size, name=a.name)
        if a.json:
            print(json.dumps(r, indent=2))
            return 0
        w = r["written"]
        print(f"{a.input} ({_trace_line(r['read'])}) -> {a.output} ({a.to}): {w['written']:,} requests")
        for n, what in ((w["dropped_flushes"], "flushes"), (w["dropped_trims"], "trims")):
            if n:
                print(f"  {n:,} {what} left out: the {a.to} format has none")
        if w["widened"]:
            print(f"  {w['widened']:,} requests widened to whole {a.out_sector_size} B sectors")
        for note in _trace_notes(r["read"]):
            print(f"  {note}")
        return 0
    t = read_trace(a.input, _trace_options(a))
    if a.json:
        print(json.dumps(t.stats, indent=2))
        return 0
    print(f"{a.input}: {_trace_line(t.stats)}")
    for note in _trace_notes(t.stats):
        print(f"  {note}")
    return 0


def cmd_experiment(a: argparse.Namespace) -> int:
    from nearflash.experiment import Experiment, Options, load_experiments
    from nearflash.experiment_options import check_keys, check_values, help_text

    if a.help or a.system is None or a.name is None:
        text, rc = help_text(a.system, a.parser.format_help())
        print(text, file=sys.stdout if rc == 0 and a.help else sys.stderr)
        return rc if a.help else 2
    try:
        exps = load_experiments(a.system)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    names = list(exps) if a.name == "all" else [a.name]
    unknown = [n for n in names if n not in exps]
    if unknown:
        print(f"error: unknown experiment {unknown[0]!r}; {a.system} has: {', '.join(exps)}", file=sys.stderr)
        return 2
    extra = _ReadTracking(parse_set(a.set))
    bad = check_keys(a.system, names, list(extra), exps) or check_values(a.system, names, parse_set(a.set), exps)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    opts = Options(quick=a.quick, seed=a.seed, extra=extra)
    out_root = Path(a.out) / a.system
    for i, n in enumerate(names, 1):
        title, run = exps[n]
        exp = Experiment(a.system, n, title, out_root)
        with progress.bar(f"experiment {a.system} {n} ({i} of {len(names)})", None) as exp.on_progress:  # type: ignore[arg-type]
            run(exp, opts)
        paths = exp.write()
        print(exp.console())
        print(f"  wrote {', '.join(str(p) for p in paths.values())}")
    ignored = sorted(set(extra) - extra.read)
    if ignored:
        # Experiments declare no option list; the keys they looked up while running are the ones they know.
        known = ", ".join(sorted(extra.read)) or "none"
        print(f"error: --set {', '.join(ignored)}: not read by {a.system} {a.name} (options it reads: {known})",
              file=sys.stderr)
        return 2
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from nearflash.html_report import find_results, write

    if not Path(a.out).is_dir():
        print(f"error: no such output directory: {a.out}", file=sys.stderr)
        return 2
    unreadable: list[Path] = []
    found = find_results(Path(a.out), unreadable)
    for p in unreadable:
        print(f"warning: skipped {p}: not readable as JSON (damaged or cut short)", file=sys.stderr)
    if not found:  # nothing to show: write no page into a directory that holds no results
        print(f"error: no experiment results under {a.out} (run `nearflash experiment SYSTEM all --out {a.out}`)",
              file=sys.stderr)
        return 2
    try:
        path = write(a.out, a.html)
    except OSError as e:
        print(f"error: --html {a.html or Path(a.out) / 'report.html'}: cannot write it ({e.strerror})", file=sys.stderr)
        return 2
    print(f"wrote {path} ({len(found)} experiments)")
    return 0


def cmd_sweep(a: argparse.Namespace) -> int:
    from nearflash.sweeps import sweep

    if a.jobs is not None and a.jobs < 1:
        print(f"error: --jobs must be a positive integer, got {a.jobs}", file=sys.stderr)
        return 2
    if a.timeout <= 0:
        print(f"error: --timeout must be positive, got {a.timeout:g}", file=sys.stderr)
        return 2
    r = sweep(a.spec, out=a.out, jobs=a.jobs, ray=a.ray, parquet=a.parquet, timeout_s=a.timeout,
              show_progress=not a.json)
    failed = r.failed
    if a.json:
        print(r.table.to_json(orient="records", indent=1))
    else:
        n = len(r.table)
        print(f"sweep {r.spec.name}: {n} point{'s' if n != 1 else ''} over {', '.join(r.spec.axes)}; ran {r.ran} now, "
              f"{len(r.table) - r.ran} finished before; {len(failed)} failed")
        for _, row in failed.iterrows():
            axes = ", ".join(f"{k}={row[k]}" for k in r.spec.axes if row[k] == row[k] and row[k] is not None)
            print(f"  FAILED {row['point']} ({axes}): {row['error']}")
        print(f"  wrote {', '.join(str(p) for p in r.paths)}")
    return 1 if len(failed) else 0
class _ReadTracking(dict):
    """`--set` values that remember which keys were looked up (so that a mistyped key is reported, not ignored)."""

    def __init__(self, items: dict[str, str]):
        super().__init__(items)
        self.read: set[str] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(key)  # type: ignore[arg-type]
        return super().__contains__(key)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nearflash", description="A software computational-storage SSD.")
    sub = p.add_subparsers(dest="command", required=True)

    def device_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--preset", default="cosmos-plus", help="preset name or .toml file (default cosmos-plus)")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a preset parameter (repeatable)")
        sp.add_argument("--seed", type=seed_int, default=1)

    sp = sub.add_parser("presets", help="list presets or show one's parameters with units and sources")
    sp.add_argument("--show", metavar="NAME")
    sp.add_argument("--set", action="append", metavar="KEY=VALUE")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_presets)

    sp = sub.add_parser("create", help="create a device image directory")
    sp.add_argument("path")
    device_args(sp)
    sp.add_argument("--timing-only", action="store_true", help="store no data (reads return zeroes)")
    sp.add_argument("--precondition", type=float, metavar="FRACTION", help="fill this fraction of the capacity")
    sp.add_argument("--fill", default="sequential", choices=["sequential", "random"])
    sp.set_defaults(fn=cmd_create)

    sp = sub.add_parser("info", help="identify a device image (or a preset's device)")
    sp.add_argument("path", nargs="?")
    device_args(sp)
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_info)

    sp = sub.add_parser("repair", help="repair a damaged device image; lists what could not be recovered "
                                       "(exit 1 if anything was lost)")
    sp.add_argument("path")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_repair)

    sp = sub.add_parser("bench", help="run a fio-like workload in virtual time")
    sp.add_argument("--device", metavar="PATH", help="image directory (default: an in-memory device)")
    device_args(sp)
    sp.add_argument("--rw", default="randread", choices=["read", "write", "randread", "randwrite", "randrw"])
    sp.add_argument("--bs", type=parse_size, default=4096, help="block size (default 4k)")
    sp.add_argument("--iodepth", type=positive_int, help="queue depth per job (default 64, or the device's maximum if lower)")
    sp.add_argument("--numjobs", type=positive_int, default=1)
    sp.add_argument("--ios", type=positive_int, default=200_000, help="I/Os in total")
    sp.add_argument("--size", type=parse_span, default=parse_size("16g"),
                    help="LBA span used: bytes (default 16g) or a share of the capacity (e.g. 90%%: with --fill random, "
                         "random writes run in GC steady state)")
    sp.add_argument("--rwmixread", type=fraction, help="share of reads in randrw, in [0, 1] (default 0.5)")
    sp.add_argument("--fill", choices=["none", "sequential", "random"],
                    help="precondition the span first (default: sequential for reads, none for writes)")
    sp.add_argument("--data", action="store_true", help="move real data (default: timing-only)")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_bench)

    def trace_read_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--format", choices=["mqsim", "msr", "fio", "blkparse", "nbdkit-log"],
                        help="the trace's format (default: told from its first lines)")
        sp.add_argument("--sector-size", type=positive_int, default=512,
                        help="bytes per sector of mqsim and blkparse traces (default 512)")
        sp.add_argument("--time-unit", choices=["ps", "ns", "us"], default="ns",
                        help="unit of MQSim's arrival times (default ns, as MQSim's engine reads them)")
        sp.add_argument("--blk-event", choices=["D", "Q"], default="D",
                        help="blkparse event replayed: D (issued, default) or Q (queued)")
        sp.add_argument("--trace-device", metavar="ID", help="only this device's requests (MQSim device, MSR "
                        "DiskNumber, blkparse major,minor, fio file, nbdkit connection; numbers compare as numbers)")
        sp.add_argument("--skip-bad", action="store_true",
                        help="skip malformed lines (counted) instead of stopping at the first")

    def run_device_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--device", metavar="PATH", help="image directory (default: an in-memory device)")
        device_args(sp)
        sp.add_argument("--fill", choices=["none", "sequential", "random"], default="sequential",
                        help="precondition a fresh device first (default sequential)")
        sp.add_argument("--fill-size", type=parse_span,
                        help="how much to fill: bytes or a share of the capacity (default: as far as the trace reaches)")
        sp.add_argument("--data", action="store_true", help="move real data (default: timing-only)")
        sp.add_argument("--latencies", metavar="CSV", help="write every request's times to this CSV file")
        sp.add_argument("--json", action="store_true")

    sp = sub.add_parser("replay", help="replay a block trace (mqsim, msr, fio iolog, blkparse, nbdkit log) in "
                                       "virtual time")
    sp.add_argument("trace", help="trace file")
    trace_read_args(sp)
    sp.add_argument("--mode", choices=["open", "closed"], default="open",
                    help="open: arrival times kept (default); closed: --iodepth requests in flight, times ignored")
    sp.add_argument("--time-scale", type=float, metavar="F",
                    help="open loop: arrival times multiplied by F (default 1; 0.5 = twice as fast)")
    sp.add_argument("--iodepth", type=positive_int, help="closed loop: requests in flight (default 32)")
    sp.add_argument("--queue-depth", type=positive_int, help="commands the submission queue holds (default: the "
                    "device's maximum); an open-loop request that finds it full waits")
    sp.add_argument("--offset", type=parse_offset, default=0, help="bytes added to every request's offset")
    sp.add_argument("--wrap", action="store_true",
                    help="fold requests past the device's end into it (without it they are an error)")
    sp.add_argument("--repeat", type=positive_int, default=1, help="replay the trace N times back to back")
    sp.add_argument("--limit", type=positive_int, help="at most N requests")
    run_device_args(sp)
    sp.set_defaults(fn=cmd_replay)

    sp = sub.add_parser("flows", help="run a scenario of concurrent flows (TOML), each on its own queue; "
                                      "--alone adds slowdown and fairness")
    sp.add_argument("scenario", help="scenario file (TOML; see nearflash.flows)")
    sp.add_argument("--alone", action="store_true", help="also run each flow alone: slowdown and fairness")
    sp.add_argument("--seed", type=seed_int, help="the device's seed (default: the scenario's)")
    sp.add_argument("--latencies", metavar="CSV", help="write every request's times to this CSV file")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_flows)

    sp = sub.add_parser("trace", help="inspect a block trace or convert it between formats")
    tsub = sp.add_subparsers(dest="trace_command", required=True)
    tp = tsub.add_parser("info", help="what a trace holds (counts, bytes, duration, lines skipped)")
    tp.add_argument("input", help="trace file")
    trace_read_args(tp)
    tp.add_argument("--json", action="store_true")
    tp.set_defaults(fn=cmd_trace)
    tp = tsub.add_parser("convert", help="write a trace (or an nbdkit log) in another format")
    tp.add_argument("input", help="trace file or nbdkit log")
    tp.add_argument("output", help="file to write")
    tp.add_argument("--to", required=True, choices=["mqsim", "msr", "fio", "blkparse"])
    trace_read_args(tp)
    tp.add_argument("--out-sector-size", type=positive_int, default=512,
                    help="bytes per sector written to mqsim and blkparse traces (default 512)")
    tp.add_argument("--name", default="nearflash", help="fio's file name, MSR's host name (default nearflash)")
    tp.add_argument("--json", action="store_true")
    tp.set_defaults(fn=cmd_trace)

    sp = sub.add_parser("serve", help="export a device image over NBD (nbdkit) to unmodified clients")
    sp.add_argument("device", help="image directory (made by `nearflash create`)")
    where = sp.add_mutually_exclusive_group()
    where.add_argument("--port", type=int, help="TCP port (default 10809)")
    where.add_argument("--unix", metavar="PATH", help="Unix socket to create instead of a TCP port")
    sp.add_argument("--bind", default="127.0.0.1", help="address of the TCP listener (default 127.0.0.1)")
    sp.add_argument("--read-only", action="store_true", help="refuse writes, trims and zeroes")
    sp.add_argument("--ext", action="append", metavar="NAME[:JSON]", help="attach an extension (repeatable)")
    sp.add_argument("--seed", type=int, default=1)
    sp.add_argument("--pace", choices=["none", "realtime"], default="none",
                    help="none: as fast as the simulator runs (default); realtime: replies held until the wall clock "
                         "reaches their modelled completion (late ones counted)")
    overlap = sp.add_mutually_exclusive_group()
    overlap.add_argument("--overlap", action="store_true",
                         help="pace none: requests in flight overlap in virtual time at the client's depth (the "
                              "default; the event loop waits up to 10 ms for a client's reaction to a reply)")
    overlap.add_argument("--serial", action="store_true",
                         help="pace none: each request runs the event loop to its own completion at once, so requests "
                              "in flight are served one after the other in virtual time: the fastest wall-clock rate "
                              "(filling an image), the client's depth not kept (docs/workloads.md)")
    sp.add_argument("--reaction-lag", type=int, metavar="N",
                    help="pace none: completions that may await their clients' reactions before the event loop holds "
                         "(1, the default: exact; more: the depth seen lower; docs/nbd.md)")
    sp.add_argument("--threads", type=int, default=64,
                    help="nbdkit worker threads per connection: the deepest client queue the device sees (default 64)")
    sp.add_argument("--log", metavar="FILE", help="record every request with nbdkit's log filter (a trace: "
                    "`nearflash trace convert FILE ...` or `nearflash replay FILE`)")
    sp.set_defaults(fn=cmd_serve)

    sp = sub.add_parser("sweep", help="run a grid or list of (preset, overrides, workload) points into one table")
    sp.add_argument("spec", help="sweep specification (TOML; see nearflash.sweeps.spec)")
    sp.add_argument("--out", default="sweep-out", help="output directory; finished points there are not rerun")
    sp.add_argument("--jobs", type=int, help="local processes at once (default: the CPU count)")
    sp.add_argument("--ray", nargs="?", const=True, metavar="ADDRESS", help="run the points as Ray tasks (a local "
                    "Ray, or the cluster at ADDRESS); needs pip install 'nearflash[ray]'")
    sp.add_argument("--parquet", action="store_true", help="also write results.parquet (needs pyarrow)")
    sp.add_argument("--timeout", type=float, default=3600.0, metavar="S",
                    help="seconds a point may run, from its process's start (default 3600)")
    sp.add_argument("--json", action="store_true", help="print the table as JSON records")
    sp.set_defaults(fn=cmd_sweep)

    sp = sub.add_parser("experiment", help="reproduce a paper's figures (JSON + Markdown + PNG)", add_help=False)
    sp.add_argument("-h", "--help", action="store_true", help="list SYSTEM's experiments and their --set keys")
    sp.add_argument("system", nargs="?", help="issd, recssd, ...")
    sp.add_argument("name", nargs="?", help="experiment name or 'all'")
    sp.add_argument("--out", default="out", help="output directory (default ./out)")
    sp.add_argument("--quick", action="store_true", help="small data sizes (smoke runs)")
    sp.add_argument("--seed", type=int, default=1)
    sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="experiment-specific option")
    sp.set_defaults(fn=cmd_experiment, parser=sp)

    sp = sub.add_parser("report", help="one HTML page of every experiment's results under an output directory")
    sp.add_argument("out", nargs="?", default="out", help="output directory of 'nearflash experiment' (default ./out)")
    sp.add_argument("--html", metavar="FILE", help="where to write the page (default OUT/report.html)")
    sp.set_defaults(fn=cmd_report)

    from nearflash.programs.cli import add_parser as add_programs_parser
    add_programs_parser(sub)
    from nearflash.cognitive.cli import add_parser as add_cognitive

    add_cognitive(sub)
    from nearflash.nice.cli import add_parser as add_nice

    add_nice(sub)
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        rc = args.fn(args)
        sys.stdout.flush()  # a closed pipe shows here rather than at interpreter exit
        return rc
    except (NearflashError, argparse.ArgumentTypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `nearflash ... | head`: the reader has gone; stop quietly, as a C tool killed by SIGPIPE would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as e:
        # A file named on the command line that cannot be read or written: the system's words, not a traceback.
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
