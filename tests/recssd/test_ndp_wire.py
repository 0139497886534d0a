"""The NDP config payload as the host sends it and the FTL parses it."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nearflash import InvalidArgument
from nearflash._native import recssd as rs


def test_payload_layout_is_header_then_result_input_pairs_sorted_by_input():
    payload = rs.ndp_encode(3, 32, np.array([24, 0, 15, 32]), np.array([0, 3]))
    words = struct.unpack(f"<{len(payload) // 4}I", payload)
    assert words[:5] == (4, 32, 2, 4, 3)  # attributeSize, embeddingLength, resultEmbeddings, inputEmbeddings, tableID
    assert words[5:] == (0, 0, 0, 15, 0, 24, 1, 32)  # (result, input) pairs by input id
    d = rs.ndp_decode(payload + b"\0" * 100, table_rows=33)  # padding to whole LBAs is ignored
    assert (d["attribute_size"], d["embedding_length"], d["result_embeddings"], d["table_id"]) == (4, 32, 2, 3)
    np.testing.assert_array_equal(d["pairs"], [[0, 0], [0, 15], [0, 24], [1, 32]])


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ((4, 32, 2, 2, 0, 0, 9, 0, 8), "sorted by input id"),
        ((4, 32, 2, 1, 0, 2, 5), "not below resultEmbeddings"),
        ((4, 32, 2, 1, 0, 0, 100), "outside the table"),
        ((3, 32, 2, 0, 0), "4 fp32, 2 fp16 or 1 int8"),
        ((4, 0, 2, 0, 0), "embedding length"),
        ((4, 32, 8193, 0, 0), "result sectors"),
        ((4, 32, 1, 3, 0, 0, 1), "truncated"),
        ((4, 32), "truncated"),
    ],
)
def test_invalid_payloads_are_rejected(words, message):
    with pytest.raises(InvalidArgument, match=message):
        rs.ndp_decode(struct.pack(f"<{len(words)}I", *words), table_rows=100)


def test_config_buffer_limit():
    n = (1 << 20) // 8  # pairs beyond the 1 MiB config buffer
    header = struct.pack("<5I", 4, 16, 1, n, 0)
    with pytest.raises(InvalidArgument, match="config buffer"):
        rs.ndp_decode(header + b"\0" * (8 * n), table_rows=10)
    assert rs.ndp_decode(header + b"\0" * (8 * n))["input_embeddings"] == n  # structure alone is fine


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_decoding_arbitrary_bytes_never_crashes(data):
    for rows in (None, 1000):
        try:
            d = rs.ndp_decode(data, table_rows=rows)
        except InvalidArgument:
            continue
        assert 20 + 8 * d["input_embeddings"] <= len(data)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 999), max_size=12), min_size=1, max_size=20))
def test_round_trip_keeps_every_lookup(bags):
    idx = np.array([i for b in bags for i in b], dtype=np.int64)
    off = np.cumsum([0] + [len(b) for b in bags[:-1]]).astype(np.int64)
    d = rs.ndp_decode(rs.ndp_encode(1, 16, idx, off), table_rows=1000)
    want = sorted((r, i) for r, b in enumerate(bags) for i in b)
    assert sorted(map(tuple, d["pairs"].tolist())) == want
    assert (np.diff(d["pairs"][:, 1].astype(np.int64)) >= 0).all()
