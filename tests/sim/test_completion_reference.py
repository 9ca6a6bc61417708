"""The compiled completion pass against its plain-Python reference
(:mod:`pipeline.sim.completion_reference`): on small random task tables, heaps (with stale
entries and ties), nodes and nearly full output buffers, both must return the same status,
finish the same tasks in the same order, and leave every column bit for bit the same."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim import completion_reference, kernels
from pipeline.sim.cluster import NodeState
from pipeline.sim.columns import Finished, NodeCols, RecordCols, TaskCols
from pipeline.sim.heap import heap_push
from pipeline.sim.tasks import (
    CENSORED,
    HAS_INPUTS,
    HEAP_N,
    IS_PARENT,
    N_EXTRA,
    OPPORTUNISTIC,
    REC_N,
    RUNNING,
    SPEC,
    TRACKED,
    Heap,
    Records,
    TaskTable,
)

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

TIMES = [0.0, 0.5, 1.0, 1.0, 2.0, 3.5, 5.0]  # few values: ties are common
FLAGS = [IS_PARENT, OPPORTUNISTIC, TRACKED, SPEC, HAS_INPUTS, CENSORED]


@dataclass
class Run:
    """A running task: where, when, what it holds, and the figures its record copies."""

    node: int
    start: float
    end: float
    epoch: int
    flags: int
    req: tuple[float, float, float]
    used: tuple[float, float]
    ints: tuple[int, int, int, int, int, int]  # row, job, kind, attempts, preemptions, evictions
    wasted: float
    locality: int
    read: tuple[float, float]
    extra: list[float]


@dataclass
class Scenario:
    """One completion step: runs, stale heap entries, nodes, buffers and the limit."""

    n_nodes: int
    extras_on: bool
    runs: list[Run]
    n_free: int  # slots holding no run (stale entries may point at them)
    stale: list[tuple[int, float]]  # (slot, end) of entries from an earlier epoch
    push_order: list[int]  # order the heap entries were pushed in (their seq)
    node_drift: list[tuple[float, int, float, int, int]]  # alloc drift, extra containers,
    # idle since, tasks done so far, instance
    limit: float
    rec_cap: int
    rec_filled: int
    follow_cap: int
    spec_cap: int
    spec_filled: int


@st.composite
def runs(draw: st.DrawFn, n_nodes: int, extras_on: bool) -> Run:
    start = draw(st.sampled_from(TIMES))
    flags = 0
    for bit in FLAGS:
        if draw(st.sampled_from([True, False, False])) and (bit != TRACKED or extras_on):
            flags |= bit
    size = st.sampled_from([0.0, 0.25, 1.0, 1.5])
    measured = st.sampled_from([np.nan, np.nan, 0.1, 0.75])
    return Run(
        node=draw(st.integers(0, n_nodes - 1)),
        start=start,
        end=start + draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 1e-3, np.inf])),
        epoch=draw(st.integers(0, 3)),
        flags=flags,
        req=(draw(size), draw(size), draw(st.sampled_from([0.0, 0.0, 1.0]))),
        used=(draw(measured), draw(measured)),
        ints=(draw(st.integers(0, 99)), draw(st.integers(0, 3)), draw(st.integers(0, 2)),
              draw(st.integers(1, 3)), draw(st.integers(0, 2)), draw(st.integers(0, 2))),
        wasted=draw(st.sampled_from([0.0, 2.5])),
        locality=draw(st.integers(-1, 2)),
        read=(draw(st.sampled_from([0.0, 64.0])), draw(st.sampled_from([0.0, 128.0]))),
        extra=draw(st.lists(st.sampled_from([0.0, 1.0, 2.5]), min_size=N_EXTRA,
                            max_size=N_EXTRA)),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n_nodes = draw(st.integers(1, 3))
    extras_on = draw(st.booleans())
    run_list = draw(st.lists(runs(n_nodes, extras_on), min_size=1, max_size=7))
    n_free = draw(st.integers(1, 3))
    n_slots = len(run_list) + n_free
    stale = draw(st.lists(st.tuples(st.integers(0, n_slots - 1), st.sampled_from(TIMES)),
                          max_size=4))
    rec_cap = draw(st.integers(1, 8))
    spec_cap = draw(st.integers(1, 4))
    drift = st.tuples(st.sampled_from([0.0, 1e-12, 0.5]), st.integers(0, 1),
                      st.sampled_from([0.0, 3.0]), st.integers(0, 5), st.integers(0, 9))
    return Scenario(
        n_nodes=n_nodes, extras_on=extras_on, runs=run_list, n_free=n_free, stale=stale,
        push_order=draw(st.permutations(list(range(len(run_list) + len(stale))))),
        node_drift=draw(st.lists(drift, min_size=n_nodes, max_size=n_nodes)),
        limit=draw(st.sampled_from([10.0, 5.0, 2.0, 10.0, 1.0, np.inf, 0.5, 0.0])),
        # mostly room to spare, sometimes a buffer (nearly) full: the step stops there
        rec_cap=rec_cap, rec_filled=draw(st.sampled_from([0, 0, 0, rec_cap - 1, rec_cap])),
        follow_cap=draw(st.integers(1, 4)), spec_cap=spec_cap,
        spec_filled=draw(st.sampled_from([0, 0, 0, spec_cap - 1, spec_cap])),
    )


@dataclass
class State:
    """The core's tables for one scenario (built afresh for each side)."""

    heap: Heap
    tasks: TaskTable
    nodes: NodeState
    records: Records
    out: Finished


def build(sc: Scenario) -> State:
    tasks = TaskTable(len(sc.runs) + sc.n_free)
    if sc.extras_on:
        tasks.enable_extras()
    slots = tasks.alloc(len(sc.runs)).tolist()
    nodes = NodeState(sc.n_nodes)
    entries = []
    for s, run in zip(slots, sc.runs, strict=True):
        (tasks.row[s], tasks.job[s], tasks.kind[s], tasks.attempts[s], tasks.preemptions[s],
         tasks.evictions[s]) = run.ints
        tasks.state[s], tasks.node[s], tasks.flags[s] = RUNNING, run.node, run.flags
        tasks.ready[s] = tasks.first_start[s] = max(run.start - 0.5, 0.0)
        tasks.start[s], tasks.run_end[s], tasks.epoch[s] = run.start, run.end, run.epoch
        tasks.req[s], tasks.used[s], tasks.read[s] = run.req, run.used, run.read
        tasks.wasted[s], tasks.locality[s] = run.wasted, run.locality
        if sc.extras_on:
            tasks.extra[s] = run.extra
        held = nodes.oalloc if run.flags & OPPORTUNISTIC else nodes.alloc
        held[run.node] += run.req
        nodes.used[run.node] += np.where(np.isnan(run.used), run.req[:2], run.used)
        nodes.ncont[run.node] += 1
        entries.append((run.end, s, run.epoch))
    for s, end in sc.stale:  # from an earlier run of the slot
        entries.append((end, s, int(tasks.epoch[s]) - 1))
    for nd, (drift, more, idle, done, instance) in enumerate(sc.node_drift):
        nodes.alloc[nd] += drift
        nodes.ncont[nd] += more
        nodes.idle_since[nd], nodes.done[nd], nodes.instance[nd] = idle, done, instance
        nodes.done_s[nd] = 10.0 * done
    nodes.dirty[:] = False
    heap = Heap(len(entries) + 1)
    for i in sc.push_order:
        end, s, epoch = entries[i]
        heap_push(heap.time, heap.seq, heap.slot, heap.epoch, tasks.counters, end, s, epoch)
    records = Records(lambda chunk: None, sc.rec_cap)
    tasks.counters[REC_N] = sc.rec_filled
    out = Finished(np.full(sc.follow_cap, -1, np.int64), np.full(sc.follow_cap, np.nan),
                   np.full(1, -1.0), np.full(sc.spec_cap, -1, np.int64),
                   np.full(sc.spec_cap, np.nan), np.array([sc.spec_filled], np.int64))
    return State(heap, tasks, nodes, records, out)


def columns(state: State) -> dict[str, np.ndarray]:
    """Every column the step may touch, by owner and name."""
    cols = {f"tasks.{f}": getattr(state.tasks, f) for f in TaskCols._fields}
    cols |= {f"nodes.{f}": getattr(state.nodes, f) for f in NodeCols._fields}
    cols |= {f"records.{f}": getattr(state.records, f)
             for f in (*RecordCols._fields, "remaining", "spec")}
    cols |= {f"out.{f}": getattr(state.out, f) for f in Finished._fields}
    return cols


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_the_compiled_completion_pass_finishes_as_the_reference(sc: Scenario) -> None:
    got, want = build(sc), build(sc)
    got_result = kernels.complete_until(sc.limit, got.heap, got.tasks, got.nodes,
                                        got.records, got.out)
    want_result = completion_reference.complete_until(sc.limit, want.heap, want.tasks,
                                                      want.nodes, want.records, want.out)
    assert tuple(int(v) for v in got_result) == want_result
    # the heap's layout is the kernel's own business; what it holds must be the same
    got_left = completion_reference.heap_entries(got.heap, got.tasks.counters)
    want_left = completion_reference.heap_entries(want.heap, want.tasks.counters)
    assert sorted(got_left) == sorted(want_left)
    assert got.tasks.counters[HEAP_N] == len(want_left)
    want_cols = columns(want)
    for name, col in columns(got).items():
        assert same_bits(col, want_cols[name]), name
