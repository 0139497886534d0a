"""Computational programs on every drive's local data, with a host-side reduction.

A :class:`Job` names an eBPF program (``examples/programs``), its parameters and the bytes each run leaves for the
host. :func:`run` runs it on every device of an :class:`~nearflash.array.Array` over that device's local pieces,
which a ``local(shard, *args)`` function writes (or finds on the device's image) and lists as ``(lba, nblocks,
nbytes)``; then the host reduces every run's output, in (device, piece) order, with ``reduce``. Two paths:

- ``in_storage``: per piece a Memory Copy from flash into the device's SLM, an Execute Program over it, and a Memory
  Read of ``out_bytes``: only those cross the shared host, with ``merge_ns_per_byte`` of host CPU each;
- ``host``: the pieces read at a queue depth, the same program run on a host core over each one (the same VM, so the
  same answer; its counted instructions x ``host_cycles_per_instruction`` / the preset's ``host.cpu_freq`` of the
  shared host's CPU, as the programs' own host path charges them).

    report, total = programs.run(array, Job(example("lineitem_filter"), 16, Q6, cparam1=8192), my_local,
                                 reduce=sum_partials)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from nearflash._native import programs as _native_programs
from nearflash.array.array import Array, Shard
from nearflash.array.host import ArrayReport
from nearflash.device import _count
from nearflash.errors import InvalidArgument
from nearflash.programs import api

PATHS = ("in_storage", "host")
#: Program slot the job is loaded into on every device.
PIND = 1
#: Most output bytes a run may leave for the host (one Memory Read).
MAX_OUT_BYTES = 1 << 20


@dataclass(frozen=True)
class Job:
    """One program to run on every piece: its object bytes, the bytes of output each run leaves after its input
    in SLM (range 1), its parameter bytes and the two command parameters."""

    program: bytes
    out_bytes: int
    params: bytes = b""
    cparam1: int = 0
    cparam2: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.program, (bytes, bytearray)) or not self.program:
            raise InvalidArgument("Job.program must be a program's object bytes (nearflash.programs.example(name))")
        _count("Job.out_bytes", self.out_bytes, 1, MAX_OUT_BYTES)
        if not isinstance(self.params, (bytes, bytearray)):
            raise InvalidArgument(f"Job.params must be bytes, got {type(self.params).__name__}")
        _count("Job.cparam1", self.cparam1, 0, 2**64 - 1)
        _count("Job.cparam2", self.cparam2, 0, 2**64 - 1)


#: Each device's local data: (shard, *args) -> its pieces as (lba, nblocks, nbytes), written or found on it.
Local = Callable[..., Sequence[tuple[int, int, int]]]


def host_ns_per_instruction(dev: Any) -> float:
    """ns of a host core per eBPF instruction: the programs' host_cycles_per_instruction over the device preset's
    host.cpu_freq (GHz)."""
    cycles = float({n: d for n, d, *_ in _native_programs.parameters()}["host_cycles_per_instruction"])
    ghz, unit = dev.param("host.cpu_freq").split()[:2]
    if unit != "GHz":
        raise InvalidArgument(f"host.cpu_freq is in {unit}, expected GHz")
    return cycles / float(ghz)


def _pieces(shard: Shard, local: Local, args: tuple[Any, ...]) -> list[tuple[int, int, int]]:
    pieces = list(local(shard, *args))
    dev = shard.device
    for i, p in enumerate(pieces):
        if not (isinstance(p, (tuple, list)) and len(p) == 3):
            raise InvalidArgument(f"local data piece {i} must be (lba, nblocks, nbytes), got {p!r}")
        lba, nblocks, nbytes = (_count(f"piece {i} {name}", v, lo)
                                for name, v, lo in zip(("lba", "nblocks", "nbytes"), p, (0, 1, 1)))
        if lba + nblocks > dev.lbas or nbytes > nblocks * dev.lba_bytes:
            raise InvalidArgument(f"local data piece {i} ({lba}, {nblocks}, {nbytes}) does not fit its blocks on the "
                                  f"device's {dev.lbas} blocks of {dev.lba_bytes} B")
    return pieces


def in_storage(shard: Shard, job: Job, pieces: Sequence[tuple[int, int, int]], merge_ns_per_byte: float,
               ) -> list[tuple[int, np.ndarray]]:
    """Runs `job` over each piece on the shard's device (the program loaded and activated already): a Memory Copy
    into SLM at 0, an Execute Program over (0, nbytes) and (slot, out_bytes), a Memory Read of the output; records
    each output's transfer to the host. Returns (program value, output) per piece."""
    dev = shard.device
    slot = max((n * dev.lba_bytes for _, n, _ in pieces), default=0)
    out = []
    for lba, nblocks, nbytes in pieces:
        api.copy_to_slm(dev, 0, lba, nblocks)
        r = api.execute(dev, PIND, [(0, nbytes), (slot, job.out_bytes)], params=job.params, cparam1=job.cparam1,
                        cparam2=job.cparam2)
        out.append((r.value, api.read_slm(dev, slot, job.out_bytes)))
        shard.transfer(dev.now_ns, job.out_bytes, cpu_ns=math.ceil(job.out_bytes * merge_ns_per_byte))
    return out


def on_host(shard: Shard, job: Job, pieces: Sequence[tuple[int, int, int]], depth: int, ns_per_instruction: float,
            ) -> list[tuple[int, np.ndarray]]:
    """Reads the pieces at `depth` commands in flight and runs `job` over each on a host core as it arrives (the
    same VM: its counted instructions at `ns_per_instruction` of the shared host's CPU). Returns (program value,
    output) per piece, in piece order."""
    dev = shard.device
    q = dev.queue(depth)
    results: dict[int, tuple[int, np.ndarray]] = {}
    tags: dict[int, int] = {}
    nxt = 0
    while nxt < len(pieces) or q.in_flight:
        while nxt < len(pieces) and q.in_flight < depth:
            lba, nblocks, _ = pieces[nxt]
            tags[q.submit_read(lba, nblocks, np.empty(nblocks * dev.lba_bytes, dtype=np.uint8))] = nxt
            nxt += 1
        c = q.wait()
        i = tags.pop(c.cid)
        data = c.data[: pieces[i][2]].copy()
        out = np.zeros(job.out_bytes, dtype=np.uint8)
        value, instructions = api.run_local(job.program, [data, out], job.params, job.cparam1, job.cparam2)
        results[i] = (value, out)
        shard.transfer(c.time_ns, c.data.nbytes, cpu_ns=math.ceil(instructions * ns_per_instruction))
    q.close()
    return [results[i] for i in range(len(pieces))]


def _shard(shard: Shard, job: Job, path: str, local: Local, args: tuple[Any, ...], depth: int,
           merge_ns_per_byte: float) -> list[tuple[int, np.ndarray]]:
    """One device's part (module-level, so that worker processes can run it)."""
    dev = shard.device
    if path == "in_storage":
        dev.attach("programs")
        api.load(dev, PIND, job.program)
        api.activate(dev, PIND)
    pieces = _pieces(shard, local, args)
    dev.reset_stats()
    shard.start_ns = dev.now_ns
    if path == "in_storage":
        return in_storage(shard, job, pieces, merge_ns_per_byte)
    return on_host(shard, job, pieces, depth, host_ns_per_instruction(dev))


def run(array: Array, job: Job, local: Local, *args: Any, path: str = "in_storage",
        reduce: Optional[Callable[[list[tuple[int, np.ndarray]]], Any]] = None, depth: int = 8,
        executor: Any = None, closed_loop: Optional[int] = None) -> tuple[ArrayReport, Any]:
    """Runs `job` on every device's local pieces (`local(shard, *args)`, a module-level function when `executor`
    runs the shards elsewhere) by `path`, then reduces every (value, output) in (device, piece) order with `reduce`
    (None: the list itself). The host's merge costs the host model's ``scan_ns_per_byte`` per output byte.
    `closed_loop`: rounds of back-pressure from the shared host (:meth:`Array.run`)."""
    if not isinstance(job, Job):
        raise InvalidArgument(f"job must be a nearflash.array.programs.Job, got {type(job).__name__}")
    if path not in PATHS:
        raise InvalidArgument(f"path must be one of {PATHS}, got {path!r}")
    if not callable(local) or (reduce is not None and not callable(reduce)):
        raise InvalidArgument("local and reduce must be functions")
    depth = _count("depth", depth, 1, 1024)
    report, parts = array.run(_shard, job, path, local, args, depth, array.host["scan_ns_per_byte"], executor=executor,
                              closed_loop=closed_loop)
    outputs = [o for p in parts for o in p]
    return report, (outputs if reduce is None else reduce(outputs))
