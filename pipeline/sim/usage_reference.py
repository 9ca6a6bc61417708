"""Usage changes in plain Python: the reference :func:`pipeline.sim.usage_kernels.usage_until`
is tested against (``tests/sim/test_usage_reference.py``).

Written for reading, not speed.  A change of behaviour starts here: change this, see the
differential test fail, then change the kernel until it passes again.

What the step does, as the core takes it at each event time ``limit``
(:mod:`pipeline.sim.usage` explains why usage changes are events):

1. Usage changes are taken in time order, ties in the order they were pushed (the heap's
   sequence number), up to and including ``limit``.
2. A change whose run is over (the slot is no longer running, or runs another run: its
   ``run_seq`` moved on) is stale and dropped.
3. Any other change moves the task to the next piece of its profile: the task's ``used``
   becomes the piece's cpu and mem, and its node's ``used`` moves by the difference.
4. If the profile has a piece after that one, its change is pushed: it is due when the run
   has done the work where that piece starts, at the node's speed (wall time =
   run start + (piece start - work done before the run) / speed).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim.tasks import HEAP_N, HEAP_SEQ, RUNNING

if TYPE_CHECKING:
    from pipeline.sim.tasks import TaskTable
    from pipeline.sim.usage import Usage

Change = tuple[float, int, int, int]  # (due_s, seq, slot, run_seq)


def usage_until(limit: float, usage: Usage, tasks: TaskTable, n_used: np.ndarray,
                n_speed: np.ndarray) -> int:
    """Apply the usage changes due by ``limit`` (steps 1-4 above); return how many applied.

    ``usage`` holds the heap (``time``, ``seq``, ``slot``, ``run``, ``counters``) and the
    profiles' pieces (``bp``, ``vc``, ``vm``); ``n_used`` is the nodes' (n, 2) cpu, mem in
    use.  The heap's arrays are written back in sorted order (a valid heap)."""
    changes = _changes(usage)
    applied = 0
    while changes and changes[0][0] <= limit:
        _, _, slot, run = heapq.heappop(changes)
        if tasks.state[slot] != RUNNING or tasks.run_seq[slot] != run:
            continue  # stale: that run is over
        piece = tasks.useg_cur[slot] + 1
        node = tasks.node[slot]
        n_used[node, 0] += usage.vc[piece] - tasks.used[slot, 0]
        n_used[node, 1] += usage.vm[piece] - tasks.used[slot, 1]
        tasks.used[slot, 0] = usage.vc[piece]
        tasks.used[slot, 1] = usage.vm[piece]
        tasks.useg_cur[slot] = piece
        applied += 1
        if piece + 1 < tasks.useg_hi[slot]:
            work_left = usage.bp[piece + 1] - tasks.work0[slot]
            due = tasks.start[slot] + work_left / n_speed[node]
            heapq.heappush(changes, (due, _next_seq(usage), slot, run))
    _store(usage, changes)
    return applied


def _changes(usage: Usage) -> list[Change]:
    """The heap's entries as a Python heap of (due, seq, slot, run)."""
    n = int(usage.counters[HEAP_N])
    changes = [(usage.time[k], int(usage.seq[k]), int(usage.slot[k]), int(usage.run[k]))
               for k in range(n)]
    heapq.heapify(changes)
    return changes


def _next_seq(usage: Usage) -> int:
    """The next push's sequence number (and count it)."""
    seq = int(usage.counters[HEAP_SEQ])
    usage.counters[HEAP_SEQ] = seq + 1
    return seq


def _store(usage: Usage, changes: list[Change]) -> None:
    """Write the remaining changes back into the heap's arrays, sorted."""
    changes.sort()
    for k, (due, seq, slot, run) in enumerate(changes):
        usage.time[k], usage.seq[k], usage.slot[k], usage.run[k] = due, seq, slot, run
    usage.counters[HEAP_N] = len(changes)
