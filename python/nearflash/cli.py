"""The `nearflash` command: presets, create, info, bench, experiment."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional, Union

from nearflash.device import Device, preset_description, preset_params, presets
from nearflash.errors import NearflashError

SIZE_SUFFIX = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """'4k', '128K', '16g', '1MiB', '4096' -> bytes (binary multiples, as fio)."""
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
        value = int(float(num) * SIZE_SUFFIX[suffix])
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4k, 128K, 16g)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return value


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
    with Device(a.path, preset=a.preset, seed=a.seed, materialise=not a.timing_only, overrides=parse_set(a.set)) as dev:
        if a.precondition:
            dev.precondition(a.precondition, a.fill, seed=a.seed)
        print(f"created {dev!r}")
    return 0


def cmd_info(a: argparse.Namespace) -> int:
    if a.path:
        dev = Device(a.path)
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


def cmd_bench(a: argparse.Namespace) -> int:
    dev = _open(a, materialise=a.data)
    with dev:
        if a.bs % dev.lba_bytes:
            print(f"error: block size {a.bs} is not a multiple of the {dev.lba_bytes} B LBA", file=sys.stderr)
            return 2
        per_io = a.bs // dev.lba_bytes
        if a.iodepth is None:
            a.iodepth = min(64, int(dev.param("nvme.max_queue_depth").split()[0]) - 1)
        share = isinstance(a.size, float)
        span_bytes = int(a.size * dev.capacity_bytes) if share else min(a.size, dev.capacity_bytes)
        lbas = span_bytes // dev.lba_bytes // per_io * per_io
        fresh = dev.path is None or dev.report().ftl["occupancy"] == 0
        fill = a.fill if a.fill is not None else ("sequential" if a.rw in ("read", "randread", "randrw") else "none")
        if fresh and fill != "none":
            dev.precondition(lbas / dev.lbas, fill, overwrite=1.0, seed=a.seed)
        progress = _progress(a) if not a.json else None
        with progress or _NullCtx() as cb:
            r = dev.bench(a.rw, a.bs, a.iodepth, a.numjobs, a.ios, span=(0, lbas), seed=a.seed, data=a.data,
                          rwmixread=a.rwmixread, progress=cb)
        rep = r["report"]
        if a.json:
            out = {k: v for k, v in r.items() if k != "report"}
            out["report"] = rep.data
            print(json.dumps(out, indent=2))
            return 0
        print(f"nearflash bench: {a.rw} bs={a.bs} iodepth={a.iodepth} numjobs={a.numjobs} ios={a.ios} "
              f"span={span_bytes / 2**30:.1f} GiB fill={fill} data={'yes' if a.data else 'timing-only'}")
        print(rep.summary())
        print(f"  simulator: {r['ios']} I/Os in {r['wall_s']:.2f} s wall = {r['sim_ios_per_s']:,.0f} simulated I/Os per second")
    return 0


class _NullCtx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *e: Any) -> None:
        return None


def _progress(a: argparse.Namespace) -> Any:
    """A rich progress bar fed by the simulator's callback (only on a terminal)."""
    if not sys.stderr.isatty():
        return None
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    class Bar:
        def __enter__(self) -> Any:
            self.p = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                              TimeRemainingColumn(), transient=True)
            self.p.__enter__()
            self.task = self.p.add_task("bench", total=a.ios)
            return lambda done, total: self.p.update(self.task, completed=done, total=total)

        def __exit__(self, *e: Any) -> None:
            self.p.__exit__(*e)

    return Bar()


def cmd_experiment(a: argparse.Namespace) -> int:
    from nearflash.experiment import Experiment, Options, load_experiments

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
    opts = Options(quick=a.quick, seed=a.seed, extra=parse_set(a.set))
    out_root = Path(a.out) / a.system
    for n in names:
        title, run = exps[n]
        exp = Experiment(a.system, n, title, out_root)
        run(exp, opts)
        paths = exp.write()
        print(exp.console())
        print(f"  wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nearflash", description="A software computational-storage SSD.")
    sub = p.add_subparsers(dest="command", required=True)

    def device_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--preset", default="cosmos-plus", help="preset name or .toml file (default cosmos-plus)")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a preset parameter (repeatable)")
        sp.add_argument("--seed", type=int, default=1)

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

    sp = sub.add_parser("bench", help="run a fio-like workload in virtual time")
    sp.add_argument("--device", metavar="PATH", help="image directory (default: an in-memory device)")
    device_args(sp)
    sp.add_argument("--rw", default="randread", choices=["read", "write", "randread", "randwrite", "randrw"])
    sp.add_argument("--bs", type=parse_size, default=4096, help="block size (default 4k)")
    sp.add_argument("--iodepth", type=int, help="queue depth per job (default 64, or the device's maximum if lower)")
    sp.add_argument("--numjobs", type=int, default=1)
    sp.add_argument("--ios", type=int, default=200_000, help="I/Os in total")
    sp.add_argument("--size", type=parse_span, default=parse_size("16g"),
                    help="LBA span used: bytes (default 16g) or a share of the capacity (e.g. 90%%: with --fill random, "
                         "random writes run in GC steady state)")
    sp.add_argument("--rwmixread", type=float, default=0.5)
    sp.add_argument("--fill", choices=["none", "sequential", "random"],
                    help="precondition the span first (default: sequential for reads, none for writes)")
    sp.add_argument("--data", action="store_true", help="move real data (default: timing-only)")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_bench)

    sp = sub.add_parser("experiment", help="reproduce a paper's figures (JSON + Markdown + PNG)")
    sp.add_argument("system", help="issd, recssd, ...")
    sp.add_argument("name", help="experiment name or 'all'")
    sp.add_argument("--out", default="out", help="output directory (default ./out)")
    sp.add_argument("--quick", action="store_true", help="small data sizes (smoke runs)")
    sp.add_argument("--seed", type=int, default=1)
    sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="experiment-specific option")
    sp.set_defaults(fn=cmd_experiment)

    from nearflash.cognitive.cli import add_parser as add_cognitive

    add_cognitive(sub)
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except NearflashError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
