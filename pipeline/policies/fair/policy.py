"""``fair-scheduler``: Hadoop 3.3 YARN FairScheduler over a hierarchical queue tree.

Source: FairScheduler.md and ``scheduler/fair`` (apache/hadoop, pinned to 3.3: defaults,
comparators, ``ComputeFairShares``, starvation); docs/semantics.md section 2.  Pieces:

- queues and placement: :mod:`.config` (allocation file, inline weights or the trace's
  queues; the shared queue tree and placement rules);
- assignment at each scheduling point: :mod:`.kernel` (descend the tree by the parents'
  fair/drf comparators, respect maxResources on the whole path, least-allocated node);
- fair shares (steady and instantaneous): :mod:`.shares`; preemption: :mod:`.preempt`
  (off by default, as ``yarn.scheduler.fair.preemption`` is).

Applications (jobs) inside a leaf queue are ordered by the leaf's policy (:mod:`.apps`);
an application's own requests go in arrival order.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.drf import inverse_capacity
from pipeline.policies.fair.apps import AppNumbering
from pipeline.policies.fair.config import NEVER, QueueSetup, build
from pipeline.policies.fair.kernel import fair_fill, leaf_usage
from pipeline.policies.fair.preempt import choose_victims, starved_claims
from pipeline.policies.fair.shares import tree_shares
from pipeline.policies.nodeindex import NodeIndex
from pipeline.policies.queues.report import queue_rows
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView

UTILIZATION_THRESHOLD = 0.8  # yarn.scheduler.fair.preemption.cluster-utilization-threshold
# The core applies preemptions before this call's placements, but the node index only sees
# the freed room in the next view: ask for a call right after (the core rounds it up to its
# scheduling grid, like the next NodeManager heartbeat).
FREED_DELAY_S = 1e-6


class FairScheduler(PolicyBase):
    """YARN FairScheduler (Hadoop 3.3): weighted hierarchical fair sharing of queues."""

    name = "fair-scheduler"
    summary = ("YARN FairScheduler: hierarchical weighted queues (fair/drf/fifo), min/max "
               "resources, optional fair-share preemption")
    source = ("Apache Hadoop 3.3 FairScheduler.md and scheduler/fair (ComputeFairShares, "
              "FairSharePolicy, DominantResourceFairnessPolicy, FSLeafQueue starvation)")
    PARAMS: ClassVar[dict[str, Param]] = {
        "allocation_file": Param("", "fair-scheduler.xml allocation file (Hadoop 3.3 format)",
                                 str),
        "queues": Param("", "inline queues 'a:1w,b:2w,eng.x:1w' (weights; instead of a file)",
                        str),
        "default_policy": Param("fair", "defaultQueueSchedulingPolicy when no file sets it",
                                str, choices=("fair", "drf", "fifo")),
        "preemption": Param(False, "yarn.scheduler.fair.preemption (Hadoop default false)",
                            bool),
        "fair_share_preemption_timeout_s": Param(
            -1.0, "default fairSharePreemptionTimeout, s (-1: file or never)", float, -1.0),
        "fair_share_preemption_threshold": Param(
            0.5, "default fairSharePreemptionThreshold (Hadoop 0.5)", float, 0.0, 1.0),
        "mem_unit_mb": Param(1024.0, "MB per trace memory unit, for absolute 'X mb' in files",
                             float, 1e-9),
        "groups": Param("", "user groups for placement: 'hash:N' or 'user=g1|g2;...'", str),
    }
    needs_running = True
    allocation_file: str
    queues: str
    default_policy: str
    preemption: bool
    fair_share_preemption_timeout_s: float
    fair_share_preemption_threshold: float
    mem_unit_mb: float
    groups: str

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> None:
        super().setup(cluster, rng)
        where = f"policy '{self.name}'"
        timeout = self.fair_share_preemption_timeout_s
        qs = build(self.allocation_file, self.queues, self.default_policy, self.groups,
                   cluster.queues, where, timeout if timeout >= 0 else NEVER,
                   self.fair_share_preemption_threshold)
        self.queues_: QueueSetup = qs
        self.leaf_table_ = qs.placement.table(cluster.users, cluster.queues)
        self.index_ = NodeIndex(cluster.n_nodes)
        self.apps_ = AppNumbering()
        self.since_ = np.full((qs.tree.n_leaves, 2), np.nan)
        self.last_fair_ = np.zeros((qs.tree.n_queues, 3))

    def decide(self, view: SchedView) -> Decisions:
        self.index_.refresh(view.nodes)
        qs, tree, running = self.queues_, self.queues_.tree, view.running
        assert running is not None  # needs_running
        total = view.nodes.cap[view.nodes.up].sum(axis=0)
        min_share, max_share = qs.resources(total, self.mem_unit_mb)
        run_leaf, run_use = self._leaves(running.user, running.queue, running.req)
        pending = view.pending
        pend_leaf, pend_use = self._leaves(pending.user, pending.queue, pending.req)
        paths = self._paths()
        usage = paths.T @ run_use
        demand = usage + paths.T @ pend_use
        out = Decisions()
        if self.preemption:
            out = self._preempt(view, run_leaf, usage, demand, min_share, total)
        tree_ = self.apps_.tree(tree.parent, qs.kind, qs.weight, min_share, max_share, usage,
                               demand, tree.leaves[pend_leaf], pending.job, pending.req,
                               running.job, running.req)
        m = len(pend_leaf)
        out_req, out_node = np.empty(m, np.int64), np.empty(m, np.int64)
        ix = self.index_
        c = fair_fill(np.ascontiguousarray(pending.req), tree_.node_of_req, tree_.parent,
                      tree_.child_ptr, tree_.child_idx, tree_.kind, tree_.weight,
                      tree_.min_share, tree_.max_share, tree_.usage, tree_.demand,
                      inverse_capacity(view.nodes.cap, view.nodes.state), tree_.rank,
                      tree.n_queues, view.nodes.cap, ix.alloc, ix.ncont, ix.up,
                      *ix._arrays(), out_req, out_node)
        out.place_req, out.place_node = out_req[:c], out_node[:c]
        return out

    def _leaves(self, user: np.ndarray, queue: np.ndarray,
                req: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = self.leaf_table_
        return leaf_usage(user, queue, req, t.by_user, t.by_queue, t.override,
                          t.default_leaf, self.queues_.tree.n_leaves)

    def _paths(self) -> np.ndarray:
        if not hasattr(self, "paths_"):
            self.paths_ = self.queues_.tree.leaf_paths_matrix().astype(np.float64)
        return self.paths_

    def fair_shares(self, total: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
        """Fair shares per queue (``active`` per queue: instantaneous; None: steady)."""
        qs = self.queues_
        low, high = qs.resources(total, self.mem_unit_mb)
        return tree_shares(qs.tree.children, qs.weight, low, high, total, active)

    def _preempt(self, view: SchedView, run_leaf: np.ndarray, usage: np.ndarray,
                 demand: np.ndarray, min_share: np.ndarray, total: np.ndarray) -> Decisions:
        qs, tree, running = self.queues_, self.queues_.tree, view.running
        assert running is not None
        active = self._paths().T @ (demand[tree.leaves, :].sum(axis=1) > 0) > 0
        fair = self.fair_shares(total, active)
        self.last_fair_ = fair
        claims, wake = starved_claims(view.now, tree.leaves, qs.kind, usage, demand, fair,
                                      min_share, qs.fs_threshold, qs.fs_timeout,
                                      qs.ms_timeout, self.since_)
        alloc = view.nodes.alloc[view.nodes.up].sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            util = np.nanmax(np.where(total[:2] > 0, alloc[:2] / total[:2], 0.0))
        victims = np.zeros(0, dtype=np.int64)
        if util >= UTILIZATION_THRESHOLD:
            victims = choose_victims(running, run_leaf, claims, usage, fair, qs.kind,
                                     qs.preemptable, tree.leaves)
        if len(victims):  # the freed room is offered at the next scheduling point
            wake = view.now + FREED_DELAY_S if wake is None else min(wake, view.now +
                                                                     FREED_DELAY_S)
        return Decisions(preempt=victims, wake_at_s=wake)

    # -- reporting hooks (shared queue infrastructure) -------------------------------------
    def assigned_queues(self, user: np.ndarray, queue: np.ndarray
                        ) -> tuple[np.ndarray, tuple[str, ...]] | None:
        """Leaf of each (user, trace queue) pair, by the placement rules."""
        return self.leaf_table_.leaf(user, queue), self.queues_.tree.leaf_names

    def queue_rows(self, total: np.ndarray) -> dict[str, list[Any]] | None:
        """``queues.parquet`` rows with the steady fair share of each queue added."""
        steady = self.fair_shares(np.asarray(total, np.float64))
        qs = self.queues_
        extra = {f"steady_fair_{r}": steady[:, k].tolist()
                 for k, r in enumerate(("cpu", "mem", "gpu"))}
        extra["scheduling_policy"] = [("fair", "drf", "fifo")[k] for k in qs.kind.tolist()]
        return queue_rows(qs.tree, np.asarray(total, np.float64), extra)
