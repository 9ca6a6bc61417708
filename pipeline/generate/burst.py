"""A tenant that bursts: extra batch work from one user for a few hours of the window.

Shared clusters see this every day: a team launches a large batch of analytics jobs (a
backfill, a retraining) on top of the diurnal load, and for a few hours asks for more than
its share.  It is what makes multi-tenant schedulers differ: the bursting team borrows idle
capacity, the others fall below their guarantees when their own demand rises, and
preemption (when on) takes containers back.  The Google 2011 trace shows such episodes as
jumps in one user's submissions (Reiss et al., SoCC 2012, section 4: a few users submit
most jobs, in bursts).

The burst's jobs come from one user (``user``, a name added to the trace's users; empty:
the trace's most active user) and follow the trace's job shapes (tasks per job, requests),
with each job's run capped at the burst's length so the batch is done within a few hours
of its end.  They arrive as a Poisson process of
constant rate over ``[start_h, start_h + hours)``, sized so the burst offers ``load`` x the
cluster's cpu on top of the diurnal load.  Its randomness has its own stream, so a trace
generated without a burst is byte-identical to one from before bursts existed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Burst:
    """When, how long and how much: ``load`` is the extra cpu offered, as a share of the
    cluster's cpu, during the burst (0 = no burst)."""

    load: float = 0.0
    start_h: float = 13.0
    hours: float = 3.0
    user: str = ""

    def __post_init__(self) -> None:
        if not (np.isfinite(self.load) and 0 <= self.load <= 10):
            raise ValueError(f"burst load must be in [0, 10], got {self.load}")
        if not (np.isfinite(self.start_h) and self.start_h >= 0):
            raise ValueError(f"burst start must be >= 0 hours, got {self.start_h}")
        if not (np.isfinite(self.hours) and self.hours > 0):
            raise ValueError(f"burst length must be > 0 hours, got {self.hours}")

    @property
    def start_s(self) -> float:
        return self.start_h * 3600.0

    @property
    def end_s(self) -> float:
        return (self.start_h + self.hours) * 3600.0

    def overlap(self, lo_s: float, hi_s: float) -> tuple[float, float]:
        """The part of ``[lo_s, hi_s)`` inside the burst (empty: ``lo >= hi``)."""
        return max(lo_s, self.start_s), min(hi_s, self.end_s)

    def job_rate(self, cluster_cpu: float, cpu_s_per_job: float) -> float:
        """Burst jobs per second that offer ``load`` x ``cluster_cpu`` of cpu."""
        return self.load * cluster_cpu / cpu_s_per_job if cpu_s_per_job > 0 else 0.0
