"""Runs a sweep's points, each in a process of its own: a local pool by default, or Ray tasks on a Ray cluster.

Every finished point's row is stored as `OUT/points/<id>.json` the moment it arrives, so an interrupted sweep resumed
with the same OUT reruns only what is missing (and points that failed: they may have failed for a reason since
fixed). A failing point is reported with its error and the others go on.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from nearflash import progress
from nearflash.errors import InvalidArgument
from nearflash.sweeps.point import METRICS, STARTED
from nearflash.sweeps.spec import Point

#: Seconds a point may run before it is stopped and reported as failed (from its process's start, imports done).
DEFAULT_POINT_TIMEOUT_S = 3600.0
#: Seconds a point's process may take to start (the interpreter, numpy, the native module: 4-11 s measured on a
#: loaded 2-core machine, load 5-9) before it is reported as failed; apart from the point's timeout.
STARTUP_TIMEOUT_S = 300.0
#: The point's process: reads the point on stdin, writes its row on stdout (`nearflash.sweeps.point.main`).
POINT_COMMAND = [sys.executable, "-m", "nearflash.sweeps"]
#: The line a point's process announces its start with, as it reaches the pipe.
_STARTED_LINE = STARTED.encode() + b"\n"


class Store:
    """The sweep's finished rows, one JSON file per point (written whole, then renamed into place)."""

    def __init__(self, out: Path):
        self.dir = out / "points"
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, point: Point) -> Path:
        return self.dir / f"{point.id}.json"

    def done(self, point: Point) -> Optional[dict[str, Any]]:
        """The stored row of a point that finished successfully, or None (never run, failed, or a damaged file)."""
        try:
            row = json.loads(self.path(point).read_text())
        except (OSError, ValueError):
            return None
        return row if isinstance(row, dict) and row.get("status") == "ok" else None

    def put(self, point: Point, row: dict[str, Any]) -> None:
        tmp = self.path(point).with_suffix(".tmp")
        tmp.write_text(json.dumps({"point": json.loads(point.to_json()), **row}))
        os.replace(tmp, self.path(point))


def _error_row(message: str) -> dict[str, Any]:
    return {"status": "error", "error": message, **{m: None for m in METRICS}}


def run_in_subprocess(point: Point, timeout_s: float = DEFAULT_POINT_TIMEOUT_S) -> dict[str, Any]:
    """Runs one point in a fresh Python process (a crash or a hang costs only that point). `timeout_s` counts from
    the process's announced start (`point.STARTED`, once its imports are done), which may take `STARTUP_TIMEOUT_S`."""
    env = dict(os.environ, NEARFLASH_NO_PROGRESS="1")
    with subprocess.Popen(POINT_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env) as p:
        head, err = _until_started(p, STARTUP_TIMEOUT_S)
        started = head is not None and _STARTED_LINE in head
        try:
            if started:
                out, more = p.communicate(point.to_json().encode(), timeout=timeout_s)
            else:  # not started in time (0: stopped now), or its stdout ended first: how it ends tells why
                out, more = p.communicate(timeout=0 if head is None else STARTUP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return _error_row(f"timed out after {timeout_s:g} s" if started else
                              f"the point's process did not start within {STARTUP_TIMEOUT_S:g} s")
    stdout, stderr = ((head or b"") + out).decode(errors="replace"), (err + more).decode(errors="replace")
    if p.returncode != 0:
        tail = (stderr.strip().splitlines() or [""])[-1]
        return _error_row(f"the point's process exited with status {p.returncode}: {tail}")
    try:
        return json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return _error_row(f"the point's process printed no result: {stdout[-200:]!r}")


def _until_started(p: subprocess.Popen, limit_s: float) -> tuple[Optional[bytes], bytes]:
    """What the process wrote on stdout up to its start line (or up to its end, if it ended first) and on stderr
    meanwhile; (None, stderr) if `limit_s` passed first."""
    assert p.stdout is not None and p.stderr is not None
    out, err = b"", b""
    deadline = time.monotonic() + limit_s
    streams = {p.stdout.fileno(): "out", p.stderr.fileno(): "err"}
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        while _STARTED_LINE not in out:
            left = deadline - time.monotonic()
            events = sel.select(left) if left > 0 else []
            if not events:
                return None, err
            for key, _ in events:
                chunk = os.read(key.fd, 65536)
                if not chunk:  # ended (or closed its stdout) before starting: the exit status tells why
                    sel.unregister(key.fd)
                    if streams[key.fd] == "out":
                        return out, err
                elif streams[key.fd] == "out":
                    out += chunk
                else:
                    err += chunk
    return out, err


def local_pool(points: list[Point], jobs: int, timeout_s: float) -> Iterable[tuple[Point, dict[str, Any]]]:
    """(point, row) as each finishes, `jobs` processes at a time."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures: dict[Future, Point] = {pool.submit(run_in_subprocess, p, timeout_s): p for p in points}
        for f in as_completed(futures):
            yield futures[f], f.result()


def _point_task(point_json: str) -> dict[str, Any]:
    """A Ray task's body: the point, run in the worker's process."""
    from nearflash.sweeps.point import run

    return run(Point.from_json(point_json))


def ray_connect(address: Optional[str]) -> bool:
    """Connects to Ray (a local one when `address` is None, as `ray.init()` does); True if this call started it."""
    try:
        import ray
    except ImportError:
        raise InvalidArgument("--ray needs Ray: pip install 'nearflash[ray]'") from None
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 configure_logging=False)
    except Exception as e:  # noqa: BLE001  (Ray raises ConnectionError, ValueError, RuntimeError, ...)
        raise InvalidArgument(f"--ray {address or ''}: Ray did not start: {type(e).__name__}: {e}".strip()) from None
    return True


def ray_tasks(points: list[Point], timeout_s: float) -> Iterable[tuple[Point, dict[str, Any]]]:
    """(point, row) as each Ray task finishes (Ray connected by `ray_connect`); each task runs in a fresh worker
    process (max_calls=1)."""
    import ray

    remote = ray.remote(max_calls=1)(_point_task)
    pending = {remote.remote(p.to_json()): p for p in points}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=timeout_s)
        if not done:
            for ref, p in pending.items():
                ray.cancel(ref, force=True)
                yield p, _error_row(f"timed out after {timeout_s:g} s (Ray)")
            return
        ref = done[0]
        p = pending.pop(ref)
        try:
            yield p, ray.get(ref)
        except Exception as e:  # noqa: BLE001  (a task that died: its point failed, the rest go on)
            yield p, _error_row(f"Ray task failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def run_points(points: list[Point], out: Path, jobs: int, use_ray: bool = False,
               timeout_s: float = DEFAULT_POINT_TIMEOUT_S, json_output: bool = False,
               on_row: Optional[Callable[[Point, dict[str, Any]], None]] = None) -> dict[str, dict[str, Any]]:
    """Runs the points not finished before (with `use_ray`, on the Ray that `ray_connect` joined); returns every
    point's row by id (stored ones included)."""
    store = Store(out)
    rows: dict[str, dict[str, Any]] = {}
    todo = []
    for p in points:
        row = store.done(p)
        if row is None:
            todo.append(p)
        else:
            rows[p.id] = {**row, "resumed": True}
    source = ray_tasks(todo, timeout_s) if use_ray else local_pool(todo, jobs, timeout_s)
    for p, row in progress.track(source, f"sweep ({len(rows)} done before)", len(todo), json_output):
        store.put(p, row)
        rows[p.id] = {**row, "resumed": False}
        if on_row:
            on_row(p, row)
    return rows
