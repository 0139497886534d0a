"""Where an array's data lives: striping (RAID-0 with a chunk size), sharding by key range, replication."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from nearflash.device import _count
from nearflash.errors import InvalidArgument


@dataclass(frozen=True)
class Extent:
    """`nbytes` of the logical space from `logical` live on one device at byte `offset`."""

    logical: int
    offset: int
    nbytes: int


class Striped:
    """RAID-0: logical chunk c of `chunk_bytes` lives on device c mod n at device chunk c div n."""

    def __init__(self, devices: int, chunk_bytes: int):
        self.devices = _count("devices", devices, 1)
        self.chunk_bytes = _count("chunk_bytes", chunk_bytes, 1)

    def locate(self, logical: int) -> tuple[int, int]:
        """(device, byte offset on it) of logical byte `logical`."""
        chunk, within = divmod(_count("logical", logical, 0), self.chunk_bytes)
        device, row = chunk % self.devices, chunk // self.devices
        return device, row * self.chunk_bytes + within

    def extents(self, device: int, total_bytes: int) -> list[Extent]:
        """The extents of a `total_bytes` logical space that live on `device`, in logical (= device) order."""
        device = _count("device", device, 0, self.devices - 1)
        total = _count("total_bytes", total_bytes, 0)
        out = []
        for chunk in range(device, -(-total // self.chunk_bytes), self.devices):
            start = chunk * self.chunk_bytes
            out.append(Extent(start, (chunk // self.devices) * self.chunk_bytes, min(self.chunk_bytes, total - start)))
        return out


class KeyRange:
    """Sharding by key range: device i holds keys in [bounds[i-1], bounds[i]) (the first from -inf, the last to +inf);
    `bounds` are n - 1 strictly increasing split keys."""

    def __init__(self, bounds: Sequence[Any]):
        self.bounds = list(bounds)
        if any(not (a < b) for a, b in zip(self.bounds, self.bounds[1:])):
            raise InvalidArgument(f"key-range bounds must be strictly increasing, got {self.bounds!r}")
        self.devices = len(self.bounds) + 1

    @classmethod
    def even(cls, devices: int, low: int, high: int) -> "KeyRange":
        """n ranges of (nearly) equal width over integer keys [low, high)."""
        n = _count("devices", devices, 1)
        if not (isinstance(low, int) and isinstance(high, int) and high - low >= n):
            raise InvalidArgument(f"need integer keys low < high with at least {n} keys, got [{low!r}, {high!r})")
        return cls([low + (high - low) * i // n for i in range(1, n)])

    def device_of(self, key: Any) -> int:
        return bisect.bisect_right(self.bounds, key)

    def split(self, keys: np.ndarray) -> list[np.ndarray]:
        """The positions in `keys` that each device holds."""
        where = np.searchsorted(np.asarray(self.bounds), np.asarray(keys), side="right")
        return [np.flatnonzero(where == d) for d in range(self.devices)]


class Replicated:
    """`copies` copies of every chunk of `chunk_bytes` (chained declustering): chunk c lives on devices c, c+1, ...,
    c+copies-1 (mod n), so that a busy device's reads spread over its neighbours. Copy j of chunk c sits on its
    device at slot (c div n) x copies + j. Writes go to every copy (:meth:`copies_of`); a read goes to the
    least-loaded copy (:meth:`route`): the one with the fewest bytes routed to it so far, the lowest device index
    among equals, so the same reads in the same order always go the same way."""

    def __init__(self, devices: int, copies: int, chunk_bytes: int):
        self.devices = _count("devices", devices, 1)
        self.copies = _count("copies", copies, 1, self.devices)
        self.chunk_bytes = _count("chunk_bytes", chunk_bytes, 1)
        #: Bytes routed to each device by :meth:`route` so far.
        self.load = [0] * self.devices

    def copies_of(self, logical: int) -> list[tuple[int, int]]:
        """(device, byte offset on it) of every copy of logical byte `logical`: where a write goes."""
        chunk, within = divmod(_count("logical", logical, 0), self.chunk_bytes)
        row, first = divmod(chunk, self.devices)
        return [((first + j) % self.devices, (row * self.copies + j) * self.chunk_bytes + within)
                for j in range(self.copies)]

    def route(self, logical: int, nbytes: int) -> tuple[int, int]:
        """(device, byte offset) of the copy a read of `nbytes` from logical byte `logical` goes to (it must stay
        within one chunk), counted in :attr:`load`."""
        nbytes = _count("nbytes", nbytes, 1)
        if logical // self.chunk_bytes != (logical + nbytes - 1) // self.chunk_bytes:
            raise InvalidArgument(f"a read of {nbytes} B from {logical} crosses a {self.chunk_bytes} B chunk boundary")
        device, offset = min(self.copies_of(logical), key=lambda c: (self.load[c[0]], c[0]))
        self.load[device] += nbytes
        return device, offset

    def extents(self, device: int, total_bytes: int) -> list[Extent]:
        """The extents of a `total_bytes` logical space that `device` holds a copy of, in device order. Only the
        device's own chunks are visited: its slot (row x copies + j) holds copy j of chunk row x n + (device - j)
        mod n, so slots in order are rows in order, then copies."""
        device = _count("device", device, 0, self.devices - 1)
        total = _count("total_bytes", total_bytes, 0)
        chunks, n = -(-total // self.chunk_bytes), self.devices
        out = []
        for row in range(-(-chunks // n)):
            for j in range(self.copies):
                chunk = row * n + (device - j) % n
                if chunk < chunks:
                    start = chunk * self.chunk_bytes
                    out.append(Extent(start, (row * self.copies + j) * self.chunk_bytes,
                                      min(self.chunk_bytes, total - start)))
        return out
