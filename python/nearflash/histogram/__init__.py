"""An in-storage byte histogram: the worked example of docs/architecture.md's "Add a system in an hour". The
firmware (crate ``nearflash-histogram``, extension ``histogram``) counts the byte values of logical blocks inside the
device and returns 256 counts, so 1 KiB crosses the link instead of the blocks themselves."""

from __future__ import annotations

from typing import Any

import numpy as np

from nearflash import _native
from nearflash.device import Device, int_argument
from nearflash.errors import InvalidArgument

def parameters() -> list[tuple[str, str, str, str]]:
    """(name, default, unit, source) of every firmware parameter."""
    return _native.histogram.parameters()


class Histogram:
    """The histogram firmware on ``device`` (attached here, with ``params`` overriding the preset's
    ``[ext.histogram]``). ``last_latency_ns`` is the device time of the last call."""

    def __init__(self, device: Device, **params: Any) -> None:
        if not isinstance(device, Device):
            raise InvalidArgument(f"device must be a nearflash.Device, got {type(device).__name__}")
        device.attach("histogram", **params)
        self.device = device
        # The opcode as the firmware resolved it (defaults, the preset's [ext.histogram], then `params`).
        self.opcode = int(device.report().extensions["histogram"]["opcode"])
        self.last_latency_ns = 0

    def counts(self, lba: int, nblocks: int) -> np.ndarray:
        """How often each byte value 0-255 occurs in ``nblocks`` blocks from ``lba``, counted in the device."""
        lba = int_argument("lba", lba, 0, 2**64 - 1)
        nblocks = int_argument("nblocks", nblocks, 1, 2**32 - 1)
        out = np.zeros(256, dtype="<u4")
        c = self.device.command(self.opcode, out=out, what=f"histogram of {nblocks} blocks at LBA {lba}",
                                cdw10=lba & 0xFFFFFFFF, cdw11=lba >> 32, cdw12=nblocks)
        self.last_latency_ns = c.latency_ns
        return out.astype(np.int64)


__all__ = ["Histogram", "parameters"]
