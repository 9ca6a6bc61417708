"""Which requests run as opportunistic containers: a replay setting, decided per request.

- ``priority``: tasks whose priority is at most ``max_priority`` (Google 2011's free tier is
  priorities 0-1, which its scheduler may evict at will).
- ``queue``: tasks of the trace queues named (Alibaba 2018's batch jobs beside its online
  services' containers, whose queue is ``online``).
- ``percent``: MapReduce's own rule for ``mapreduce.job.num-opportunistic-maps-percent``
  (``RMContainerAllocator.ScheduledRequests.addMap``, Hadoop 3.3): each job's AM keeps a
  counter ``mapsMod100`` of the map requests it has made, modulo 100; a request is
  opportunistic when the counter is below the percentage, and every request moves it on.
  So the first ``percent`` maps of each hundred are opportunistic (all the maps of a job
  with fewer, none of the rest of the hundred), not a share spread over the job.  A map
  asked for again after its attempt was killed (by a NodeManager, a preemption, a lost
  node, a NodeManager's full queue or its queue limit: the AM sees each as a killed
  attempt) is a new request and goes through the counter again, so it may come back as
  the other type; a map asked for after a *failed* attempt would be guaranteed, but tasks
  here never fail.  Reduces are always guaranteed and do not move the counter; a task of
  one phase (no map/reduce kind in the trace) counts as a map.

With ``priority`` and ``queue`` a task keeps its type for the whole replay.  A task that
asks for a GPU is always guaranteed: over-subscription works on measured CPU and memory,
while a GPU share is bound to a device for the container's whole run
(:mod:`pipeline.sim.gpus`).
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.interface import ClusterInfo, PendingView
from pipeline.sim.tasks import KIND_REDUCE


class ContainerTypes:
    """The opportunistic flag of each request, remembered by trace row and request."""

    def __init__(self, by: str, percent: float, max_priority: int, queues: str,
                 cluster: ClusterInfo) -> None:
        self.by, self.percent, self.max_priority = by, percent, max_priority
        names = {q.strip() for q in queues.split(",") if q.strip()}
        self.queue_codes = np.array([i for i, q in enumerate(cluster.queues) if q in names],
                                    dtype=np.int64)
        # percent rule: each trace row's flag, the request (``asks``) it was decided for
        # (-1: none yet), and each job's mapsMod100
        self._flag = np.zeros(0, dtype=np.bool_)
        self._asked = np.full(0, -1, dtype=np.int64)
        self._mod100 = np.zeros(0, dtype=np.int64)

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
        size = int(rows.max()) + 1
        self._flag = _grown(self._flag, size, False)
        self._asked = _grown(self._asked, size, -1)
        asks = np.asarray(pending.asks, dtype=np.int64)
        new = np.flatnonzero(self._asked[rows] != asks)
        if len(new):  # requests made since the last call, in queue order (the AM's order)
            self._decide(rows[new], asks[new], pending.take("job", new),
                         pending.take("kind", new))
        return self._flag[rows]

    def _decide(self, rows: np.ndarray, asks: np.ndarray, jobs: np.ndarray,
                kinds: np.ndarray) -> None:
        """Flag new requests ``rows`` (in request order) by their jobs' mapsMod100."""
        self._asked[rows] = asks
        maps = np.asarray(kinds) != KIND_REDUCE
        self._flag[rows[~maps]] = False
        rows, jobs = rows[maps], np.asarray(jobs, dtype=np.int64)[maps]
        if len(rows) == 0:
            return
        self._mod100 = _grown(self._mod100, int(jobs.max()) + 1, 0)
        by_job = np.argsort(jobs, kind="stable")
        sorted_jobs = jobs[by_job]
        first = np.searchsorted(sorted_jobs, sorted_jobs, side="left")
        counter = np.empty(len(rows), dtype=np.int64)  # mapsMod100 when each was asked for
        counter[by_job] = (np.arange(len(rows)) - first + self._mod100[sorted_jobs]) % 100
        self._flag[rows] = counter < self.percent
        np.add.at(self._mod100, jobs, 1)
        self._mod100 %= 100


def _grown(array: np.ndarray, size: int, fill: object) -> np.ndarray:
    """``array`` extended to at least ``size`` entries (doubling), new ones ``fill``."""
    if size <= len(array):
        return array
    out = np.full(max(size, 2 * len(array)), fill, dtype=array.dtype)
    out[: len(array)] = array
    return out
