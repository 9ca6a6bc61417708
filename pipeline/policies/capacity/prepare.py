"""Compiled passes over the pending requests and the running containers, once per call.

The CapacityScheduler's state at a scheduling point is mostly sums: resources used per
(leaf, user), the applications alive now, their AM use.  With ~10^5 requests pending and
~10^5 containers running at 12,500 nodes, doing that with a chain of numpy calls (gather,
normalise, look up the leaf, bincount, mark) cost several passes over memory per call; each
function here is one pass.

Applications are trace jobs, and, as in YARN, an application is placed in one leaf queue
for one user when it is submitted: its leaf, its (leaf, user) pair and its priority are
fixed the first time one of its requests is seen pending (:func:`stamp_pending` lists those
requests so the caller looks their user and queue up), and every container of the job
counts against that leaf and that user.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.sim.jit import helper

EPS = 1e-9


class Sizing(NamedTuple):
    """How requests are normalised (``formulas.normalize``)."""

    minimum: np.ndarray  # (3,) minimum allocation, trace units
    calc: int  # resource calculator: 0 default (memory only), 1 dominant


class JobSums(NamedTuple):
    """Per job code: what a scan of the running containers reads and adds to."""

    first_seen: np.ndarray  # (n_jobs,) s, first seen pending (inf: never, an error)
    pair: np.ndarray  # (n_jobs,) int64 the job's (leaf, user) pair
    mem: np.ndarray  # (n_jobs,) normalised memory running, added to; updated
    # (empty: not summed, only fair ordering reads it)


class AliveApps(NamedTuple):
    """Per job code: what :func:`alive_counts` reads to count the applications alive."""

    started: np.ndarray  # (n_jobs,) bool: AM allocated
    key: np.ndarray  # (n_jobs,) int64 the key counted under: leaf, or partition * n + leaf
    pair: np.ndarray  # (n_jobs,) int64 the job's (leaf, user) pair
    am_req: np.ndarray  # (n_jobs, 3) the AM container's normalised size
    mark: np.ndarray  # (n_jobs,) bool scratch, all False on entry and on return; updated


class AliveCounts(NamedTuple):
    """Sums over the applications alive, added to by :func:`alive_counts`."""

    am_used: np.ndarray  # (n_keys, 3) resources of their AMs per key; updated
    key_apps: np.ndarray  # (n_keys,) int64 how many per key; updated
    pair_apps: np.ndarray  # (n_pairs,) int64 how many per (leaf, user) pair; updated


@helper
def _steps(minimum: np.ndarray, calc: int) -> tuple[float, float, float]:
    """The step each resource is rounded up to (0: not rounded; formulas.normalize): memory
    only with the default calculator, every resource with a minimum with the dominant one.
    Decided once per pass, not per request."""
    s0 = minimum[0] if minimum[0] > 0 and calc == 1 else 0.0
    s1 = minimum[1] if minimum[1] > 0 else 0.0
    s2 = minimum[2] if minimum[2] > 0 and calc == 1 else 0.0
    return s0, s1, s2


@helper
def _up(x: float, step: float) -> float:
    """``x`` rounded up to a multiple of ``step``, never below it (``step`` 0: ``x``)."""
    if step > 0:
        v = x if x > step else step
        return np.ceil(v / step - EPS) * step
    return x


@helper
def _normalize_row(req, i, steps, largest, out_req) -> None:
    for r in range(3):
        v = _up(req[i, r], steps[r])
        out_req[i, r] = v if v < largest[r] else largest[r]


@njit(cache=True)
def stamp_pending(job, first_seen, now, new_idx) -> int:
    """Stamp jobs seen for the first time with ``now``; write the index of each such job's
    first request to ``new_idx`` and return how many."""
    n_new = 0
    for i in range(len(job)):
        j = job[i]
        if first_seen[j] == np.inf:
            first_seen[j] = now
            new_idx[n_new] = i
            n_new += 1
    return n_new


@njit(cache=True)
def normalize_pending(req, rows, minimum, calc, largest, out_req) -> None:
    """Normalise the pending requests ``rows`` (indices; capped at the largest node) into
    the same rows of ``out_req``."""
    steps = _steps(minimum, calc)
    for i in rows:
        _normalize_row(req, i, steps, largest, out_req)


@njit(cache=True)
def scan_running(slots, t_job, req, sizing, jobs, n_pairs, out_req, job):
    """Normalised use per (leaf, user) pair of running containers.  Container ``i`` is row
    ``slots[i]`` of the task table's columns ``t_job`` and ``req`` (read in place, not
    gathered first); its job code is written to ``job[i]``.

    ``sizing``: :class:`Sizing`; ``jobs``: :class:`JobSums`.  When ``jobs.mem`` is not
    empty, each job's normalised memory is added to it (the caller reads and clears it);
    when ``out_req`` has a row per container, the normalised requests are written there.
    """
    first_seen, job_pair, job_mem = jobs.first_seen, jobs.pair, jobs.mem
    pair_used = np.zeros((n_pairs, 3))
    keep = len(out_req) == len(job)
    by_job = len(job_mem) > 0
    s0, s1, s2 = _steps(sizing.minimum, sizing.calc)
    for i in range(len(job)):
        s = slots[i]
        j = job[i] = t_job[s]
        if j >= len(first_seen) or first_seen[j] == np.inf:
            raise ValueError("a running container's application was never seen pending")
        p = job_pair[j]
        v0 = _up(req[s, 0], s0)
        v1 = _up(req[s, 1], s1)
        v2 = _up(req[s, 2], s2)
        pair_used[p, 0] += v0
        pair_used[p, 1] += v1
        pair_used[p, 2] += v2
        if keep:
            out_req[i, 0] = v0
            out_req[i, 1] = v1
            out_req[i, 2] = v2
        if by_job:
            job_mem[j] += v1
    return pair_used


@njit(cache=True)
def scan_running_parts(job, part, req, sizing, jobs, n_pairs, n_parts, out_req):
    """As :func:`scan_running`, per partition: ``part[i]`` is the partition of container
    ``i``'s node (usage counts where a container runs); ``out_req`` always gets the
    normalised requests.  Returns (n_parts, n_pairs, 3)."""
    first_seen, job_pair, job_mem = jobs.first_seen, jobs.pair, jobs.mem
    pair_used = np.zeros((n_parts, n_pairs, 3))
    by_job = len(job_mem) > 0
    steps = _steps(sizing.minimum, sizing.calc)
    for i in range(len(job)):
        j = job[i]
        if first_seen[j] == np.inf:
            raise ValueError("a running container's application was never seen pending")
        p = job_pair[j]
        x = part[i]
        for r in range(3):
            v = _up(req[i, r], steps[r])
            pair_used[x, p, r] += v
            out_req[i, r] = v
        if by_job:
            job_mem[j] += out_req[i, 1]
    return pair_used


@helper
def _count_alive(values, apps, counts, out, n) -> int:
    """Count the started applications of ``values`` not marked yet (see
    :func:`alive_counts`); append them to ``out`` from ``n``, return the new length."""
    started, mark, key = apps.started, apps.mark, apps.key
    am_used, key_apps, pair_apps = counts.am_used, counts.key_apps, counts.pair_apps
    for i in range(len(values)):
        j = values[i]
        if started[j] and not mark[j]:
            mark[j] = True
            out[n] = j
            n += 1
            k = key[j]
            for r in range(3):
                am_used[k, r] += apps.am_req[j, r]
            key_apps[k] += 1
            pair_apps[apps.pair[j]] += 1
    return n


@njit(cache=True)
def alive_counts(run_job, pend_job, apps, counts) -> None:
    """The started applications alive now (a container running or a request pending) summed
    in one pass, each once: their AM resources and their number per key (``apps.key``: the
    leaf, or partition and leaf), their number per (leaf, user) pair, added to ``counts``
    (:class:`AliveApps`, :class:`AliveCounts`).  Sums run in one fixed order (running
    first, then pending, each job where first seen); ``apps.mark`` is all False on entry
    and on return."""
    out = np.empty(len(run_job) + len(pend_job), dtype=np.int64)
    n = _count_alive(run_job, apps, counts, out, 0)
    n = _count_alive(pend_job, apps, counts, out, n)
    for k in range(n):
        apps.mark[out[k]] = False


@njit(cache=True)
def keep_waiting(jobs, started, job_key, closed, mark, kept, cand) -> tuple[int, int]:
    """The indices of the pending requests whose application is started or whose key is
    open (``closed[job_key[j]]``: the leaf, or partition and leaf, of application ``j``
    has no room to start one) to ``kept``, in order; the applications not started with a
    kept request, each once in first-seen order, to ``cand``; returns how many of each
    (``mark`` as in :func:`alive_counts`)."""
    n = 0
    c = 0
    for i in range(len(jobs)):
        j = jobs[i]
        s = started[j]
        if s or not closed[job_key[j]]:
            kept[c] = i
            c += 1
            if not s and not mark[j]:
                mark[j] = True
                cand[n] = j
                n += 1
    for k in range(n):
        mark[cand[k]] = False
    return c, n


@njit(cache=True)
def admitted(jobs, started, kept, members, mark):
    """The requests of ``kept`` (indices) whose application is started or one of
    ``members`` (``mark`` as in :func:`alive_counts`)."""
    for k in range(len(members)):
        mark[members[k]] = True
    out = np.empty(len(kept), dtype=np.int64)
    n = 0
    for i in kept:
        j = jobs[i]
        if started[j] or mark[j]:
            out[n] = i
            n += 1
    for k in range(len(members)):
        mark[members[k]] = False
    return out[:n]
