"""Compiled passes over measured usage (:mod:`pipeline.sim.usage`), and the named groups of
arrays they read.

Three groups, each a ``NamedTuple`` whose field names are its owner's attribute names (as
in :mod:`pipeline.sim.columns`): :class:`UsagePool` (the profiles' pieces) and
:class:`UsageHeap` (the usage-change heap), both owned by :class:`pipeline.sim.usage.Usage`,
and :class:`UsageTasks` (the task columns these passes use, owned by
:class:`pipeline.sim.tasks.TaskTable`).  The passes the core calls take each group as a
plain tuple in field order, read from its owner at every call (``read_*`` below: an owner
that grows re-creates its arrays), and name it on entry (numba types a plain tuple in C,
a NamedTuple in Python; see :mod:`pipeline.sim.columns`).

:func:`usage_until` has a plain-Python reference it is tested against
(:mod:`pipeline.sim.usage_reference`).
"""

from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.sim.heap import heap_pop, heap_push
from pipeline.sim.jit import helper
from pipeline.sim.tasks import HEAP_N, RUNNING, X_MEASURED, X_USED_CPU_S, X_USED_MEM_S


class UsagePool(NamedTuple):
    """The pieces of every profile in the pool, by piece index (a task's profile is its
    pieces ``useg_lo`` to ``useg_hi - 1``, in order of work).

    - ``bp``: work (s on a speed-1.0 machine, from the task's start) where the piece starts;
      it ends where the next one starts (the last one at the task's ``duration``);
    - ``vc``, ``vm``: cpu, mem used during the piece;
    - ``cc``, ``cm``: usage x work (cpu s, mem s at speed 1.0) of the task's earlier pieces,
      from work 0 to ``bp``.
    """

    bp: np.ndarray
    vc: np.ndarray
    vm: np.ndarray
    cc: np.ndarray
    cm: np.ndarray


class UsageHeap(NamedTuple):
    """The usage-change heap (a binary min-heap over ``(time, seq)``, :mod:`pipeline.sim.heap`):
    entry ``i`` moves run ``run[i]`` of slot ``slot[i]`` to its next profile piece at
    ``time[i]`` (wall s), pushed as number ``seq[i]`` (ties break by it); an entry whose run
    is no longer the slot's ``run_seq`` (or that is not running) is stale.  ``counters``:
    its size ``counters[HEAP_N]`` and next sequence number ``counters[HEAP_SEQ]``."""

    time: np.ndarray
    seq: np.ndarray
    slot: np.ndarray
    run: np.ndarray
    counters: np.ndarray


class UsageTasks(NamedTuple):
    """The per-slot task columns the usage passes read and write (``TaskTable``'s).

    - ``state``: slot state (``RUNNING`` ...); ``node``: node slot of the run (-1: none);
      ``start``: the current run's start (wall s); ``duration``: run time (s) at speed 1.0;
    - ``req``: (n, 3) cpu, mem, gpu requested; ``used``: (n, 2) cpu, mem in force (the
      profile's piece, else the task's mean; NaN: unmeasured, the request counts);
    - ``extra``: (n, N_EXTRA) float32 figures of TRACKED tasks (``X_MEASURED``,
      ``X_USED_CPU_S``, ``X_USED_MEM_S`` here);
    - ``work0``: work (s at speed 1.0) done before the current run; ``run_seq``: the
      current run's number (unique over the replay);
    - ``useg_lo``, ``useg_hi``: the task's pieces in :class:`UsagePool` (-1: no profile);
      ``useg_cur``: the piece in force.
    """

    state: np.ndarray
    node: np.ndarray
    start: np.ndarray
    duration: np.ndarray
    req: np.ndarray
    used: np.ndarray
    extra: np.ndarray
    work0: np.ndarray
    run_seq: np.ndarray
    useg_lo: np.ndarray
    useg_hi: np.ndarray
    useg_cur: np.ndarray


class Segments(NamedTuple):
    """Measured usage segments of a batch of tasks (``TaskBatch.usage_of``): task ``i``'s
    are ``indptr[i]`` to ``indptr[i + 1] - 1``, each from work ``start`` to ``end`` (s at
    speed 1.0 from the task's start) using ``cpu`` and ``mem``."""

    indptr: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray


# An owner's arrays in a group's field order, as the plain tuple a compiled pass takes.
read_pool = attrgetter(*UsagePool._fields)
read_heap = attrgetter(*UsageHeap._fields)
read_tasks = attrgetter(*UsageTasks._fields)


@helper
def _put(pool, k, bp, c, m, acc_c, acc_m):
    """Write piece ``k``: from work ``bp`` using ``c``, ``m``, after ``acc_c``, ``acc_m``."""
    pool.bp[k] = bp
    pool.vc[k] = c
    pool.vm[k] = m
    pool.cc[k] = acc_c
    pool.cm[k] = acc_m


@njit(cache=True)
def build(seg_cols, fill, duration, pool_cols, base, lo, hi):
    """Profiles of the tasks of ``seg_cols`` (:class:`Segments`) into the pool from piece
    ``base``; ``lo``/``hi`` get each task's piece range (-1 without segments); return the
    pool's new size.  A gap between segments (and the tail after the last) uses ``fill``
    ((n, 2): the task's mean, its request where unmeasured); a segment overlapped by an
    earlier one, or past the task's ``duration``, is clipped."""
    seg = Segments(*seg_cols)
    pool = UsagePool(*pool_cols)
    k = base
    for i in range(len(seg.indptr) - 1):
        a, z = seg.indptr[i], seg.indptr[i + 1]
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
                s = max(seg.start[j], p)
                e = min(seg.end[j], dur)
                if e <= s:
                    continue  # overlapped by an earlier segment, or past the task's end
            else:
                s = dur  # the tail after the last segment
                e = dur
            if s > p:  # a gap: the task's mean (its request where unmeasured)
                _put(pool, k, p, fill[i, 0], fill[i, 1], acc_c, acc_m)
                acc_c += (s - p) * fill[i, 0]
                acc_m += (s - p) * fill[i, 1]
                k += 1
                p = s
            if j < z:
                _put(pool, k, s, seg.cpu[j], seg.mem[j], acc_c, acc_m)
                acc_c += (e - s) * seg.cpu[j]
                acc_m += (e - s) * seg.mem[j]
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
def work_integral(s, p, tasks, pool):
    """Usage x work of task ``s`` from work 0 to ``p`` (cpu, mem); a task without a profile
    uses its ``used`` (its mean) throughout."""
    lo = tasks.useg_lo[s]
    if lo < 0:
        c = tasks.used[s, 0]
        m = tasks.used[s, 1]
        return (p * (tasks.req[s, 0] if np.isnan(c) else c),
                p * (tasks.req[s, 1] if np.isnan(m) else m))
    i = _piece(lo, tasks.useg_hi[s], pool.bp, p)
    d = p - pool.bp[i]
    return pool.cc[i] + d * pool.vc[i], pool.cm[i] + d * pool.vm[i]


@helper
def _add_integral(s, w0, w1, speed, sign, tasks, pool):
    """Add ``sign`` x the usage integral of task ``s``'s work ``w0`` to ``w1`` run at
    ``speed`` to its ``used_*_s``."""
    c1, m1 = work_integral(s, w1, tasks, pool)
    c0, m0 = work_integral(s, w0, tasks, pool)
    if sign > 0:
        tasks.extra[s, X_USED_CPU_S] += (c1 - c0) / speed
        tasks.extra[s, X_USED_MEM_S] += (m1 - m0) / speed
    else:
        tasks.extra[s, X_USED_CPU_S] -= (c1 - c0) / speed
        tasks.extra[s, X_USED_MEM_S] -= (m1 - m0) / speed


@helper
def _push(heap, time, slot, run):
    """:func:`heap_push` on a :class:`UsageHeap`."""
    heap_push(heap.time, heap.seq, heap.slot, heap.run, heap.counters, time, slot, run)


@njit(cache=True)
def start_runs(at, slots, nodes, n_speed, task_cols, pool_cols, heap_cols):
    """Runs of profiled ``slots`` start on ``nodes`` (speeds ``n_speed``) at ``at``: set the
    usage in force, push the first usage change, add the run's whole usage integral.
    Called before the node's ``used`` is increased by the task's ``used``."""
    tasks = UsageTasks(*task_cols)
    pool = UsagePool(*pool_cols)
    heap = UsageHeap(*heap_cols)
    for j in range(len(slots)):
        s = slots[j]
        speed = n_speed[nodes[j]]
        w0 = tasks.work0[s]
        i = _piece(tasks.useg_lo[s], tasks.useg_hi[s], pool.bp, w0)
        tasks.useg_cur[s] = i
        tasks.used[s, 0] = pool.vc[i]
        tasks.used[s, 1] = pool.vm[i]
        if i + 1 < tasks.useg_hi[s]:
            _push(heap, at + (pool.bp[i + 1] - w0) / speed, s, tasks.run_seq[s])
        _add_integral(s, w0, tasks.duration[s], speed, 1, tasks, pool)


@njit(cache=True)
def stop_runs(at, slots, n_speed, task_cols, pool_cols, done):
    """Runs of ``slots`` stop at ``at``: take back the usage integral of the work they did
    not do; ``done`` gets each one's work done (s at speed 1.0, all its runs)."""
    tasks = UsageTasks(*task_cols)
    pool = UsagePool(*pool_cols)
    for j in range(len(slots)):
        s = slots[j]
        speed = n_speed[tasks.node[s]]
        dur = tasks.duration[s]
        p = min(dur, tasks.work0[s] + max(at - tasks.start[s], 0.0) * speed)
        done[j] = p
        if tasks.extra[s, X_MEASURED] > 0:
            _add_integral(s, p, dur, speed, -1, tasks, pool)


@njit(cache=True)
def usage_until(limit, heap_cols, task_cols, pool_cols, n_used, n_speed):
    """Apply every usage change due at or before ``limit`` (stale ones are dropped) to the
    tasks' and their nodes' ``used`` (``n_used``: (nodes, 2)); return how many applied.
    The plain-Python reference is :func:`pipeline.sim.usage_reference.usage_until`."""
    heap = UsageHeap(*heap_cols)
    tasks = UsageTasks(*task_cols)
    pool = UsagePool(*pool_cols)
    applied = 0
    while heap.counters[HEAP_N] > 0 and heap.time[0] <= limit:
        s = heap.slot[0]
        rs = heap.run[0]
        heap_pop(heap.time, heap.seq, heap.slot, heap.run, heap.counters)
        if tasks.state[s] != RUNNING or tasks.run_seq[s] != rs:
            continue
        i = tasks.useg_cur[s] + 1
        nd = tasks.node[s]
        n_used[nd, 0] += pool.vc[i] - tasks.used[s, 0]
        n_used[nd, 1] += pool.vm[i] - tasks.used[s, 1]
        tasks.used[s, 0] = pool.vc[i]
        tasks.used[s, 1] = pool.vm[i]
        tasks.useg_cur[s] = i
        applied += 1
        if i + 1 < tasks.useg_hi[s]:
            _push(heap, tasks.start[s] + (pool.bp[i + 1] - tasks.work0[s]) / n_speed[nd], s,
                  rs)
    return applied
