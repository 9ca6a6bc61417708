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
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.sim.heap import heap_pop, heap_push
from pipeline.sim.jit import helper
from pipeline.sim.tasks import (
    FREE,
    HEAP_N,
    RUNNING,
    TRACKED,
    X_MEASURED,
    X_USED_CPU_S,
    X_USED_MEM_S,
    TaskTable,
)


@njit(cache=True)
def _build(indptr, seg_s, seg_e, seg_c, seg_m, fill, duration, out_bp, out_c, out_m, out_cc,
           out_cm, base, lo, hi):
    """Profiles of tasks ``i`` with segments ``indptr[i]:indptr[i+1]`` into ``out_*`` from
    ``base``; ``lo``/``hi`` get each task's piece range (-1 without segments)."""
    k = base
    for i in range(len(indptr) - 1):
        a, z = indptr[i], indptr[i + 1]
        if a == z:
            lo[i] = -1
            hi[i] = -1
            continue
        lo[i] = k
        p = 0.0
        acc_c = 0.0
        acc_m = 0.0
        dur = duration[i]
        for j in range(a, z + 1):
            if j < z:
                s = max(seg_s[j], p)
                e = min(seg_e[j], dur)
                if e <= s:
                    continue  # overlapped by an earlier segment, or past the task's end
            else:
                s = dur  # the tail after the last segment
                e = dur
            if s > p:  # a gap: the task's mean (its request where unmeasured)
                out_bp[k] = p
                out_c[k] = fill[i, 0]
                out_m[k] = fill[i, 1]
                out_cc[k] = acc_c
                out_cm[k] = acc_m
                acc_c += (s - p) * fill[i, 0]
                acc_m += (s - p) * fill[i, 1]
                k += 1
                p = s
            if j < z:
                out_bp[k] = s
                out_c[k] = seg_c[j]
                out_m[k] = seg_m[j]
                out_cc[k] = acc_c
                out_cm[k] = acc_m
                acc_c += (e - s) * seg_c[j]
                acc_m += (e - s) * seg_m[j]
                k += 1
                p = e
        hi[i] = k
    return k


@helper
def _piece(lo, hi, bp, p):
    """Index of the piece of ``[lo, hi)`` in force at work ``p``."""
    a, z = lo, hi - 1
    while a < z:  # last breakpoint <= p
        mid = (a + z + 1) >> 1
        if bp[mid] <= p:
            a = mid
        else:
            z = mid - 1
    return a


@helper
def work_integral(s, p, t_lo, t_hi, t_used, t_req, bp, vc, vm, cc, cm):
    """Usage x work of task ``s`` from work 0 to ``p`` (cpu, mem); a task without a profile
    uses its ``used`` (its mean) throughout."""
    lo = t_lo[s]
    if lo < 0:
        c = t_used[s, 0]
        m = t_used[s, 1]
        return (p * (t_req[s, 0] if np.isnan(c) else c),
                p * (t_req[s, 1] if np.isnan(m) else m))
    i = _piece(lo, t_hi[s], bp, p)
    d = p - bp[i]
    return cc[i] + d * vc[i], cm[i] + d * vm[i]


@njit(cache=True)
def start_runs(at, slots, nodes, t_lo, t_hi, t_cur, t_used, t_req, t_work0, t_duration,
               t_run_seq, t_extra, n_speed, bp, vc, vm, cc, cm, ht, hs, hslot, hrun, ucount):
    """Runs of profiled ``slots`` start on ``nodes`` at ``at``: set the usage in force, push
    the first usage change, add the run's whole usage integral.  Called before the node's
    ``used`` is increased by the task's ``used``."""
    for j in range(len(slots)):
        s = slots[j]
        speed = n_speed[nodes[j]]
        w0 = t_work0[s]
        lo = t_lo[s]
        i = _piece(lo, t_hi[s], bp, w0)
        t_cur[s] = i
        t_used[s, 0] = vc[i]
        t_used[s, 1] = vm[i]
        if i + 1 < t_hi[s]:
            heap_push(ht, hs, hslot, hrun, ucount, at + (bp[i + 1] - w0) / speed, s,
                      t_run_seq[s])
        dur = t_duration[s]
        c1, m1 = work_integral(s, dur, t_lo, t_hi, t_used, t_req, bp, vc, vm, cc, cm)
        c0, m0 = work_integral(s, w0, t_lo, t_hi, t_used, t_req, bp, vc, vm, cc, cm)
        t_extra[s, X_USED_CPU_S] += (c1 - c0) / speed
        t_extra[s, X_USED_MEM_S] += (m1 - m0) / speed


@njit(cache=True)
def stop_runs(at, slots, t_node, t_start, t_lo, t_hi, t_used, t_req, t_work0, t_duration,
              t_extra, n_speed, bp, vc, vm, cc, cm, done):
    """Runs of ``slots`` stop at ``at``: take back the usage integral of the work they did
    not do; ``done`` gets each one's work done (s at speed 1.0, all its runs)."""
    for j in range(len(slots)):
        s = slots[j]
        speed = n_speed[t_node[s]]
        dur = t_duration[s]
        p = min(dur, t_work0[s] + max(at - t_start[s], 0.0) * speed)
        done[j] = p
        if t_extra[s, X_MEASURED] > 0:
            c1, m1 = work_integral(s, dur, t_lo, t_hi, t_used, t_req, bp, vc, vm, cc, cm)
            c0, m0 = work_integral(s, p, t_lo, t_hi, t_used, t_req, bp, vc, vm, cc, cm)
            t_extra[s, X_USED_CPU_S] -= (c1 - c0) / speed
            t_extra[s, X_USED_MEM_S] -= (m1 - m0) / speed


@njit(cache=True)
def usage_until(limit, ht, hs, hslot, hrun, ucount, t_state, t_run_seq, t_node, t_used,
                t_cur, t_hi, t_start, t_work0, bp, vc, vm, n_used, n_speed):
    """Apply every usage change due at or before ``limit`` (stale ones are dropped)."""
    applied = 0
    while ucount[HEAP_N] > 0 and ht[0] <= limit:
        s = hslot[0]
        rs = hrun[0]
        heap_pop(ht, hs, hslot, hrun, ucount)
        if t_state[s] != RUNNING or t_run_seq[s] != rs:
            continue
        i = t_cur[s] + 1
        nd = t_node[s]
        n_used[nd, 0] += vc[i] - t_used[s, 0]
        n_used[nd, 1] += vm[i] - t_used[s, 1]
        t_used[s, 0] = vc[i]
        t_used[s, 1] = vm[i]
        t_cur[s] = i
        applied += 1
        if i + 1 < t_hi[s]:
            heap_push(ht, hs, hslot, hrun, ucount,
                      t_start[s] + (bp[i + 1] - t_work0[s]) / n_speed[nd], s, rs)
    return applied


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
        indptr, start, end, cpu, mem = segments
        mean = t.used[slots]
        fill = np.where(np.isfinite(mean), mean, t.req[slots, :2])
        room = 2 * len(start) + len(slots) + 1
        if self.n + room > len(self.bp):
            self.compact(t)
        self._grow(("bp", "vc", "vm", "cc", "cm"), self.n + room)
        lo = np.empty(len(slots), dtype=np.int64)
        hi = np.empty(len(slots), dtype=np.int64)
        self.n = int(_build(indptr, start, end, cpu, mem, fill, t.duration[slots],
                            self.bp, self.vc, self.vm, self.cc, self.cm, self.n, lo, hi))
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
        for name in ("bp", "vc", "vm", "cc", "cm"):
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
            start_runs(at, slots[prof], nodes[prof], t.useg_lo, t.useg_hi, t.useg_cur, t.used,
                       t.req, t.work0, t.duration, t.run_seq, t.extra, speed, self.bp,
                       self.vc, self.vm, self.cc, self.cm, self.time, self.seq, self.slot,
                       self.run, self.counters)
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
            stop_runs(at, slots, t.node, t.start, t.useg_lo, t.useg_hi, t.used, t.req,
                      t.work0, t.duration, t.extra, speed, self.bp, self.vc, self.vm,
                      self.cc, self.cm, done)
        return done

    def advance(self, t: TaskTable, limit: float, used: np.ndarray, speed: np.ndarray) -> int:
        """Apply usage changes due by ``limit``; return how many were applied."""
        if not self.active or self.counters[HEAP_N] == 0:
            return 0
        return int(usage_until(limit, self.time, self.seq, self.slot, self.run, self.counters,
                               t.state, t.run_seq, t.node, t.used, t.useg_cur, t.useg_hi,
                               t.start, t.work0, self.bp, self.vc, self.vm, used, speed))
