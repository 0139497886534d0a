"""The served device's status file, `<image>/serve.json`: who serves it, where, and the device's figures.

The nbdkit plugin holds the image (and its lock) while serving, so `nearflash info` cannot open it; the plugin
rewrites this file (atomically: a temporary file renamed over it) a few times a second while requests arrive and
once more when it stops, and `nearflash info` prints it for a device that is being served. A file left behind by a
server that was killed is recognised by its lock being free, and ignored.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, Optional

STATUS_FILE = "serve.json"


def status_path(image: os.PathLike | str) -> Path:
    return Path(image) / STATUS_FILE


def write_status(image: os.PathLike | str, status: dict[str, Any]) -> None:
    """Replaces the status file in one step, so a reader never sees half of it."""
    path = status_path(image)
    tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status, indent=1))
    os.replace(tmp, path)


def remove_status(image: os.PathLike | str) -> None:
    try:
        status_path(image).unlink()
    except FileNotFoundError:
        pass


def image_locked(image: os.PathLike | str) -> bool:
    """Whether a process holds the image open (the core takes an exclusive flock on `<image>/LOCK`)."""
    lock = Path(image) / "LOCK"
    if not lock.exists():
        return False
    with open(lock, "rb") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    return False


#: Keys `nearflash info` reads; a file without them (damaged, or not ours) is ignored.
REQUIRED = {"pid": int, "address": str, "readonly": bool, "now_ns": int, "requests": dict, "identify": dict,
            "lbas": int, "lba_bytes": int, "extensions": list, "report": dict}


def _serving_process(pid: int, image: os.PathLike | str) -> bool:
    """Whether `pid` is the nbdkit serving `image` (not a recycled pid, nor another process holding the image)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(f"image={Path(image).absolute()}") in args


def read_status(image: os.PathLike | str) -> Optional[dict[str, Any]]:
    """The status of a device being served now, or None (not served, a file left by a server that died, or a file
    that is damaged)."""
    path = status_path(image)
    if not path.exists() or not image_locked(image):
        return None
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(status, dict) or any(not isinstance(status.get(k), t) for k, t in REQUIRED.items()):
        return None
    req = status["requests"]
    if any(not isinstance(req.get(k), int) for k in ("read", "write", "fua_writes", "flush", "trim", "zero",
                                                     "errors", "open_connections", "connections")):
        return None
    return status if _serving_process(status["pid"], image) else None
