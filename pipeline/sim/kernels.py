"""Compiled hot paths of the core: the completion heap, releasing finished tasks, and
checking-and-applying a policy's placements.  They know nothing of policies.

The passes the core calls (:func:`complete_until`, :func:`apply_placements`,
:func:`start_opportunistic`) take the core's tables and read their arrays grouped by owner
(:mod:`pipeline.sim.columns`: ``heap``, ``tasks``, ``nodes``, ``records``), so compiled code
reads a field by name.  The completion pass has a plain-Python reference it is tested
against (:mod:`pipeline.sim.completion_reference`).

Ties in the heap are broken by a sequence number, so the order of simultaneous completions
is the order their tasks started (deterministic by construction, as in SimPy's kernel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from pipeline.sim.columns import (
    CompletionHeap,
    Finished,
    NodeCols,
    RecordCols,
    TaskCols,
    read_heap,
    read_nodes,
    read_records,
    read_tasks,
)
from pipeline.sim.heap import heap_pop, heap_push
from pipeline.sim.jit import helper, inlined
from pipeline.sim.tasks import (
    DONE,
    FREE,
    FREE_TOP,
    HAS_INPUTS,
    HEAP_N,
    IS_PARENT,
    N_DONE,
    OPPORTUNISTIC,
    PAUSED,
    PENDING,
    REC_N,
    RUNNING,
    SPEC,
    TRACKED,
    X_OPP,
    X_OPP_QUEUE_S,
    X_OPP_STARTS,
)

if TYPE_CHECKING:
    from pipeline.sim.cluster import NodeState
    from pipeline.sim.tasks import Heap, Records, TaskTable

UP = 2
EPS = 1e-9  # relative slack in capacity checks (float sums of requests drift)


@inlined
def _pop(heap, counters):
    """:func:`heap_pop` on a :class:`~pipeline.sim.columns.CompletionHeap`."""
    heap_pop(heap.time, heap.seq, heap.slot, heap.epoch, counters)


def complete_until(limit: float, heap: Heap, tasks: TaskTable, nodes: NodeState,
                   records: Records, out: Finished) -> tuple[int, int]:
    """Finish tasks whose end is ``<= limit``, in time order; record them and free slots.

    ``out`` (:class:`~pipeline.sim.columns.Finished`) is filled here.  Freed slots are reset
    for reuse.  Finished slots flagged ``IS_PARENT`` are listed in ``out.follow_*`` (kept,
    not freed) so the caller can release their dependants.  ``out.clock[0]`` is set to the
    last end time.  Returns (status, n_follow): status 0 when all due completions are
    done, 1 when the record buffer or an output list is full.
    A task flagged ``OPPORTUNISTIC`` gives its resources back to the node's opportunistic
    allocation ``oalloc`` (the RM's ``alloc`` never held them); one flagged ``TRACKED``
    records its ``extra`` row (then zeroed), the others zeros.
    A task flagged ``SPEC`` (it has or had a speculative copy, or is one) is popped and
    listed in ``out.spec_slot``/``out.spec_end`` (``out.n_spec[0]`` of them) for the
    caller, which settles which attempt won (:mod:`pipeline.sim.speculation`); its
    resources stay held until then (nothing is placed before).
    Each finished task counts in its node's ``done`` and ``done_s`` (run time).
    The plain-Python reference is :func:`pipeline.sim.completion_reference.complete_until`.
    """
    return _complete_until(limit, read_heap(heap), read_tasks(tasks), read_nodes(nodes),
                           read_records(records), tuple(out))


@njit(cache=True)
def _complete_until(limit, heap_cols, task_cols, node_cols, record_cols, out_cols):
    """:func:`complete_until`, compiled; the groups come as plain tuples (see
    :mod:`pipeline.sim.columns`) and are named here."""
    return _complete_loop(limit, CompletionHeap(*heap_cols), TaskCols(*task_cols),
                          NodeCols(*node_cols), RecordCols(*record_cols), Finished(*out_cols))


@helper
def _complete_loop(limit, heap, tasks, nodes, records, out):
    """:func:`complete_until`'s loop on the named groups; a :func:`~pipeline.sim.jit.helper`
    so that its per-completion steps (:func:`~pipeline.sim.jit.inlined`) become its own code."""
    counters = tasks.counters
    nf = 0
    while counters[HEAP_N] > 0:
        s = heap.slot[0]
        if heap.epoch[0] != tasks.epoch[s]:  # a run that ended otherwise (stopped, re-timed)
            _pop(heap, counters)
            continue
        end = heap.time[0]
        if end > limit:
            return 0, nf
        if (counters[REC_N] >= len(records.row) or nf >= len(out.follow_slot)
                or out.n_spec[0] >= len(out.spec_slot)):
            return 1, nf
        _pop(heap, counters)
        out.clock[0] = end
        if tasks.flags[s] & SPEC:
            k = out.n_spec[0]
            out.spec_slot[k] = s
            out.spec_end[k] = end
            out.n_spec[0] = k + 1
            continue
        _finish(s, end, tasks, nodes, records)
        if tasks.flags[s] & IS_PARENT:
            out.follow_slot[nf] = s
            out.follow_end[nf] = end
            nf += 1
            tasks.state[s] = DONE  # finished, awaiting the caller
            continue
        _free_slot(s, tasks)
    return 0, nf


@inlined
def _finish(s, end, tasks, nodes, records):
    """Task ``s`` finished at ``end``: its node counts it and gets its resources back, and
    the next record row holds it; its heap entries go stale."""
    nd = tasks.node[s]
    nodes.done[nd] += 1
    nodes.done_s[nd] += end - tasks.start[s]
    _release_node(nd, s, end, tasks, nodes)
    counters = tasks.counters
    _record(counters[REC_N], s, end, tasks, nodes, records)
    counters[REC_N] += 1
    counters[N_DONE] += 1
    tasks.epoch[s] += 1


@inlined
def _record(i, s, end, tasks, nodes, records):
    """Write finished task ``s`` into record row ``i``; a TRACKED task's ``extra`` moves
    there (its slot's row is zeroed), the others record zeros."""
    records.row[i] = tasks.row[s]
    records.instance[i] = nodes.instance[tasks.node[s]]
    records.job[i] = tasks.job[s]
    records.ready[i] = tasks.ready[s]
    records.first_start[i] = tasks.first_start[s]
    records.start[i] = tasks.start[s]
    records.end[i] = end
    records.outcome[i] = 0
    records.attempts[i] = tasks.attempts[s]
    records.preemptions[i] = tasks.preemptions[s]
    records.evictions[i] = tasks.evictions[s]
    records.wasted[i] = tasks.wasted[s]
    records.locality[i] = tasks.locality[s]
    records.read[i, 0] = tasks.read[s, 0]
    records.read[i, 1] = tasks.read[s, 1]
    records.kind[i] = tasks.kind[s]
    if tasks.flags[s] & TRACKED:
        for k in range(tasks.extra.shape[1]):
            records.extra[i, k] = tasks.extra[s, k]
            tasks.extra[s, k] = 0.0
    else:
        for k in range(records.extra.shape[1]):
            records.extra[i, k] = 0.0


@inlined
def _free_slot(s, tasks):
    """Reset what every run of slot ``s`` set and push it on the free stack."""
    tasks.state[s] = FREE
    tasks.node[s] = -1
    tasks.start[s] = np.nan
    tasks.first_start[s] = np.nan
    tasks.attempts[s] = 0
    tasks.preemptions[s] = 0
    tasks.evictions[s] = 0
    tasks.wasted[s] = 0.0
    tasks.flags[s] = 0
    tasks.locality[s] = -1
    tasks.last_preempted[s] = False
    tasks.read[s, 0] = 0.0
    tasks.read[s, 1] = 0.0
    counters = tasks.counters
    tasks.free_stack[counters[FREE_TOP]] = s
    counters[FREE_TOP] += 1


@inlined
def _release_node(nd, s, end, tasks, nodes):
    """Give task ``s``'s resources on node ``nd`` back at time ``end``, to the allocation
    it was counted in (``oalloc`` for an opportunistic container, else ``alloc``)."""
    held = nodes.oalloc if tasks.flags[s] & OPPORTUNISTIC else nodes.alloc
    for k in range(3):
        held[nd, k] -= tasks.req[s, k]
    for k in range(2):
        u = tasks.used[s, k]
        nodes.used[nd, k] -= tasks.req[s, k] if np.isnan(u) else u
    nodes.ncont[nd] -= 1
    if nodes.ncont[nd] == 0:
        nodes.idle_since[nd] = end
        for k in range(3):
            nodes.alloc[nd, k] = 0.0  # no containers: clear float drift
            nodes.oalloc[nd, k] = 0.0
        for k in range(2):
            nodes.used[nd, k] = 0.0
    nodes.dirty[nd] = True


@inlined
def _hold(nd, s, tasks, nodes, held):
    """Task ``s`` takes its request on node ``nd`` (counted in ``held``: ``alloc`` or
    ``oalloc``) and its measured usage (the request where unmeasured)."""
    for k in range(3):
        held[nd, k] += tasks.req[s, k]
    for k in range(2):
        u = tasks.used[s, k]
        nodes.used[nd, k] += tasks.req[s, k] if np.isnan(u) else u
    nodes.ncont[nd] += 1
    nodes.dirty[nd] = True


@helper
def locality_level(inputs, nd, n_rack):
    """0 node-local (``nd`` holds the data), 1 rack-local (a node of ``nd``'s rack does),
    2 off-rack; ``inputs`` lists node slots, -1 padded (none: the data is on no node here,
    as on an elastic cluster, so the read is remote)."""
    level = 2
    rack = n_rack[nd]
    for k in range(len(inputs)):
        x = inputs[k]
        if x < 0:
            break
        if x == nd:
            return 0
        if rack >= 0 and n_rack[x] == rack:
            level = 1
    return level


@helper
def run_time(duration, speed, mb, level, read_rate):
    """Seconds a task runs: ``duration`` is its run time on a speed-1.0 machine reading its
    ``mb`` MiB of input node-locally; the compute part scales with the machine's speed, the
    read goes at ``read_rate[level]`` MiB/s (node, rack, off-rack)."""
    if not mb > 0:  # NaN or zero: nothing read beyond what the duration holds
        return duration / speed
    local = mb / read_rate[0]
    compute = duration - local if duration > local else 0.0
    return compute / speed + mb / read_rate[level]


@inlined
def _open_run(s, nd, now, work, first, heap, tasks, nodes, open_flag, read_rate):
    """A run of task ``s`` on node ``nd`` starts at ``now`` with ``work`` left (s at speed
    1.0): a ``first`` run (not a resumed one) gets its locality (a task flagged
    ``HAS_INPUTS``) and reads its input; its completion is pushed (never, for a task
    flagged ``open_flag``) and kept in ``run_end``."""
    level = 0
    mb = 0.0
    if first:
        if tasks.flags[s] & HAS_INPUTS:
            level = locality_level(tasks.inp[s], nd, nodes.rack)
            tasks.locality[s] = level
        mb = tasks.input_mb[s]
        if level > 0 and mb > 0:
            tasks.read[s, level - 1] += mb
    end = np.inf if tasks.flags[s] & open_flag else now + run_time(
        work, nodes.speed[nd], mb, level, read_rate)
    tasks.run_end[s] = end
    heap_push(heap.time, heap.seq, heap.slot, heap.epoch, tasks.counters, end, s,
              tasks.epoch[s])


@inlined
def _refusal(r, nd, pend_slots, tasks, nodes):
    """Why placing request ``r`` on node ``nd`` is refused (a reason code of
    :func:`apply_placements`), 0 if it is not."""
    if r < 0 or r >= len(pend_slots):
        return 1
    if nd < 0 or nd >= len(nodes.state):
        return 2
    s = pend_slots[r]
    if tasks.state[s] != PENDING:
        return 3
    if nodes.state[nd] != UP:
        return 4
    for k in range(3):
        c = nodes.cap[nd, k]
        if nodes.alloc[nd, k] + tasks.req[s, k] > c + EPS * c + 1e-12:
            return 5
    return 0


def apply_placements(now: float, req_idx: np.ndarray, node_idx: np.ndarray,
                     pend_slots: np.ndarray, heap: Heap, tasks: TaskTable, nodes: NodeState,
                     open_flag: int, read_rate: np.ndarray) -> tuple[int, int]:
    """Check and apply placements in order; return (-1, 0) or (bad index, reason code).

    Request ``req_idx[i]`` (an index into ``pend_slots``) goes on node ``node_idx[i]``.
    A task flagged ``open_flag`` (censored: 0 when the run censors nothing) never completes
    on its own: the core stops it when the trace's window closes.  A task flagged
    ``HAS_INPUTS`` gets its locality here (:func:`locality_level`) and a task that reads
    ``input_mb`` runs for :func:`run_time` at ``read_rate`` (MiB/s by locality); the MiB
    it read across a rack or the core are added to ``read``.
    Reason codes: 1 request index out of range, 2 node index out of range, 3 request
    already placed, 4 node not up, 5 does not fit the node's free capacity.
    """
    return _apply_placements(now, req_idx, node_idx, pend_slots, read_heap(heap),
                             read_tasks(tasks), read_nodes(nodes), open_flag, read_rate)


@njit(cache=True)
def _apply_placements(now, req_idx, node_idx, pend_slots, heap_cols, task_cols, node_cols,
                      open_flag, read_rate):
    """:func:`apply_placements`, compiled (the groups come as plain tuples)."""
    return _apply_loop(now, req_idx, node_idx, pend_slots, CompletionHeap(*heap_cols),
                       TaskCols(*task_cols), NodeCols(*node_cols), open_flag, read_rate)


@helper
def _apply_loop(now, req_idx, node_idx, pend_slots, heap, tasks, nodes, open_flag, read_rate):
    """:func:`apply_placements`'s loop on the named groups (its steps are inlined)."""
    for i in range(len(req_idx)):
        r = req_idx[i]
        nd = node_idx[i]
        code = _refusal(r, nd, pend_slots, tasks, nodes)
        if code:
            return i, code
        s = pend_slots[r]
        _hold(nd, s, tasks, nodes, nodes.alloc)
        tasks.state[s] = RUNNING
        tasks.node[s] = nd
        tasks.start[s] = now
        if np.isnan(tasks.first_start[s]):
            tasks.first_start[s] = now
        tasks.attempts[s] += 1
        _open_run(s, nd, now, tasks.duration[s], True, heap, tasks, nodes, open_flag,
                  read_rate)
    return -1, 0


def start_opportunistic(at: float, slots: np.ndarray, node_idx: np.ndarray, heap: Heap,
                        tasks: TaskTable, nodes: NodeState, open_flag: int,
                        read_rate: np.ndarray) -> None:
    """Start (or resume) opportunistic containers ``slots`` on nodes ``node_idx`` at ``at``
    (:mod:`pipeline.sim.nodemanager`): their resources count in the node's opportunistic
    allocation ``oalloc``; a resumed (paused) one runs only the work it had left."""
    _start_opportunistic(at, slots, node_idx, read_heap(heap), read_tasks(tasks),
                         read_nodes(nodes), open_flag, read_rate)


@njit(cache=True)
def _start_opportunistic(at, slots, node_idx, heap_cols, task_cols, node_cols, open_flag,
                         read_rate):
    """:func:`start_opportunistic`, compiled (the groups come as plain tuples)."""
    _opportunistic_loop(at, slots, node_idx, CompletionHeap(*heap_cols), TaskCols(*task_cols),
                        NodeCols(*node_cols), open_flag, read_rate)


@helper
def _opportunistic_loop(at, slots, node_idx, heap, tasks, nodes, open_flag, read_rate):
    """:func:`start_opportunistic`'s loop on the named groups (its steps are inlined)."""
    for j in range(len(slots)):
        s = slots[j]
        nd = node_idx[j]
        _hold(nd, s, tasks, nodes, nodes.oalloc)
        resumed = (tasks.flags[s] & PAUSED) != 0
        tasks.flags[s] = (tasks.flags[s] & ~PAUSED) | OPPORTUNISTIC
        tasks.state[s] = RUNNING
        tasks.node[s] = nd
        tasks.start[s] = at
        if np.isnan(tasks.first_start[s]):
            tasks.first_start[s] = at
        if not np.isnan(tasks.nmq_since[s]):
            tasks.extra[s, X_OPP_QUEUE_S] += at - tasks.nmq_since[s]
        tasks.nmq_since[s] = np.nan
        tasks.extra[s, X_OPP] = 1.0
        if not resumed:
            tasks.attempts[s] += 1
            tasks.extra[s, X_OPP_STARTS] += 1.0
        _open_run(s, nd, at, tasks.duration[s] - tasks.work0[s], not resumed, heap, tasks,
                  nodes, open_flag, read_rate)
