"""The compiled usage-change pass against its plain-Python reference
(:mod:`pipeline.sim.usage_reference`): on small random profiles, running and stopped tasks,
heaps with stale entries and ties, and nodes of several speeds, both must apply the same
changes and leave the tasks, nodes and heap bit for bit the same."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim import usage_kernels, usage_reference
from pipeline.sim.heap import heap_push
from pipeline.sim.tasks import FREE, HEAP_N, HEAP_SEQ, N_EXTRA, PENDING, RUNNING

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

TIMES = [0.0, 0.5, 1.0, 1.0, 2.0, 3.5, 5.0]  # few values: ties are common
USE = [0.0, 0.1, 0.25, 0.75, 1.0]


@dataclass
class Task:
    """One slot: its profile, where it is in it, and its current run."""

    bp: list[float]  # piece starts (work s), ascending from 0
    cpu: list[float]
    mem: list[float]
    cur: int  # piece in force (index into the profile)
    state: int
    node: int
    start: float
    work0: float
    run_seq: int
    pushed: bool  # its next change is in the heap


@dataclass
class Scenario:
    """One usage step: the tasks, stale heap entries, node speeds, the limit."""

    tasks: list[Task]
    stale: list[tuple[int, int, float]]  # (slot, run, due)
    speed: list[float]
    used: list[tuple[float, float]]
    seq0: int
    limit: float


@st.composite
def tasks(draw: st.DrawFn, n_nodes: int, run_seq: int) -> Task:
    n = draw(st.integers(1, 5))
    steps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5]), min_size=n - 1,
                          max_size=n - 1))
    bp = [0.0]
    for step in steps:
        bp.append(bp[-1] + step)
    return Task(
        bp=bp,
        cpu=draw(st.lists(st.sampled_from(USE), min_size=n, max_size=n)),
        mem=draw(st.lists(st.sampled_from(USE), min_size=n, max_size=n)),
        cur=draw(st.integers(0, n - 1)),
        state=draw(st.sampled_from([RUNNING, RUNNING, RUNNING, PENDING, FREE])),
        node=draw(st.integers(0, n_nodes - 1)),
        start=draw(st.sampled_from(TIMES)),
        work0=draw(st.sampled_from([0.0, 0.0, 0.5, 1.0])),
        run_seq=run_seq,
        pushed=draw(st.booleans()),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n_nodes = draw(st.integers(1, 3))
    n = draw(st.integers(1, 6))
    task_list = [draw(tasks(n_nodes, 10 + k)) for k in range(n)]
    stale = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 9),
                                    st.sampled_from(TIMES)), max_size=4))
    return Scenario(
        tasks=task_list,
        stale=stale,
        speed=draw(st.lists(st.sampled_from([1.0, 0.5, 1.5, 2.0]), min_size=n_nodes,
                            max_size=n_nodes)),
        used=draw(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.5]),
                                     st.sampled_from([0.0, 0.5, 3.0])),
                           min_size=n_nodes, max_size=n_nodes)),
        seq0=draw(st.integers(0, 5)),
        limit=draw(st.sampled_from([*TIMES, 10.0, np.inf])),
    )


def build(sc: Scenario) -> tuple[SimpleNamespace, SimpleNamespace, np.ndarray, np.ndarray]:
    """The usage pool and heap, the task columns, node ``used`` and speeds of ``sc``."""
    n = len(sc.tasks)
    pieces = sum(len(t.bp) for t in sc.tasks)
    cap = pieces + len(sc.stale) + 1
    usage = SimpleNamespace(
        bp=np.zeros(pieces), vc=np.zeros(pieces), vm=np.zeros(pieces), cc=np.zeros(pieces),
        cm=np.zeros(pieces), time=np.zeros(cap), seq=np.zeros(cap, dtype=np.int64),
        slot=np.zeros(cap, dtype=np.int64), run=np.zeros(cap, dtype=np.int64),
        counters=np.zeros(8, dtype=np.int64))
    usage.counters[HEAP_SEQ] = sc.seq0
    t = SimpleNamespace(
        state=np.array([x.state for x in sc.tasks], dtype=np.int8),
        node=np.array([x.node for x in sc.tasks], dtype=np.int32),
        start=np.array([x.start for x in sc.tasks]),
        duration=np.array([x.bp[-1] + 1.0 for x in sc.tasks]),
        req=np.ones((n, 3)), used=np.zeros((n, 2)),
        extra=np.zeros((n, N_EXTRA), dtype=np.float32),
        work0=np.array([x.work0 for x in sc.tasks]),
        run_seq=np.array([x.run_seq for x in sc.tasks], dtype=np.int64),
        useg_lo=np.zeros(n, dtype=np.int64), useg_hi=np.zeros(n, dtype=np.int64),
        useg_cur=np.zeros(n, dtype=np.int64))
    speed = np.array(sc.speed)
    k = 0
    for s, x in enumerate(sc.tasks):
        m = len(x.bp)
        usage.bp[k:k + m], usage.vc[k:k + m], usage.vm[k:k + m] = x.bp, x.cpu, x.mem
        t.useg_lo[s], t.useg_hi[s], t.useg_cur[s] = k, k + m, k + x.cur
        t.used[s] = x.cpu[x.cur], x.mem[x.cur]
        nxt = k + x.cur + 1
        if x.pushed and nxt < k + m:
            due = x.start + (usage.bp[nxt] - x.work0) / speed[x.node]
            push(usage, due, s, x.run_seq)
        k += m
    for s, run, due in sc.stale:
        push(usage, due, s, run)
    return usage, t, np.array(sc.used, dtype=np.float64), speed


def push(usage: SimpleNamespace, due: float, slot: int, run: int) -> None:
    heap_push(usage.time, usage.seq, usage.slot, usage.run, usage.counters, due, slot, run)


def heap_entries(usage: SimpleNamespace) -> list[tuple[float, int, int, int]]:
    n = int(usage.counters[HEAP_N])
    return sorted(zip(usage.time[:n].tolist(), usage.seq[:n].tolist(),
                      usage.slot[:n].tolist(), usage.run[:n].tolist(), strict=True))


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_usage_until_matches_reference(sc: Scenario) -> None:
    usage_a, tasks_a, used_a, speed = build(sc)
    usage_b, tasks_b, used_b, _ = build(sc)
    got = usage_kernels.usage_until(
        sc.limit, usage_kernels.read_heap(usage_a), usage_kernels.read_tasks(tasks_a),
        usage_kernels.read_pool(usage_a), used_a, speed)
    want = usage_reference.usage_until(sc.limit, usage_b, tasks_b, used_b, speed)
    assert got == want
    assert heap_entries(usage_a) == heap_entries(usage_b)
    assert np.array_equal(usage_a.counters, usage_b.counters)
    assert used_a.tobytes() == used_b.tobytes()
    for name in ("used", "useg_cur"):
        assert getattr(tasks_a, name).tobytes() == getattr(tasks_b, name).tobytes(), name


def test_a_change_is_applied_once_and_the_next_pushed() -> None:
    """One running task with three pieces at speed 2: its second piece is due at work 1.0,
    wall 0.5; the third then at wall 1.5."""
    sc = Scenario(tasks=[Task(bp=[0.0, 1.0, 3.0], cpu=[0.1, 0.25, 1.0], mem=[0.1, 0.75, 0.0],
                              cur=0, state=RUNNING, node=0, start=0.0, work0=0.0,
                              run_seq=10, pushed=True)],
                  stale=[], speed=[2.0], used=[(0.1, 0.1)], seq0=0, limit=1.0)
    usage, t, used, speed = build(sc)
    assert usage_reference.usage_until(1.0, usage, t, used, speed) == 1
    assert t.used[0].tolist() == [0.25, 0.75]
    assert used[0].tolist() == [0.25, 0.75]
    assert heap_entries(usage) == [(1.5, 1, 0, 10)]
