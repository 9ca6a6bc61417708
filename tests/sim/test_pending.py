"""The pending queue keeps its columns aligned through appends, removals and regrowth."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim.interface import PendingView
from pipeline.sim.pending import PendingQueue

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


def _entries(first: int, k: int) -> tuple[np.ndarray, ...]:
    slots = np.arange(first, first + k, dtype=np.int64)
    return (slots, slots * 0.5, np.stack([slots, slots + 1, slots + 2], axis=1) * 1.0,
            (slots % 7).astype(np.int32))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.lists(st.integers(0, 60), max_size=20)),
                min_size=1, max_size=30))
def test_columns_follow_their_slots(steps: list[tuple[int, list[int]]]) -> None:
    """Each live entry's time, request and job stay those appended with its slot, in
    queue order, whatever was removed (and however often the buffer moved or grew)."""
    q = PendingQueue(capacity=4)
    model: list[int] = []
    nxt = 0
    for k, picks in steps:
        slots, enter, req, job = _entries(nxt, k)
        q.append(slots, enter, req, job)
        model.extend(slots.tolist())
        nxt += k
        index = np.unique([i for i in picks if i < len(model)]).astype(np.int64)
        removed = q.remove(index)
        assert removed.tolist() == [model[i] for i in index]
        model = [s for i, s in enumerate(model) if i not in set(index.tolist())]
        live = np.array(model, dtype=np.int64)
        assert q.slots.tolist() == model
        np.testing.assert_array_equal(q.enter, live * 0.5)
        np.testing.assert_array_equal(q.req, np.stack([live, live + 1, live + 2], axis=1))
        assert q.job.dtype == np.int32
        np.testing.assert_array_equal(q.job, live % 7)


def test_a_subset_keeps_the_columns_the_core_gave() -> None:
    """A layered policy's inner view carries the queue's own request and job columns (not
    gathered again from the task table), restricted to the subset, in its order."""
    n = 6
    table = SimpleNamespace(req=np.full((n, 3), -1.0), job=np.full(n, -1, np.int32),
                            user=np.arange(n, dtype=np.int32) * 10)
    slots = np.array([5, 3, 1, 0], dtype=np.int64)
    req = np.arange(12, dtype=float).reshape(4, 3)
    job = np.array([7, 8, 9, 10], dtype=np.int32)
    sub = PendingView(0.0, slots, table, req=req, job=job).subset(np.array([2, 0]))
    np.testing.assert_array_equal(sub.req, req[[2, 0]])
    np.testing.assert_array_equal(sub.job, job[[2, 0]])
    np.testing.assert_array_equal(sub.user, [10, 50])  # other columns: from the table
