"""The YARN-1011 formulas (pipeline.sim.overalloc) on the branch's own unit-test numbers,
and the compiled FIFO-start pass and the vectorised MapReduce counter against plain loops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.layers.opportunistic.types import ContainerTypes
from pipeline.sim.interface import ClusterInfo
from pipeline.sim.kernels import EPS
from pipeline.sim.nm_kernels import nm_fifo_starts
from pipeline.sim.overalloc import (
    available,
    cpu_over_limit,
    guaranteed_victims,
    headroom,
    lifo_victims,
    to_reclaim,
)
from pipeline.sim.tasks import KIND_MAP, KIND_REDUCE

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


def test_snapshot_preemption_policy_numbers() -> None:
    """``TestSnapshotBasedOverAllocationPreemptionPolicy``: thresholds 0.75, 2048 MB, CPU
    allowed over its threshold 2 times in a row.  2000 MB used: 464 MB over; CPU at 1.0
    counts at the third high check in a row (a low one in between resets), then again at
    the third after."""
    cap = np.array([1.0, 2048.0])
    over = np.array([1.0, 2000.0]) - 0.75 * cap
    assert over[1] == 464.0
    count = np.zeros(1, dtype=np.int64)
    seen = [bool(cpu_over_limit(count, np.array([hot]), 2)[0])
            for hot in (True, False, True, True, True, True, True, True)]
    assert seen == [False, False, False, False, True, False, False, True]


def test_reclaim_is_the_smaller_excess() -> None:
    cap = np.array([4.0, 2048.0])
    # TestContainerSchedulerWithOverAllocation: 2860 MB allocated, 409.6 MB above 0.8
    assert to_reclaim(np.array([6.0, 2860.0]), cap, np.array([0.0, 409.6]))[1] == 409.6
    # allocations within capacity: nothing, however high the use
    assert np.all(to_reclaim(np.array([4.0, 2048.0]), cap, np.array([0.8, 409.6])) == 0)


def test_headroom_and_available() -> None:
    cap = np.array([4.0, 2048.0])
    room = headroom(cap, np.array([0.5, 512.0]), np.array([0.75, 0.75]))
    assert room.tolist() == [2.5, 1024.0]
    assert headroom(cap, np.array([3.5, 512.0]), np.array([0.75, 0.75])).tolist() == [0, 0]
    assert available(np.array([2.0, 200.0]), room).tolist() == [2.5, 1024.0]
    assert available(np.array([2.0, 200.0]), None).tolist() == [2.0, 200.0]


def test_victims_most_recent_first_credited_their_request() -> None:
    request = np.array([[1.0, 512.0, 0.0], [1.0, 300.0, 0.0]])
    slack = np.array([1e-9, 1e-9])
    assert lifo_victims([0, 1], request, np.array([0.0, 409.6]), slack) == [1, 0]
    assert lifo_victims([0, 1], request, np.array([0.0, 241.6]), slack) == [1]
    assert lifo_victims([0, 1], request, np.array([0.0, 241.6]), slack, {1}) == [0]


@pytest.mark.parametrize(("used", "threshold", "victims"), [
    (512.0, (0.75, 0.75), []), (1800.0, (0.75, 0.75), [1]), (512.0, None, [1])])
def test_guaranteed_victims(used: float, threshold: tuple | None, victims: list) -> None:
    """``testKillNoOppContainersWithPartialOverallocationLowUtilization`` and its twins:
    O0 1024 MB and O1 824 MB run (0.5 vcores used); G 512 MB finds 200 MB unallocated.
    With 512 MB used the headroom takes it; with 1800 MB, or without over-allocation, O1
    (the last started, 824 >= 312 MB lacking) goes."""
    request = np.array([[1.0, 1024.0, 0.0], [1.0, 824.0, 0.0]])
    got = guaranteed_victims(np.array([[1.0, 512.0]]), np.array([4.0, 2048.0]),
                             np.array([2.0, 200.0]), np.array([0.5, used]),
                             None if threshold is None else np.array(threshold), [0, 1],
                             request, EPS)
    assert got == victims
    # no CPU available at all: resourcesToFreeUp deducts nothing, so the whole request is
    # freed (both small containers go), not only the 0.5 vcore the node lacks
    small = np.array([[1.0, 100.0, 0.0], [1.0, 100.0, 0.0]])
    assert guaranteed_victims(np.array([[0.5, 512.0]]), np.array([4.0, 2048.0]),
                              np.array([0.0, 600.0]), np.array([4.0, used]), None, [0, 1],
                              small, EPS) == [1, 0]


def fifo_reference(queues: list[list[int]], req: np.ndarray, free: np.ndarray,
                   room: np.ndarray, cap: np.ndarray) -> list[int]:
    """How many start from each queue's head: while the head fits the larger of the
    unallocated room and the headroom, resource by resource (GPU: unallocated only)."""
    out = []
    for i, queue in enumerate(queues):
        avail = free[i].copy()
        avail[:2] = available(free[i, :2], room[i])
        n = 0
        for s in queue:
            if np.any(req[s] > avail + EPS * cap[i] + 1e-12):
                break
            avail -= req[s]
            n += 1
        out.append(n)
    return out


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fifo_starts_match_the_reference(data: st.DataObject) -> None:
    n_nodes = data.draw(st.integers(1, 4))
    n_slots = data.draw(st.integers(1, 12))
    grid = st.integers(0, 8).map(lambda x: x / 2)
    req = np.array([[data.draw(grid), data.draw(grid), data.draw(st.sampled_from([0.0, 1.0]))]
                    for _ in range(n_slots)])
    cap = np.full((n_nodes, 3), 4.0)
    alloc = np.array([[data.draw(grid), data.draw(grid), 0.0] for _ in range(n_nodes)])
    oalloc = np.array([[data.draw(grid), data.draw(grid), 0.0] for _ in range(n_nodes)])
    use_room = data.draw(st.booleans())
    room = (np.array([[data.draw(grid), data.draw(grid)] for _ in range(n_nodes)]) if use_room
            else np.full((n_nodes, 2), -np.inf))
    queues = [data.draw(st.lists(st.integers(0, n_slots - 1), max_size=5))
              for _ in range(n_nodes)]
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum([len(q) for q in queues], out=indptr[1:])
    flat = np.array([s for q in queues for s in q], dtype=np.int64)
    go = np.zeros(n_nodes, dtype=np.int64)
    nm_fifo_starts(flat, indptr, np.arange(n_nodes, dtype=np.int64), req, cap, alloc, oalloc,
                   room, EPS, go)
    assert go.tolist() == fifo_reference(queues, req, cap - alloc - oalloc, room, cap)


class _Pending:
    """The columns ContainerTypes reads, for a list of (row, job, kind, asks)."""

    def __init__(self, rows: list[tuple[int, int, int, int]]) -> None:
        self.row = np.array([r[0] for r in rows], dtype=np.int64)
        self.job = np.array([r[1] for r in rows], dtype=np.int64)
        self.kind = np.array([r[2] for r in rows], dtype=np.int8)
        self.asks = np.array([r[3] for r in rows], dtype=np.int32)
        self.req = np.zeros((len(rows), 3))

    def __len__(self) -> int:
        return len(self.row)

    def take(self, name: str, index: np.ndarray) -> np.ndarray:
        return getattr(self, name)[index]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_maps_mod_100_matches_a_sequential_counter(data: st.DataObject) -> None:
    """The vectorised rule against MapReduce's loop: each new request (first sight of a
    row, or a new ``asks``) in queue order moves its job's counter; a map is opportunistic
    while the counter is below the percentage; reduces never, and do not count."""
    percent = data.draw(st.sampled_from([0.0, 3.0, 10.0, 50.0, 99.5, 100.0]))
    types = ContainerTypes("percent", percent, 0, "", ClusterInfo("fixed", 1, None, None, 1,
                                                                 ("u",), ("q",)))
    n_rows = data.draw(st.integers(1, 40))
    job_of = [data.draw(st.integers(0, 3)) for _ in range(n_rows)]
    kind_of = [data.draw(st.sampled_from([0, KIND_MAP, KIND_REDUCE])) for _ in range(n_rows)]
    asks = [0] * n_rows
    counter = [0] * 4
    flag: dict[int, bool] = {}
    for _call in range(data.draw(st.integers(1, 6))):
        rows = data.draw(st.lists(st.integers(0, n_rows - 1), unique=True, max_size=25))
        for r in rows:
            if data.draw(st.booleans()) or asks[r] == 0:
                asks[r] += 1  # asked for again (or for the first time)
        seen = [r for r in rows if flag.get(-r - 1) != asks[r]]
        for r in seen:  # MapReduce's addMap, one request at a time
            flag[-r - 1] = asks[r]
            if kind_of[r] == KIND_REDUCE:
                flag[r] = False
                continue
            flag[r] = counter[job_of[r]] < percent
            counter[job_of[r]] = (counter[job_of[r]] + 1) % 100
        got = types.mask(_Pending([(r, job_of[r], kind_of[r], asks[r]) for r in rows]))
        assert got.tolist() == [flag[r] for r in rows]
