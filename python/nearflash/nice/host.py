"""NICE's host library (the paper's Table II) over a device with the `nice` firmware attached: `open(path, flag)`
looks the file up in the ext4 file system on the device's blocks and checks its mode bits and owner against the
caller's uid, keeping the head-LBA table; `nice_write(path, op)` and `nice_read(path)` are an ordinary Write and Read
at the file's hyper-address (first LBA + C). Nothing else talks to the device.

The lookup resolves the path with the crate's ext4 reader, reading only the blocks the walk needs through the
device's ordinary Read (as a kernel's open() with a cold page cache); the in-storage work is all the firmware's.

A handle is the head LBA `open` saw. If the file is deleted and another takes its place there (the file system
reuses the LBA, and perhaps the inode number), the firmware runs the op on that other file: every result says which
file it was computed on (inode, size, the inode's generation), and `nice_read` raises `StaleHandleError` when that
is not the file `open` saw."""

from __future__ import annotations

import errno
import os
import struct
from typing import Any, NamedTuple

import numpy as np

from nearflash._native import InvalidArgument
from nearflash.device import _count
from nearflash.errors import NvmeError

from . import lookup_via

OPS = {"crc32": 1, "sum": 2, "knn": 3, "cnn": 6}
#: NICE-K over a batch of queries in one pass (what 'knn' binds when `query` is 2-D).
OP_KNN_BATCH = 7
#: NICE-C networks (op 'cnn'): id and CHW input shape.
NETWORKS = {"lenet5": (0, (1, 28, 28)), "mobilenet_v2": (1, (3, 224, 224))}
#: Bytes of a NICE_Read result before its tail: op u32, size u64, inode u32, value u64, generation u32, 4 reserved.
RESULT_HEADER = 32
RESULT_FIELDS = struct.Struct("<IQIQI4x")


class StaleHandleError(OSError):
    """A result was computed on another file than the one `open` saw at the handle's head LBA (the file was removed
    or replaced since): errno ESTALE, as NFS reports a handle whose file is gone."""

    def __init__(self, path: str, opened: "Opened", got: "Opened"):
        super().__init__(errno.ESTALE, f"{path}: stale handle: open saw inode {opened.inode} (generation "
                                       f"{opened.generation}, {opened.size} bytes) at LBA {opened.head}, the device "
                                       f"found inode {got.inode} (generation {got.generation}, {got.size} bytes); "
                                       f"open the file again")


class Opened(NamedTuple):
    """What `open` saw of a file (and what a result says it was computed on)."""

    head: int
    inode: int
    size: int
    generation: int


class NiceHost:
    def __init__(self, device: Any, uid: int = 0):
        if not isinstance(uid, int) or uid < 0:
            raise InvalidArgument(f"uid must be a non-negative int, got {uid!r}")
        self.dev = device
        self.uid = uid
        self.capacity = device.lbas // 2  # the firmware advertises twice the capacity
        self.heads: dict[str, int] = {}
        #: What open saw of each file, to check every result against.
        self.opened: dict[str, Opened] = {}
        #: The sectors the last `open` read, in order.
        self.last_open_reads: list[int] = []
        #: Per file with a batched NICE-K bound: (sectors its NICE_Read needs, k, bytes per vector).
        self._batch: dict[str, tuple[int, int, int]] = {}

    def _read_sector(self, lba: int) -> bytes:
        """One sector through the device's ordinary Read (the file system's blocks below C only)."""
        if not 0 <= lba < self.capacity:
            raise InvalidArgument(f"the file system refers to LBA {lba}, outside the device's {self.capacity} blocks")
        return bytes(self.dev.read(lba, 1))

    def open(self, path: str, flag: int = os.O_RDONLY) -> int:
        """Looks `path` up, checks the caller may read it (O_RDONLY) or read and write it (O_RDWR); returns and keeps
        the file's head LBA. FileNotFoundError for an unknown path, PermissionError when the mode bits refuse,
        ImageError when the file system's metadata is damaged."""
        if not isinstance(path, str) or not path.startswith("/"):
            raise InvalidArgument(f"path must be an absolute path string, got {path!r}")
        if flag not in (os.O_RDONLY, os.O_RDWR):
            raise InvalidArgument(f"flag must be os.O_RDONLY or os.O_RDWR, got {flag!r}")
        # The walk reads only the blocks it needs (superblock, descriptors, each level's inode and directory
        # blocks, the file's inode), one Read each, as a kernel's open() does with a cold page cache.
        meta = lookup_via(self._read_sector, path, 0, self.dev.lba_bytes)
        self.last_open_reads = list(meta["reads"])
        if meta["is_dir"] or not meta["lbas"]:
            raise InvalidArgument(f"{path} is a directory or an empty file: nothing to compute on")
        need = 0o4 | (0o2 if flag == os.O_RDWR else 0)
        bits = (meta["mode"] >> 6) & 7 if meta["uid"] == self.uid else meta["mode"] & 7
        if self.uid != 0 and bits & need != need:
            raise PermissionError(f"{path}: mode {meta['mode'] & 0o777:o}, owner uid {meta['uid']}: uid {self.uid} may not open it")
        self.heads[path] = meta["lbas"][0]
        self.opened[path] = Opened(int(meta["lbas"][0]), int(meta["inode"]), int(meta["size"]), int(meta["generation"]))
        return int(meta["lbas"][0])

    def _head(self, path: str) -> int:
        if path not in self.heads:
            raise InvalidArgument(f"{path!r} is not open: call open(path, flag) first")
        return self.heads[path]

    def _io(self, path: str, what: str, call: Any) -> Any:
        """Runs a Read/Write at the file's hyper-address; a refusal names the file and what the status means here."""
        lba = self.capacity + self._head(path)
        try:
            return call(lba)
        except NvmeError as e:
            why = {0x02: "the device knows no whole file starting at its head LBA (changed or removed since open, or its "
                         "metadata is damaged), or the op does not fit the file",
                   0x0C: "no NICE_Write bound an op to it"}.get(e.sc if e.sct == 0 else -1, e.status)
            # The firmware's own reason stays a field (`reason`), shown after this library's reading of the status.
            raise NvmeError(e.sct, e.sc, f"{what} {path} at hyper-address {lba}: {why}", e.reason, e.dw0) from e

    def nice_write(self, path: str, op: str, query: Any = None, k: int = 0, bits: int = 16,
                   weights: str | None = None, net: str = "lenet5") -> int:
        """Binds in-storage op `op` to the open file: 'crc32', 'sum', 'knn' (NICE-K: the file is an int16/int32
        embedding matrix of len(query) columns; `k` nearest by squared L2; a 2-D `query`, one query per row, is a
        batch answered in one pass over the file, op 7), or 'cnn' (NICE-C: the file holds u8
        images of network `net`'s CHW shape, `weights` is the open file of its f32 parameters). Returns the latency
        in ns."""
        if op not in OPS:
            raise InvalidArgument(f"op must be one of {sorted(OPS)}, got {op!r}")
        if op == "cnn":
            if net not in NETWORKS:
                raise InvalidArgument(f"net must be one of {sorted(NETWORKS)}, got {net!r}")
            if not isinstance(weights, str):
                raise InvalidArgument(f"weights must be the path of an open weights file, got {weights!r}")
            block = np.zeros(self.dev.lba_bytes, dtype=np.uint8)
            block[:16] = np.frombuffer(bytes([OPS[op], NETWORKS[net][0]]) + bytes(6)
                                       + struct.pack("<Q", self._head(weights)), dtype=np.uint8)
            ns = self._io(path, "NICE_Write", lambda lba: self.dev.write(lba, block))
            self._batch.pop(path, None)
            return ns
        if op != "knn":
            block = np.zeros(self.dev.lba_bytes, dtype=np.uint8)
            block[0] = OPS[op]
            ns = self._io(path, "NICE_Write", lambda lba: self.dev.write(lba, block))
            self._batch.pop(path, None)  # only once the device took the new op
            return ns
        q = np.asarray(query)
        batch = q.ndim == 2
        if q.ndim not in (1, 2) or not np.issubdtype(q.dtype, np.integer) or q.size == 0:
            raise InvalidArgument(f"query must be a non-empty 1-D (one query) or 2-D (a batch, one per row) integer "
                                  f"array, got {q.shape} of {q.dtype}")
        dim, n = q.shape[-1], (q.shape[0] if batch else 1)
        if not 1 <= dim <= 1024 or n > 0xFFFF or (not batch and dim > (self.dev.lba_bytes - 8) // 4):
            raise InvalidArgument(f"query: {dim} values per query and {n} queries; 1..1024 values (one sector's worth "
                                  f"for a single query) and at most 65535 queries")
        k_max = 4096 if batch else (self.dev.lba_bytes - RESULT_HEADER) // 12
        k = _count("k", k, 1, k_max)  # a bool is refused, a numpy integer taken
        if bits not in (16, 32):
            raise InvalidArgument(f"bits must be 16 or 32, got {bits!r}")
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        if np.any(q < lo) or np.any(q > hi):
            raise InvalidArgument(f"query values must fit the {bits}-bit embedding ({lo}..{hi})")
        head = bytes([OP_KNN_BATCH if batch else OPS[op], bits]) + struct.pack("<HHH", dim, k, n if batch else 0)
        raw = head + q.astype("<i4").tobytes()
        sectors = -(-len(raw) // self.dev.lba_bytes)
        block = np.zeros(sectors * self.dev.lba_bytes, dtype=np.uint8)
        block[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        ns = self._io(path, "NICE_Write", lambda lba: self.dev.write(lba, block))
        if batch:
            self._batch[path] = (-(-(RESULT_HEADER + 12 * n * k) // self.dev.lba_bytes), k, dim * bits // 8)
        else:
            self._batch.pop(path, None)
        return ns

    def nice_read(self, path: str) -> dict[str, Any]:
        """Runs the bound op in storage; returns {op, size, inode, generation, value} and, for 'knn', `neighbours`:
        a uint64 array of (distance, index) rows nearest first, a distance of 2^64 or more saturated at 2^64 - 1 (a
        batch: one such array per query, shape (queries, min(k, N), 2)); for 'cnn', `classes`: one per image.
        StaleHandleError when the result was computed on another file than the one `open` saw."""
        sectors, k, row = self._batch.get(path, (1, 0, 0))
        out = bytes(self._io(path, "NICE_Read", lambda lba: self.dev.read(lba, sectors)))
        op, size, inode, value, generation = RESULT_FIELDS.unpack_from(out, 0)
        opened = self.opened[path]
        got = Opened(opened.head, inode, size, generation)
        if got != opened:
            raise StaleHandleError(path, opened, got)
        r: dict[str, Any] = {"op": op, "size": size, "inode": inode, "generation": generation, "value": value}
        if op in (OPS["knn"], OP_KNN_BATCH):
            per = min(k, size // row) if op == OP_KNN_BATCH else value
            count = per * value if op == OP_KNN_BATCH else value
            rows = np.frombuffer(out, dtype=np.dtype([("dist", "<u8"), ("index", "<u4")]), count=count,
                                 offset=RESULT_HEADER)
            # uint64: a squared int32 distance may exceed 2^63 (the device saturates it at 2^64 - 1).
            pairs = np.stack([rows["dist"], rows["index"].astype(np.uint64)], axis=1)
            r["neighbours"] = pairs.reshape(value, per, 2) if op == OP_KNN_BATCH else pairs
        if op == OPS["cnn"]:
            r["classes"] = np.frombuffer(out, dtype="<u2", count=value, offset=RESULT_HEADER).astype(np.int64)
        return r
