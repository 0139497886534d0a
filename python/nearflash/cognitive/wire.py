"""The DLG library's NVMe vendor commands exactly as the paper's Table 1 (opcode, DW10 address, DW11 size, DW12)."""

from __future__ import annotations

from nearflash import _native

COMMANDS = {
    "DLG_hashing": 0xC0,
    "DLG_index": 0xC1,
    "DLG_analysis": 0xC2,
    "DLG_config": 0xC3,
    "SSD_read": 0xC4,
    "SSD_write": 0xC5,
}


def encode_command(name: str, address: int, size: int, dw12: int = 0, cid: int = 0, nsid: int = 1) -> bytes:
    """A 64-byte submission entry; raises InvalidArgument for a field the device would refuse."""
    return _native.cognitive.encode_command(name, address, size, dw12, cid, nsid)


def decode_command(entry: bytes) -> tuple[str, int, int, int, int]:
    """(name, opcode, dw10, dw11, dw12) of a 64-byte submission entry."""
    return _native.cognitive.decode_command(entry)
