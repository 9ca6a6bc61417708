"""Node heartbeats: each node once per interval, windows that partition time, varying order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim.heartbeat import Heartbeats

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


@given(n=st.integers(1, 300), seed=st.integers(0, 2**40), period=st.integers(0, 10_000))
@settings(max_examples=80, deadline=None)
def test_every_node_reports_once_per_interval(n: int, seed: int, period: int) -> None:
    beats = Heartbeats(n, 2.0, seed)
    nodes, times = beats.between(period * 2.0, (period + 1) * 2.0)
    assert sorted(nodes.tolist()) == list(range(n))
    assert np.all(np.diff(times) > 0) and times[0] > period * 2.0


@given(cuts=st.lists(st.floats(0.0, 30.0), min_size=1, max_size=12), seed=st.integers(0, 99))
@settings(max_examples=60, deadline=None)
def test_windows_partition_the_reports(cuts: list[float], seed: int) -> None:
    beats = Heartbeats(17, 3.0, seed)
    bounds = [0.0, *sorted(cuts), 30.0]
    parts = [beats.between(a, b) for a, b in itertools.pairwise(bounds)]
    whole = beats.between(0.0, 30.0)
    assert np.array_equal(np.concatenate([p[0] for p in parts]), whole[0])
    assert np.array_equal(np.concatenate([p[1] for p in parts]), whole[1])


def test_order_changes_between_intervals_and_is_seeded() -> None:
    beats = Heartbeats(50, 1.0, 3)
    orders = {tuple(beats.between(p, p + 1.0)[0]) for p in range(20)}
    assert len(orders) > 10
    assert np.array_equal(Heartbeats(50, 1.0, 3).between(0, 5)[0], beats.between(0, 5)[0])
    assert not np.array_equal(Heartbeats(50, 1.0, 4).between(0, 5)[0], beats.between(0, 5)[0])
    first = [beats.order(p)[0] for p in range(200)]
    assert len(set(first)) > 40  # no node is always first


def test_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval"):
        Heartbeats(3, 0.0)
