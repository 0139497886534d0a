"""The six DLG library calls on the wire (paper Table 1)."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nearflash import InvalidArgument
from nearflash.cognitive import COMMANDS, decode_command, encode_command


@pytest.mark.parametrize(("name", "opcode"), sorted(COMMANDS.items()))
def test_opcodes_and_dwords_as_table_1(name, opcode):
    dw12 = {"DLG_hashing": 48, "DLG_index": 200, "DLG_config": 1}.get(name, 0)
    e = encode_command(name, 0x1234, 784, dw12, cid=9)
    assert len(e) == 64 and e[0] == opcode
    assert struct.unpack_from("<III", e, 40) == (0x1234, 784, dw12)  # DW10, DW11, DW12
    assert decode_command(e) == (name, opcode, 0x1234, 784, dw12)


@pytest.mark.parametrize(
    ("name", "size", "dw12", "message"),
    [
        ("DLG_hashing", 784, 0, "hash code length"),
        ("DLG_hashing", 784, 65, "hash code length"),
        ("DLG_index", 8, 0, "T is 0"),
        ("DLG_config", 8, 2, "DLG_config"),
        ("DLG_hashing", 0, 48, "data size is 0"),
        ("DLG_erase", 8, 0, "name"),
    ],
)
def test_refuses_bad_fields(name, size, dw12, message):
    with pytest.raises(InvalidArgument, match=message):
        encode_command(name, 0, size, dw12)


def test_decoder_refuses_damaged_entries():
    good = bytearray(encode_command("SSD_read", 7, 4096))
    with pytest.raises(InvalidArgument, match="64"):
        decode_command(bytes(good[:63]))
    bad = bytearray(good)
    bad[0] = 0xC6
    with pytest.raises(InvalidArgument, match="not a DLG command"):
        decode_command(bytes(bad))
    bad = bytearray(good)
    bad[48] = 1  # DW12 of SSD_read is reserved
    with pytest.raises(InvalidArgument, match="reserved"):
        decode_command(bytes(bad))
    bad = bytearray(good)
    bad[52] = 1  # CDW13
    with pytest.raises(InvalidArgument, match="CDW13"):
        decode_command(bytes(bad))


@given(st.binary(min_size=64, max_size=64))
def test_decoder_never_crashes_and_roundtrips(data):
    try:
        name, _, a, s, d = decode_command(data)
    except InvalidArgument:
        return
    assert decode_command(encode_command(name, a, s, d)) == (name, data[0], a, s, d)
