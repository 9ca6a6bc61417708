"""Which requests run as opportunistic containers: a replay setting, decided per task.

- ``priority``: tasks whose priority is at most ``max_priority`` (Google 2011's free tier is
  priorities 0-1, which its scheduler may evict at will).
- ``queue``: tasks of the trace queues named (Alibaba 2018's batch jobs beside its online
  services' containers, whose queue is ``online``).
- ``percent``: ``percent`` % of each job's tasks, as MapReduce's
  ``mapreduce.job.num-opportunistic-maps-percent`` marks ⌊n·p/100⌋ of a job's n maps.  The
  replay sees a job's tasks as they arrive and not its size, so it marks the k-th task
  (0-based, in arrival order) when ⌊(k+1)·p/100⌋ > ⌊k·p/100⌋: every prefix of the job holds
  the share MapReduce would give it, spread over the job rather than its first tasks.

A task keeps its type for the whole replay (a killed opportunistic container is asked for
again as opportunistic, as the MapReduce AM re-requests the same kind).  A task that asks
for a GPU is always guaranteed: over-subscription works on measured CPU and memory, while a
GPU share is bound to a device for the container's whole run (:mod:`pipeline.sim.gpus`).
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.interface import ClusterInfo, PendingView


class ContainerTypes:
    """The per-task opportunistic flag, remembered by trace row."""

    def __init__(self, by: str, percent: float, max_priority: int, queues: str,
                 cluster: ClusterInfo) -> None:
        self.by, self.percent, self.max_priority = by, percent, max_priority
        names = {q.strip() for q in queues.split(",") if q.strip()}
        self.queue_codes = np.array([i for i, q in enumerate(cluster.queues) if q in names],
                                    dtype=np.int64)
        # percent rule: each trace row's decision (-1: not seen yet) and tasks seen per job
        self._flag = np.full(0, -1, dtype=np.int8)
        self._count = np.zeros(0, dtype=np.int64)

    def mask(self, pending: PendingView) -> np.ndarray:
        """Whether each pending request is opportunistic (never one asking for a GPU)."""
        if self.by == "priority":
            opp = np.asarray(pending.priority) <= self.max_priority
        elif self.by == "queue":
            opp = np.isin(pending.queue, self.queue_codes)
        elif self.by == "percent":
            opp = self._percent(pending)
        else:
            return np.zeros(len(pending), dtype=np.bool_)
        return opp & (np.asarray(pending.req)[:, 2] <= 0)

    def _percent(self, pending: PendingView) -> np.ndarray:
        rows = np.asarray(pending.row, dtype=np.int64)
        if len(rows) == 0:
            return np.zeros(0, dtype=np.bool_)
        self._flag = _grown(self._flag, int(rows.max()) + 1, -1)
        flag = self._flag[rows]
        unseen = flag < 0
        if unseen.any():  # first sight, in trace-row order: the rank does not depend on timing
            new = rows[unseen]
            order = np.argsort(new, kind="stable")
            new = new[order]
            jobs = np.asarray(pending.take("job", np.flatnonzero(unseen)), np.int64)[order]
            self._count = _grown(self._count, int(jobs.max()) + 1, 0)
            by_job = np.argsort(jobs, kind="stable")
            sorted_jobs = jobs[by_job]
            first = np.searchsorted(sorted_jobs, sorted_jobs, side="left")
            rank = np.empty(len(new), dtype=np.int64)
            rank[by_job] = np.arange(len(new)) - first + self._count[sorted_jobs]
            np.add.at(self._count, jobs, 1)
            p = self.percent
            mark = np.floor((rank + 1) * p / 100) > np.floor(rank * p / 100)
            self._flag[new] = mark
            flag = self._flag[rows]
        return flag > 0


def _grown(array: np.ndarray, size: int, fill: int) -> np.ndarray:
    """``array`` extended to at least ``size`` entries (doubling), new ones ``fill``."""
    if size <= len(array):
        return array
    out = np.full(max(size, 2 * len(array)), fill, dtype=array.dtype)
    out[: len(array)] = array
    return out
