"""The nbdkit plugin that exports a nearflash device over NBD (`nbdkit python plugin.py image=DIR ...`).

`nearflash serve` starts it; it runs inside nbdkit's embedded Python (Debian's python3), which finds the nearflash
package through the site directories `nearflash serve` passes in NEARFLASH_SITE_DIRS (see `nearflash.nbd.launch`).
Every NBD request becomes the device's NVMe commands through the SDK, issued at the device's virtual clock (the
synchronous helpers submit at "now" and wait for the completion, so the clock advances by each command's latency):

    NBD_CMD_READ               Read
    NBD_CMD_WRITE              Write (FUA flag -> the Write's FUA bit)
    NBD_CMD_FLUSH              Flush
    NBD_CMD_TRIM               Dataset Management, deallocate (FUA -> then a Flush)
    NBD_CMD_WRITE_ZEROES       Write Zeroes (NBD_CMD_FLAG_NO_HOLE unset -> its Deallocate bit; FUA -> then a Flush)

Requests arrive whole-block aligned (nbdkit's blocksize filter, placed in front by `nearflash serve`, reads, modifies
and writes partial blocks). nbdkit serialises all requests (the default thread model of Python plugins), so one
device serves every connection in order, and a Flush from any connection covers all of them (multi-conn is safe).
Attached extensions (config key ext=NAME or ext=NAME:{json}) see these commands like any other, and the export's
size is what the device advertises.
"""

from __future__ import annotations

import errno
import json
import os
import site
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional


def _add_site_dirs() -> None:
    """Puts the serving environment's site directories (with their .pth files, e.g. an editable install) ahead of
    the interpreter's own, so that nearflash, numpy and friends come from the virtual environment."""
    before = list(sys.path)
    for d in filter(None, os.environ.get("NEARFLASH_SITE_DIRS", "").split(os.pathsep)):
        site.addsitedir(d)
    added = [p for p in sys.path if p not in before]
    sys.path[:] = added + before


_add_site_dirs()

import nbdkit  # noqa: E402  (provided by nbdkit's embedded interpreter)

from nearflash.device import Device  # noqa: E402
from nearflash.errors import NearflashError, NvmeError  # noqa: E402
from nearflash.nbd.stats import remove_status, write_status  # noqa: E402

API_VERSION = 2

#: Seconds between rewrites of the status file while requests arrive.
STATUS_PERIOD_S = 0.2

_cfg: dict[str, Any] = {"image": None, "ext": [], "seed": 1, "address": "", "readonly": False}
_dev: Optional[Device] = None
_lock = threading.Lock()
_counts = {"connections": 0, "open_connections": 0, "read": 0, "write": 0, "fua_writes": 0, "flush": 0,
           "trim": 0, "zero": 0, "errors": 0, "bytes_read": 0, "bytes_written": 0}
_static: dict[str, Any] = {}
_dirty = threading.Event()
_stop = threading.Event()


def config(key: str, value: str) -> None:
    if key == "image":
        _cfg["image"] = value
    elif key == "ext":
        _cfg["ext"].append(value)
    elif key == "seed":
        _cfg["seed"] = int(value)
    elif key == "address":
        _cfg["address"] = value
    elif key == "recovery":  # what `nearflash serve` recovered when it checked the image
        _cfg["recovery"] = json.loads(value)
    elif key == "readonly":
        _cfg["readonly"] = value == "true"
    else:
        raise ValueError(f"unknown parameter {key!r} (image, ext, seed, address, readonly, recovery)")


def config_complete() -> None:
    if not _cfg["image"]:
        raise ValueError("image=DIR is required")


def _parse_ext(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, params = spec.partition(":")
    return name, (json.loads(params) if params else {})


def get_ready() -> None:
    global _dev
    _dev = Device(_cfg["image"], seed=_cfg["seed"], create=False)
    try:
        for spec in _cfg["ext"]:
            name, params = _parse_ext(spec)
            _dev.attach(name, **params)
        _static.update(identify=_dev.identify(), lba_bytes=_dev.lba_bytes, lbas=_dev.lbas, preset=_dev.preset,
                       extensions=[_parse_ext(s)[0] for s in _cfg["ext"]],
                       recovery=_dev.recovery or _cfg.get("recovery"))
    except BaseException:
        _dev.close()
        raise
    _write_status("serving")
    threading.Thread(target=_status_loop, name="nearflash-status", daemon=True).start()


def _write_status(state: str) -> None:
    """Called with `_lock` held or before serving starts (the device is not thread-safe). It must not submit
    commands (SMART, Identify): they would advance the virtual clock at moments set by the wall clock."""
    assert _dev is not None
    status = {
        "state": state,
        "pid": os.getpid(),
        "address": _cfg["address"],
        "readonly": _cfg["readonly"],
        "updated_unix": time.time(),
        "now_ns": _dev.now_ns,
        "requests": dict(_counts),
        **_static,
        "report": _dev.report().data,  # reading the report issues no command: status writes never move the clock
    }
    write_status(_cfg["image"], status)


def _status_loop() -> None:
    while not _stop.is_set():
        if _dirty.wait(STATUS_PERIOD_S) and not _stop.is_set():
            time.sleep(STATUS_PERIOD_S)  # gather a burst of requests into one rewrite
            with _lock:
                _dirty.clear()
                if _dev is not None and not _stop.is_set():
                    _write_status("serving")


def cleanup() -> None:
    """Server shutdown (SIGTERM, SIGINT or nbdkit.shutdown): flush, checkpoint and close the image cleanly."""
    global _dev
    _stop.set()
    with _lock:
        if _dev is not None:
            _dev.close()
            _dev = None
            remove_status(_cfg["image"])
            (Path(_cfg["image"]) / "serve.pid").unlink(missing_ok=True)  # written by nbdkit -P (nearflash serve)


def thread_model() -> int:
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def open(readonly: bool) -> dict[str, bool]:  # noqa: A001  (the name nbdkit looks up)
    with _lock:
        _counts["connections"] += 1
        _counts["open_connections"] += 1
    _dirty.set()
    return {"readonly": readonly}


def close(h: Any) -> None:
    with _lock:
        _counts["open_connections"] -= 1
        if _dev is not None:
            _write_status("serving")


def get_size(h: Any) -> int:
    assert _dev is not None
    return _dev.lbas * _dev.lba_bytes


def block_size(h: Any) -> tuple[int, int, int]:
    assert _dev is not None
    lba = _dev.lba_bytes
    return lba, max(lba, 128 << 10), 32 << 20


def can_write(h: Any) -> bool:
    return True


def can_flush(h: Any) -> bool:
    return True


def can_trim(h: Any) -> bool:
    return True


def can_zero(h: Any) -> bool:
    return True


def can_fast_zero(h: Any) -> bool:
    return True  # Write Zeroes moves no data over the link


def can_fua(h: Any) -> int:
    return nbdkit.FUA_NATIVE


def can_multi_conn(h: Any) -> bool:
    return True  # one device behind every connection, and a Flush covers them all


def is_rotational(h: Any) -> bool:
    return False


def _blocks(offset: int, count: int) -> tuple[int, int]:
    assert _dev is not None
    lba = _dev.lba_bytes
    if offset % lba or count % lba:
        nbdkit.set_error(errno.EINVAL)
        raise ValueError(f"request at {offset}+{count} is not aligned to the {lba} B block")
    return offset // lba, count // lba


def _run(kind: str, nbytes: int, fn: Any) -> None:
    with _lock:
        try:
            fn()
        except NvmeError as e:
            _counts["errors"] += 1
            nbdkit.set_error(errno.ENOSPC if "Capacity Exceeded" in str(e) else errno.EIO)
            raise
        except NearflashError:
            _counts["errors"] += 1
            nbdkit.set_error(errno.EIO)
            raise
        _counts[kind] += 1
        if kind == "read":
            _counts["bytes_read"] += nbytes
        elif kind in ("write", "zero"):
            _counts["bytes_written"] += nbytes
    _dirty.set()


def pread(h: Any, buf: Any, offset: int, flags: int) -> None:
    import numpy as np

    assert _dev is not None
    lba, n = _blocks(offset, len(buf))
    out = np.frombuffer(buf, dtype=np.uint8)
    _run("read", len(buf), lambda: _dev.read(lba, n, out=out))


def pwrite(h: Any, buf: Any, offset: int, flags: int) -> None:
    assert _dev is not None
    lba, _ = _blocks(offset, len(buf))
    fua = bool(flags & nbdkit.FLAG_FUA)

    def go() -> None:
        _dev.write(lba, buf, fua=fua)
        _counts["fua_writes"] += fua  # under the lock, with the write

    _run("write", len(buf), go)


def flush(h: Any, flags: int) -> None:
    assert _dev is not None
    _run("flush", 0, _dev.flush)


def trim(h: Any, count: int, offset: int, flags: int) -> None:
    assert _dev is not None
    lba, n = _blocks(offset, count)

    def go() -> None:
        _dev.trim(lba, n)
        if flags & nbdkit.FLAG_FUA:
            _dev.flush()

    _run("trim", 0, go)


def zero(h: Any, count: int, offset: int, flags: int) -> None:
    assert _dev is not None
    lba, n = _blocks(offset, count)

    def go() -> None:
        _dev.write_zeroes(lba, n, deallocate=bool(flags & nbdkit.FLAG_MAY_TRIM))
        if flags & nbdkit.FLAG_FUA:
            _dev.flush()

    _run("zero", count, go)
