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


def read_status(image: os.PathLike | str) -> Optional[dict[str, Any]]:
    """The status of a device being served now, or None (not served, or a file left by a server that died)."""
    path = status_path(image)
    if not path.exists() or not image_locked(image):
        return None
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    pid = status.get("pid")
    if not isinstance(pid, int) or not Path(f"/proc/{pid}").exists():
        return None
    return status
