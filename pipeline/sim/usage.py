"""Measured usage over a task's life: usage profiles, usage-change events, usage integrals.

A trace's ``task_usage`` table gives each task piecewise-constant measured usage, with times
counted in the task's own work (seconds on a speed-1.0 machine from the start of its run).
At admission each task's segments become a *profile* in one shared pool: pieces
``[bp[i], bp[i+1])`` covering ``[0, duration]``, where a gap between measured segments uses
the task's mean usage (``cpu_used``/``mem_used``) and, where that is unknown too, its
request.  Tasks without segments have no profile: their usage is their mean throughout
(the request where unmeasured), as before.

Why usage changes are events (a second heap, next to the completion heap) rather than a
sampling tick: the events cost exactly one heap operation per measured piece of a running
task, and nothing at all for traces without ``task_usage``; a 3-second sampling tick would
cost O(running tasks) every 3 simulated seconds whether anything changed or not (28,800
passes over ~10^5 running containers per simulated day at 12,500 machines).  Node ``used``
is then exact at every instant, so the NodeManager's utilization checks
(:mod:`pipeline.sim.nodemanager`) read it directly.

Usage integrals: a TRACKED task (one with a profile, or one a NodeManager ran) accumulates
``used_cpu_s``/``used_mem_s`` (usage x wall time over all its runs) in the core: a run adds
the integral of its whole remaining profile when it starts, and a run that stops early
(killed, preempted, paused, evicted, cut at the horizon) takes back the part it did not run.
Any other task's usage is its mean throughout, so its integral is mean x run time, computed
when the run is written (:mod:`pipeline.replay.output`): the hot path pays nothing for
it.  Reading input data (``input_mb``) lengthens a run without changing its usage
profile, which is indexed by work done.

The compiled passes, and the named groups of arrays they read (``UsagePool`` and
``UsageHeap``, held here, and ``UsageTasks``, the task table's), are in
:mod:`pipeline.sim.usage_kernels`.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.tasks import (
    FREE,
    HEAP_N,
    TRACKED,
    X_MEASURED,
    X_USED_CPU_S,
    X_USED_MEM_S,
    TaskTable,
)
from pipeline.sim.usage_kernels import (
    Segments,
    UsagePool,
    build,
    read_heap,
    read_pool,
    read_tasks,
    start_runs,
    stop_runs,
    usage_until,
)


class Usage:
    """The usage pool (profiles of tasks in flight) and the usage-change heap."""

    def __init__(self, capacity: int = 1024) -> None:
        self.bp = np.zeros(capacity)
        self.vc = np.zeros(capacity)
        self.vm = np.zeros(capacity)
        self.cc = np.zeros(capacity)
        self.cm = np.zeros(capacity)
        self.n = 0
        self.time = np.zeros(1024)
        self.seq = np.zeros(1024, dtype=np.int64)
        self.slot = np.zeros(1024, dtype=np.int64)
        self.run = np.zeros(1024, dtype=np.int64)
        self.counters = np.zeros(8, dtype=np.int64)
        self.next_run = 0
        self.active = False  # some task has a profile (else nothing here costs anything)

    def _grow(self, names: tuple[str, ...], need: int) -> None:
        for name in names:
            old = getattr(self, name)
            if need > len(old):
                new = np.zeros(max(need, 2 * len(old)), dtype=old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)

    def admit(self, t: TaskTable, slots: np.ndarray, segments: tuple[np.ndarray, ...] | None
              ) -> None:
        """Profiles of newly admitted ``slots`` (``segments``: indptr, start, end, cpu, mem
        for those tasks in order, or None; their ``used`` holds their mean usage, NaN where
        unmeasured).  A task with a profile is TRACKED: the core keeps its usage integral."""
        if segments is not None:
            t.enable_extras()
        if not t.extras_on:
            return
        t.useg_lo[slots] = -1
        t.useg_hi[slots] = -1
        t.work0[slots] = 0.0
        if segments is None:
            return
        seg = Segments(*segments)
        mean = t.used[slots]
        fill = np.where(np.isfinite(mean), mean, t.req[slots, :2])
        room = 2 * len(seg.start) + len(slots) + 1
        if self.n + room > len(self.bp):
            self.compact(t)
        self._grow(UsagePool._fields, self.n + room)
        lo = np.empty(len(slots), dtype=np.int64)
        hi = np.empty(len(slots), dtype=np.int64)
        self.n = int(build(tuple(seg), fill, t.duration[slots], read_pool(self), self.n,
                           lo, hi))
        t.useg_lo[slots] = lo
        t.useg_hi[slots] = hi
        profiled = slots[lo >= 0]
        if len(profiled):
            self.active = True
            t.flags[profiled] |= np.int8(TRACKED)
            t.extra[profiled, X_MEASURED] = 1.0

    def compact(self, t: TaskTable) -> None:
        """Keep only the profiles of tasks still in flight (a finished task's pieces are
        never read again), so the pool holds what is in flight, not the trace so far."""
        live = np.flatnonzero((t.useg_lo >= 0) & (t.state != FREE))
        t.useg_lo[(t.useg_lo >= 0) & (t.state == FREE)] = -1
        lo, hi = t.useg_lo[live], t.useg_hi[live]
        counts = hi - lo
        new_lo = np.cumsum(counts) - counts
        total = int(counts.sum())
        take = np.repeat(lo - new_lo, counts) + np.arange(total)
        for name in UsagePool._fields:
            arr = getattr(self, name)
            arr[:total] = arr[take]  # (gathered into a copy first, then written)
        shift = new_lo - lo
        t.useg_lo[live] = new_lo
        t.useg_hi[live] = new_lo + counts
        cur = t.useg_cur[live]
        t.useg_cur[live] = np.where(cur >= 0, cur + shift, cur)
        self.n = total

    @staticmethod
    def track(t: TaskTable, slots: np.ndarray) -> None:
        """From now on the core keeps these tasks' extra figures (a NodeManager runs them):
        the usage integral starts from their earlier runs' time (``wasted``) at their mean."""
        new = slots[(t.flags[slots] & TRACKED) == 0]
        if len(new) == 0:
            return
        t.flags[new] |= np.int8(TRACKED)
        mean = t.used[new]
        measured = np.all(np.isfinite(mean), axis=1)
        t.extra[new, X_MEASURED] = measured
        have = new[measured]
        t.extra[have, X_USED_CPU_S] = t.used[have, 0] * t.wasted[have]
        t.extra[have, X_USED_MEM_S] = t.used[have, 1] * t.wasted[have]

    def start(self, t: TaskTable, at: float, slots: np.ndarray, nodes: np.ndarray,
              speed: np.ndarray) -> None:
        """Runs of ``slots`` start on ``nodes`` (before node usage is added): usage in force
        and first change for profiled tasks, usage integrals for TRACKED ones."""
        k = len(slots)
        if k == 0 or not t.extras_on:
            return
        t.run_seq[slots] = np.arange(self.next_run, self.next_run + k)
        self.next_run += k
        prof = t.useg_lo[slots] >= 0 if self.active else np.zeros(k, dtype=np.bool_)
        if prof.any():
            self._grow(("time", "seq", "slot", "run"), int(self.counters[HEAP_N]) + k)
            start_runs(at, slots[prof], nodes[prof], speed, read_tasks(t), read_pool(self),
                       read_heap(self))
            slots, nodes = slots[~prof], nodes[~prof]
        flat = (t.flags[slots] & TRACKED) != 0  # tracked, mean usage throughout the run
        if not flat.any():
            return
        flat &= t.extra[slots, X_MEASURED] > 0
        s = slots[flat]
        left = (t.duration[s] - t.work0[s]) / speed[nodes[flat]]
        t.extra[s, X_USED_CPU_S] += t.used[s, 0] * left
        t.extra[s, X_USED_MEM_S] += t.used[s, 1] * left

    def stop(self, t: TaskTable, at: float, slots: np.ndarray, speed: np.ndarray
             ) -> np.ndarray:
        """Runs of ``slots`` stop at ``at``; return the work each had done (all runs)."""
        if not t.extras_on:
            return np.minimum(t.duration[slots], np.maximum(at - t.start[slots], 0.0)
                              * speed[np.maximum(t.node[slots], 0)])
        done = np.zeros(len(slots))
        if len(slots):
            stop_runs(at, slots, speed, read_tasks(t), read_pool(self), done)
        return done

    def advance(self, t: TaskTable, limit: float, used: np.ndarray, speed: np.ndarray) -> int:
        """Apply usage changes due by ``limit``; return how many were applied."""
        if not self.active or self.counters[HEAP_N] == 0 or self.time[0] > limit:
            return 0  # nothing due (the heap's top is its earliest change)
        return int(usage_until(limit, read_heap(self), read_tasks(t), read_pool(self), used,
                               speed))
