"""``fcfs``: strict first-come-first-served for rigid batch jobs.

Source: the baseline of the HPC scheduling literature, e.g. Feitelson, "Workload Modeling
for Computer Systems Performance Evaluation" (2015), and Mu'alem and Feitelson, "Utilization,
Predictability, Workloads, and User Runtime Estimates in Scheduling the IBM SP2 with
Backfilling" (IEEE TPDS 12(6), 2001): jobs start in arrival order; the first job that does
not fit blocks every job behind it, whatever their size (no backfilling).  A job spread over
nodes (a gang of tasks) fits when all its tasks do.  At one instant
the core releases completions first, then adds arrivals in trace order, then calls the
policy once; starting from the head of the queue, each job starts while it fits.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.hpc.pool import Placed, Pool, fcfs_pass, job_starts
from pipeline.policies.models import pending_allow
from pipeline.sim.interface import Decisions, SchedView


class Fcfs(PolicyBase):
    """Start jobs from the head of the queue while they fit; stop at the first that does not."""

    name = "fcfs"
    summary = "HPC first-come-first-served: jobs start in arrival order, no backfilling"
    source = ("Mu'alem & Feitelson, IEEE TPDS 12(6), 2001 (the FCFS baseline); "
              "Parallel Workloads Archive")
    PARAMS: ClassVar[dict[str, Param]] = {}

    def decide(self, view: SchedView) -> Decisions:
        pending = view.pending
        pool = Pool(view.nodes, pending.req, pending_allow(view))
        rows = np.empty(len(pending), np.int64)
        nodes = np.empty(len(pending), np.int64)
        n, _ = fcfs_pass(pool.room, job_starts(pending.gang), Placed(rows, nodes))
        return Decisions(place_req=rows[:n], place_node=nodes[:n])
