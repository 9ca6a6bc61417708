"""Quincy's per-job bounds E_j <= running <= F_j, and the fair share they come from.

Source: Isard et al., SOSP 2009, section 4.3; Gleave's account of Firmament's port (AdamGleave/
Hapi ``doc/diss-app-flow-scheduling.tex``): U_j has demand ``N_j - F_j`` and its arc to the
sink capacity ``F_j - E_j``, so at most ``F_j`` and at least ``E_j`` of job j's ``N_j``
tasks in the network run.  The fair variants set ``E_j = F_j`` = the job's fair share of
the cluster's ``S = sum K_m`` slots: ``floor(S / J)`` over the ``J`` jobs with runnable
tasks when every job can use it, as the paper states.  A job with fewer runnable tasks than
that keeps only what it can use, and the slots it leaves are shared out the same way among
the others (water-filling); the remainder of the last division goes one slot each to the
jobs first in job order, so no slot idles while a job could use it.

Feasibility: every task has an arc to the cluster aggregator X, which reaches every machine,
so the network has a feasible flow as long as ``sum E_j`` is at most the machines' total
capacity in the round; :func:`job_bounds` clips the lower bounds to that (again by
water-filling) and a test checks the property on random clusters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VARIANTS = ("Q", "QF", "QFP")


def waterfill(total: int, demand: np.ndarray) -> np.ndarray:
    """Max-min fair integer shares of ``total`` among ``demand`` (none above its demand);
    the remainder of the last division goes to the first unsaturated entries."""
    d = np.maximum(np.asarray(demand, dtype=np.int64), 0)
    total = max(int(total), 0)
    if d.sum() <= total:
        return d.copy()
    s = np.sort(d)
    n = len(s)
    before = np.cumsum(s) - s  # sum of the smaller demands
    level = (total - before) // (n - np.arange(n))
    k = int(np.argmax(level < s))  # first demand the level does not reach
    share = np.minimum(d, level[k])
    rest = total - int(share.sum())
    open_ = np.flatnonzero(d > share)[:rest]
    share[open_] += 1
    return share


@dataclass(frozen=True)
class JobBounds:
    """Per job in the network: tasks ``n``, upper bound ``upper`` (F_j), lower ``lower``."""

    n: np.ndarray
    upper: np.ndarray
    lower: np.ndarray

    @property
    def u_demand(self) -> np.ndarray:
        """Demand of U_j: the tasks that must stay unscheduled (N_j - F_j)."""
        return self.n - self.upper

    @property
    def u_capacity(self) -> np.ndarray:
        """Capacity of U_j -> sink: the further tasks that may stay unscheduled."""
        return self.upper - self.lower


def job_bounds(variant: str, pending: np.ndarray, running: np.ndarray, slots: int,
               capacity: int, running_in_network: bool) -> JobBounds:
    """Bounds of each job's tasks in the network for ``variant``.

    ``pending``/``running``: tasks of each job (running ones are in the network only when
    ``running_in_network``, the preemptive variant; otherwise they hold their slots and the
    bounds apply to what is left); ``slots``: S, the cluster's slots; ``capacity``: what the
    machines can take in this network (the lower bounds are clipped to it).
    """
    pending = np.asarray(pending, np.int64)
    running = np.asarray(running, np.int64)
    n = pending + running if running_in_network else pending
    if variant == "Q":  # no fairness: any number may run, none has to
        return JobBounds(n, n.copy(), np.zeros_like(n))
    share = waterfill(slots, pending + running)  # A_j, the fair share
    upper = share if running_in_network else np.clip(share - running, 0, pending)
    lower = upper if upper.sum() <= capacity else waterfill(capacity, upper)
    return JobBounds(n, upper, lower)
