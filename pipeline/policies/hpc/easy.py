"""``easy-backfill``: EASY backfilling for rigid batch jobs, as the textbook defines it.

Sources: D. Lifka, "The ANL/IBM SP Scheduling System" (JSSPP 1995), and A. Mu'alem and
D. Feitelson, "Utilization, Predictability, Workloads, and User Runtime Estimates in
Scheduling the IBM SP2 with Backfilling" (IEEE TPDS 12(6), 2001), section 2: jobs start in
arrival order while they fit.  When the first waiting job (the head) does not fit, it gets
a reservation: the *shadow time*, the earliest time enough processors are free for it if
running jobs end when their users said they would (start + requested time), and the *extra*
processors, those free at the shadow time beyond what the head needs.  A later job may
start now only if it fits now and does not delay the reservation: it ends (by its requested
time) no later than the shadow time, or it uses no more than the extra processors (which
it then takes from them).  Waiting jobs are considered in arrival order.

Conventions (documented choices where the sources are silent):

- a job's requested time is the trace's ``requested_s``; without one (an SWF -1) the job is
  planned as if it never ended: it never shortens a shadow time and backfills only into
  the extra processors;
- a running job past its requested time is expected to end now (it holds its processors
  until it actually ends);
- a job spread over nodes (an SWF log read as ``MaxNodes`` nodes: a gang of tasks) is one
  job here: it fits when all its tasks do, and it needs their processors together;
- planning counts processors (``cpu``) over all up nodes: exact for the Standard Workload
  Format's single pool, where every job goes to the one node; on several nodes a job also
  needs one node with room, memory and GPUs included;
- at one instant the core releases completions first, then adds arrivals in trace order,
  then calls the policy once.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.hpc.pool import Placed, Pool, backfill_pass, fcfs_pass, job_starts
from pipeline.policies.models import pending_allow
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs


class EasyBackfill(PolicyBase):
    """EASY: FCFS, plus later jobs that do not delay the first waiting job's reservation."""

    name = "easy-backfill"
    summary = ("HPC EASY backfilling: FCFS with a reservation for the first waiting job; later "
               "jobs start early only if they do not delay it")
    source = ("Lifka, JSSPP 1995 (ANL/IBM SP); Mu'alem & Feitelson, IEEE TPDS 12(6), 2001, "
              "section 2")
    PARAMS: ClassVar[dict[str, Param]] = {}

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        return Needs(running=True)  # the running jobs' ends decide the reservation

    def decide(self, view: SchedView) -> Decisions:
        pending, now = view.pending, view.now
        pool = Pool(view.nodes, pending.req, pending_allow(view))
        req = pool.req
        starts = job_starts(pending.gang)
        rows = np.empty(len(pending), np.int64)
        nodes = np.empty(len(pending), np.int64)
        out = Placed(rows, nodes)
        n, head = fcfs_pass(pool.room, starts, out)
        if head < len(starts) - 2:  # the head waits: backfill behind its reservation
            requested = pending.requested_s
            ends, cpus = self._planned_ends(view, now, rows[:n], requested)
            size = job_sizes(req, starts)
            shadow, extra = reservation(pool.free_cpu(), float(size[head]), ends, cpus)
            n = backfill_pass(pool.room, starts, head, size,
                              now + _estimates(requested[starts[:-1]]), shadow, extra, out, n)
        return Decisions(place_req=rows[:n], place_node=nodes[:n])

    @staticmethod
    def _planned_ends(view: SchedView, now: float, placed: np.ndarray,
                      requested: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """When each running task (and each task started in this pass) is expected to end,
        and its processors."""
        running = view.running
        ends = [np.maximum(running.start_s + _estimates(running.requested_s), now)]
        cpus = [running.req[:, 0]]
        if len(placed):
            ends.append(now + _estimates(requested[placed]))
            cpus.append(view.pending.req[placed, 0])
        return np.concatenate(ends), np.concatenate(cpus)


def reservation(free_now: float, need: float, ends: np.ndarray, cpus: np.ndarray
                ) -> tuple[float, float]:
    """The head's shadow time and the extra processors then: running jobs release their
    processors at their planned ends (earliest first) until ``need`` are free; the extra
    processors are all those free at that time (every job ending by then counted) beyond
    ``need``.  A head that no planned end frees enough for gets shadow time infinity and no
    extra processors."""
    available = free_now
    order = np.argsort(ends, kind="stable")
    for k in order:
        if not np.isfinite(ends[k]):
            break
        available += float(cpus[k])
        if available >= need - 1e-9:
            shadow = float(ends[k])
            at_shadow = free_now + float(cpus[ends <= shadow].sum())
            return shadow, at_shadow - need
    return float("inf"), 0.0


def job_sizes(req: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Processors per job (``starts``: :func:`~pipeline.policies.hpc.pool.job_starts`); a
    gang's are summed as numpy sums them."""
    size = req[starts[:-1], 0].copy()
    for k in np.flatnonzero(np.diff(starts) > 1).tolist():
        size[k] = float(req[np.arange(starts[k], starts[k + 1]), 0].sum())
    return size


def _estimates(requested: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(requested) & (requested > 0), requested, np.inf)
