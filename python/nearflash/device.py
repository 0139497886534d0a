"""The SDK's `Device`: an emulated computational SSD, in a directory (a persistent image) or in memory.

    with nearflash.Device("/tmp/dev0", preset="cosmos-plus", channels=16) as dev:
        dev.write(0, np.arange(4096, dtype=np.uint8))
        data = dev.read(0, 1)
        q = dev.queue(depth=64)
        for lba in range(0, 64 * 8, 8):
            q.submit_read(lba, 8)
        q.wait_all()
        print(dev.report().summary())

Reads land directly in numpy arrays and writes are taken from them without copies. Every call advances the host's
virtual clock; `report()` tells what the device did in virtual time.

A `Device` may be shared by threads: each call holds the device's lock, so calls from several threads run one after
another (the simulated device has one host clock). A host library that drives `native` itself holds the lock with
`with dev.exclusive():`. The `Device` owns the I/O queue ids: its synchronous helpers' queue, the `Queue`s it
creates and the queues it reserves for native host libraries (`reserved_queue`) never collide.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

import numpy as np

from nearflash import _native
from nearflash.errors import InvalidArgument, InvalidType, InvalidValue, NvmeError, check, status_name
from nearflash.report import Report

#: Depth of the queue the synchronous helpers use (capped at the device's maximum).
SYNC_DEPTH = 64


def _as_u8(data: Any, name: str = "data") -> np.ndarray:
    """A contiguous uint8 view of `data` (bytes, bytearray, memoryview or any numpy array), copying only if needed;
    InvalidArgument naming `name` for anything else (a str, a list, None)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidType(f"{name} must be bytes, a bytearray, a memoryview or a numpy array, "
                              f"got {type(data).__name__}") from None
    return np.frombuffer(view, dtype=np.uint8)


def _out_view(out: Any, size: int) -> np.ndarray:
    """A uint8 view of the caller's `out` that data read into lands in: a read-only or non-contiguous array (which
    would be read into a copy, leaving `out` untouched) or one under `size` bytes is refused."""
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise InvalidArgument("out must be a writable array (it is read-only)")
    view = _as_u8(out, "out")
    if view.size < size or not np.shares_memory(view, out):
        raise InvalidArgument(f"out must be a contiguous array of at least {size} bytes")
    return view


#: The files of a device image (any of them marks a directory as an image).
IMAGE_FILES = ("state.json", "nearflash.toml", "l2p.bin", "oob.bin", "data.bin", "checkpoint.bin", "trim.log")

#: Most blocks one Read or Write command carries (NLB is a 0's-based 16-bit field).
MAX_NLB = 1 << 16


def _count(name: str, value: Any, low: int = 0, high: Optional[int] = None) -> int:
    """`value` as an int in [low, high], or InvalidArgument naming `name` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidType(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if v < low or (high is not None and v > high):
        allowed = f"{low} to {high}" if high is not None else f">= {low}"
        raise InvalidValue(f"{name} {v} is out of range (allowed {allowed})")
    return v


def int_argument(name: str, value: Any, low: int = 0, high: Optional[int] = None) -> int:
    """A host library's integer argument `value` as an int in [low, high], or InvalidArgument naming `name` and the
    allowed range (bools and floats are refused, not truncated)."""
    return _count(name, value, low, high)


def _real(name: str, value: Any) -> float:
    """`value` as a float, or InvalidArgument naming `name` (the callee checks its range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidType(f"{name} must be a number, got {value!r}")
    return float(value)


def _flag(name: str, value: Any) -> bool:
    """`value` as a bool, or InvalidType naming `name` (a truthy string such as "no" would silently mean yes)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidType(f"{name} must be True or False, got {value!r}")
    return bool(value)


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """Runs a `Device` method holding the device's lock (a `Queue` method: its device's)."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with (self if isinstance(self, Device) else self.dev)._lock:
            return method(self, *args, **kwargs)

    return run  # type: ignore[return-value]


def _override_items(overrides: dict[str, Any]) -> list[tuple[str, str]]:
    items = []
    for k, v in overrides.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        items.append((k, str(v)))
    return items


#: Command dwords a submission entry carries beside the opcode, the command id and the namespace: their byte offsets.
SQE_DWORDS = {"cdw2": 8, "cdw3": 12, **{f"cdw{i}": 4 * i for i in range(10, 16)}}


def sqe(opcode: int, *, nsid: int = 1, **dwords: int) -> bytes:
    """A 64-byte NVMe submission entry: ``opcode``, namespace ``nsid`` and command dwords by name (``cdw2``,
    ``cdw3``, ``cdw10`` .. ``cdw15``); the command id is left 0 (the device assigns it when the entry is submitted).
    A vendor command's dwords are its own: each system's docs say what they hold."""
    entry = bytearray(64)
    entry[0] = _count("opcode", opcode, 0, 0xFF)
    entry[4:8] = _count("nsid", nsid, 0, 2**32 - 1).to_bytes(4, "little")
    for name, value in dwords.items():
        if name not in SQE_DWORDS:
            raise InvalidArgument(f"{name} is not a command dword; use {', '.join(SQE_DWORDS)}")
        o = SQE_DWORDS[name]
        entry[o : o + 4] = _count(name, value, 0, 2**32 - 1).to_bytes(4, "little")
    return bytes(entry)


def _entry(command: Any, dwords: dict[str, int]) -> bytearray:
    """A mutable submission entry from an opcode (and dwords) or a ready 64-byte entry."""
    if isinstance(command, (bytes, bytearray, memoryview)):
        if dwords:
            raise InvalidArgument("give an opcode with dwords, or a ready 64-byte entry, not both")
        if len(command) != 64:
            raise InvalidArgument(f"a submission entry is 64 bytes, got {len(command)}")
        return bytearray(command)
    return bytearray(sqe(command, **dwords))


def _payload(data: Any, out: Any) -> tuple[Optional[np.ndarray], bool]:
    """(buffer, to_device) of a command: `data` goes to the device, the device's bytes land in `out`."""
    if data is not None and out is not None:
        raise InvalidArgument("give data (host to device) or out (device to host), not both")
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise InvalidArgument(f"out must be a writable numpy array, got {type(out).__name__}")
        return _out_view(out, out.nbytes), False
    if data is not None:
        return _as_u8(data), True
    return None, False


class Device:
    """An emulated SSD.

    Args:
        path: image directory; None for an in-memory device. An image there is opened; a missing or empty
            directory gets a new device (a missing one's parent must exist: nothing above it is created); any other
            directory is refused.
        create: True: only create (refuse an existing image); False: only open (never create anything);
            None (default): open if `path` holds an image, else create.
        preset: preset name (`nearflash.presets()`) or a .toml file; used when creating.
        seed: seed of every random stream.
        materialise: store data (False: timing-only, reads return zeroes; for large sweeps).
        durability: "process" (survives kill -9) or "fsync" (also survives a host crash; slower Flush).
        memory_limit: bytes of written data an in-memory device (no `path`) may keep in host memory (None: the host's
            RAM); a write past it fails as one to a full disk does (HostIoError, "storage full").
        **overrides: preset parameters, by unique leaf name (`channels=16`), `section__name`, or full dotted path via
            `overrides={"nand.t_read": "60us"}`. Values may carry units ("60us", "1.2GB/s").
    """

    def __init__(
        self,
        path: Optional[os.PathLike | str] = None,
        preset: str = "cosmos-plus",
        *,
        seed: int = 1,
        materialise: bool = True,
        durability: str = "process",
        create: Optional[bool] = None,
        memory_limit: Optional[int] = None,
        overrides: Optional[dict[str, Any]] = None,
        **more_overrides: Any,
    ):
        ov = {**(overrides or {}), **more_overrides}
        seed = _count("seed", seed, 0, 2**64 - 1)
        if memory_limit is not None:
            memory_limit = _count("memory_limit", memory_limit, 1, 2**64 - 1)
            if path is not None:
                raise InvalidArgument("memory_limit bounds an in-memory device's data: give no path")
        self.path = Path(path) if path is not None else None
        # Anything that looks like an image (even a damaged one) is opened, so that damage is reported, not
        # mistaken for a place to create a device.
        is_image = self.path is not None and any((self.path / f).exists() for f in IMAGE_FILES)
        if self.path is not None and (create is False or (create is None and is_image)):
            if ov:
                raise InvalidArgument("overrides apply when creating a device; this image already exists")
            self._dev = _native.Device.open(str(self.path), seed=seed, durability_mode=durability)
        else:
            if self.path is not None and not self.path.exists() and not self.path.absolute().parent.exists():
                raise InvalidValue(f"path {str(self.path)!r}: its parent directory {str(self.path.absolute().parent)!r} "
                                   "does not exist (a device is created in a new or empty directory; its parent "
                                   "must exist)")
            try:
                self._dev = _native.Device.create(
                    str(self.path) if self.path is not None else None,
                    preset,
                    _override_items(ov),
                    seed=seed,
                    materialise=materialise,
                    durability_mode=durability,
                    memory_limit=memory_limit,
                )
            except OSError as e:
                # The native error names the OS's complaint, not the path it was about.
                if self.path is not None and e.filename is None:
                    e.filename = str(self.path)
                raise
        self._sync_qid: Optional[int] = None
        self._queues: dict[int, Queue] = {}
        #: Queues reserved for host libraries that submit on them from native code: owner -> qid.
        self._reserved: dict[str, int] = {}
        self._lock = threading.RLock()

    # --- context management -------------------------------------------------------------------------------------
    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator["_native.Device"]:
        """Holds the device's lock and yields the native handle: for host libraries that drive it directly, so that
        calls from other threads wait until they are done."""
        with self._lock:
            yield self._dev

    @_locked
    def close(self) -> None:
        """Flushes, checkpoints and marks the image clean."""
        if not self._dev.closed:
            self._dev.close()

    # --- facts ----------------------------------------------------------------------------------------------------
    @property
    def native(self) -> "_native.Device":
        """The native handle, for a system's native host library (Rust code that submits through
        ``Device::execute``): pass it with :attr:`sync_qid`. Python code submits with :meth:`command` instead."""
        return self._dev

    @property
    def sync_qid(self) -> int:
        """The I/O queue the synchronous calls (:meth:`read`, :meth:`write`, :meth:`command`, ...) use; a native
        host library submits its commands there (see :attr:`native`). Created on first use."""
        return self._sync()

    @property
    def lba_bytes(self) -> int:
        return self._dev.lba_bytes

    @property
    def lbas(self) -> int:
        return self._dev.lbas

    @property
    def capacity_bytes(self) -> int:
        return self.lbas * self.lba_bytes

    @property
    def now_ns(self) -> int:
        """The host's virtual clock."""
        return self._dev.now_ns

    @property
    def preset(self) -> str:
        return self._dev.preset_name()

    def params(self) -> list[tuple[str, str, str, str]]:
        """Every parameter as (path, value, unit, source)."""
        return self._dev.params()

    def param(self, path: str) -> str:
        for p, v, u, _ in self.params():
            if p == path or p.endswith("." + path):
                return f"{v} {u}"
        raise KeyError(f"unknown parameter {path!r} of preset {self.preset!r} (params() lists them)")

    @property
    def recovery(self) -> Optional[dict[str, Any]]:
        """What crash recovery did when this image was opened (None after a clean shutdown)."""
        r = self._dev.recovery_json()
        return json.loads(r) if r else None

    @_locked
    def identify(self) -> dict[str, Any]:
        """Key fields of Identify Controller and Identify Namespace."""
        c = bytes(self._dev.identify(1))
        n = bytes(self._dev.identify(0))
        return {
            "serial": c[4:24].decode().strip(),
            "model": c[24:64].decode().strip(),
            "firmware": c[64:72].decode().strip(),
            "mdts_bytes": 4096 << c[77],
            "namespace_lbas": int.from_bytes(n[0:8], "little"),
            "namespace_used_lbas": int.from_bytes(n[16:24], "little"),
            "lba_bytes": 1 << n[130],
        }

    @_locked
    def smart(self) -> dict[str, int]:
        """SMART / Health log fields."""
        b = bytes(self._dev.log_page(0x02, 512))
        u128 = lambda o: int.from_bytes(b[o : o + 16], "little")  # noqa: E731
        return {
            "available_spare_pct": b[3],
            "percentage_used": b[5],
            "data_units_read": u128(32),
            "data_units_written": u128(48),
            "host_read_commands": u128(64),
            "host_write_commands": u128(80),
            "media_errors": u128(160),
        }

    @_locked
    def error_log(self) -> list[dict[str, Any]]:
        """The device's Error Information log (Get Log Page 0x01), newest first: one dict per failed command with
        ``error_count``, ``sqid``, ``cid``, ``status`` (its name), ``sct``, ``sc``, ``lba`` (None where the command
        addresses none), ``byte`` (of the command holding the offending field, or None) and ``reason`` (the
        firmware's words from vendor log 0xC1, or None)."""
        page = bytes(self._dev.log_page(0x01, 64 * 64))
        reasons = {r["error_count"]: r for r in json.loads(bytes(self._dev.log_page(0xC1, 1 << 16)).rstrip(b"\0") or b"[]")}
        out = []
        for o in range(0, len(page), 64):
            e = page[o : o + 64]
            count = int.from_bytes(e[0:8], "little")
            if count == 0:
                break
            field = int.from_bytes(e[12:14], "little") >> 1
            sct, sc = (field >> 8) & 0x7, field & 0xFF
            location = int.from_bytes(e[14:16], "little")
            why = reasons.get(count, {})
            out.append({
                "error_count": count,
                "sqid": int.from_bytes(e[8:10], "little"),
                "cid": int.from_bytes(e[10:12], "little"),
                "status": status_name(sct, sc),
                "sct": sct,
                "sc": sc,
                "lba": why.get("lba"),
                "byte": None if location == 0xFFFF else location,
                "reason": why.get("reason"),
            })
        return out

    def error_reason(self, sqid: int, cid: int) -> Optional[str]:
        """The device's reason for failed command ``cid`` on queue ``sqid`` (from :meth:`error_log`), or None."""
        key = (_count("sqid", sqid, 0, 0xFFFF), _count("cid", cid, 0, 0xFFFF))
        return next((e["reason"] for e in self.error_log() if (e["sqid"], e["cid"]) == key), None)

    @staticmethod
    def repair(path: os.PathLike | str) -> dict[str, Any]:
        """Repairs a damaged image in place (it must not be open). Returns what it did and what it could not
        recover: {"actions": [...], "unrecoverable": [...], "lost_lba_ranges": [[first, last], ...],
        "damaged_pages": [...]}. Afterwards the image opens cleanly; lost LBAs read as zeroes."""
        return json.loads(_native.Device.repair(str(path)))

    # --- synchronous I/O ------------------------------------------------------------------------------------------
    def _limit(self, name: str) -> int:
        return int(self.param(f"nvme.{name}").split()[0])

    def _free_qids(self) -> list[int]:
        """Queue ids no queue holds: the device's list, so that a queue a native host library created on its own
        is never created twice."""
        used = set(self._dev.io_queue_ids())
        return [q for q in range(1, self._limit("max_queues") + 1) if q not in used]

    def _idle(self, qid: int) -> bool:
        q = self._queues.get(qid)
        return (q is None or q.in_flight == 0) and not self._dev.outstanding(qid)

    @_locked
    def _sync(self) -> int:
        """The queue for synchronous calls: its own (the highest free id), or an idle queue (a user's or a
        reserved one) when the device has no queue id left (SATA-like presets have one)."""
        if self._sync_qid is not None:
            return self._sync_qid
        free = self._free_qids()
        if free:
            self._dev.create_queue(free[-1], min(SYNC_DEPTH, self._limit("max_queue_depth")))
            self._sync_qid = free[-1]
            return self._sync_qid
        for qid in [*self._queues, *self._reserved.values()]:
            if self._idle(qid):
                return qid
        raise InvalidArgument(f"all {self._limit('max_queues')} I/O queues have commands in flight; wait for them first")

    def _give_up_idle(self) -> Optional[int]:
        """Deletes the synchronous helpers' queue, else an idle reserved one (both are made again when needed), to
        free an id on a device that has none left; returns it (None: nothing could be given up)."""
        if self._sync_qid is not None and self._idle(self._sync_qid):
            qid, self._sync_qid = self._sync_qid, None
        else:
            owner = next((o for o, q in self._reserved.items() if self._idle(q)), None)
            if owner is None:
                return None
            qid = self._reserved.pop(owner)
        self._dev.delete_queue(qid)
        return qid

    @_locked
    def reserved_queue(self, owner: str, depth: int) -> int:
        """The id of an I/O queue reserved for `owner`, a host library that submits on it from native code (the
        iSSD Initiator): made on first use with `depth` entries (at most the device's maximum) on the highest free
        id, or on the synchronous helpers' queue's id when none is free (they then borrow an idle queue). The
        Device owns every queue id, so the block API, `queue()` and these libraries never create the same queue."""
        qid = self._reserved.get(owner)
        if qid is not None and self._dev.queue_depth(qid) is not None:
            return qid
        depth = min(_count("depth", depth, 2), self._limit("max_queue_depth"))
        free = self._free_qids()
        qid = free[-1] if free else self._give_up_idle()
        if qid is None:
            raise InvalidArgument(f"no I/O queue is free for {owner}: the device's {self._limit('max_queues')} queues "
                                  f"are in use by the Queue objects made with queue(); close one first")
        self._dev.create_queue(qid, depth)
        self._reserved[owner] = qid
        return qid

    def _reap_fault(self, qid: int, cid: int) -> None:
        """A fault (e.g. the host's disk full) still completes the command, with Internal Error: reaps it, so that
        the queue holds nothing in flight for the next call."""
        while self._dev.in_flight(qid, cid) and self._dev.wait(qid) is not None:
            pass

    def _one(self, submit: Callable[[int, int], None], what: str) -> int:
        q = self._sync()
        cid = self._dev.next_cid(q)
        start = self._dev.now_ns
        try:
            submit(q, cid)
        except Exception:
            self._reap_fault(q, cid)
            raise
        c = self._dev.wait(q)
        while c is not None and c[0] != cid:
            c = self._dev.wait(q)
        if c is None:
            raise InvalidArgument(f"{what}: completion lost")
        if (c[1], c[2]) != (0, 0):
            raise NvmeError(c[1], c[2], what, self.error_reason(q, cid), c[3])
        return c[4] - start

    def _check_range(self, what: str, lba: Any, nblocks: Any) -> tuple[int, int]:
        """Validates a whole request before its first command: a request that fails changes nothing."""
        lba = _count("lba", lba, 0)
        nblocks = _count("nblocks", nblocks, 1)
        if lba + nblocks > self.lbas:
            raise NvmeError(0, 0x80, f"{what} of {nblocks} blocks at LBA {lba} ends past the device's {self.lbas} LBAs")
        return lba, nblocks

    @_locked
    def write(self, lba: int, data: Any, *, fua: bool = False) -> int:
        """Writes whole blocks from `data` at `lba`; returns the latency in ns. Raises NvmeError on failure; a
        request that does not fit the device raises before anything is written."""
        fua = _flag("fua", fua)
        buf = _as_u8(data)
        if buf.size == 0 or buf.size % self.lba_bytes:
            raise InvalidArgument(f"data must be a positive multiple of {self.lba_bytes} bytes, got {buf.size}")
        lba, nlb = self._check_range("write", lba, buf.size // self.lba_bytes)
        total = 0
        step = self._dev.max_lbas_per_command
        for off in range(0, nlb, step):
            n = min(step, nlb - off)
            chunk = buf[off * self.lba_bytes : (off + n) * self.lba_bytes]
            total += self._one(lambda q, c: self._dev.submit_write(q, c, lba + off, n, chunk, fua), f"write LBA {lba + off}")
        return total

    @_locked
    def read(self, lba: int, nblocks: int, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Reads `nblocks` blocks from `lba` into `out` (a new uint8 array if None) and returns it."""
        lba, nblocks = self._check_range("read", lba, nblocks)
        size = nblocks * self.lba_bytes
        if out is None:
            out = np.empty(size, dtype=np.uint8)
        view = _out_view(out, size)
        step = self._dev.max_lbas_per_command
        for off in range(0, nblocks, step):
            n = min(step, nblocks - off)
            chunk = view[off * self.lba_bytes : (off + n) * self.lba_bytes]
            self._one(lambda q, c: self._dev.submit_read(q, c, lba + off, n, chunk), f"read LBA {lba + off}")
        return out

    @_locked
    def flush(self) -> int:
        sct, sc, lat = self._dev.flush(self._sync())
        check(sct, sc, "flush")
        return lat

    @_locked
    def trim(self, lba: int, nblocks: int) -> int:
        """Deallocates blocks (Dataset Management)."""
        lba, nblocks = self._check_range("trim", lba, nblocks)
        ranges = []
        while nblocks > 0:
            n = min(nblocks, 0xFFFFFFFF)
            ranges.append((lba, n))
            lba += n
            nblocks -= n
        sct, sc, lat = self._dev.trim(self._sync(), ranges)
        check(sct, sc, "trim")
        return lat

    @_locked
    def write_zeroes(self, lba: int, nblocks: int, *, deallocate: bool = False) -> int:
        """Zeroes blocks with NVMe Write Zeroes (no data crosses the link); `deallocate` lets the device trim them
        instead (deallocated blocks read as zeroes). Returns the latency in ns."""
        lba, nblocks = self._check_range("write zeroes", lba, nblocks)
        deallocate = _flag("deallocate", deallocate)
        total = 0
        while nblocks > 0:
            n = min(nblocks, 1 << 16)  # NLB is a 16-bit, 0-based field
            dw12 = (n - 1) | ((1 << 25) if deallocate else 0)
            done = self.command(0x08, what=f"write zeroes LBA {lba}", cdw10=lba & 0xFFFFFFFF, cdw11=lba >> 32, cdw12=dw12)
            total += done.latency_ns
            lba += n
            nblocks -= n
        return total

    @_locked
    def command(self, command: Any, data: Any = None, *, out: Optional[np.ndarray] = None, what: str = "",
                check: bool = True, **dwords: int) -> "Completion":
        """Submits one command on the synchronous queue and waits for it: the public way for a host library to
        send a vendor command (or any other). ``command`` is an opcode with its dwords by name (``cdw10=...``,
        ``nsid=...``; see :func:`sqe`) or a ready 64-byte submission entry; the device assigns the command id.
        ``data`` (bytes or an array) goes to the device; the device's bytes land in ``out`` (a writable array).
        Returns the :class:`Completion` (status, the device's reason, DW0, latency, ``data`` = ``out``); a failed
        command raises :class:`NvmeError` carrying the status, ``reason``, ``command`` (``what``) and ``dw0`` as
        fields, unless ``check=False``."""
        entry = bytes(_entry(command, dwords))
        _payload(data, out)  # refused before the synchronous queue is made
        qid = self._sync()
        # The synchronous queue is idle (no command of another in flight): a Queue of its own is enough.
        q = Queue(self, qid, SYNC_DEPTH)
        try:
            return q._command(entry, data, out, what, check, {})
        except Exception:
            for cid in list(q._pending):
                self._reap_fault(qid, cid)
            raise

    # --- asynchronous I/O -----------------------------------------------------------------------------------------
    @_locked
    def queue(self, depth: int = 32, qid: Optional[int] = None, priority: str = "medium") -> "Queue":
        """A new I/O queue pair for asynchronous submission. `priority` ("urgent", "high", "medium", "low": NVMe's
        submission-queue priority) is the class of its commands' flash work: urgent goes strictly first, then high,
        medium and low share the dies 4:2:1."""
        depth = _count("depth", depth, 1)
        if priority not in ("urgent", "high", "medium", "low"):
            raise InvalidArgument(f"priority {priority!r}: expected 'urgent', 'high', 'medium' or 'low'")
        if qid is not None:
            qid = _count("qid", qid, 1, self._limit("max_queues"))
        if depth + 1 > self._limit("max_queue_depth"):
            raise InvalidArgument(f"queue depth {depth} exceeds the device's maximum of {self._limit('max_queue_depth') - 1}")
        free = self._free_qids()
        if qid is None and not free:
            # Give the synchronous helpers' (or an idle reserved) queue up: they borrow an idle queue or are made
            # again when needed.
            given = self._give_up_idle()
            free = [given] if given is not None else []
        if qid is None:
            if not free:
                raise InvalidArgument(f"the device supports {self._limit('max_queues')} I/O queues, all in use")
            qid = free[0]
        elif qid == self._sync_qid and self._idle(qid):
            self._dev.delete_queue(qid)  # the synchronous helpers make theirs again elsewhere
            self._sync_qid = None
        elif qid not in free:
            holder = ("the synchronous helpers' queue" if qid == self._sync_qid else
                      "a Queue of this Device" if qid in self._queues else
                      next((f"the queue reserved for {o}" for o, q in self._reserved.items() if q == qid),
                           "a queue a host library created"))
            raise InvalidArgument(f"qid {qid} is in use by {holder}; free ids: {free or 'none'}")
        self._dev.create_queue(qid, depth + 1, priority)
        q = Queue(self, qid, depth)
        self._queues[qid] = q
        return q

    # --- state and measurement ------------------------------------------------------------------------------------
    @_locked
    def precondition(self, fraction: float = 1.0, pattern: str = "sequential", overwrite: float = 1.0, seed: int = 1) -> None:
        """Fills a fresh device to `fraction` of its capacity ("sequential", or "random": then `overwrite` x the
        filled sectors of random rewrites) so that measurements start in steady state."""
        self._dev.precondition(_real("fraction", fraction), pattern, _real("overwrite", overwrite),
                               _count("seed", seed, 0, 2**64 - 1))

    @_locked
    def inject_errors(self, lba: int, bits: int) -> None:
        """Injects `bits` raw bit errors into the worst codeword of the stored copy of `lba`."""
        self._dev.inject_errors(_count("lba", lba, 0), _count("bits", bits, 0, 2**32 - 1))

    @_locked
    def verify(self) -> None:
        """Checks the FTL's invariants; raises ImageError if the mapping and the OOB area disagree."""
        self._dev.verify()

    @_locked
    def advance(self, ns: int) -> None:
        """Lets `ns` of host think time pass."""
        self._dev.advance(_count("ns", ns, 0, 2**64 - 1))

    @_locked
    def report(self) -> Report:
        return Report.from_json(self._dev.report_json())

    @_locked
    def extension_report(self, name: str) -> dict[str, Any]:
        """One attached extension's report, as ``report().extensions[name]`` holds it, without building the whole
        device report (the core's counters, histograms and every other extension); {} when none of that name is
        attached."""
        if not isinstance(name, str):
            raise InvalidType(f"extension_report: name must be an extension's name (a str), got {name!r}")
        text = self._dev.extension_report_json(name)
        return json.loads(text) if text else {}

    @_locked
    def reset_stats(self) -> None:
        """Starts a new measurement window."""
        self._dev.reset_stats()

    @_locked
    def attach(self, extension: str, **params: Any) -> None:
        """Attaches a firmware extension (e.g. "issd", "recssd")."""
        try:
            encoded = json.dumps(params)
        except TypeError as e:
            raise InvalidType(f"attach({extension!r}): parameter values must be numbers, strings, booleans, lists or "
                              f"dicts of them: {e}") from None
        self._dev.attach(extension, encoded)

    @_locked
    def bench(
        self,
        rw: str = "randread",
        bs: int = 4096,
        iodepth: int = 32,
        numjobs: int = 1,
        ios: int = 100_000,
        span: Optional[tuple[int, int]] = None,
        seed: int = 1,
        data: bool = False,
        rwmixread: float = 0.5,
        progress: Optional[Callable[[int, int], None]] = None,
    ) -> dict[str, Any]:
        """Runs a fio-like workload; returns {'report': Report, 'ios', 'wall_s', 'sim_ios_per_s'}. Job j runs on
        I/O queue 1 + j, borrowed for the run and given back as it was (a queue with commands in flight is refused)."""
        if not isinstance(rw, str):
            raise InvalidArgument(f"rw must be a pattern name (read, write, randread, randwrite, randrw), got {rw!r}")
        if span is not None:
            if not isinstance(span, (tuple, list)) or len(span) != 2:
                raise InvalidArgument(f"span must be (first LBA, number of LBAs), got {span!r}")
            span = (_count("span's first LBA", span[0], 0, 2**64 - 1), _count("span's LBAs", span[1], 1, 2**64 - 1))
        r = json.loads(
            self._dev.bench(rw, _count("bs", bs, 1, 2**64 - 1), _count("iodepth", iodepth, 1, 2**32 - 1),
                            _count("numjobs", numjobs, 1, self._limit("max_queues")), _count("ios", ios, 1, 2**64 - 1),
                            span, _count("seed", seed, 0, 2**64 - 1), bool(data), _real("rwmixread", rwmixread), progress)
        )
        r["report"] = Report(r["report"])
        return r

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        state = "closed" if self._dev.closed else f"{self.capacity_bytes / 2**30:.1f} GiB"
        return f"Device({where!r}, preset={self.preset!r}, {state})"


class Queue:
    """An I/O queue pair: submit reads, writes and any other command, then reap their completions in virtual-time
    order."""

    def __init__(self, dev: Device, qid: int, depth: int):
        self.dev = dev
        self.qid = qid
        self.depth = depth
        #: cid -> (what the command was, its submission time, the array its data lands in).
        self._pending: dict[int, tuple[str, int, Optional[np.ndarray]]] = {}
        #: Completions seen while `command` waited for its own, handed out by the next reap or wait.
        self._early: list[tuple[int, int, int, int, int]] = []

    def _submit(self, what: str, submit: Callable[[int], None], out: Optional[np.ndarray] = None) -> int:
        """Submits under the next command id and returns it; a command taken though its submit raised (a fault: it
        completes with Internal Error) stays pending, so that wait() and reap() deliver it and in_flight stays true."""
        cid, submitted = self.dev._dev.next_cid(self.qid), self.dev.now_ns
        try:
            submit(cid)
        finally:
            if self.dev._dev.in_flight(self.qid, cid):
                self._pending[cid] = (what, submitted, out)
        return cid

    def _live(self) -> None:
        """Refuses a closed Queue: its id may belong to a new queue now, whose completions it must not take."""
        if self.dev._queues.get(self.qid) is not self:
            raise InvalidArgument(f"queue {self.qid} is closed; make a new one with Device.queue()")

    def _room(self) -> None:
        self._live()
        if len(self._pending) >= self.depth:
            raise InvalidArgument(f"queue {self.qid} is full: {len(self._pending)} commands in flight, its depth "
                                  f"{self.depth}; wait() or reap() first")

    @_locked
    def submit_read(self, lba: int, nblocks: int, out: Optional[np.ndarray] = None) -> int:
        """Submits a read into `out` (None: timing only); returns the command id. The data is in `out` once the
        command completes."""
        self._room()
        lba = _count("lba", lba, 0)
        nblocks = _count("nblocks", nblocks, 1, MAX_NLB)
        view = None if out is None else _out_view(out, nblocks * self.dev.lba_bytes)
        return self._submit(f"read LBA {lba}", lambda cid: self.dev._dev.submit_read(self.qid, cid, lba, nblocks, view), out)

    @_locked
    def submit_write(self, lba: int, data: Any = None, nblocks: Optional[int] = None, fua: bool = False) -> int:
        """Submits a write of `data` (None: timing only, `nblocks` blocks); returns the command id."""
        self._room()
        fua = _flag("fua", fua)
        lba = _count("lba", lba, 0)
        if data is None:
            if nblocks is None:
                raise InvalidArgument("give data or nblocks")
            buf = None
        else:
            buf = _as_u8(data)
            lb = self.dev.lba_bytes
            if buf.size == 0 or buf.size % lb:
                raise InvalidArgument(f"data must be a positive multiple of {lb} bytes, got {buf.size}")
            if nblocks is not None and _count("nblocks", nblocks, 1) != buf.size // lb:
                raise InvalidArgument(f"nblocks {nblocks} does not match data of {buf.size // lb} blocks")
            nblocks = buf.size // lb
        nblocks = _count("nblocks", nblocks, 1, MAX_NLB)
        return self._submit(f"write LBA {lba}", lambda cid: self.dev._dev.submit_write(self.qid, cid, lba, nblocks, buf, fua))

    @_locked
    def submit(self, command: Any, data: Any = None, *, out: Optional[np.ndarray] = None, what: str = "",
               **dwords: int) -> int:
        """Submits any command without waiting (as :meth:`Device.command` describes its arguments); returns the
        command id. Its completion comes from :meth:`wait` or :meth:`reap`, with ``data`` = ``out``."""
        self._room()
        return self._submit_entry(command, data, out, what, dwords)

    def _submit_entry(self, command: Any, data: Any, out: Optional[np.ndarray], what: str, dwords: dict[str, int]) -> int:
        entry = _entry(command, dwords)
        buf, to_device = _payload(data, out)

        def submit(cid: int) -> None:
            entry[2:4] = cid.to_bytes(2, "little")
            self.dev._dev.submit_raw(self.qid, bytes(entry), buf, to_device)

        return self._submit(what or f"command {entry[0]:#04x}", submit, out)

    @_locked
    def command(self, command: Any, data: Any = None, *, out: Optional[np.ndarray] = None, what: str = "",
                check: bool = True, **dwords: int) -> "Completion":
        """Submits one command and waits for its completion (see :meth:`Device.command`); completions of other
        commands seen meanwhile are kept for the next :meth:`reap` or :meth:`wait`."""
        self._room()
        return self._command(command, data, out, what, check, dwords)

    def _command(self, command: Any, data: Any, out: Optional[np.ndarray], what: str, check: bool,
                 dwords: dict[str, int]) -> "Completion":
        cid = self._submit_entry(command, data, out, what, dwords)
        while True:
            c = self.dev._dev.wait(self.qid)
            if c is None:
                raise InvalidArgument(f"{self._pending.pop(cid)[0]}: completion lost")
            if c[0] == cid:
                return self._done(c, check)
            self._early.append(c)

    def _done(self, c: tuple[int, int, int, int, int], raise_errors: bool) -> "Completion":
        cid, sct, sc, dw0, t = c
        what, submitted, out = self._pending.pop(cid, ("command", t, None))
        reason = None if (sct, sc) == (0, 0) else self.dev.error_reason(self.qid, cid)
        comp = Completion(cid, sct, sc, dw0, t, latency_ns=t - submitted, reason=reason, data=out, what=what)
        return comp.check() if raise_errors else comp

    @_locked
    def reap(self, raise_errors: bool = True) -> list["Completion"]:
        """Completions that happened by now (does not advance the clock)."""
        self._live()
        early, self._early = self._early, []
        return [self._done(c, raise_errors) for c in early + list(self.dev._dev.reap(self.qid))]

    @_locked
    def wait(self, raise_errors: bool = True) -> Optional["Completion"]:
        """The next completion, advancing the clock to it (None if nothing is in flight)."""
        self._live()
        c = self._early.pop(0) if self._early else self.dev._dev.wait(self.qid)
        return None if c is None else self._done(c, raise_errors)

    @_locked
    def wait_all(self, raise_errors: bool = True) -> list["Completion"]:
        self._live()
        out = []
        while self._pending:
            c = self.wait(raise_errors)
            if c is None:
                break
            out.append(c)
        return out

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @_locked
    def close(self) -> None:
        """Deletes the queue pair (its commands must have completed: `wait_all` first); its id is free again."""
        if self._pending:
            raise InvalidArgument(f"queue {self.qid} has {len(self._pending)} commands in flight; wait_all() first")
        if self.dev._queues.get(self.qid) is self:
            self.dev._dev.delete_queue(self.qid)
            del self.dev._queues[self.qid]


class Completion:
    """A command's completion: its id, NVMe status (``sct``, ``sc``; ``status`` its name, ``ok``), DW0 (the
    command-specific result), the virtual time the host saw it (``time_ns``) and its latency from submission,
    the device's ``reason`` for a failure (None on success or where it gave none), ``data`` (the array the
    device's bytes landed in, or None) and ``what`` the command was."""

    __slots__ = ("cid", "sct", "sc", "dw0", "time_ns", "latency_ns", "reason", "data", "what")

    def __init__(self, cid: int, sct: int, sc: int, dw0: int, time_ns: int, *, latency_ns: int = 0,
                 reason: Optional[str] = None, data: Optional[np.ndarray] = None, what: str = ""):
        self.cid, self.sct, self.sc, self.dw0, self.time_ns = cid, sct, sc, dw0, time_ns
        self.latency_ns, self.reason, self.data, self.what = latency_ns, reason, data, what

    @property
    def ok(self) -> bool:
        return self.sct == 0 and self.sc == 0

    @property
    def status(self) -> str:
        return status_name(self.sct, self.sc)

    def check(self, error: type[NvmeError] = NvmeError) -> "Completion":
        """This completion if it succeeded; else raises ``error`` (an :class:`NvmeError` type) with the status,
        reason, command and DW0 as fields."""
        if not self.ok:
            raise error(self.sct, self.sc, self.what, self.reason, self.dw0)
        return self

    def __repr__(self) -> str:
        why = f", reason={self.reason!r}" if self.reason else ""
        return f"Completion(cid={self.cid}, {self.status}{why}, dw0={self.dw0}, t={self.time_ns} ns)"


def presets() -> list[str]:
    return list(_native.presets())


def preset_params(name: str, overrides: Optional[dict[str, Any]] = None) -> list[tuple[str, str, str, str]]:
    return _native.preset_params(name, _override_items(overrides or {}))


def check_overrides(name: str, overrides: dict[str, Any]) -> None:
    """Raises ConfigError for an unknown preset, an unknown parameter or a value that does not parse in the
    parameter's unit; whether the values fit together is checked when a device is made."""
    _native.preset_params(name, _override_items(overrides), False)


def preset_description(name: str) -> str:
    return _native.preset_description(name)
