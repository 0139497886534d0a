"""NICE-K is exact for every representable input: full-range int16/int32 embeddings and queries against a reference
in Python's unbounded integers, and query values outside the embeddings' dtype refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from nearflash import nice


def exact(e: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    d = [sum((int(x) - int(y)) ** 2 for x, y in zip(row, q)) for row in e]
    return sorted(range(len(d)), key=lambda i: (d[i], i))[:k]


def test_full_range_int32_rows_rank_exactly():
    e = np.array([[2**31 - 1] * 4, [0] * 4, [-(2**31)] * 4], dtype=np.int32)
    assert nice.knn(e, np.array([-(2**31)] * 4), 3).tolist() == [2, 1, 0]


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.int16, np.int32]))
    info = np.iinfo(dtype)
    # The extremes often: that is where a narrow accumulator wraps.
    values = st.one_of(st.sampled_from([info.min, info.max, 0, info.min + 1, info.max - 1]),
                       st.integers(int(info.min), int(info.max)))
    n, dim = draw(st.integers(1, 30)), draw(st.integers(1, 24))
    e = draw(arrays(dtype, (n, dim), elements=values))
    q = draw(arrays(np.int64, dim, elements=values))
    return e, q, draw(st.integers(1, n + 2))


@settings(max_examples=150, deadline=None)
@given(cases())
def test_equals_an_exact_reference_over_the_full_range(case):
    e, q, k = case
    assert nice.knn(e, q, k).tolist() == exact(e, q, k)


@pytest.mark.parametrize("dtype,bad", [(np.int16, 2**15), (np.int16, -(2**15) - 1), (np.int32, 2**31),
                                       (np.int32, -(2**31) - 1), (np.int32, 2**70)])
def test_query_values_outside_the_embedding_dtype_are_refused(dtype, bad):
    e = np.zeros((5, 4), dtype=dtype)
    q = np.array([0, bad, 0, 0], dtype=object if abs(bad) >= 2**63 else np.int64)
    with pytest.raises((ValueError, TypeError), match="query"):
        nice.knn(e, q, 2)
