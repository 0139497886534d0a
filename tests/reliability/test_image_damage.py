"""Issue 9, items 3 and 4: opening never creates or overwrites, and every image file damaged in each way (deleted,
truncated, extended, bytes flipped, crafted records, another format) is refused with a message naming the file;
`Device.repair` then salvages the image and reports exactly which LBAs it could not recover."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nearflash
from nearflash import Device

from conftest import TINY
from helpers import WRITTEN, build_image, pattern

HEADER_SPAN = 4096


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nearflash.cli", *args], capture_output=True, text=True)


@pytest.fixture
def image(tmp_path) -> Path:
    p = tmp_path / "dev"
    build_image(p)
    return p


def open_fails(path: Path, *needles: str) -> str:
    with pytest.raises(nearflash.ImageError) as e:
        Device(path)
    msg = str(e.value)
    for n in needles:
        assert n in msg, msg
    return msg


def check_contents(path: Path, lost: set[int] = frozenset()) -> None:
    """Every written LBA reads its pattern, except `lost` ones, which read zeroes."""
    with Device(path) as dev:
        got = dev.read(0, WRITTEN).reshape(WRITTEN, -1)
        want = pattern(0, WRITTEN, dev.lba_bytes).reshape(WRITTEN, -1)
        dev.verify()
    for lba in range(WRITTEN):
        if lba in lost:
            assert not got[lba].any(), f"LBA {lba} reported lost but returned data"
        else:
            assert np.array_equal(got[lba], want[lba]), f"LBA {lba} lost without being reported"


def lost_lbas(report: dict) -> set[int]:
    return {l for a, b in report["lost_lba_ranges"] for l in range(a, b + 1)}


def programmed_oob_records(path: Path) -> list[int]:
    """File offsets of OOB records with a non-zero sequence number."""
    raw = (path / "oob.bin").read_bytes()
    stride = struct.unpack_from("<I", raw, 20)[0]
    return [o for o in range(HEADER_SPAN, len(raw), stride) if raw[o : o + 8] != b"\0" * 8]


def flip(p: Path, offset: int, mask: int = 0x5A) -> None:
    with open(p, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


# --- item 3: never create on open ---------------------------------------------------------------------------------------
def test_a_user_directory_is_never_turned_into_an_image(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(nearflash.ImageError, match="not empty"):
        Device(d, **TINY)
    with pytest.raises(nearflash.ImageError, match="not a nearflash device"):
        Device(d, create=False)
    p = run("info", str(d))
    assert p.returncode == 2 and "not a nearflash device" in p.stderr, p.stderr
    assert sorted(os.listdir(d)) == ["cat.jpg"]


def test_info_on_a_missing_path_creates_nothing(tmp_path):
    d = tmp_path / "nothing"
    p = run("info", str(d))
    assert p.returncode == 2 and "does not exist" in p.stderr, p.stderr
    assert not d.exists()


def test_an_image_without_state_json_is_refused_not_recreated(image):
    (image / "state.json").unlink()
    before = sorted(os.listdir(image))
    open_fails(image, "state.json", "repair")
    with pytest.raises(nearflash.NearflashError):
        Device(image, **TINY)
    assert sorted(os.listdir(image)) == before
    report = Device.repair(image)
    assert any("state.json" in a for a in report["actions"])
    check_contents(image)


def test_create_that_fails_leaves_nothing_behind(tmp_path):
    d = tmp_path / "dev"
    p = run("create", str(d), "--set", "channels=2", "--precondition", "2")
    assert p.returncode == 2 and "precondition" in p.stderr, p.stderr
    assert not d.exists() or not os.listdir(d)


# --- item 4: damaged files are refused by name -----------------------------------------------------------------------
def truncate(p: Path, size: int | None = None) -> None:
    with open(p, "r+b") as f:
        f.truncate(size if size is not None else os.path.getsize(p) // 2)


CLEAN_DAMAGE = {
    "l2p deleted": ("l2p.bin", lambda p: p.unlink(), "cannot open"),
    "l2p truncated": ("l2p.bin", truncate, "expected"),
    "l2p extended": ("l2p.bin", lambda p: truncate(p, os.path.getsize(p) + 4096), "expected"),
    "l2p entry flipped": ("l2p.bin", lambda p: flip(p, HEADER_SPAN + 4 * 10 + 1), "l2p.bin"),
    "l2p header flipped": ("l2p.bin", lambda p: flip(p, 2), "magic"),
    "oob deleted": ("oob.bin", lambda p: p.unlink(), "cannot open"),
    "oob truncated": ("oob.bin", truncate, "expected"),
    "data deleted": ("data.bin", lambda p: p.unlink(), "cannot open"),
    "data truncated": ("data.bin", lambda p: truncate(p, HEADER_SPAN + 4096 * 100), "expected"),
    "checkpoint deleted": ("checkpoint.bin", lambda p: p.unlink(), "cannot open"),
    "checkpoint flipped": ("checkpoint.bin", lambda p: flip(p, os.path.getsize(p) - 40), "checksum"),
    "trim log deleted": ("trim.log", lambda p: p.unlink(), "cannot open"),
    "trim log records after a clean close": ("trim.log", lambda p: p.write_bytes(p.read_bytes() + b"\1" * 20), "clean close"),
    "config swapped for another geometry": (
        "l2p.bin",
        lambda p: (p.parent / "nearflash.toml").write_text(
            (p.parent / "nearflash.toml").read_text().replace("value = 16\n", "value = 17\n", 1)),
        "geometry",
    ),
}


@pytest.mark.parametrize("case", list(CLEAN_DAMAGE))
def test_damage_to_a_cleanly_closed_image_is_refused_and_repaired(image, case):
    name, damage, needle = CLEAN_DAMAGE[case]
    damage(image / name)
    open_fails(image, name, needle)
    if case.startswith("config"):
        return  # the configuration itself no longer matches the files: nothing to salvage automatically
    report = Device.repair(image)
    lost = lost_lbas(report)
    if case.startswith(("oob", "data deleted")):
        assert lost == set(range(WRITTEN)) and report["unrecoverable"], report
    elif case.startswith("data truncated"):
        assert lost and min(lost) > 0 and report["unrecoverable"], report
    else:
        assert not lost, report
    check_contents(image, lost)
    assert Device.repair(image)["actions"] == ["no damage found"]


def unclean_image(path: Path, *, trim: bool = False) -> None:
    dev = build_image(path, trim=trim, close=False)
    dev.native.abandon()


def test_a_crafted_trim_record_cannot_wipe_the_device(tmp_path):
    path = tmp_path / "dev"
    unclean_image(path)
    log = path / "trim.log"
    body = struct.pack("<QII", 10**6, 0, 0xFFFFFFFF)
    import zlib

    log.write_bytes(log.read_bytes() + body + struct.pack("<I", zlib.crc32(body)))
    open_fails(path, "trim.log: record 0", "beyond the device")
    report = Device.repair(path)
    assert any("trim.log: record 0" in a for a in report["actions"]), report
    check_contents(path)


def test_flipped_trim_record_is_refused(tmp_path):
    path = tmp_path / "dev"
    unclean_image(path, trim=True)
    log = path / "trim.log"
    assert os.path.getsize(log) > 44, "the trim after the last checkpoint is journaled"
    flip(log, 44 + 8)  # the LBA field of record 0
    open_fails(path, "trim.log: record 0 fails its checksum")
    report = Device.repair(path)
    assert any("could not be replayed" in u for u in report["unrecoverable"]), report


def test_damaged_oob_after_a_crash_is_refused_not_silently_dropped(tmp_path):
    path = tmp_path / "dev"
    unclean_image(path)
    recs = programmed_oob_records(path)
    assert len(recs) > 10
    flip(path / "oob.bin", recs[3] + 30)  # an LPN in the record of a programmed page
    open_fails(path, "oob.bin", "checksum")
    report = Device.repair(path)
    lost = lost_lbas(report)
    assert len(report["damaged_pages"]) == 1 and 0 < len(lost) <= 4, report
    check_contents(path, lost)


def test_a_previous_format_is_named(image):
    s = json.loads((image / "state.json").read_text())
    s["format"] = 1
    (image / "state.json").write_text(json.dumps(s))
    open_fails(image, "format 1, expected 2")


def test_repair_cli_reports_and_fixes(image):
    truncate(image / "data.bin", HEADER_SPAN + 4096 * 100)
    p = run("repair", str(image), "--json")
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    assert report["lost_lba_ranges"] and report["unrecoverable"]
    p = run("info", str(image))
    assert p.returncode == 0, p.stderr
    p = run("repair", str(image))
    assert p.returncode == 0 and "no damage found" in p.stdout
