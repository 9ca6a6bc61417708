"""The views' compiled gather returns exactly what ``np.take(column, slots, axis=0)`` does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim.gather import gather

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 50), width=st.sampled_from([0, 1, 3, 8]),
       dtype=st.sampled_from([np.float64, np.int32, np.int8, np.bool_]),
       picks=st.lists(st.integers(0, 10_000), max_size=40), seed=st.integers(0, 2**16))
def test_gather_is_take(n: int, width: int, dtype: type, picks: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (n,) if width == 0 else (n, width)
    column = (rng.random(shape) * 100).astype(dtype)
    slots = np.array([p % n for p in picks], dtype=np.int64)
    got = gather(column, slots)
    want = np.take(column, slots, axis=0)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)
