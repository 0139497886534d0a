"""Block traces: read (`read_trace`), tell the format of (`detect`), and convert between formats (`convert_trace`).

Formats: ``mqsim`` (MQSim's ASCII trace), ``msr`` (MSR Cambridge CSV, SNIA IOTTA), ``fio`` (fio iolog v2 and v3),
``blkparse`` (blkparse's default output) and, read only, ``nbdkit-log`` (nbdkit's log filter, what
``nearflash serve --log`` records). The parsing is the native module's (streaming, every line checked); a malformed
line raises ``InvalidArgument`` naming the file and line. See docs/workloads.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from nearflash import _native
from nearflash.errors import InvalidArgument

FORMATS = ("mqsim", "msr", "fio", "blkparse", "nbdkit-log")
WRITABLE = FORMATS[:4]
TIME_UNITS = ("ps", "ns", "us")
#: The native integers' ranges.
U32_MAX, U64_MAX = 2**32 - 1, 2**64 - 1


@dataclass
class TraceOptions:
    """How a trace file is read.

    Args:
        format: one of `FORMATS`; None: told from the file's first lines.
        sector_size: bytes per sector of the formats that count in sectors (mqsim, blkparse).
        time_unit: unit of MQSim's arrival times (ps, ns, us; MQSim's engine reads them as ns).
        blk_event: blkparse event replayed: "D" (issued) or "Q" (queued).
        device: only this device's requests (MQSim's device column, MSR's DiskNumber, blkparse's "major,minor",
            fio's file name, an nbdkit log's connection number); numbers compare as numbers ("1" keeps "01").
        skip_bad: skip malformed lines (counted) instead of stopping at the first.
        repeat: replay the trace this many times back to back (MQSim's Relay_Count).
        limit: at most this many requests.
    """

    format: Optional[str] = None
    sector_size: int = 512
    time_unit: str = "ns"
    blk_event: str = "D"
    device: Optional[str] = None
    skip_bad: bool = False
    repeat: int = 1
    limit: Optional[int] = None

    def check(self) -> None:
        def positive(name: str, v: Any, optional: bool = False, high: int = U64_MAX) -> None:
            if optional and v is None:
                return
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= high:
                raise InvalidArgument(f"{name} must be a positive integer (at most {high}), got {v!r}")

        if self.format is not None and self.format not in FORMATS:
            raise InvalidArgument(f"format must be one of {', '.join(FORMATS)} (or None to detect it), got {self.format!r}")
        positive("sector_size", self.sector_size)
        positive("repeat", self.repeat, high=U32_MAX)
        positive("limit", self.limit, optional=True)
        if self.time_unit not in TIME_UNITS:
            raise InvalidArgument(f"time_unit must be one of {', '.join(TIME_UNITS)}, got {self.time_unit!r}")
        if self.blk_event not in ("D", "Q"):
            raise InvalidArgument(f"blk_event must be 'D' (issued) or 'Q' (queued), got {self.blk_event!r}")
        if self.device is not None and not isinstance(self.device, str):
            raise InvalidArgument(f"device must be a string (e.g. '0', '8,0'), got {self.device!r}")
        if not isinstance(self.skip_bad, bool):
            raise InvalidArgument(f"skip_bad must be true or false, got {self.skip_bad!r}")

    def source(self, path: Union[str, os.PathLike]) -> dict[str, Any]:
        """The native trace source (JSON-ready) of `path` read with these options."""
        self.check()
        p = as_path("trace", path)
        if not p.exists():
            raise InvalidArgument(f"trace {path}: no such file")
        return {"path": str(p), **asdict(self)}


def as_path(name: str, v: Any) -> Path:
    """`v` as a path (a str or os.PathLike), or InvalidArgument naming `name`."""
    if isinstance(v, bool) or not isinstance(v, (str, os.PathLike)) or not str(v):
        raise InvalidArgument(f"{name} must be a path (a str or os.PathLike), got {v!r}")
    return Path(v)


def as_options(options: Any) -> TraceOptions:
    """`options` (None: the defaults) as TraceOptions, or InvalidArgument."""
    if options is None:
        return TraceOptions()
    if not isinstance(options, TraceOptions):
        raise InvalidArgument(f"options must be a nearflash.traces.TraceOptions or None, got {type(options).__name__}")
    return options


@dataclass
class Trace:
    """A trace read into memory: its requests (time_ns, op, offset, length, line, recorded response ns) and the
    reader's figures (counts, bytes, duration, lines ignored, skipped or out of order)."""

    requests: list[tuple[int, str, int, int, int, Optional[int]]]
    stats: dict[str, Any] = field(default_factory=dict)


def read_trace(path: Union[str, os.PathLike], options: Optional[TraceOptions] = None) -> Trace:
    """Reads a whole trace (small traces: replay streams long ones)."""
    src = as_options(options).source(path)
    rows, stats = _native.workloads.trace_read(json.dumps(src))
    return Trace(rows, json.loads(stats))


def detect(path: Union[str, os.PathLike]) -> str:
    """The format of the trace at `path`, from its first lines (InvalidArgument where they do not tell)."""
    if not as_path("trace", path).exists():
        raise InvalidArgument(f"trace {path}: no such file")
    return _native.workloads.trace_detect(str(path))


def convert_trace(src: Union[str, os.PathLike], dst: Union[str, os.PathLike], to: str,
            options: Optional[TraceOptions] = None, *, sector_size: int = 512, name: str = "nearflash",
            start_ticks: int = 0) -> dict[str, Any]:
    """Writes the trace at `src` to `dst` in format `to` (mqsim, msr, fio or blkparse). Returns what was read and
    what was written (``written``: requests, flushes and trims the format cannot hold, requests widened to whole
    sectors). An nbdkit log's replies become MSR's response times. `name`: fio's file name, MSR's host name;
    `start_ticks`: MSR's Windows filetime of the first request."""
    src_path, dst_path, options = as_path("src", src), as_path("dst", dst), as_options(options)
    if to not in WRITABLE:
        raise InvalidArgument(f"to must be one of {', '.join(WRITABLE)}, got {to!r}")
    for key, v in (("sector_size", sector_size), ("start_ticks", start_ticks)):
        if isinstance(v, bool) or not isinstance(v, int) or not (1 if key == "sector_size" else 0) <= v <= U64_MAX:
            raise InvalidArgument(f"{key} must be a {'positive' if key == 'sector_size' else 'non-negative'} integer, got {v!r}")
    if not isinstance(name, str) or not name or any(c.isspace() or c == "," for c in name):
        raise InvalidArgument(f"name must be a word without spaces or commas, got {name!r}")
    if dst_path.resolve() == src_path.resolve():
        raise InvalidArgument(f"the output {dst} is the input trace")
    out = _native.workloads.trace_convert(json.dumps(options.source(src_path)), str(dst_path), to, sector_size, name,
                                          start_ticks)
    return json.loads(out)
