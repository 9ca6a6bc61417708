"""Hadoop's native speculation rule (Hadoop 0.20, before LATE).

Hadoop 0.20 ``TaskInProgress.hasSpeculativeTask``: a running task is a candidate iff

- ``averageProgress - progress >= SPECULATIVE_GAP`` (0.2), where ``averageProgress`` is its
  job's map (or reduce) progress over all the job's tasks of that kind,
- it has run ``SPECULATIVE_LAG`` (60 s) or more, and
- it runs no other attempt and has had none (``MAX_TASK_EXECS`` = 1: at most one
  speculative attempt per task),

so every task beyond the gap is "equally slow" and a task past 0.8 is never speculated
(the average is at most 1).  ``JobInProgress.findNewMapTask`` hands a free slot a candidate
by locality (node-local input, then rack-local, then any), never one already running on
that node; speculative tasks come after every non-running task (the layer only uses room
the inner policy left).  Zaharia et al. (OSDI 2008, section 3) describe the same rule.

The replay has no heartbeat order: candidates are taken in trace-row order, each to a
node holding its input if one has room, else a node in such a node's rack, else any node
(lowest slot on ties).
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.layers.speculation.groups import N_KINDS, lookup
from pipeline.policies.layers.speculation.placement import CopyPlacer
from pipeline.policies.layers.speculation.running import RunningTasks
from pipeline.policies.models import task_allow
from pipeline.sim.interface import SchedView

SPECULATIVE_GAP = 0.2
SPECULATIVE_LAG_S = 60.0
MAX_TASK_EXECS = 1
# PS and averages are float sums: a gap of exactly 0.2 in decimal must count as 0.2
GAP_TOL = 1e-9
EMPTY = np.zeros(0, dtype=np.int64)


def job_kind_progress(finished: np.ndarray, running_ps_sum: np.ndarray,
                      arrived: np.ndarray, running: np.ndarray) -> np.ndarray:
    """Hadoop's job progress of one kind: (finished + sum of running PS + 0 per pending
    task) / tasks of that kind (at least the running ones; 0 for none)."""
    total = np.maximum(np.asarray(arrived, dtype=np.float64), running)
    out = np.zeros(len(total), dtype=np.float64)
    np.divide(np.asarray(finished, dtype=np.float64) + running_ps_sum, total, out=out,
              where=total > 0)
    return out


def hadoop_candidates(ps: np.ndarray, elapsed_s: np.ndarray, avg_progress: np.ndarray,
                      has_copy: np.ndarray, copies: np.ndarray,
                      gap: float = SPECULATIVE_GAP, lag_s: float = SPECULATIVE_LAG_S,
                      max_copies: int = MAX_TASK_EXECS) -> np.ndarray:
    """Whether each running task is a speculation candidate under Hadoop 0.20's rule."""
    return (~np.asarray(has_copy, dtype=bool) & (np.asarray(copies) < max_copies)
            & (np.asarray(elapsed_s) >= lag_s)
            & (np.asarray(avg_progress) - np.asarray(ps) >= gap - GAP_TOL))


class HadoopRule:
    """Hadoop 0.20's native rule over the running originals of one call."""

    def __init__(self, gap: float, lag_s: float) -> None:
        self.gap, self.lag_s = gap, lag_s

    def launch(self, view: SchedView, tasks: RunningTasks,
               room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions (into ``tasks``) of the originals to copy, and their nodes."""
        # cheap filters first: only tasks that can pass whatever their category's average
        pre = (tasks.open & (tasks.copies < MAX_TASK_EXECS)
               & (tasks.elapsed_s >= self.lag_s) & (tasks.ps <= 1.0 - self.gap + GAP_TOL))
        jobs = getattr(view, "jobs", None)
        if jobs is None or not pre.any():
            return EMPTY, EMPTY
        groups = tasks.groups
        job, kind = groups.keys // N_KINDS, groups.keys % N_KINDS
        avg = job_kind_progress(lookup(jobs.finished, job, kind),
                                groups.sum(tasks.ps), lookup(jobs.arrived, job, kind),
                                groups.counts)
        pos = np.flatnonzero(pre)
        ok = hadoop_candidates(tasks.ps[pos], tasks.elapsed_s[pos],
                               avg[groups.inverse[pos]], tasks.has_copy[pos],
                               tasks.copies[pos], self.gap, self.lag_s)
        pos = pos[ok]
        if len(pos) == 0:
            return EMPTY, EMPTY
        sub = tasks.at(pos)
        req = np.asarray(sub.req, dtype=np.float64)
        placer = CopyPlacer(room, view.nodes.rack, req.min(axis=0), models=view.nodes.gpu_model)
        order = np.argsort(np.asarray(sub.row), kind="stable")
        took, nodes = placer.place(order, req, tasks.node[pos], inputs=np.asarray(sub.inputs),
                                   allow=task_allow(view, sub))
        return pos[took], nodes
