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
again as opportunistic, as the MapReduce AM re-requests the same kind).
"""

from __future__ import annotations

import math

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
        self._seen: dict[int, bool] = {}  # trace row -> opportunistic (percent rule)
        self._rank: dict[int, int] = {}  # job code -> tasks seen

    def mask(self, pending: PendingView) -> np.ndarray:
        """Whether each pending request is opportunistic."""
        if self.by == "priority":
            return np.asarray(pending.priority) <= self.max_priority
        if self.by == "queue":
            return np.isin(pending.queue, self.queue_codes)
        if self.by == "percent":
            return self._percent(pending)
        return np.zeros(len(pending), dtype=np.bool_)

    def _percent(self, pending: PendingView) -> np.ndarray:
        rows = pending.row.tolist()
        out = np.zeros(len(rows), dtype=np.bool_)
        new = [i for i, r in enumerate(rows) if r not in self._seen]
        if new:  # first sight: in trace-row order, so the rank does not depend on timing
            jobs = pending.job
            for i in sorted(new, key=lambda i: rows[i]):
                j = int(jobs[i])
                k = self._rank.get(j, 0)
                self._rank[j] = k + 1
                p = self.percent
                self._seen[rows[i]] = math.floor((k + 1) * p / 100) > math.floor(k * p / 100)
        for i, r in enumerate(rows):
            out[i] = self._seen[r]
        return out
