"""The CapacityScheduler's memory between scheduling points: one :class:`CapacityState`.

The policy owns it; the modules that build a scheduling point's decisions
(:mod:`.batch`, :mod:`.offers`, :mod:`.passes`, :mod:`.pending`) take it, plus the few
objects they need beyond it (the locality rule, the partitions, the preemption timer), and
never the policy itself.  What changes at every call lives here next to the functions that
change it (:meth:`CapacityState.grow`, :meth:`~CapacityState.submit`,
:meth:`~CapacityState.mark_started`).

Index spaces as in :mod:`.inputs`: *job* = the core's job code (an application; arrays are
grown to the largest code seen, :meth:`CapacityState.grow`); *leaf* = position in
``QueueTree.leaves``; *queue* = node of the queue tree; *pair* = ``leaf * n_users + user``.
Vectors are ``(cpu, mem, gpu)`` rows in the trace's units.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipeline.policies.capacity.prepare import AliveApps, Sizing
from pipeline.policies.capacity.resources import QueueCaps
from pipeline.policies.capacity.state import LeafSettings, app_limits
from pipeline.policies.queues.placement import LeafTable
from pipeline.policies.queues.tree import QueueTree
from pipeline.sim.interface import PendingView


def _empty(dtype: type = np.float64, *shape: int) -> np.ndarray:
    return np.zeros((0, *shape), dtype=dtype)


@dataclass
class CapacityState:
    """Configuration-derived constants and per-application memory of one replay."""

    # -- fixed at setup ------------------------------------------------------------------
    tree: QueueTree  # the queue hierarchy
    settings: LeafSettings  # per-leaf / per-queue constants of the configuration
    caps: QueueCaps  # capacities per partition (absolute ones in trace units)
    calc: int  # resource calculator: 0 default (memory), 1 dominant
    minimum: np.ndarray  # (3,) minimum allocation, trace units
    weights: np.ndarray  # (n_leaves, n_users) user weights (user-settings.<user>.weight)
    paths: np.ndarray  # (n_queues, n_leaves) float 1 where the queue is on the leaf's path
    all_access: np.ndarray  # (n_queues,) bool, all True: every queue can use DEFAULT
    app_max: np.ndarray  # (n_leaves,) int64 maximum-applications (relative capacities)
    user_app_max: np.ndarray  # (n_leaves,) int64 maximum applications per user (same)
    max_applications: int  # yarn.scheduler.capacity.maximum-applications (system-wide)
    placement: LeafTable  # (user, queue) -> leaf, the queue mappings resolved
    # -- per job code, grown by :meth:`grow` -----------------------------------------------
    started: np.ndarray = field(default_factory=lambda: _empty(np.bool_))  # AM allocated
    mark: np.ndarray = field(default_factory=lambda: _empty(np.bool_))  # scratch flags
    # (all False between calls: prepare.alive_counts, keep_waiting, admitted)
    job_mem: np.ndarray = field(default_factory=_empty)  # normalised memory running
    # (fair ordering; filled by prepare.scan_running, cleared by the caller)
    first_seen: np.ndarray = field(default_factory=_empty)  # s, first seen pending (inf: not)
    am_req: np.ndarray = field(default_factory=lambda: _empty(np.float64, 3))  # (n, 3) AM size
    am_row: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # AM's task row, -1
    job_leaf: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # leaf
    job_pair: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # (leaf, user) pair
    job_prio: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # priority
    job_part: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # partition asked
    nx_since: np.ndarray = field(default_factory=_empty)  # s, missed DEFAULT since (passes;
    # inf: not waiting for a non-exclusive partition)
    # -- per call buffers ----------------------------------------------------------------
    req_buf: np.ndarray = field(default_factory=lambda: _empty(np.float64, 3))  # normalised
    # pending rows, NaN but for req_rows (batch.normalized)
    req_rows: np.ndarray = field(default_factory=lambda: _empty(np.int64))  # rows in req_buf

    @property
    def n_users(self) -> int:
        """Users per leaf in the pair index space."""
        return int(self.weights.shape[1])

    @property
    def sizing(self) -> Sizing:
        """How requests are normalised (the compiled passes' view)."""
        return Sizing(self.minimum, self.calc)

    def alive_apps(self, job_key: np.ndarray) -> AliveApps:
        """The per-job arrays :func:`~.prepare.alive_counts` reads (``job_key``: the leaf,
        or partition and leaf, each application is counted under)."""
        return AliveApps(self.started, job_key, self.job_pair, self.am_req, self.mark)

    def app_limits(self, totals: np.ndarray, guars: list[np.ndarray],
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(per-leaf, per-user) maximum applications; recomputed from the effective
        guarantees when capacities are absolute (they follow the cluster's size)."""
        if not self.caps.any_absolute:
            return self.app_max, self.user_app_max
        return app_limits(self.settings, self.caps.app_shares(totals, guars, self.calc),
                          self.max_applications)

    def grow(self, jobs: np.ndarray, run_jobs: np.ndarray | None = None) -> None:
        """Per-job memory sized to the largest job code seen (doubling).  A running job was
        pending at an earlier call, so pending ``jobs`` alone suffice (``scan_running``
        says so if one never was)."""
        need = max(int(jobs.max()) + 1 if len(jobs) else 0,
                   int(run_jobs.max()) + 1 if run_jobs is not None and len(run_jobs) else 0)
        if need <= len(self.started):
            return
        extra = max(need, 2 * len(self.started)) - len(self.started)

        def more(a: np.ndarray, fill: float | int | bool) -> np.ndarray:
            return np.concatenate([a, np.full((extra, *a.shape[1:]), fill, dtype=a.dtype)])

        self.started, self.mark = more(self.started, False), more(self.mark, False)
        self.first_seen, self.am_req = more(self.first_seen, np.inf), more(self.am_req, 0)
        self.am_row, self.job_leaf = more(self.am_row, -1), more(self.job_leaf, 0)
        self.job_pair, self.job_prio = more(self.job_pair, 0), more(self.job_prio, 0)
        self.job_mem = more(self.job_mem, 0.0)
        self.job_part, self.nx_since = more(self.job_part, 0), more(self.nx_since, np.inf)

    def submit(self, pend: PendingView, jobs: np.ndarray, first: np.ndarray) -> None:
        """Place applications seen for the first time (``first``: their first request):
        leaf queue from the mappings, user, priority; fixed for the application's life."""
        user = np.asarray(pend.take("user", first), dtype=np.int64)
        leaf = self.placement.leaf(user, pend.take("queue", first))
        j = jobs[first]
        self.job_leaf[j] = leaf
        self.job_pair[j] = leaf * self.n_users + user
        self.job_prio[j] = pend.take("priority", first)
        self.job_part[j] = self.caps.leaf_part[leaf]

    def mark_started(self, jobs: np.ndarray, req: np.ndarray, rows: np.ndarray) -> None:
        """The first container of a job is its AM (tracereplay's model, see state.py)."""
        uniq, first = np.unique(jobs, return_index=True)
        new = ~self.started[uniq]
        self.started[uniq[new]] = True
        self.am_req[uniq[new]] = req[first[new]]
        self.am_row[uniq[new]] = rows[first[new]]
