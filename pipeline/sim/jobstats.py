"""Per-job task statistics the core keeps for speculation rules that compare a task with the
tasks of its job (Hadoop's ``DataStatistics`` per job and task type; LATE's progress rates):
asked for with ``Needs(job_stats=True)`` (:mod:`pipeline.sim.needs`)."""

from __future__ import annotations

import numpy as np

from pipeline.sim.interface import readonly

N_KINDS = 3


class JobStats:
    """Per job and task kind: tasks admitted, finished, and the finished ones' run times
    (sum and sum of squares), for speculation rules that compare a task with its job's."""

    def __init__(self) -> None:
        self.n = 0
        self.arrived = np.zeros((0, N_KINDS), dtype=np.int64)
        self.finished = np.zeros((0, N_KINDS), dtype=np.int64)
        self.run_s_sum = np.zeros((0, N_KINDS))
        self.run_s_sq = np.zeros((0, N_KINDS))

    def _grow(self, jobs: np.ndarray) -> None:
        need = int(jobs.max()) + 1 if len(jobs) else 0
        if need <= len(self.arrived):
            self.n = max(self.n, need)
            return
        size = max(need, 2 * len(self.arrived), 1024)
        for name in ("arrived", "finished", "run_s_sum", "run_s_sq"):
            old = getattr(self, name)
            new = np.zeros((size, N_KINDS), dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        self.n = need

    def arrive(self, job: np.ndarray, kind: np.ndarray) -> None:
        self._grow(job)
        np.add.at(self.arrived, (job, kind), 1)

    def finish(self, job: np.ndarray, kind: np.ndarray, run_s: np.ndarray) -> None:
        self._grow(job)
        np.add.at(self.finished, (job, kind), 1)
        np.add.at(self.run_s_sum, (job, kind), run_s)
        np.add.at(self.run_s_sq, (job, kind), run_s * run_s)

    def view(self) -> JobStats:
        """Read-only views of the live arrays, cut to the jobs known so far (valid during
        the policy call they are handed to)."""
        v = object.__new__(JobStats)
        v.n = self.n
        for name in ("arrived", "finished", "run_s_sum", "run_s_sq"):
            setattr(v, name, readonly(getattr(self, name)[: self.n]))
        return v
