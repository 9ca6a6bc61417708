"""Application limits of ``fair-scheduler``: ``maxRunningApps`` and ``maxAMShare`` (Hadoop 3.3).

Sources: FairScheduler.md ("maxRunningApps: limit the number of apps from the queue to run
at once"; "maxAMShare: limit the fraction of the queue's fair share that can be used to run
application masters ... The value of -1.0f will disable this feature ... The default value
is 0.5f"; ``<user>`` elements and ``userMaxAppsDefault``) and apache/hadoop 3.3
``MaxRunningAppsEnforcer`` (``canAppBeRunnable``, ``updateRunnabilityOnAppRemoval``),
``FSLeafQueue`` (``canRunAppAM``, ``computeMaxAMResource``), ``FSAppAttempt``
(``isOverAMShareLimit``) and ``FairSharePolicy``/``DominantResourceFairnessPolicy``
(``computeShares``); paraphrased, not copied.

Applications are trace jobs, modeled as in ``capacity-scheduler``
(:mod:`pipeline.policies.capacity.state`): an application's AM is **the first container the
scheduler gives the job**, and an application lives while the job has tasks pending or
running (it ends when it has neither; new tasks after that make it live again).

**maxRunningApps.**  Hadoop makes an application *runnable* only while its user has fewer
runnable applications than its limit (``<user>``, else ``userMaxAppsDefault``) and every
queue from its leaf up to the root has fewer runnable applications in its subtree than its
``maxRunningApps`` (a parent's limit counts all its descendants).  A non-runnable
application gets no containers (it still counts in its queue's demand); when a runnable
one ends, waiting applications become runnable in start-time order.  Here, at each
scheduling point, the live applications that are not runnable are taken in the order they
were first seen pending (the scheduling point, then the position of their first request:
submission order) and made runnable while the limits allow; an application stays runnable
until it ends, whether or not it got a container yet, as in Hadoop.  (Hadoop's removal
scan stops after one newly runnable application per waiting list; tracereplay admits
every one that fits.)  A job that ends and later gets new tasks waits to be runnable
again, in its original FIFO place, and its AM (if it had one) counts again; it needs no
new AM.

**maxAMShare.**  An application that has no AM yet gets a container only if its leaf's AM
usage plus that container fits in ``maxAMShare`` times the leaf's *instantaneous* fair
share, resource by resource (``Resources.fitsIn``); otherwise it is passed over at this
scheduling point and the leaf serves its other applications.  AM usage is the sum of the
AMs of the leaf's live started applications.  As in ``computeMaxAMResource``, a fair-share
component of 0 is replaced by ``min(unallocated in the cluster, the queue's maxResources)``;
a ``fair`` parent computes its children's fair shares for memory only (``FairSharePolicy
.computeShares(..., MEMORY)``), so below ``fair`` parents the cpu and gpu bases are always
that replacement, while ``drf`` parents compute every resource.  Hadoop rounds the product
up (``multiplyAndRoundUp``: whole MB and vcores, "to allow AM to run when there is only
one vcore"); tracereplay rounds cpu up to a whole core when the trace's cpu unit is cores,
memory up to a whole MB (``mem_unit_mb``) and gpus to whole devices, and does not round
normalized units.
Instantaneous fair shares count queues with pending or running work as active (Hadoop:
queues with runnable applications) and are cached while the active set and the cluster
are unchanged (Hadoop recomputes them every ``update-interval-ms``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.fair.config import UNLIMITED, QueueSetup
from pipeline.policies.fair.kernel import DRF

__all__ = ["UNLIMITED", "AppLimits", "am_limits", "increments"]

# per-job memory: name, dtype, initial value, trailing shape
_JOB_ARRAYS = (("seq", np.int64, -1, ()), ("job_leaf", np.int64, 0, ()),
               ("job_user", np.int64, 0, ()), ("started", np.bool_, False, ()),
               ("runnable", np.bool_, False, ()), ("listed", np.bool_, False, ()),
               ("mark", np.int64, 0, ()), ("am_req", np.float64, 0.0, (3,)))


class CallJobs(NamedTuple):
    """The jobs of one scheduling point, as :func:`track` reads them."""

    pend_job: np.ndarray  # (m,) int64: job code of each pending request
    pend_leaf: np.ndarray  # (m,) int64: its leaf queue index
    pend_user: np.ndarray  # (m,) int64: its user code (-1: none)
    run_job: np.ndarray  # (running,) int64: job code of each running container (may be
    # empty when the running jobs were marked already)
    stamp: int  # this call's liveness stamp (:meth:`AppLimits.begin`)


class QueueLimits(NamedTuple):
    """The maxRunningApps limits of the queue tree and the users."""

    count_apps: bool  # maxRunningApps is enforced somewhere
    parent: np.ndarray  # (n_queues,) int64: parent queue (-1: the root)
    queue_max: np.ndarray  # (n_queues,) int64: runnable applications allowed in the subtree
    user_max: np.ndarray  # (users + 1,) int64: per user code (last: a null user)


class JobMemory(NamedTuple):
    """Per job code, what the limits keep between calls (:class:`AppLimits`, same names)."""

    seq: np.ndarray  # FIFO sequence number (-1: not seen yet)
    job_leaf: np.ndarray  # queue index of the job's leaf
    job_user: np.ndarray  # user code (the last user_max entry for a null user)
    started: np.ndarray  # got its first container (its AM)
    runnable: np.ndarray  # admitted by maxRunningApps (while live)
    listed: np.ndarray  # in ``tracked``
    mark: np.ndarray  # call stamp of the jobs live at the last call
    am_req: np.ndarray  # (n, 3) the AM's size


@njit(cache=True)
def _live(call, lim, jobs, tracked, next_seq):
    """Mark the live jobs, number the new ones, end the ones gone; returns ``(out, n,
    cand, m, next_seq)``: the tracked jobs in ``out[:n]``, the waiting ones in
    ``cand[:m]``."""
    pend_job, seq, mark, stamp = call.pend_job, jobs.seq, jobs.mark, call.stamp
    n_pend = pend_job.shape[0]
    last_user = lim.user_max.shape[0] - 1
    for i in range(call.run_job.shape[0]):
        mark[call.run_job[i]] = stamp
    out = np.empty(tracked.shape[0] + n_pend, dtype=np.int64)
    cand = np.empty(n_pend if lim.count_apps else 0, dtype=np.int64)
    n = m = 0
    for i in range(n_pend):
        j = pend_job[i]
        if mark[j] == stamp and seq[j] >= 0:
            continue
        mark[j] = stamp  # first request of a job in this call (or of a job running too)
        if seq[j] < 0:  # first seen: FIFO position, leaf and user
            seq[j] = next_seq
            next_seq += 1
            jobs.job_leaf[j] = call.pend_leaf[i]
            jobs.job_user[j] = call.pend_user[i] if call.pend_user[i] >= 0 else last_user
        if jobs.started[j] and not jobs.listed[j]:  # back with new tasks: its AM counts again
            jobs.listed[j] = True
            out[n] = j
            n += 1
        if lim.count_apps and not jobs.runnable[j]:
            cand[m] = j
            m += 1
    for k in range(tracked.shape[0]):
        j = tracked[k]
        if mark[j] == stamp:
            out[n] = j
            n += 1
        else:  # the application ended
            jobs.listed[j] = False
            jobs.runnable[j] = False
    return out, n, cand, m, next_seq


@njit(cache=True)
def _counts(out, n, lim, jobs):
    """Runnable applications per queue subtree and per user, and AM usage per queue, of
    the tracked jobs ``out[:n]``."""
    parent = lim.parent
    q_count = np.zeros(parent.shape[0], dtype=np.int64)
    u_count = np.zeros(lim.user_max.shape[0], dtype=np.int64)
    am_used = np.zeros((parent.shape[0], 3))
    for k in range(n):
        j = out[k]
        if jobs.runnable[j]:
            u_count[jobs.job_user[j]] += 1
            q = jobs.job_leaf[j]
            while q >= 0:
                q_count[q] += 1
                q = parent[q]
        if jobs.started[j]:
            for r in range(3):
                am_used[jobs.job_leaf[j], r] += jobs.am_req[j, r]
    return q_count, u_count, am_used


@njit(cache=True)
def _admit(cand, m, out, n, lim, jobs, q_count, u_count):
    """Make the waiting jobs ``cand[:m]`` runnable in FIFO order while the limits allow
    (the counts updated); returns the new number of tracked jobs in ``out``."""
    parent, queue_max = lim.parent, lim.queue_max
    keys = np.empty(m, dtype=np.int64)
    for k in range(m):
        keys[k] = jobs.seq[cand[k]]
    for k in np.argsort(keys):
        if q_count[0] >= queue_max[0]:
            break  # the root is full: nothing else can start
        j = cand[k]
        u = jobs.job_user[j]
        if u_count[u] >= lim.user_max[u]:
            continue
        q = jobs.job_leaf[j]
        ok = True
        while q >= 0:
            if q_count[q] >= queue_max[q]:
                ok = False
                break
            q = parent[q]
        if not ok:
            continue
        jobs.runnable[j] = True
        u_count[u] += 1
        q = jobs.job_leaf[j]
        while q >= 0:
            q_count[q] += 1
            q = parent[q]
        if not jobs.listed[j]:
            jobs.listed[j] = True
            out[n] = j
            n += 1
    return n


@njit(cache=True)
def _keep(call, lim, jobs):
    """``(keep, may_start)``: which pending requests belong to runnable jobs (empty without
    ``count_apps``), and whether some of them could be an AM."""
    n_pend = call.pend_job.shape[0]
    keep = np.empty(n_pend if lim.count_apps else 0, dtype=np.bool_)
    may_start = False
    for i in range(n_pend):
        j = call.pend_job[i]
        ok = jobs.runnable[j] or not lim.count_apps
        if lim.count_apps:
            keep[i] = ok
        if ok and not jobs.started[j]:
            may_start = True
    return keep, may_start


@njit(cache=True)
def track(call, lim, jobs, tracked, next_seq):
    """One scheduling point of bookkeeping; returns ``(tracked, keep, am_used, may_start,
    next_seq)``.  ``call``, ``lim``, ``jobs``: :class:`CallJobs`, :class:`QueueLimits` and
    :class:`JobMemory` as plain tuples (``tuple(x)``: the dispatcher types those in C).

    ``tracked`` lists the jobs that were live and runnable or started at the previous call
    (``listed`` marks them); the ones no longer pending or running end here (they stop
    being runnable).  New jobs get their leaf, user and FIFO sequence number.  With
    ``count_apps``, waiting jobs are made runnable in FIFO order while the queue and user
    limits allow; ``keep`` says which pending requests belong to runnable jobs.  ``am_used``
    is the AM usage per queue; ``may_start`` whether some pending request could be an AM.
    ``mark[j] == stamp`` says job ``j`` is live now (``stamp`` grows by one every call).
    One pass over the running containers, two over the pending requests.
    """
    call, lim, jobs = CallJobs(*call), QueueLimits(*lim), JobMemory(*jobs)
    out, n, cand, m, next_seq = _live(call, lim, jobs, tracked, next_seq)
    q_count, u_count, am_used = _counts(out, n, lim, jobs)
    if m:
        n = _admit(cand, m, out, n, lim, jobs, q_count, u_count)
    keep, may_start = _keep(call, lim, jobs)
    return out[:n].copy(), keep, am_used, may_start, next_seq


@njit(cache=True)
def note_started(jobs, req, started, am_req, listed):
    """Record the first container of each job in ``jobs`` (placement order) as its AM;
    return the newly started jobs that were not tracked yet."""
    out = np.empty(jobs.shape[0], dtype=np.int64)
    n = 0
    for i in range(jobs.shape[0]):
        j = jobs[i]
        if not started[j]:
            started[j] = True
            for r in range(3):
                am_req[j, r] = req[i, r]
            if not listed[j]:
                listed[j] = True
                out[n] = j
                n += 1
    return out[:n].copy()


def increments(units: dict[str, str], mem_unit_mb: float) -> np.ndarray:
    """Rounding steps ``(cpu, mem, gpu)`` of the AM limit in trace units (0: none)."""
    cpu, mem, gpu = (units.get(k, "").lower() for k in ("cpu", "mem", "gpu"))
    return np.array([1.0 if "core" in cpu and "normalized" not in cpu else 0.0,
                     0.0 if "normalized" in mem else 1.0 / mem_unit_mb,
                     0.0 if "normalized" in gpu else 1.0])


@njit(cache=True)
def am_limits(am_share, fair, computed, max_share, available, step):
    """(n_queues, 3) AM limits: ``maxAMShare`` x fair share (see the module docstring).

    ``computed`` says which fair-share components the parents' policies set (the others
    are 0 in Hadoop); a component that is 0 is replaced by ``min(available, max_share)``
    (``available``: the cluster's unallocated resources); ``step`` rounds up (0: not);
    ``inf`` where there is no check.
    """
    out = np.full((am_share.shape[0], 3), np.inf)
    for q in range(am_share.shape[0]):
        if am_share[q] < 0:
            continue
        for k in range(3):
            base = fair[q, k] if computed[q, k] and fair[q, k] > 0 else min(
                available[k], max_share[q, k])
            x = am_share[q] * base
            if step[k] > 0:
                x = np.ceil(x / step[k] - 1e-9) * step[k]
            out[q, k] = x
    return out


class AppLimits:
    """The application limits of one run and the per-job memory they need between calls."""

    seq: np.ndarray  # FIFO sequence number of each job (-1: not seen yet)
    job_leaf: np.ndarray  # queue index of the job's leaf
    job_user: np.ndarray  # user code (the last user_max entry for a null user)
    started: np.ndarray  # got its first container (its AM)
    runnable: np.ndarray  # admitted by maxRunningApps (while live)
    listed: np.ndarray  # in ``tracked``
    mark: np.ndarray  # call stamp of the jobs live at the last call (see :func:`track`)
    am_req: np.ndarray  # (n, 3) the AM's size

    def __init__(self, qs: QueueSetup, users: tuple[str, ...], step: np.ndarray) -> None:
        tree = qs.tree
        self.count_apps = qs.limits_apps
        self.check_am = bool((qs.am_share >= 0).any())
        self.active = self.count_apps or self.check_am
        self.parent = tree.parent.astype(np.int64)
        self.queue_max = np.minimum(qs.max_apps, UNLIMITED).astype(np.int64)
        self.user_max = qs.user_limits(users)
        self.am_share = qs.am_share
        self.step = step
        computed = np.ones((tree.n_queues, 3), dtype=bool)
        for q in range(1, tree.n_queues):  # parents first (breadth-first order)
            p = int(tree.parent[q])
            computed[q] = computed[p] & np.array([qs.kind[p] == DRF, True, qs.kind[p] == DRF])
        self.computed = computed
        self.tracked = np.zeros(0, dtype=np.int64)
        self.next_seq = 0
        self.stamp = 0
        for name, dtype, fill, shape in _JOB_ARRAYS:
            setattr(self, name, np.full((1024, *shape), fill, dtype=dtype))

    def _grow(self, need: int) -> None:
        """Per-job arrays sized to the largest job code seen (doubling)."""
        old = len(self.seq)
        if need <= old:
            return
        size = max(need, 2 * old)
        for name, dtype, fill, shape in _JOB_ARRAYS:
            extra = np.full((size - old, *shape), fill, dtype=dtype)
            setattr(self, name, np.concatenate([getattr(self, name), extra]))

    def begin(self, pend_job: np.ndarray, run_job: np.ndarray) -> int:
        """Start a scheduling point: size the per-job arrays; return the liveness stamp."""
        top = max(int(pend_job.max()) + 1 if len(pend_job) else 0,
                  int(run_job.max()) + 1 if len(run_job) else 0)
        self._grow(top)
        self.stamp += 1
        return self.stamp

    def step_call(self, pend_job: np.ndarray, pend_queue: np.ndarray, pend_user: np.ndarray,
                  run_job: np.ndarray) -> tuple[np.ndarray | None, np.ndarray, bool]:
        """``(keep, am_used, may_start)`` for one scheduling point (see :func:`track`),
        after :meth:`begin`; ``run_job`` may be empty when the running containers' jobs
        were marked already.  ``keep`` is None when every pending request may get a
        container."""
        call = (pend_job, pend_queue, pend_user, run_job, self.stamp)
        lim = (self.count_apps, self.parent, self.queue_max, self.user_max)
        jobs = tuple(getattr(self, name) for name in JobMemory._fields)
        self.tracked, keep, am_used, may_start, self.next_seq = track(
            call, lim, jobs, self.tracked, self.next_seq)
        return (keep if self.count_apps and not keep.all() else None), am_used, may_start

    def note_started(self, jobs: np.ndarray, req: np.ndarray) -> None:
        """The placed requests' jobs (in placement order): first containers become AMs."""
        new = note_started(jobs, np.ascontiguousarray(req), self.started, self.am_req,
                           self.listed)
        if len(new):
            self.tracked = np.concatenate([self.tracked, new])
