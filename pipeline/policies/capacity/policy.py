"""``capacity-scheduler``: Hadoop YARN's CapacityScheduler, pinned to Hadoop 3.3 semantics.

Sources: CapacityScheduler.md (apache/hadoop 3.3, hadoop-yarn-site) and the
ResourceManager classes ``ParentQueue``, ``LeafQueue``, ``UsersManager``,
``PriorityUtilizationQueueOrderingPolicy``, ``FifoOrderingPolicy``/``FairOrderingPolicy``,
``DefaultResourceCalculator``/``DominantResourceCalculator`` and
``ProportionalCapacityPreemptionPolicy`` (see docs/semantics.md section 1).

At each scheduling point: requests are normalised to multiples of the minimum allocation
(capped at the largest node, YARN's maximum allocation), each application (trace job) is
placed in a leaf (queue mappings, the trace's queue, the default leaf), and the compiled
loop of :mod:`~pipeline.policies.capacity.kernel` hands out containers one at a time in
Hadoop's order; the chosen containers go, in that order, to the up node with the least
memory allocated (as ``yarn-uniform``; YARN's node is the one heartbeating).  Queue, user
and AM accounting use the normalised sizes.  Choices are documented where they are made;
node labels, reservations, delay scheduling, absolute-resource capacities and
auto-created queues are not modelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.capacity import config as cfg
from pipeline.policies.capacity.batch import kernel_inputs
from pipeline.policies.capacity.formulas import DEFAULT, DOMINANT, minimum_allocation, normalize
from pipeline.policies.capacity.kernel import allocate
from pipeline.policies.capacity.preemption import PreemptionTimer
from pipeline.policies.capacity.state import app_limits, leaf_settings
from pipeline.policies.nodeindex import NodeIndex
from pipeline.policies.queues import QueuePlacement, groups_provider
from pipeline.policies.queues.report import queue_rows
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView


class CapacityScheduler(PolicyBase):
    """Hierarchical capacity queues with user limits, AM limits and preemption (YARN 3.3)."""

    name = "capacity-scheduler"
    summary = ("Hadoop 3.3 CapacityScheduler: capacity queues, user limits, AM limits, "
               "cross-queue preemption")
    source = ("Apache Hadoop 3.3 CapacityScheduler.md; ResourceManager scheduler/capacity "
              "(LeafQueue, UsersManager, ProportionalCapacityPreemptionPolicy)")
    needs_running = True
    PARAMS: ClassVar[dict[str, Param]] = {
        "config": Param("", "path of a capacity-scheduler.xml (overrides the inline "
                            "queue settings)", str),
        "queues": Param("default:100", "inline queues path:capacity[:max], e.g. a:50,b:50 "
                                       "(capacity 2w = weight)", str),
        "mappings": Param("", "queue mappings, e.g. u:%user:%primary_group,g:eng:a", str),
        "groups": Param("", "user groups: hash:N[:prefix] (tracereplay extension) or "
                            "user=g1|g2;...", str),
        "user_limit_factor": Param(1.0, "inline: user-limit-factor of every leaf (-1 = off)",
                                   float, -1.0),
        "minimum_user_limit_percent": Param(100.0, "inline: minimum-user-limit-percent",
                                            float, 0.0, 100.0),
        "ordering": Param("fifo", "inline: leaf ordering policy", str,
                          choices=("fifo", "fair")),
        "resource_calculator": Param(DEFAULT, "inline: default (memory only) or dominant",
                                     str, choices=(DEFAULT, DOMINANT)),
        "max_am_resource_percent": Param(0.1, "inline: maximum-am-resource-percent", float,
                                         0.0, 1.0),
        "maximum_applications": Param(10000, "inline: yarn.scheduler.capacity."
                                             "maximum-applications (system-wide)", int, 1),
        "preemption": Param(False, "inline: ProportionalCapacityPreemptionPolicy on", bool),
        "min_alloc_mem": Param(None, "minimum allocation, memory, in trace units (default "
                                     "from the trace's units: YARN's 1024 MB as 1 GiB or "
                                     "1024 MiB; none for normalized units)", float, 0.0),
        "min_alloc_cpu": Param(None, "minimum allocation, cpu (minimum-allocation-vcores; "
                                     "default 1 for cores, none for normalized units)",
                               float, 0.0),
    }
    config: str
    queues: str
    mappings: str
    groups: str
    user_limit_factor: float
    minimum_user_limit_percent: float
    ordering: str
    resource_calculator: str
    max_am_resource_percent: float
    maximum_applications: int
    preemption: bool
    min_alloc_mem: float | None
    min_alloc_cpu: float | None

    # -- setup ---------------------------------------------------------------------------
    def load_config(self) -> cfg.CapacityConfig:
        """The configuration from ``config`` (XML) or the inline parameters."""
        if self.config:
            return cfg.from_xml(Path(self.config))
        return cfg.from_inline(
            self.queues, self.mappings, user_limit_factor=self.user_limit_factor,
            minimum_user_limit_percent=self.minimum_user_limit_percent,
            ordering=self.ordering, calculator=self.resource_calculator,
            max_am_percent=self.max_am_resource_percent, preemption=self.preemption,
            max_applications=self.maximum_applications)

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> None:
        super().setup(cluster, rng)
        conf = self.load_config()
        self.conf_ = conf
        self.tree_ = conf.tree
        groups = groups_provider(self.groups, source="capacity-scheduler parameter 'groups'")
        placement = QueuePlacement(conf.tree, conf.mappings, groups, override=conf.override)
        self.leaves_ = placement.table(cluster.users, cluster.queues)
        self.settings_ = leaf_settings(conf.tree, conf.max_am_percent)
        self.app_max_, self.user_app_max_ = app_limits(
            self.settings_, conf.tree.abs_cap[conf.tree.leaves], conf.max_applications)
        self.calc_ = 1 if conf.calculator == DOMINANT else 0
        self.minimum_ = np.array([*minimum_allocation(cluster.units, self.min_alloc_cpu,
                                                      self.min_alloc_mem), 0.0])
        self.index_ = NodeIndex(cluster.n_nodes)
        self.started_ = np.zeros(0, dtype=np.bool_)
        self.first_seen_ = np.zeros(0)
        self.am_req_ = np.zeros((0, 3))
        self.am_row_ = np.zeros(0, dtype=np.int64)
        self.job_leaf_ = np.zeros(0, dtype=np.int64)
        self.job_pair_ = np.zeros(0, dtype=np.int64)
        self.job_prio_ = np.zeros(0, dtype=np.int64)
        self.paths_ = conf.tree.leaf_paths_matrix().T.astype(np.float64)
        self.timer_ = PreemptionTimer(conf.tree, conf.preemption)
        self.weights_ = self._pair_weights(cluster.users)

    def _pair_weights(self, users: tuple[str, ...]) -> np.ndarray:
        """(n_leaves, n_users) user weights (``user-settings.<user>.weight``, default 1)."""
        w = np.ones((self.tree_.n_leaves, max(len(users), 1)))
        for leaf, table in enumerate(self.settings_.user_weights):
            for u, name in enumerate(users):
                if name in table:
                    w[leaf, u] = table[name]
        return w

    def _grow(self, jobs: np.ndarray, run_jobs: np.ndarray, now: float) -> None:
        """Per-job memory sized to the largest job code seen; first-seen times of pending."""
        need = max(int(jobs.max()) + 1 if len(jobs) else 0,
                   int(run_jobs.max()) + 1 if len(run_jobs) else 0)
        if need > len(self.started_):
            size = max(need, 2 * len(self.started_))
            extra = size - len(self.started_)
            self.started_ = np.concatenate([self.started_, np.zeros(extra, np.bool_)])
            self.first_seen_ = np.concatenate([self.first_seen_, np.full(extra, np.inf)])
            self.am_req_ = np.concatenate([self.am_req_, np.zeros((extra, 3))])
            self.am_row_ = np.concatenate([self.am_row_, np.full(extra, -1, np.int64)])
            self.job_leaf_ = np.concatenate([self.job_leaf_, np.zeros(extra, np.int64)])
            self.job_pair_ = np.concatenate([self.job_pair_, np.zeros(extra, np.int64)])
            self.job_prio_ = np.concatenate([self.job_prio_, np.zeros(extra, np.int64)])
        self.first_seen_[jobs] = np.minimum(self.first_seen_[jobs], now)

    # -- decisions -----------------------------------------------------------------------
    def decide(self, view: SchedView) -> Decisions:
        self.index_.refresh(view.nodes)
        nodes, pend, run = view.nodes, view.pending, view.running
        assert run is not None
        up = nodes.up
        cluster = nodes.cap[up].sum(axis=0) if up.any() else np.zeros(3)
        calc_name = DOMINANT if self.calc_ else DEFAULT
        largest = nodes.cap[up].max(axis=0) if up.any() else np.full(3, np.inf)
        run_leaf = self.leaves_.leaf(run.user, run.queue)
        run_req = normalize(run.req, self.minimum_, calc_name).reshape(-1, 3)
        jobs = np.asarray(pend.job, dtype=np.int64)
        self._grow(jobs, np.asarray(run.job, np.int64), view.now)
        req = np.minimum(normalize(pend.req, self.minimum_, calc_name).reshape(-1, 3),
                         largest)
        pend_leaf = self.leaves_.leaf(pend.user, pend.queue)
        self.job_leaf_[jobs] = pend_leaf
        self.job_prio_[jobs] = np.asarray(pend.priority)
        self.job_pair_[jobs] = pend_leaf * self.weights_.shape[1] + np.asarray(pend.user)
        preempt, wake = self.timer_.step(
            view.now, run, run_leaf, run_req, pend_leaf, req,
            self.first_seen_, self.am_row_, cluster, self.calc_)
        if len(pend) == 0 or not up.any():
            return Decisions(preempt=preempt, wake_at_s=wake)
        order = self._assign(view, req, pend_leaf, run_leaf, run_req, cluster)
        # the node must hold the raw request too (it can exceed a capped normalised one)
        fit = np.maximum(req[order], np.asarray(pend.req)[order])
        placed, node = self.index_.place(nodes, fit, None, packing=False)
        chosen = order[placed]
        self._mark_started(jobs[chosen], req[chosen], np.asarray(pend.row)[chosen])
        return Decisions(place_req=chosen, place_node=node, preempt=preempt, wake_at_s=wake)

    def _mark_started(self, jobs: np.ndarray, req: np.ndarray, rows: np.ndarray) -> None:
        """The first container of a job is its AM (tracereplay's model, see state.py)."""
        uniq, first = np.unique(jobs, return_index=True)
        new = ~self.started_[uniq]
        self.started_[uniq[new]] = True
        self.am_req_[uniq[new]] = req[first[new]]
        self.am_row_[uniq[new]] = rows[first[new]]

    def _assign(self, view: SchedView, req: np.ndarray, pend_leaf: np.ndarray,
                run_leaf: np.ndarray, run_req: np.ndarray, cluster: np.ndarray) -> np.ndarray:
        """Pending indices in the order the kernel hands out containers."""
        args = kernel_inputs(self, view, req, pend_leaf, run_leaf, run_req, cluster)
        out = np.empty(len(req), dtype=np.int64)
        n = allocate(*args, out)
        return out[:n]

    # -- reporting hooks -----------------------------------------------------------------
    def assigned_queues(self, user: np.ndarray,
                        queue: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
        """The leaf each job ran in (full queue paths)."""
        return self.leaves_.leaf(user, queue), self.tree_.leaf_names

    def queue_rows(self, total: np.ndarray) -> dict[str, list[Any]]:
        """Queue configuration with the CapacityScheduler's per-leaf settings."""
        t = self.tree_
        extra: dict[str, list[Any]] = {
            "user_limit_factor": [t.prop(i, "user_limit_factor") for i in range(t.n_queues)],
            "minimum_user_limit_percent": [t.prop(i, "minimum_user_limit_percent")
                                           for i in range(t.n_queues)],
            "ordering_policy": [t.prop(i, "ordering") for i in range(t.n_queues)],
        }
        return queue_rows(t, total, extra)
