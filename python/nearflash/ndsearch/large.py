"""The large sharded NDSearch run, resumable across sessions (issue 26: a set many times what one device holds,
built shard by shard, searched across the array).

    nice -n 19 python -m nearflash.ndsearch.large --n 100000000 --devices 64 --set ext_reserved_blocks=1 \\
        --ef-construction 64 --ef 512 --workers 2 --nice 5 --cache /work/nds-100m/cache --log run.log \\
        --out large-100m.json

builds the shards' graphs still missing from ``--cache``, ``--workers`` at a time, each in a fresh worker process
at niceness ``--nice`` (its peak memory is the shard's alone), adding its rows in steps of ``--step`` and saving a
checkpoint of the partial graph every ``--checkpoint-min`` minutes, so a stopped run resumes where its last
checkpoints left it: a graph built on one thread is the same whether its rows are added at once or in steps, and
after a save and a load (tested), so a resumed shard is the graph an uninterrupted build makes, whichever worker
builds it. It logs every step with the measured rate and the remaining CPU and wall time of the whole run; when
every shard is built it searches across the array (:func:`nearflash.ndsearch.sharded.main`, the graphs loaded from
the cache, ``--workers`` shards at once, each shard's result kept under ``cache/search`` as it finishes so a killed
search resumes there, its cost estimated by a probe of ``--probe-queries`` on shard 0 and printed first).
``--status`` only reports; ``--search partial`` searches the shards built so far (the first ``k`` of the split)
without building more."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from nearflash.array import topk
from nearflash.errors import InvalidValue
from nearflash.ndsearch.index import Index
from nearflash.ndsearch.scale import cpu_seconds, peak_rss_bytes
from nearflash.ndsearch.sharded import Graph, Synthetic, shard_path

#: Rows added between progress lines (and the finest checkpoint granularity).
STEP = 1 << 20


def partial_paths(path: Path) -> tuple[Path, Path]:
    """The checkpoint of a shard's unfinished graph beside its final ``path``: (index, record)."""
    return path.with_suffix(".partial.nfidx"), path.with_suffix(".partial.json")


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=2))
    tmp.replace(path)


def build_shard(base: Synthetic, first: int, rows: int, graph: Graph, cache_dir: str, step: int = STEP,
                checkpoint_s: float = 600.0, progress: Any = None) -> dict:
    """Builds the graph of ``rows`` rows of ``base`` from ``first`` on one thread into ``cache_dir`` (where
    :func:`nearflash.ndsearch.sharded.shard_graph` loads it), resuming from its checkpoint if one exists; returns
    its build record (CPU and wall seconds over every session, peak RSS of this process, sessions).
    ``progress(done, rows, record)`` is called after every step."""
    path = shard_path(cache_dir, base, first, rows, graph)
    if path is None:
        raise InvalidValue("build_shard needs a cache directory")
    if path.exists() and path.with_suffix(".json").exists():
        return json.loads(path.with_suffix(".json").read_text())
    part, part_rec = partial_paths(path)
    rec = {"first": first, "rows": rows, "build_cpu_s": 0.0, "build_wall_s": 0.0, "sessions": 0, "rows_done": 0}
    if part.exists() and part_rec.exists():
        ix = Index.load(part)
        rec = json.loads(part_rec.read_text())
        if ix.ntotal != rec["rows_done"]:
            raise InvalidValue(f"checkpoint {part} holds {ix.ntotal} rows, its record says {rec['rows_done']}")
    else:
        ix = Index(base.dim, graph.metric or base.metric, kind=graph.kind, R=graph.R,
                   ef_construction=graph.ef_construction, dtype=base.dtype, seed=graph.seed)
    rec["sessions"] += 1
    t0, c0 = time.perf_counter(), cpu_seconds()
    cpu0, wall0 = rec["build_cpu_s"], rec["build_wall_s"]
    saved, start_rows = time.perf_counter(), ix.ntotal
    path.parent.mkdir(parents=True, exist_ok=True)
    while ix.ntotal < rows:
        ix.add(base.rows(first + ix.ntotal, min(step, rows - ix.ntotal)), threads=1)
        cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
        rec.update(rows_done=ix.ntotal, build_cpu_s=cpu0 + cpu, build_wall_s=wall0 + wall,
                   peak_rss_bytes=peak_rss_bytes(), session={"rows": ix.ntotal - start_rows, "cpu_s": cpu,
                                                             "wall_s": wall})
        if ix.ntotal < rows and time.perf_counter() - saved >= checkpoint_s:
            ix.save(part)
            _write_json(part_rec, rec)
            saved = time.perf_counter()
        if progress is not None:
            progress(ix.ntotal, rows, rec)
    ix.save(path)
    rec["peak_rss_bytes"] = peak_rss_bytes()
    _write_json(path.with_suffix(".json"), rec)
    part.unlink(missing_ok=True)
    part_rec.unlink(missing_ok=True)
    return rec


class Plan:
    """The shards of a run and which of them are built (or part built) in the cache."""

    def __init__(self, base: Synthetic, devices: int, graph: Graph, cache_dir: str):
        self.base, self.graph, self.cache_dir = base, graph, cache_dir
        self.shards = topk.even_split(len(base), devices)

    def path(self, i: int) -> Path:
        first, rows = self.shards[i]
        return shard_path(self.cache_dir, self.base, first, rows, self.graph)

    def built(self, i: int) -> Optional[dict]:
        p = self.path(i)
        return json.loads(p.with_suffix(".json").read_text()) if p.exists() and p.with_suffix(".json").exists() \
            else None

    def rows_done(self, i: int) -> int:
        if (rec := self.built(i)) is not None:
            return rec.get("rows_done", self.shards[i][1])
        part, part_rec = partial_paths(self.path(i))
        return json.loads(part_rec.read_text())["rows_done"] if part.exists() and part_rec.exists() else 0

    def missing(self) -> list[int]:
        return [i for i in range(len(self.shards)) if self.built(i) is None]

    def built_prefix(self) -> int:
        """How many shards from the first are built (a partial array searches these)."""
        missing = self.missing()
        return missing[0] if missing else len(self.shards)

    def remaining_rows(self) -> int:
        return sum(rows - self.rows_done(i) for i, (_, rows) in enumerate(self.shards))

    def status(self) -> dict:
        recs = [self.built(i) for i in range(len(self.shards))]
        cpu = sum(r["build_cpu_s"] for r in recs if r)
        rows = sum(self.shards[i][1] for i, r in enumerate(recs) if r)
        return {"shards": len(self.shards), "built": sum(r is not None for r in recs),
                "rows_built": rows, "rows_remaining": self.remaining_rows(),
                "build_cpu_s_so_far": cpu, "vectors_per_cpu_s": rows / cpu if cpu else None,
                "predicted_remaining_cpu_s": self.remaining_rows() * cpu / rows if cpu else None}


def _build_in_worker(base: Synthetic, first: int, rows: int, graph: Graph, cache_dir: str, step: int,
                     checkpoint_s: float, index: int, remaining_after: int, log: Optional[str], nice: int = 19,
                     workers: int = 1) -> dict:
    """One shard's build in its own process at niceness ``nice``, logging each step with the run's time to go
    (``workers`` shards being built at once); it ends with the driver (:func:`exit_with_parent`)."""
    exit_with_parent()
    set_nice(nice)
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(log, "a")) if log else sys.stdout
        return build_shard(base, first, rows, graph, cache_dir, step, checkpoint_s,
                           lambda done, total, rec: _progress(out, index, done, total, rec, remaining_after, workers))


def exit_with_parent() -> bool:
    """Asks Linux to end this process (SIGTERM) when the process that started it ends: a build worker left behind
    by a killed driver would otherwise build on, beside the next driver's worker for the same shard. Returns whether
    it could (False off Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM)) != 0:
        return False
    if os.getppid() == 1:  # the driver ended before the request: end now, as the signal would have
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def set_nice(nice: int) -> int:
    """Sets this process's niceness to ``nice`` (raising priority needs the privilege to; without it the niceness
    stays where it is, with a warning on stderr); returns the niceness it now has."""
    try:
        return os.nice(nice - os.nice(0))
    except PermissionError:
        print(f"cannot lower the niceness to {nice} without privilege: staying at {os.nice(0)}", file=sys.stderr)
        return os.nice(0)


def _progress(out: Any, index: int, done: int, total: int, rec: dict, remaining_after: int,
              workers: int = 1) -> None:
    """One progress line: the shard's rows, this session's rates, the whole run's time to go at them (wall time:
    with ``workers`` shards built side by side at this shard's rate each)."""
    s = rec["session"]
    per_cpu, per_wall = s["rows"] / max(s["cpu_s"], 1e-9), s["rows"] / max(s["wall_s"], 1e-9)
    left = total - done + remaining_after
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} shard {index}: {done:,}/{total:,} rows, "
          f"{per_cpu:,.0f} vectors/CPU s, {per_wall:,.0f} vectors/s wall, peak RSS "
          f"{rec['peak_rss_bytes'] / 2**30:.2f} GiB; run: {left:,} rows to go, ~{left / per_cpu / 3600:.2f} CPU h, "
          f"~{left / per_wall / workers / 3600:.2f} h wall at this rate x {workers} worker{'s' * (workers > 1)}",
          file=out, flush=True)


#: The lock file a driver holds in its cache while it runs (so two drivers never build the same shard).
LOCK = "driver.lock"


def _lock(cache: Path) -> Any:
    """The cache's driver lock, held until this process exits (None: another process holds it)."""
    import fcntl

    cache.mkdir(parents=True, exist_ok=True)
    f = open(cache / LOCK, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def build(plan: Plan, a: Any, out: Any) -> None:
    """Builds every missing shard of ``plan``, ``a.workers`` at a time, each in a fresh worker process at niceness
    ``a.nice`` with its own checkpoint (a shard's graph is built on one thread from its own rows, so it is the same
    byte for byte whichever worker builds it and whatever runs beside it); logs each finished shard's record with
    the plan's status to ``out``."""
    missing = plan.missing()
    if not missing:
        return
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(a.workers, len(missing)), mp_context=ctx,
                                                max_tasks_per_child=1) as pool:
        jobs = {}
        for n, i in enumerate(missing):
            first, rows = plan.shards[i]
            after = sum(plan.shards[j][1] - plan.rows_done(j) for j in missing[n + 1:])
            jobs[pool.submit(_build_in_worker, plan.base, first, rows, plan.graph, plan.cache_dir, a.step,
                             a.checkpoint_min * 60, i, after, a.log, a.nice, a.workers)] = i
        try:
            for done in concurrent.futures.as_completed(jobs):
                print(json.dumps({"shard": jobs[done], "record": done.result(), **plan.status()}), file=out,
                      flush=True)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # the shards in progress keep their checkpoints
            raise


def main(argv: Optional[list[str]] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m nearflash.ndsearch.large", description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="sift-like")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--preset", default="searssd")
    ap.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE")
    ap.add_argument("--R", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", required=True, help="directory of the shards' graphs (outside any worktree)")
    ap.add_argument("--step", type=int, default=STEP, help="rows added between progress lines")
    ap.add_argument("--checkpoint-min", type=float, default=10.0, help="minutes between checkpoints of a shard")
    ap.add_argument("--log", help="append progress here (default: stdout)")
    ap.add_argument("--workers", type=int, default=1, help="shards built at once (each its own worker process and "
                    "checkpoint; 0.6-0.9 GiB each at 1.5M vectors), and shards searched at once")
    ap.add_argument("--nice", type=int, default=19, help="niceness of the build workers (-20..19; below the "
                    "driver's own needs the privilege to raise priority)")
    ap.add_argument("--status", action="store_true", help="report what is built and the time to go; build nothing")
    ap.add_argument("--search", choices=("auto", "never", "partial"), default="auto",
                    help="auto: search once every shard is built; partial: search the shards built so far now")
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--queries", type=int, default=2048)
    ap.add_argument("--truth-queries", type=int, default=200)
    ap.add_argument("--probe-queries", type=int, default=32, help="queries of the probe on shard 0 that estimates "
                    "the search's CPU and wall time before it starts (0: no estimate)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if not 1 <= a.workers <= 256:
        ap.error(f"--workers must be 1..256, not {a.workers}")
    if not -20 <= a.nice <= 19:
        ap.error(f"--nice must be -20..19, not {a.nice}")
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(a.log, "a")) if a.log else sys.stdout
        return _run(a, out, stack)


def _run(a: Any, out: Any, stack: contextlib.ExitStack) -> int:
    from nearflash.ndsearch import sharded

    base = Synthetic(a.name, a.n, a.seed)
    graph = Graph(R=a.R, ef_construction=a.ef_construction, seed=a.seed)
    plan = Plan(base, a.devices, graph, a.cache)
    print(json.dumps({"plan": {"n": a.n, "devices": a.devices, "graph": asdict(graph), "cache": a.cache},
                      **plan.status()}), file=out, flush=True)
    if a.status:
        return 0
    if a.search != "partial":  # a partial search only reads the graphs built so far, beside a running driver
        lock = _lock(Path(a.cache))
        if lock is None:
            print(f"another run holds {Path(a.cache) / LOCK}: one driver per cache at a time", file=sys.stderr)
            return 2
        stack.enter_context(lock)
        build(plan, a, out)
    if a.search == "never" or (a.search == "auto" and plan.missing()):
        return 0
    k = plan.built_prefix() if a.search == "partial" else a.devices
    if k == 0:
        print("no shard is built yet: nothing to search", file=out, flush=True)
        return 1
    args = ["--name", a.name, "--n", str(a.n), "--devices", str(k), "--split", str(a.devices), "--preset", a.preset,
            "--R", str(a.R), "--ef-construction", str(a.ef_construction), "--seed", str(a.seed), "--ef", str(a.ef),
            "--queries", str(a.queries), "--truth-queries", str(a.truth_queries), "--workers", str(a.workers),
            "--cache", a.cache, "--results", str(Path(a.cache) / "search"), "--probe-queries", str(a.probe_queries)]
    for s in a.set:
        args += ["--set", s]
    if a.out:
        args += ["--out", a.out]
    return sharded.main(args)


if __name__ == "__main__":
    raise SystemExit(main())
