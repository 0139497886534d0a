"""docs/architecture.md's table of the vendor opcodes each extension claims, checked against the extensions: each
registered extension is attached to a device it accepts, and every vendor opcode (0x80-0xFF) is sent through the
public path; an opcode no attached extension claims is refused with the device's reason saying so."""

import re
from pathlib import Path

import pytest

from nearflash import Device, _native

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
SMALL = dict(channels=2, chips_per_channel=1, blocks_per_plane=64, pages_per_block=32, over_provisioning=25,
             write_buffer="1MiB")
#: A device each extension accepts: (preset, overrides). Defaults: cosmos-plus, small, with a reserved area.
DEVICES = {
    "issd": ("issd", dict(channels=2, chips_per_channel=1, blocks_per_plane=64, over_provisioning=25)),
    "ndsearch": ("searssd", dict(blocks_per_plane=24, over_provisioning=40, ext_reserved_blocks=2)),
    "nice": ("nice-zu7eg", dict(SMALL, blocks_per_plane=96, pages_per_block=64)),
}


def documented() -> dict[str, set[int]]:
    text = DOC.read_text()
    section = text[text.index("### Vendor opcodes each extension claims"):]
    section = section[: section.index("\n#", 1)]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| `")]
    return {r[1].strip().strip("`"): {int(h, 16) for h in re.findall(r"0x[0-9A-Fa-f]{2}\b", r[2])} for r in rows}


def claimed(name: str) -> set[int]:
    preset, overrides = DEVICES.get(name, ("cosmos-plus", dict(SMALL, ext_reserved_blocks=8)))
    with Device(None, preset, overrides=overrides) as dev:
        dev.attach(name)
        out = set()
        for op in range(0x80, 0x100):
            c = dev.command(op, check=False)
            if not (c.sct == 0 and c.sc == 0x01 and "no attached extension claims it" in (c.reason or "")):
                out.add(op)
        return out


def test_every_registered_extension_has_a_row():
    assert set(documented()) == set(_native.extensions())


@pytest.mark.parametrize("name", sorted(_native.extensions()))
def test_the_table_lists_the_opcodes_the_extension_claims(name):
    assert claimed(name) == documented().get(name), f"{name}: docs/architecture.md's opcode table is stale"


def test_no_two_extensions_default_to_the_same_opcode():
    owners: dict[int, str] = {}
    for name, ops in documented().items():
        for op in ops:
            assert op not in owners, f"{op:#04x} is both {owners[op]}'s and {name}'s default"
            owners[op] = name


def test_issd_and_cognitive_attach_to_one_device_with_their_defaults():
    # iSSD's defaults once overlapped Cognitive SSD's (0xC1, 0xC2), so attaching both was refused
    with Device(None, "cosmos-plus", overrides=dict(SMALL, ext_reserved_blocks=8)) as dev:
        dev.attach("issd")
        dev.attach("cognitive")
        assert set(dev.report().extensions) >= {"issd", "cognitive"}
