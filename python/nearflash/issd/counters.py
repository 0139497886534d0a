"""Hardware counters of the calling thread through Linux's perf_event_open (no `perf` binary needed): instructions
and cycles spent in user space while a function runs. Many VMs expose no PMU; :func:`available` says whether this
machine counts, and :func:`count` returns ``None`` where it does not, so callers fall back to timed runs."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import struct
from collections.abc import Callable
from typing import Any

# perf_event_open(2): x86_64 / aarch64 syscall numbers, event ids, ioctls
_SYSCALL = {"x86_64": 298, "aarch64": 241}
PERF_TYPE_HARDWARE = 0
HW_CPU_CYCLES, HW_INSTRUCTIONS = 0, 1
_ENABLE, _DISABLE, _RESET = 0x2400, 0x2401, 0x2403
_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: the kernel accepts the short form
# flags bitfield: disabled (bit 0), exclude_kernel (bit 5), exclude_hv (bit 6)
_FLAGS = (1 << 0) | (1 << 5) | (1 << 6)


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _open(config: int) -> int:
    """A disabled counter of the calling thread on any CPU, or -1."""
    nr = _SYSCALL.get(platform.machine())
    if nr is None:
        return -1
    attr = bytearray(_ATTR_SIZE)
    struct.pack_into("<IIQ", attr, 0, PERF_TYPE_HARDWARE, _ATTR_SIZE, config)
    struct.pack_into("<Q", attr, 40, _FLAGS)  # type u32, size u32, config, sample_period, sample_type, read_format
    buf = ctypes.create_string_buffer(bytes(attr), _ATTR_SIZE)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    return int(libc.syscall(nr, buf, 0, -1, -1, ctypes.c_ulong(0)))


def count(fn: Callable[[], Any]) -> tuple[Any, dict[str, int] | None]:
    """Runs ``fn()``; returns its result and {"instructions", "cycles"} in user space of this thread, or ``None``
    where the counters cannot be opened (the function still runs once)."""
    fds = {name: _open(cfg) for name, cfg in (("instructions", HW_INSTRUCTIONS), ("cycles", HW_CPU_CYCLES))}
    if any(fd < 0 for fd in fds.values()):
        for fd in fds.values():
            if fd >= 0:
                os.close(fd)
        return fn(), None
    libc = _libc()
    try:
        for fd in fds.values():
            libc.ioctl(fd, _RESET, 0)
            libc.ioctl(fd, _ENABLE, 0)
        result = fn()
        for fd in fds.values():
            libc.ioctl(fd, _DISABLE, 0)
        counts = {name: struct.unpack("<q", os.read(fd, 8))[0] for name, fd in fds.items()}
    finally:
        for fd in fds.values():
            os.close(fd)
    return result, counts


def available() -> bool:
    """Whether this thread's instructions can be counted (a short loop counts more than zero)."""
    _, c = count(lambda: sum(range(10_000)))
    return c is not None and c["instructions"] > 0
