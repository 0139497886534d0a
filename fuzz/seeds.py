#!/usr/bin/env python3
"""Writes seed corpora of valid inputs for the fuzz targets, so that fuzzing starts from commands that complete
successfully and mutates past the decoders. Usage: python3 fuzz/seeds.py fuzz/corpus (idempotent)."""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

LBA = 4096
LBAS = 2000  # below the fuzzed devices' namespaces


def sqe(opcode: int, nsid: int = 1, cdw10: int = 0, cdw11: int = 0, cdw12: int = 0, cid: int = 1) -> bytes:
    b = bytearray(64)
    b[0] = opcode
    struct.pack_into("<H", b, 2, cid)
    struct.pack_into("<I", b, 4, nsid)
    struct.pack_into("<III", b, 40, cdw10, cdw11, cdw12)
    return bytes(b)


def rw(opcode: int, slba: int, nlb: int, fua: bool = False) -> bytes:
    return sqe(opcode, cdw10=slba & 0xFFFFFFFF, cdw11=slba >> 32, cdw12=(nlb - 1) | (fua << 30))


def dsm_ranges(ranges: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack("<IIQ", 0, n, s) for s, n in ranges)


def sector_data(nlb: int, rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(16)) * (nlb * LBA // 16)


def nvme_commands(rng: random.Random) -> dict[str, bytes]:
    """nvme_command: mode byte (bit 0: I/O queue; bits 1-2: 0 none, 1 to device, 2 from device) + SQE + payload."""
    seeds = {}
    for i, (slba, nlb) in enumerate([(0, 1), (8, 8), (100, 16), (LBAS - 4, 4)]):
        seeds[f"write{i}"] = bytes([1 | 1 << 1]) + rw(0x01, slba, nlb) + sector_data(nlb, rng)
        seeds[f"write_fua{i}"] = bytes([1 | 1 << 1]) + rw(0x01, slba, nlb, True) + sector_data(nlb, rng)
        seeds[f"read{i}"] = bytes([1 | 2 << 1]) + rw(0x02, slba, nlb) + bytes(nlb * LBA)
    seeds["flush"] = bytes([1]) + sqe(0x00)
    seeds["trim"] = bytes([1 | 1 << 1]) + sqe(0x09, cdw10=1, cdw11=1 << 2) + dsm_ranges([(0, 8), (64, 32)])
    seeds["write_zeroes"] = bytes([1]) + sqe(0x08, cdw10=16, cdw12=7)
    seeds["identify_ctrl"] = bytes([2 << 1]) + sqe(0x06, cdw10=1) + bytes(4096)
    seeds["identify_ns"] = bytes([2 << 1]) + sqe(0x06, cdw10=0) + bytes(4096)
    seeds["smart_log"] = bytes([2 << 1]) + sqe(0x02, nsid=0xFFFFFFFF, cdw10=0x02 | 127 << 16) + bytes(512)
    return seeds


def nvme_decode(rng: random.Random) -> dict[str, bytes]:
    """nvme_decode: an SQE, then DSM range descriptors."""
    seeds = {name: cmd[1:] for name, cmd in nvme_commands(rng).items()}
    seeds["dsm_many"] = sqe(0x09, cdw10=3, cdw11=1 << 2) + dsm_ranges([(i * 100, 10) for i in range(4)])
    return seeds


def device_model(rng: random.Random) -> dict[str, bytes]:
    """device_model: 4-byte operations (op % 16: 0-5 write, 6-9 read, 10-11 trim, 12-13 flush, 14 reopen,
    15 crash; then two LBA bytes and a length byte)."""

    def op(kind: int, lba: int = 0, n: int = 0) -> bytes:
        return bytes([kind, lba >> 8 & 0xFF, lba & 0xFF, n])

    seeds = {
        "write_flush_crash_read": op(0, 1, 3) + op(12) + op(0, 1, 3) + op(15) + op(6, 1, 3),
        "trim_crash": op(0, 5, 15) + op(12) + op(10, 5, 7) + op(15) + op(6, 5, 15),
        "reopen": op(0, 9, 1) + op(14) + op(6, 9, 1) + op(10, 9, 1) + op(14) + op(6, 9, 1),
    }
    # Enough writes to start garbage collection, with flushes and a crash at the end.
    gc = b"".join(op(0, rng.randrange(0, 1 << 16), 15) + (op(12) if i % 10 == 9 else b"") for i in range(300))
    seeds["gc_then_crash"] = gc + op(15) + op(6, 0, 15)
    return seeds


def cp_sqe(opcode: int, nsid: int, cdw2: int = 0, cdw3: int = 0, mptr: int = 0, cdw10: int = 0, cdw11: int = 0,
           cdw12: int = 0) -> bytes:
    b = bytearray(sqe(opcode, nsid, cdw10, cdw11, cdw12))
    struct.pack_into("<IIQ", b, 8, cdw2, cdw3, mptr)
    return bytes(b)


def programs_commands(rng: random.Random) -> dict[str, bytes]:
    """programs_commands: mode byte (bit 0 set: keep the SQE's opcode; bit 7: data from the device) + SQE + payload;
    the fuzzed device has programs in slots 1-4 (1-3 active), the device-defined sls_f32 active at 5, 1 MiB of SLM
    and an SLS layout at byte 4096 (table 4 x 4 f32, one index, one length, then a 16-byte output)."""
    def slm(sb: int, length: int) -> bytes:
        return struct.pack("<IIQ", 2, length, sb) + bytes(16)

    slm_range = slm(0, 64)
    sls = slm(4096, 64) + slm(4160, 4) + slm(4164, 4) + slm(4168, 16)
    seeds = {f"execute_slot{p}": bytes([1]) + cp_sqe(0x90, 3, cdw2=p, cdw3=1, mptr=32, cdw10=7) + slm_range
             for p in (2, 3, 4)}
    seeds["sls_f32"] = bytes([1]) + cp_sqe(0x90, 3, cdw2=5, cdw3=4, mptr=len(sls), cdw10=4) + sls
    seeds["activate_slot4"] = bytes([1]) + cp_sqe(0x88, 3, cdw10=4 | 1 << 16)
    return seeds | {
        "memory_write": bytes([1]) + cp_sqe(0x93, 2, cdw12=16) + sector_data(1, rng)[:16],
        "memory_read": bytes([0x81]) + cp_sqe(0x92, 2, cdw12=16),
        "range_set": bytes([1]) + cp_sqe(0x89, 3, cdw11=1) + slm_range,
        "execute_inline": bytes([1]) + cp_sqe(0x90, 3, cdw2=1, cdw3=1, mptr=40) + slm_range + b"params!!",
        "execute_set": bytes([1]) + cp_sqe(0x90, 3, cdw2=1 | 1 << 16),
        "activate": bytes([1]) + cp_sqe(0x88, 3, cdw10=1 | 1 << 16),
        "memory_copy": bytes([1]) + cp_sqe(0x91, 2) + struct.pack("<IIQI", 1, 0, 0, 7) + bytes(12),
        "identify": bytes([0x81]) + cp_sqe(0x94, 0),
    }


def programs_load(rng: random.Random) -> dict[str, bytes]:
    """programs_load: an even first byte then raw bytes as an object (clang's examples where clang is installed);
    an odd one (2 n + 1: n instructions of text) then a relocation (offset / 8, symbol, type), text and rodata."""
    lddw = bytes([0x18, 0, 0, 0, 0, 0, 0, 0]) + bytes(8)
    text = lddw + bytes([0x61, 0, 0, 0, 0, 0, 0, 0]) + bytes([0x95, 0, 0, 0, 0, 0, 0, 0])
    seeds = {"rodata_load": bytes([4 << 1 | 1, 0, 1, 1]) + text + b"abcdefgh"}
    import shutil
    import subprocess
    import tempfile

    examples = Path(__file__).resolve().parents[1] / "examples" / "programs"
    if shutil.which("clang"):
        with tempfile.TemporaryDirectory() as tmp:
            for src in sorted(examples.glob("*.c")):
                obj = Path(tmp) / (src.stem + ".o")
                r = subprocess.run(["clang", "-O2", "-target", "bpf", "-c", str(src), "-o", str(obj)], capture_output=True)
                if r.returncode == 0:
                    seeds[f"clang_{src.stem}"] = bytes([0]) + obj.read_bytes()
    return seeds


def extension_commands(rng: random.Random) -> dict[str, bytes]:
    """extension_commands: mode byte (bits 0-1: 0 vendor opcode, 1 NDP-flagged Read/Write, else as given; bit 2:
    from device) + SQE + payload. Seeds register RecSSD tables (its vendor opcode 0xE1 with a 64-byte descriptor:
    magic, table id, placement, start LBA, rows, dim, attribute bytes, source, seed), so that later NDP commands
    find a table, plus the plain commands of nvme_command."""

    def table(table_id: int, start: int, rows: int, dim: int, generated: bool) -> bytes:
        d = bytearray(64)
        d[:8] = b"RSSDTBL1"
        struct.pack_into("<IIQQIII", d, 8, table_id, 0, start, rows, dim, 4, int(generated))
        struct.pack_into("<Q", d, 48, 7 if generated else 0)
        return bytes(d) + bytes(LBA - 64)

    seeds = {
        "recssd_register_generated": bytes([0]) + sqe(0xE1) + table(1, 0, 1000, 32, True),
        "recssd_register_stored": bytes([0]) + sqe(0xE1) + table(2, 1000, 500, 32, False),
    }
    for name, cmd in nvme_commands(rng).items():
        if cmd[0] & 1:  # I/O queue commands, passed through as given (mode 2/3 keep the opcode)
            seeds[f"plain_{name}"] = bytes([2 | (4 if cmd[0] >> 1 & 3 == 2 else 0)]) + cmd[1:]
    return seeds


TRACES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "traces"
#: The recorded fixtures by the fuzzers' format number (mqsim, msr, fio, blkparse, nbdkit-log).
TRACE_FORMATS = {"sqlite.trace": 0, "fio.csv": 1, "qemu-img.iolog": 2, "mke2fs.blktrace.txt": 3,
                 "qemu-img.nbdkit.log": 4}


def trace_parse(rng: random.Random) -> dict[str, bytes]:
    """trace_parse: a mode byte (format = mode % 6, 5 detects; option bits) + the first 4 KiB of each fixture."""
    seeds = {}
    for name, fmt in TRACE_FORMATS.items():
        head = (TRACES / name).read_bytes()[:4096]
        seeds[name] = bytes([fmt]) + head
        seeds[f"{name}-detected"] = bytes([5 | 0x04]) + head
    return seeds


def trace_convert(rng: random.Random) -> dict[str, bytes]:
    """trace_convert: a format byte (mode % 5) + trace text."""
    return {name: bytes([fmt]) + (TRACES / name).read_bytes()[:2048] for name, fmt in TRACE_FORMATS.items()}


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus")
    rng = random.Random(1)
    targets = (("nvme_command", nvme_commands), ("nvme_decode", nvme_decode), ("device_model", device_model),
               ("extension_commands", extension_commands), ("programs_commands", programs_commands),
               ("programs_load", programs_load), ("trace_parse", trace_parse), ("trace_convert", trace_convert))
    for target, make in targets:
        d = root / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in make(rng).items():
            (d / f"seed-{name}").write_bytes(data)


if __name__ == "__main__":
    main()
