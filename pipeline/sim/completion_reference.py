"""The completion step in plain Python: the reference :func:`pipeline.sim.kernels.complete_until`
is tested against (``tests/sim/test_completion_reference.py``).

Written for reading, not speed.  A change of behaviour starts here: change this, see the
differential test fail, then change the kernel until it passes again.

The step, as the core takes it at each event time ``limit``:

1. Completions are taken in time order, ties in the order their runs were pushed (the
   heap's sequence number).  An entry whose run has since ended otherwise (stopped,
   re-timed: the slot's epoch moved on) is stale and dropped.
2. The step stops at the first live completion after ``limit``, or before one it has no
   room to hand back (the record buffer or an output list is full: status 1).
3. A speculated task (``SPEC``) is only listed for the core, which settles which attempt
   won; it keeps its slot and its resources.
4. Any other task finishes: its node counts it, gets its resources back (an opportunistic
   container's to the NodeManager's allocation, a guaranteed one's to the RM's; a node
   left empty is reset exactly, dropping float drift), and a record row holds it.
5. A finished parent (``IS_PARENT``) keeps its slot, ``DONE``, listed for the core to
   release its dependants; any other slot is reset and freed.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.cluster import NodeState
from pipeline.sim.columns import Finished
from pipeline.sim.tasks import (
    DONE,
    FINISHED,
    FREE,
    FREE_TOP,
    HEAP_N,
    IS_PARENT,
    N_DONE,
    OPPORTUNISTIC,
    REC_N,
    SPEC,
    TRACKED,
    Heap,
    Records,
    TaskTable,
)

# Columns a finished task's record copies from its slot unchanged.
RECORDED = ("row", "job", "ready", "first_start", "start", "attempts", "preemptions",
            "evictions", "wasted", "locality", "read", "kind")
# What a freed slot is reset to (the fields every run sets; the others are set on admission).
RESET = {"state": FREE, "node": -1, "start": np.nan, "first_start": np.nan, "attempts": 0,
         "preemptions": 0, "evictions": 0, "wasted": 0.0, "flags": 0, "locality": -1,
         "last_preempted": False, "read": 0.0}

Entry = tuple[float, int, int, int]  # (end_s, seq, slot, epoch)


def complete_until(limit: float, heap: Heap, tasks: TaskTable, nodes: NodeState,
                   records: Records, out: Finished) -> tuple[int, int]:
    """Finish the tasks due by ``limit`` (steps 1-5 above); return (status, parents listed).

    The heap is left holding the entries not taken, sorted (a sorted array is a heap).
    """
    counters = tasks.counters
    entries = sorted(heap_entries(heap, counters))  # by (end_s, seq)
    parents = 0
    status = 0
    taken = 0
    for end, _seq, slot, epoch in entries:
        if epoch != tasks.epoch[slot]:
            taken += 1  # stale: dropped
            continue
        if end > limit:
            break
        if (counters[REC_N] >= len(records.row) or parents >= len(out.follow_slot)
                or out.n_spec[0] >= len(out.spec_slot)):
            status = 1
            break
        taken += 1
        out.clock[0] = end
        if tasks.flags[slot] & SPEC:
            list_speculated(out, slot, end)
            continue
        finish(tasks, nodes, records, slot, end)
        if tasks.flags[slot] & IS_PARENT:
            out.follow_slot[parents] = slot
            out.follow_end[parents] = end
            parents += 1
            tasks.state[slot] = DONE
        else:
            free(tasks, slot)
    set_heap(heap, counters, entries[taken:])
    return status, parents


def heap_entries(heap: Heap, counters: np.ndarray) -> list[Entry]:
    """The heap's entries, in storage order."""
    n = int(counters[HEAP_N])
    return list(zip(heap.time[:n].tolist(), heap.seq[:n].tolist(), heap.slot[:n].tolist(),
                    heap.epoch[:n].tolist(), strict=True))


def set_heap(heap: Heap, counters: np.ndarray, entries: list[Entry]) -> None:
    """Store ``entries`` (sorted) as the heap."""
    for i, (end, seq, slot, epoch) in enumerate(entries):
        heap.time[i], heap.seq[i], heap.slot[i], heap.epoch[i] = end, seq, slot, epoch
    counters[HEAP_N] = len(entries)


def list_speculated(out: Finished, slot: int, end: float) -> None:
    """Hand an attempt of a speculated task back to the core (step 3)."""
    k = int(out.n_spec[0])
    out.spec_slot[k] = slot
    out.spec_end[k] = end
    out.n_spec[0] = k + 1


def finish(tasks: TaskTable, nodes: NodeState, records: Records, slot: int,
           end: float) -> None:
    """Task ``slot`` finished at ``end`` (step 4); its heap entries go stale."""
    node = tasks.node[slot]
    nodes.done[node] += 1
    nodes.done_s[node] += end - tasks.start[slot]
    give_back(tasks, nodes, slot, node, end)
    record(tasks, nodes, records, slot, end)
    tasks.counters[N_DONE] += 1
    tasks.epoch[slot] += 1


def give_back(tasks: TaskTable, nodes: NodeState, slot: int, node: int, end: float) -> None:
    """The node gets the task's request and usage back (the request where unmeasured)."""
    opportunistic = tasks.flags[slot] & OPPORTUNISTIC
    held = nodes.oalloc if opportunistic else nodes.alloc
    held[node] -= tasks.req[slot]
    used = tasks.used[slot]
    nodes.used[node] -= np.where(np.isnan(used), tasks.req[slot, :2], used)
    nodes.ncont[node] -= 1
    if nodes.ncont[node] == 0:  # empty: exactly nothing held or used
        nodes.idle_since[node] = end
        nodes.alloc[node] = 0.0
        nodes.oalloc[node] = 0.0
        nodes.used[node] = 0.0
    nodes.dirty[node] = True


def record(tasks: TaskTable, nodes: NodeState, records: Records, slot: int,
           end: float) -> None:
    """Write the finished task into the next record row."""
    i = int(tasks.counters[REC_N])
    for name in RECORDED:
        getattr(records, name)[i] = getattr(tasks, name)[slot]
    records.instance[i] = nodes.instance[tasks.node[slot]]
    records.end[i] = end
    records.outcome[i] = FINISHED
    if tasks.flags[slot] & TRACKED:  # its figures move into the record
        records.extra[i] = tasks.extra[slot]
        tasks.extra[slot] = 0.0
    else:
        records.extra[i] = 0.0
    tasks.counters[REC_N] = i + 1


def free(tasks: TaskTable, slot: int) -> None:
    """Reset the slot and push it on the free stack (step 5)."""
    for name, value in RESET.items():
        getattr(tasks, name)[slot] = value
    top = int(tasks.counters[FREE_TOP])
    tasks.free_stack[top] = slot
    tasks.counters[FREE_TOP] = top + 1
