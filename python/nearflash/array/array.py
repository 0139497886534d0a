"""`Array`: N devices, each with its own image (or memory) and preset and its own virtual clock, behind one shared
host. A shard's work runs on its device alone (in this process or in a worker process); the combiner then replays
every device's host-visible transfers through the shared host on one array clock (nearflash.array.host)."""

from __future__ import annotations

import os
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from nearflash.array.host import DIRECTIONS, ArrayReport, HostModel, ShardResult, Transfer, combine
from nearflash.device import Device, _count
from nearflash.errors import InvalidArgument, InvalidValue


@dataclass(frozen=True)
class DeviceSpec:
    """How to make (or open) one device of the array: everything a worker process needs, picklable."""

    preset: str = "cosmos-plus"
    seed: int = 1
    path: Optional[str] = None
    materialise: bool = True
    overrides: dict[str, Any] = field(default_factory=dict)

    def open(self) -> Device:
        return Device(self.path, self.preset, seed=self.seed, materialise=self.materialise, overrides=self.overrides)


class Shard:
    """What a shard's work function gets: its device, its index among `devices`, the shared host's CPU `cores`
    (the most tasks a host-path round's CPU work is worth splitting into) and :meth:`transfer` to record each
    host-visible transfer on the device's clock."""

    def __init__(self, device: Device, index: int, devices: int, holds: Optional[Sequence[int]] = None,
                 cores: int = 1):
        self.device, self.index, self.devices, self.cores = device, index, devices, cores
        self.start_ns = device.now_ns
        self.transfers: list[Transfer] = []
        #: In a closed-loop round: when the last round delivered each transfer (relative to the shard's start).
        self.holds = holds

    def transfer(self, done_ns: int, nbytes: int, direction: str = "to_host", cpu_ns: int | Sequence[int] = 0) -> int:
        """Records `nbytes` that crossed this device's link `direction`, done at device time `done_ns` (as a
        completion's time_ns), followed by `cpu_ns` of host CPU work on them: one task on one core, or a list of
        independent tasks (a multi-threaded host's threads, each taking some of the queries), each then recorded
        as a transfer of its share of the bytes, so that the shared cores run them side by side. Returns the device
        time at which the host has consumed them: `done_ns` in an open-loop run; in a closed-loop round
        (``Array.run(closed_loop=k)``) the transfer's delivery in the last round (its last task's), and the device's
        clock advances to it, so that the host's next command waits for the shared host as a host that consumes
        each completion before reusing its slot does."""
        if direction not in DIRECTIONS:
            raise InvalidArgument(f"transfer direction must be one of {DIRECTIONS}, got {direction!r}")
        t = _count("done_ns", done_ns, self.start_ns) - self.start_ns
        nbytes = _count("nbytes", nbytes, 1)
        tasks = [_count("cpu_ns", c, 0) for c in cpu_ns] if isinstance(cpu_ns, (list, tuple)) else \
            [_count("cpu_ns", cpu_ns, 0)]
        if not 1 <= len(tasks) <= nbytes:
            raise InvalidArgument(f"cpu_ns: {len(tasks)} tasks for {nbytes} bytes; 1 to one per byte")
        first = len(self.transfers)
        for i, task in enumerate(tasks):  # the bytes split as evenly as whole bytes allow
            share = nbytes * (i + 1) // len(tasks) - nbytes * i // len(tasks)
            self.transfers.append(Transfer(t, share, direction, task))
        return self._consumed(first, done_ns)

    def transfer_each(self, done_ns: Sequence[int], nbytes: int, direction: str = "to_host") -> int:
        """Records one transfer of `nbytes` at each of `done_ns` (device times, as completions' time_ns, none
        before the shard's start; e.g. every 4 KiB read of a host path as it completed), with no host CPU work: as
        many :meth:`transfer` calls, checked at once. Returns the device time at which the host has consumed the
        last of them (the latest of `done_ns` in an open-loop run; see :meth:`transfer`)."""
        if direction not in DIRECTIONS:
            raise InvalidArgument(f"transfer direction must be one of {DIRECTIONS}, got {direction!r}")
        nbytes = _count("nbytes", nbytes, 1)
        times = np.asarray(done_ns)
        if times.ndim != 1 or (times.size and times.dtype.kind not in "iu"):
            raise InvalidArgument(f"done_ns must be a 1-D sequence of integer device times, got {times.dtype} "
                                  f"of shape {times.shape}")
        if not times.size:
            return self.start_ns
        if int(times.min()) < self.start_ns:
            raise InvalidArgument(f"done_ns {int(times.min())} is before the shard's start ({self.start_ns} ns)")
        first = len(self.transfers)
        self.transfers.extend(Transfer(t, nbytes, direction) for t in (times - self.start_ns).tolist())
        return self._consumed(first, int(times.max()))

    def _consumed(self, first: int, done_ns: int) -> int:
        """When the host has consumed the transfers recorded from index `first` on, done by `done_ns`: `done_ns` in
        an open-loop run, else no earlier than the last round's latest delivery of them, the device's clock
        advanced to it."""
        count = len(self.transfers) - first
        if self.holds is None or first + count > len(self.holds):
            return done_ns
        consumed = max(done_ns, self.start_ns + max(self.holds[first:first + count]))
        if consumed > self.device.now_ns:
            self.device.advance(consumed - self.device.now_ns)
        return consumed


#: A shard's work: (shard, *args) -> the shard's value for the host-side merge.
Work = Callable[..., Any]


def run_shard(spec: DeviceSpec, index: int, devices: int, work: Work, args: tuple[Any, ...],
              holds: Optional[Sequence[int]] = None, cores: int = 1) -> ShardResult:
    """Makes device `index` from `spec`, runs `work` on it (in a closed-loop round, with the last round's delivery
    times `holds`; `cores`: the shared host's) and returns what the combiner needs (module-level, so that a worker
    process can run it)."""
    with spec.open() as dev:
        shard = Shard(dev, index, devices, holds, cores)
        value = work(shard, *args)
        end = dev.now_ns - shard.start_ns
        return ShardResult(index, dev.preset, shard.transfers, end, dev.report().data, value)


class Array:
    """N devices behind one shared host.

    Args:
        devices: the number of devices (each made from `preset`, `overrides` and seed `seed + i`), or a list of
            :class:`DeviceSpec` (each its own preset, seed and image path).
        host: overrides of the shared host's parameters (``crates/nearflash-array/host.toml``), e.g.
            ``{"uplink_bandwidth": 8}``.
        images: an existing directory: device i keeps its image in ``images/dev<i>`` (None: in-memory devices).
        closed_loop: rounds of back-pressure from the shared host for :meth:`run` when a call does not say (0: open
            loop).
    """

    def __init__(self, devices: int | Sequence[DeviceSpec], preset: str = "cosmos-plus", *, seed: int = 1,
                 host: Optional[dict[str, Any]] = None, images: Optional[os.PathLike | str] = None,
                 materialise: bool = True, overrides: Optional[dict[str, Any]] = None, closed_loop: int = 0):
        if isinstance(devices, (list, tuple)):
            if not devices or not all(isinstance(d, DeviceSpec) for d in devices):
                raise InvalidArgument("devices must be a count or a non-empty list of DeviceSpec")
            if images is not None:
                raise InvalidArgument("give images, or DeviceSpec paths, not both")
            self.specs = list(devices)
        else:
            n = _count("devices", devices, 1, 4096)
            if images is not None and not Path(images).is_dir():
                raise InvalidValue(f"images {str(images)!r} is not an existing directory")
            seed = _count("seed", seed, 0, 2**64 - 1 - n)
            paths = [None] * n if images is None else [str(Path(images) / f"dev{i}") for i in range(n)]
            self.specs = [DeviceSpec(preset, seed + i, paths[i], bool(materialise), dict(overrides or {}))
                          for i in range(n)]
        self.host = HostModel(host)
        self.closed_loop = _count("closed_loop", closed_loop, 0, 1000)

    def __len__(self) -> int:
        return len(self.specs)

    def run(self, work: Work, *args: Any, executor: Optional[Executor] = None,
            closed_loop: Optional[int] = None) -> tuple[ArrayReport, list[Any]]:
        """Runs `work(shard, *args)` on every device (here, one after another, or on `executor`'s workers: a
        ProcessPoolExecutor or a Ray-backed one) and combines their transfers; returns the array's report and each
        shard's value, in device order. The report is the same however the shards ran.

        `closed_loop` > 0 (None: the array's own): back-pressure from the shared host, by rounds (docs/arrays.md):
        every shard runs again with the last round's delivery times, its host consuming each transfer at its
        delivery before going on (:meth:`Shard.transfer`), until a round reproduces the last one's deliveries or
        `closed_loop` rounds have run; ``whole["closed_loop"]`` says how many ran, whether they converged and the
        last round's largest change."""
        if not callable(work):
            raise InvalidArgument(f"work must be a function (shard, *args) -> value, got {type(work).__name__}")
        rounds_max = self.closed_loop if closed_loop is None else _count("closed_loop", closed_loop, 0, 1000)
        report, values = self._round(work, args, executor, None)
        rounds, change = 0, 0
        while rounds < rounds_max:
            holds = [report.deliveries[i] for i in range(len(self.specs))]
            new, values = self._round(work, args, executor, holds)
            rounds += 1
            change = max((abs(a - b) for i, h in enumerate(holds) for a, b in zip(h, new.deliveries[i])), default=0)
            same = all(new.deliveries[i] == h for i, h in enumerate(holds))
            report = new
            if same:
                break
        if rounds_max:
            report.whole["closed_loop"] = {"rounds": rounds, "converged": change == 0, "max_change_ns": change}
        return report, values

    def _round(self, work: Work, args: tuple[Any, ...], executor: Optional[Executor],
               holds: Optional[list[list[int]]]) -> tuple[ArrayReport, list[Any]]:
        jobs = self.jobs(work, args, holds)
        results = list(map(run_shard, *jobs) if executor is None else executor.map(run_shard, *jobs))
        return combine(results, self.host), [r.value for r in results]


    def jobs(self, work: Work, args: tuple[Any, ...], holds: Optional[list[list[int]]] = None) -> tuple[list, ...]:
        """The arguments of :func:`run_shard` for every device (one list per parameter, as ``map`` takes them): what
        a round of :meth:`run` hands its executor (``Resumable.pending`` tells which of them are still to run)."""
        n = len(self.specs)
        return (self.specs, list(range(n)), [n] * n, [work] * n, [args] * n, holds or [None] * n,
                [self.host.cpu_cores] * n)


class RayExecutor:
    """Runs each shard as a Ray task in a fresh worker process, on a local Ray (`address` None) or a cluster, as the
    sweeps' ``--ray`` does; pass it as ``Array.run(..., executor=RayExecutor())``. Ray is the optional 'ray' extra."""

    def __init__(self, address: Optional[str] = None):
        from nearflash.sweeps.runner import ray_connect

        self.started = ray_connect(address)

    def map(self, fn: Callable[..., Any], *iterables: Any) -> list[Any]:
        import ray

        task = ray.remote(max_calls=1)(fn)
        return ray.get([task.remote(*a) for a in zip(*iterables)])

    def shutdown(self) -> None:
        """Stops the Ray this executor started (a Ray it joined stays)."""
        if self.started:
            import ray

            ray.shutdown()
            self.started = False


class Resumable:
    """An executor for :meth:`Array.run` that keeps each shard's result in `directory` as soon as it finishes and,
    when the same run is started again (the same work, arguments, device, closed-loop holds), loads the shards done
    instead of running them: a killed run restarts at the shards it had not finished, and its report is the one an
    uninterrupted run gives (the combiner sees the same shard results). The shards still to run go to `executor`
    (None: one after another in this process; a ProcessPoolExecutor: side by side, each saved as it finishes).
    Results are pickles: keep `directory` as private as the run's own cache. `loaded` / `ran` count the shards of
    the last :meth:`map`."""

    def __init__(self, directory: os.PathLike | str, executor: Optional[Executor] = None):
        self.directory = Path(directory)
        self.executor = executor
        self.loaded = self.ran = 0

    def path(self, fn: Callable[..., Any], job: tuple[Any, ...]) -> Path:
        """Where the result of one :func:`run_shard` job (``fn`` and its arguments) is kept: its device index and a
        digest of everything it depends on."""
        import hashlib
        import pickle

        digest = hashlib.sha256(pickle.dumps((fn, job), protocol=4)).hexdigest()[:24]
        return self.directory / f"shard-{job[1]:05d}-{digest}.pkl"

    def _load(self, path: Path) -> Any:
        import pickle

        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except Exception as e:  # a damaged or foreign file: say which, never half-use it
            raise InvalidValue(f"{path} is not a readable shard result ({type(e).__name__}: {e}); delete it to run "
                               f"that shard again") from None

    def _save(self, path: Path, result: Any) -> Any:
        import pickle

        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(result, f, protocol=4)
        tmp.replace(path)
        return result

    def pending(self, fn: Callable[..., Any], *iterables: Any) -> list[int]:
        """Which of the jobs ``map(fn, *iterables)`` would run (the others' results are kept)."""
        return [n for n, job in enumerate(zip(*iterables)) if not self.path(fn, job).exists()]

    def map(self, fn: Callable[..., Any], *iterables: Any) -> list[Any]:
        import concurrent.futures

        jobs = list(zip(*iterables))
        self.directory.mkdir(parents=True, exist_ok=True)
        paths = [self.path(fn, job) for job in jobs]
        out = [self._load(p) if p.exists() else None for p in paths]
        todo = [n for n, p in enumerate(paths) if out[n] is None]
        self.loaded, self.ran = len(jobs) - len(todo), len(todo)
        if self.executor is None:
            for n in todo:
                out[n] = self._save(paths[n], fn(*jobs[n]))
        elif hasattr(self.executor, "submit"):
            running = {self.executor.submit(fn, *jobs[n]): n for n in todo}
            for done in concurrent.futures.as_completed(running):
                out[running[done]] = self._save(paths[running[done]], done.result())
        else:  # an executor with map only (Ray): saved when all of them are back
            for n, r in zip(todo, self.executor.map(fn, *zip(*(jobs[n] for n in todo))) if todo else []):
                out[n] = self._save(paths[n], r)
        return out

    def shutdown(self) -> None:
        if hasattr(self.executor, "shutdown"):
            self.executor.shutdown()
