"""Applications under their leaf queues: the per-call tree the assignment kernel walks.

The FairScheduler orders applications inside a leaf queue by the leaf's policy, as it orders
queues inside a parent (``FSLeafQueue.assignContainer`` sorts its runnable apps with the
same comparators).  Each job with pending requests becomes a node below its leaf queue,
with weight 1 (``sizebasedweight`` off, the Hadoop default), no minimum and no maximum; its
usage is that of its running containers.  Applications are numbered in order of their first
pending request, which breaks ties (Hadoop: start time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from pipeline.policies.drf import group_by_code

_NO_MARK = np.zeros(1, dtype=np.int64)


@njit(cache=True)
def number_apps(req_job, req, run_job, run_req, scratch, mark, stamp):
    """App of each request, each app's first request, running usage and pending demand.

    ``scratch`` maps job codes to apps during the call (all -1 before and after).  With
    ``stamp > 0``, ``mark[job] = stamp`` for every running container's job (the
    application limits' liveness marks, :mod:`.limits`, set in the same pass).
    """
    m = req_job.shape[0]
    app = np.empty(m, dtype=np.int64)
    first = np.empty(m, dtype=np.int64)
    na = 0
    for i in range(m):
        j = req_job[i]
        if scratch[j] < 0:
            scratch[j] = na
            first[na] = i
            na += 1
        app[i] = scratch[j]
    pend = np.zeros((na, 3))
    for i in range(m):
        for k in range(3):
            pend[app[i], k] += req[i, k]
    use = np.zeros((na, 3))
    for i in range(run_job.shape[0]):
        j = run_job[i]
        if stamp > 0:
            mark[j] = stamp
        if j < scratch.shape[0] and scratch[j] >= 0:
            for k in range(3):
                use[scratch[j], k] += run_req[i, k]
    for i in range(na):
        scratch[req_job[first[i]]] = -1
    return app, first[:na].copy(), use, pend


@dataclass
class AppTree:
    """Queues ``0..nq-1`` then applications, as arrays for :func:`fair_fill`."""

    node_of_req: np.ndarray
    parent: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
    kind: np.ndarray
    weight: np.ndarray
    min_share: np.ndarray
    max_share: np.ndarray
    usage: np.ndarray
    demand: np.ndarray
    rank: np.ndarray
    app_job: np.ndarray  # job code of each application (node n_queues + a)


class AppNumbering:
    """Keeps the job-code scratch map between calls (grown on demand)."""

    def __init__(self) -> None:
        self.scratch = np.full(1024, -1, dtype=np.int64)

    def tree(self, parent: np.ndarray, kind: np.ndarray, weight: np.ndarray,
             min_share: np.ndarray, max_share: np.ndarray, usage: np.ndarray,
             demand: np.ndarray, leaf_queue_of_req: np.ndarray, req_job: np.ndarray,
             req: np.ndarray, run_job: np.ndarray, run_req: np.ndarray,
             mark: np.ndarray | None = None, stamp: int = 0) -> AppTree:
        """Add one node per pending job below its leaf queue (queues keep their indices);
        ``mark``/``stamp``: see :func:`number_apps`."""
        top = int(req_job.max()) + 1 if len(req_job) else 0
        if top > len(self.scratch):
            self.scratch = np.full(max(top, 2 * len(self.scratch)), -1, dtype=np.int64)
        app, first, use, pend = number_apps(
            req_job, np.ascontiguousarray(req), run_job, np.ascontiguousarray(run_req),
            self.scratch, _NO_MARK if mark is None else mark, 0 if mark is None else stamp)
        nq, na = len(parent), len(first)
        full_parent = np.concatenate([parent, leaf_queue_of_req[first]]).astype(np.int64)
        indptr, order = group_by_code(full_parent[1:], nq + na)  # children by parent
        return AppTree(
            nq + app, full_parent, indptr, order + 1,
            np.concatenate([kind, np.zeros(na, np.int64)]),
            np.concatenate([weight, np.ones(na)]), np.vstack([min_share, np.zeros((na, 3))]),
            np.vstack([max_share, np.full((na, 3), np.inf)]), np.vstack([usage, use]),
            np.vstack([demand, use + pend]),
            np.concatenate([np.zeros(nq), first.astype(np.float64)]),
            np.asarray(req_job)[first])
