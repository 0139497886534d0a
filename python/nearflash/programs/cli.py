"""``nearflash programs``: compile a C program, list the examples, show a preset's compute resources, or run a
program through the standard commands (Load Program, Program Activation, Memory Copy, Execute Program, Memory
Read) on an in-memory device, optionally beside the host path. Programs and SLM are volatile, so ``run`` does the
whole sequence in one device session."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from nearflash.cli import non_negative_int, seed_int, u64_int
from nearflash.errors import InvalidArgument


def _program(path: str) -> bytes:
    from nearflash.programs.build import EXAMPLES, compile_c, example

    if path in EXAMPLES:
        return example(path)
    p = Path(path)
    if p.suffix == ".c":
        return compile_c(p)
    if not p.is_file():
        raise InvalidArgument(f"program {path!r} is not a file, a .c source or an example name")
    return p.read_bytes()


def _params(a: argparse.Namespace) -> bytes:
    out = b""
    if a.param_str is not None:
        out += a.param_str.encode()
    if a.param_i32:
        out += np.asarray(a.param_i32, dtype="<i4").tobytes()
    if a.param_hex:
        try:
            out += bytes.fromhex(a.param_hex)
        except ValueError:
            raise InvalidArgument(f"--param-hex is not hexadecimal: {a.param_hex!r}") from None
    return out


def cmd_compile(a: argparse.Namespace) -> int:
    from nearflash.programs.build import compile_c

    obj = compile_c(a.source)
    out = Path(a.output or Path(a.source).with_suffix(".o").name)
    out.write_bytes(obj)
    print(f"wrote {out} ({len(obj)} bytes)")
    return 0


def cmd_examples(a: argparse.Namespace) -> int:
    from nearflash.programs.build import EXAMPLES, EXAMPLES_DIR

    for name, what in EXAMPLES.items():
        print(f"{name:16s} {what}  ({EXAMPLES_DIR / (name + '.c')})")
    return 0


def _device(a: argparse.Namespace) -> Any:
    from nearflash.cli import parse_set
    from nearflash.device import Device

    dev = Device(None, preset=a.preset, seed=a.seed, **parse_set(a.set))
    dev.attach("programs")
    return dev


def cmd_identify(a: argparse.Namespace) -> int:
    from nearflash.programs import identify

    with _device(a) as dev:
        info = identify(dev)
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    from nearflash.programs.compare import compare, in_storage

    try:
        data = Path(a.input).read_bytes()
    except OSError as e:
        raise InvalidArgument(f"--input {a.input!r} cannot be read: {e.strerror or e}") from None
    if not data:
        raise InvalidArgument(f"--input {a.input!r} is empty")
    program = _program(a.program)
    with _device(a) as dev:
        block = dev.lba_bytes
        nblocks = -(-len(data) // block)
        padded = np.zeros(nblocks * block, dtype=np.uint8)
        padded[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        dev.write(0, padded)
        kw = dict(params=_params(a), cparam1=a.cparam1, cparam2=a.cparam2, out_bytes=a.out_bytes)
        if a.compare_host:
            r = compare(dev, program, 0, nblocks, len(data), **kw)
            res = r["in_storage"]
        else:
            r = None
            res = in_storage(dev, program, 0, nblocks, len(data), **kw)
    out = res.pop("output")
    summary: dict[str, Any] = {"preset": a.preset, "input_bytes": len(data), **res}
    if out is not None:
        summary["output_hex"] = out.tobytes().hex()
    if r is not None:
        host_out = r["host"].pop("output")
        if host_out is not None:
            r["host"]["output_hex"] = host_out.hex()
        summary["host"] = r["host"]
        summary["time_ratio_host_over_storage"] = r["time_ratio"]
        summary["energy_ratio_host_over_storage"] = r["energy_ratio"]
    if a.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"value {summary['value']}  ({summary['instructions']} eBPF instructions counted)")
    print(f"in storage: {summary['time_ns'] / 1e3:.1f} us (execute {summary['execute_ns'] / 1e3:.1f} us), "
          f"{summary['energy_j'] * 1e3:.4f} mJ")
    if out is not None:
        print(f"output: {summary['output_hex']}")
    if r is not None:
        h = r["host"]
        print(f"host path:  {h['time_ns'] / 1e3:.1f} us, {h['energy_j'] * 1e3:.4f} mJ (value {h['value']})")
        print(f"host / in-storage: time x{r['time_ratio']:.2f}, energy x{r['energy_ratio']:.2f}")
    return 0


def int32(text: str) -> int:
    """A little-endian int32 parameter value."""
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not -(2**31) <= v < 2**31:
        raise argparse.ArgumentTypeError(f"an int32 is in [-2**31, 2**31), got {v}")
    return v


def add_parser(sub: Any) -> None:
    """Adds ``nearflash programs ...`` to the top-level subparsers."""
    p = sub.add_parser("programs", help="NVMe computational programs: compile C to eBPF, run it in storage")
    ps = p.add_subparsers(dest="programs_command", required=True)

    sp = ps.add_parser("compile", help="clang -O2 -target bpf -c SOURCE")
    sp.add_argument("source")
    sp.add_argument("-o", "--output")
    sp.set_defaults(fn=cmd_compile)

    sp = ps.add_parser("examples", help="list the C examples")
    sp.set_defaults(fn=cmd_examples)

    def device_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--preset", default="cosmos-plus")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a preset parameter")
        sp.add_argument("--seed", type=seed_int, default=1)

    sp = ps.add_parser("identify", help="the compute and memory resources a preset's device reports")
    device_args(sp)
    sp.set_defaults(fn=cmd_identify)

    sp = ps.add_parser("run", help="run a program (.c, .o or example name) over an input file, in storage")
    sp.add_argument("program")
    sp.add_argument("--input", required=True, help="file written to the device and copied into SLM (range 0)")
    device_args(sp)
    sp.add_argument("--out-bytes", type=non_negative_int, default=0, help="size of an output range (range 1), read back")
    sp.add_argument("--param-str", help="parameter data: a string")
    sp.add_argument("--param-i32", type=int32, nargs="+", help="parameter data: little-endian int32 values")
    sp.add_argument("--param-hex", help="parameter data: hex bytes")
    sp.add_argument("--cparam1", type=u64_int, default=0)
    sp.add_argument("--cparam2", type=u64_int, default=0)
    sp.add_argument("--compare-host", action="store_true", help="also run the host path and print the ratios")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_run)
