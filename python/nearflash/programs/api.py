"""The host library over a :class:`nearflash.Device` with the ``programs`` extension attached. Every call is one
or a few commands on the device's synchronous queue; an error completion raises :class:`ProgramError` naming the
command and its status (the Computational Programs / SLM names included)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from nearflash._native import programs as _p
from nearflash.device import Completion
from nearflash.errors import InvalidArgument, NvmeError

_NAMES = {(sct, sc): name for sct, sc, name in _p.status_names()}
_U16 = (1, 0xFFFF)
#: Most bytes `host_run` holds at once, sources and outputs together (refused beyond, before anything is read).
HOST_RUN_MAX_BYTES: int = _p.HOST_RUN_MAX_BYTES
#: Most blocks one Memory Copy source range carries (its NLB is a 0's-based 32-bit field; all ones is reserved).
MAX_COPY_BLOCKS = 2**32 - 1


class ProgramError(NvmeError):
    """A Computational Programs or SLM command completed with an error status (``dw0`` carries a fault code for
    a program stopped at run time: 1 out of range, 2 instruction budget, 3 arithmetic, 4 call depth, 5 other,
    6 a flash read outside the LBA ranges named, 7 read budget)."""

    def __init__(self, sct: int, sc: int, command: str = "", reason: Optional[str] = None, dw0: int = 0):
        super().__init__(sct, sc, command, reason, dw0)
        name = _NAMES.get((sct, sc))
        if name is not None:
            self.status = name
            where = f"{command} ({reason})" if reason else command
            self.args = (f"{where}: {name} (SCT {sct:#x}, SC {sc:#04x}, DW0 {dw0})",)


def _check(outcome: tuple[int, int, int, int, Optional[str]], what: str) -> tuple[int, int]:
    """(dw0, latency) of a successful command; else raises ProgramError naming the command and the device's reason
    (from its error log: the field and what it may hold)."""
    sct, sc, dw0, latency, reason = outcome
    if (sct, sc) == (0, 1):
        what = f"{what} (is the 'programs' extension attached? dev.attach('programs'))"
    Completion(0, sct, sc, dw0, 0, latency_ns=latency, reason=reason, what=what).check(ProgramError)
    return dw0, latency


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgument(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= int(value) <= hi:
        raise InvalidArgument(f"{name} must be in {lo}..{hi}, got {value}")
    return int(value)


def _bytes(value: Any, name: str) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value).tobytes()
    raise InvalidArgument(f"{name} must be bytes or a numpy array, got {type(value).__name__}")


def _pairs(value: Any, name: str, first_max: int, second: tuple[int, int]) -> list[tuple[int, int]]:
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidArgument(f"{name} must be a non-empty list of (start, length) pairs")
    out = []
    for i, p in enumerate(value):
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise InvalidArgument(f"{name}[{i}] must be a (start, length) pair, got {p!r}")
        out.append((_int(p[0], f"{name}[{i}] start", 0, first_max), _int(p[1], f"{name}[{i}] length", *second)))
    return out


def _program_bytes(program: Any) -> bytes:
    if isinstance(program, (str, os.PathLike)):
        path = Path(program)
        if not path.is_file():
            raise InvalidArgument(f"program {str(path)!r} is not a file")
        return path.read_bytes()
    data = _bytes(program, "program")
    if not data:
        raise InvalidArgument("program is empty")
    return data


def _dev(dev: Any) -> tuple[Any, int]:
    native = getattr(dev, "native", None)
    if native is None:
        raise InvalidArgument(f"dev must be a nearflash.Device, got {type(dev).__name__}")
    return native, dev.sync_qid


def load(dev: Any, pind: int, program: Any) -> int:
    """Downloads an eBPF ELF object (bytes, or a path to a ``.o``) into program slot ``pind`` (Load Program, in
    chunks); returns the modelled ns. A malformed or refused program raises Invalid Program Data."""
    native, q = _dev(dev)
    _, ns = _check(_p.load(native, q, _int(pind, "pind", *_U16), _program_bytes(program)), "Load Program")
    return ns


def unload(dev: Any, pind: int) -> int:
    native, q = _dev(dev)
    return _check(_p.unload(native, q, _int(pind, "pind", *_U16)), "Load Program (unload)")[1]


def activate(dev: Any, pind: int, on: bool = True) -> int:
    """Activates (or, with ``on=False``, deactivates) the program in slot ``pind``."""
    if not isinstance(on, bool):
        raise InvalidArgument(f"on must be a bool, got {type(on).__name__}")
    native, q = _dev(dev)
    return _check(_p.activate(native, q, _int(pind, "pind", *_U16), on), "Program Activation Management")[1]


def create_range_set(dev: Any, ranges: Sequence[tuple[int, int]]) -> int:
    """Creates a memory range set of ``(slm_offset, length)`` ranges; returns its identifier (RSID)."""
    native, q = _dev(dev)
    r = _pairs(ranges, "ranges", 2**64 - 1, (1, 2**32 - 1))
    return _check(_p.create_range_set(native, q, r), "Memory Range Set Management")[0]


def delete_range_set(dev: Any, rsid: int) -> int:
    native, q = _dev(dev)
    return _check(_p.delete_range_set(native, q, _int(rsid, "rsid", *_U16)), "Memory Range Set Management")[1]


def copy_to_slm(dev: Any, slm_offset: int, lba: int | None = None, nblocks: int | None = None, *,
                sources: Optional[Sequence[tuple[int, int]]] = None) -> int:
    """Memory Copy: ``nblocks`` logical blocks from ``lba`` (or ``sources``, a list of ``(lba, nblocks)``) read
    from flash through the FTL into Subsystem Local Memory at ``slm_offset``; returns the modelled ns."""
    native, q = _dev(dev)
    if sources is None:
        if lba is None or nblocks is None:
            raise InvalidArgument("give lba and nblocks, or sources")
        s = [(_int(lba, "lba", 0, 2**64 - 1), _int(nblocks, "nblocks", 1, MAX_COPY_BLOCKS))]
    elif lba is not None or nblocks is not None:
        raise InvalidArgument("give lba and nblocks, or sources, not both")
    else:
        s = _pairs(sources, "sources", 2**64 - 1, (1, MAX_COPY_BLOCKS))
    if len(s) > 256:
        raise InvalidArgument(f"at most 256 source ranges, got {len(s)}")
    off = _int(slm_offset, "slm_offset", 0, 2**64 - 1)
    return _check(_p.copy_to_slm(native, q, off, s), "Memory Copy")[1]


def write_slm(dev: Any, slm_offset: int, data: Any) -> int:
    """Memory Write: host bytes into SLM at ``slm_offset``; returns the modelled ns."""
    native, q = _dev(dev)
    buf = np.frombuffer(_bytes(data, "data"), dtype=np.uint8)
    if buf.size == 0 or buf.size >= 2**32:
        raise InvalidArgument(f"data must be 1 byte to 4 GiB, got {buf.size}")
    return _check(_p.write_slm(native, q, _int(slm_offset, "slm_offset", 0, 2**64 - 1), buf), "Memory Write")[1]


def read_slm(dev: Any, slm_offset: int, nbytes: int, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Memory Read: ``nbytes`` of SLM from ``slm_offset`` into a new uint8 array (or ``out``)."""
    native, q = _dev(dev)
    n = _int(nbytes, "nbytes", 1, 2**32 - 1)
    if out is None:
        out = np.empty(n, dtype=np.uint8)
    elif not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 1 or out.size != n:
        raise InvalidArgument(f"out must be a 1-D uint8 array of {n} bytes")
    _check(_p.read_slm(native, q, _int(slm_offset, "slm_offset", 0, 2**64 - 1), out), "Memory Read")
    return out


@dataclass
class ExecuteResult:
    """One Execute Program: the program's 64-bit return value, the executed eBPF instructions (counted by the
    VM), and the command's modelled latency."""

    value: int
    instructions: int
    latency_ns: int

    @property
    def dw0(self) -> int:
        return self.value & 0xFFFFFFFF


def execute(dev: Any, pind: int, ranges: Optional[Sequence[tuple[int, int]]] = None, *, range_set: Optional[int] = None,
            params: Any = b"", cparam1: int = 0, cparam2: int = 0,
            flash: Optional[Sequence[tuple[int, int]]] = None) -> ExecuteResult:
    """Execute Program ``pind`` over inline ``(slm_offset, length)`` ranges or a stored ``range_set``, with
    parameter bytes ``params`` and the two 64-bit command parameters. ``flash``: ``(lba, nblocks)`` ranges of
    the NVM namespace the program may read with its read helpers (inline, after ``ranges``; docs/programs.md
    "Reading flash")."""
    native, q = _dev(dev)
    if ranges is not None and range_set is not None:
        raise InvalidArgument("give ranges or range_set, not both")
    if flash is not None and range_set is not None:
        raise InvalidArgument("flash ranges go inline: not with a range_set")
    fl = _pairs(flash, "flash", 2**64 - 1, (1, 2**64 - 1)) if flash is not None else []
    r = _pairs(ranges, "ranges", 2**64 - 1, (1, 2**32 - 1)) if ranges is not None else ([] if fl else None)
    rsid = _int(range_set, "range_set", *_U16) if range_set is not None else None
    p = _bytes(params, "params")
    c1, c2 = _int(cparam1, "cparam1", 0, 2**64 - 1), _int(cparam2, "cparam2", 0, 2**64 - 1)
    outcome = _p.execute(native, q, _int(pind, "pind", *_U16), rsid, r, p, c1, c2, fl)
    _, latency = _check(outcome, "Execute Program")
    stats = json.loads(native.extension_report_json("programs") or "{}").get("stats", {})
    return ExecuteResult(int(stats["last_result"]), int(stats["last_instructions"]), latency)


def device_program(dev: Any, name: str) -> int:
    """The program index of a device-defined program (``sls_f32``: SparseLengthsSum over fp32 rows on a
    fixed-function unit; see docs/programs.md)."""
    names = [n for n, _ in _p.device_programs()]
    if name not in names:
        raise InvalidArgument(f"device-defined program {name!r} is not one of {names}")
    return identify(dev)["first_device_program"] + names.index(name)


def identify(dev: Any) -> dict[str, int]:
    """The compute and memory resources the extension reports (Identify)."""
    native, q = _dev(dev)
    outcome, fields = _p.identify(native, q)
    _check(outcome, "Identify")
    return dict(fields)


def run_local(program: Any, buffers: Sequence[np.ndarray], params: Any = b"", cparam1: int = 0, cparam2: int = 0,
              budget: int = 10**9) -> tuple[int, int]:
    """Runs a program in the VM without a device, over uint8 numpy ``buffers`` (one memory range each, changed in
    place); returns ``(value, instructions)``. A run the VM stops raises :class:`InvalidArgument` naming the fault."""
    if not isinstance(buffers, (list, tuple)) or not all(
        isinstance(b, np.ndarray) and b.dtype == np.uint8 and b.ndim == 1 and b.flags.c_contiguous for b in buffers
    ):
        raise InvalidArgument("buffers must be a list of contiguous 1-D uint8 arrays")
    v, fault, n = _p.run_local(_program_bytes(program), list(buffers), _bytes(params, "params"),
                               _int(cparam1, "cparam1", 0, 2**64 - 1), _int(cparam2, "cparam2", 0, 2**64 - 1),
                               _int(budget, "budget", 1, 2**63))
    if fault is not None:
        raise InvalidArgument(f"the program was stopped after {n} instructions: {fault}")
    return v, n


def host_run(dev: Any, program: Any, sources: Sequence[tuple[int, int]], params: Any = b"", cparam1: int = 0,
             cparam2: int = 0, lengths: Optional[Sequence[int]] = None,
             outputs: Sequence[int] = ()) -> dict[str, Any]:
    """The host path of a comparison: ``sources`` (``(lba, nblocks)``) read with ordinary Reads, then the same
    program run on one host core (its counted instructions at the host's clock and energy per instruction) over
    one range per source, cut to ``lengths`` bytes where given, then zeroed output ranges of ``outputs`` bytes.
    Sources and outputs together hold at most :data:`HOST_RUN_MAX_BYTES`. Returns result, fault, instructions,
    latency_ns, bytes_read, outputs (bytes each)."""
    native, q = _dev(dev)
    s = _pairs(sources, "sources", 2**64 - 1, (1, 2**32 - 1))
    lens = None if lengths is None else [_int(n, f"lengths[{i}]", 0, 2**64 - 1) for i, n in enumerate(lengths)]
    if isinstance(outputs, (str, bytes)) or not isinstance(outputs, (list, tuple)):
        raise InvalidArgument(f"outputs must be a list of byte counts, got {type(outputs).__name__}")
    outs = [_int(n, f"outputs[{i}]", 1, HOST_RUN_MAX_BYTES) for i, n in enumerate(outputs)]
    if len(s) + len(outs) > 16:
        raise InvalidArgument("at most 16 ranges (sources and outputs together)")
    return _p.host_run(native, q, _program_bytes(program), s, _bytes(params, "params"),
                       _int(cparam1, "cparam1", 0, 2**64 - 1), _int(cparam2, "cparam2", 0, 2**64 - 1), lens, outs)


def host_runs(dev: Any, program: Any, flash: Sequence[tuple[int, int]], runs: Sequence[tuple[Any, int, int]],
              warm: Sequence[int] = ()) -> list[dict[str, Any]]:
    """The host path of a program that reads flash (a B-tree walk on the host): the same program run once per
    ``(params, cparam1, cparam2)`` of ``runs``, one after another, on one host core, each of its reads of the
    ``flash`` ranges (``(lba, nblocks)``) one Read command through the kernel stack, or a page-cache hit where
    every block it reads is among ``warm`` (blocks read into the host's cache first). Returns per run: result,
    fault, instructions, latency_ns, reads, cache_hits."""
    native, q = _dev(dev)
    fl = _pairs(flash, "flash", 2**64 - 1, (1, 2**64 - 1))
    if not isinstance(runs, (list, tuple)):
        raise InvalidArgument(f"runs must be a list of (params, cparam1, cparam2), got {type(runs).__name__}")
    rs = []
    for i, r in enumerate(runs):
        if not isinstance(r, (list, tuple)) or len(r) != 3:
            raise InvalidArgument(f"runs[{i}] must be (params, cparam1, cparam2), got {r!r}")
        rs.append((_bytes(r[0], f"runs[{i}] params"), _int(r[1], f"runs[{i}] cparam1", 0, 2**64 - 1),
                   _int(r[2], f"runs[{i}] cparam2", 0, 2**64 - 1)))
    if isinstance(warm, (str, bytes)) or not isinstance(warm, (list, tuple, range)):
        raise InvalidArgument(f"warm must be a list of block numbers, got {type(warm).__name__}")
    w = [_int(b, f"warm[{i}]", 0, 2**64 - 1) for i, b in enumerate(warm)]
    out = _p.host_runs_reading(native, q, _program_bytes(program), fl, rs, w)
    keys = ("result", "fault", "instructions", "latency_ns", "reads", "cache_hits")
    return [dict(zip(keys, r)) for r in out]
