"""``fair-scheduler``: Hadoop 3.3 YARN FairScheduler over a hierarchical queue tree.

Source: FairScheduler.md and ``scheduler/fair`` (apache/hadoop, pinned to 3.3: defaults,
comparators, ``ComputeFairShares``, starvation); docs/semantics.md section 2.  Pieces:

- queues and placement: :mod:`.config` (allocation file, inline weights or the trace's
  queues; the shared queue tree and placement rules);
- assignment at each scheduling point: :mod:`.kernel` (descend the tree by the parents'
  fair/drf comparators, respect maxResources on the whole path, least-allocated node);
- fair shares (steady and instantaneous): :mod:`.shares`; preemption: :mod:`.preempt`
  (off by default, as ``yarn.scheduler.fair.preemption`` is);
- application limits: :mod:`.limits` (``maxRunningApps`` per queue and per user, off by
  default; ``maxAMShare``, 0.5 of a leaf's fair share by default as in Hadoop);
- delay scheduling (``locality.threshold.node/rack``, or the time-based
  ``locality-delay-node-ms/-rack-ms`` with continuous scheduling; off by default as in
  Hadoop): :mod:`.offers`, one pass per node heartbeat through the locality gate.

Applications (jobs) inside a leaf queue are ordered by the leaf's policy (:mod:`.apps`);
an application's own requests go in arrival order.  An application's AM is the first
container the job gets; it lives while the job has tasks pending or running (the model of
``capacity-scheduler``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.base import Param, PolicyBase, PreemptionProfile
from pipeline.policies.drf import Nodes, Placements, group_by_code, inverse_capacity
from pipeline.policies.fair.apps import AppNumbering, AppTree
from pipeline.policies.fair.config import NEVER, UNLIMITED, QueueSetup, build
from pipeline.policies.fair.fill_state import AmCheck, Fill, FillTree, Pending
from pipeline.policies.fair.kernel import fair_fill_plain, leaf_usage
from pipeline.policies.fair.limits import AppLimits, am_limits, increments
from pipeline.policies.fair.offers import (
    SITE_PROPS,
    fair_rule,
    fill_on_offers,
    hadoop_threshold,
    site_locality,
    site_settings,
    wants_offers,
)
from pipeline.policies.fair.preempt import WAIT_BEFORE_KILL_S, FairPreemption
from pipeline.policies.fair.reclaim import preempt_step
from pipeline.policies.fair.settings import fair_file_settings
from pipeline.policies.fair.shares import tree_shares
from pipeline.policies.locality.gate import LocalityState, no_offer
from pipeline.policies.models import model_masks, pending_allow
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.policies.queues.report import queue_rows
from pipeline.policies.settings import Setting
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs

_NO_STARTED = np.ones(1, dtype=np.bool_)  # kernel arguments when no AM limit is checked
_NO_AM = np.zeros((1, 3))


class FairScheduler(PolicyBase):
    """YARN FairScheduler (Hadoop 3.3): weighted hierarchical fair sharing of queues."""

    name = "fair-scheduler"
    summary = ("YARN FairScheduler: hierarchical weighted queues (fair/drf/fifo), min/max "
               "resources, maxRunningApps/maxAMShare, optional fair-share preemption")
    source = ("Apache Hadoop 3.3 FairScheduler.md and scheduler/fair (ComputeFairShares, "
              "FairSharePolicy, DominantResourceFairnessPolicy, FSLeafQueue starvation and "
              "canRunAppAM, MaxRunningAppsEnforcer)")
    # waitTimeBeforeKill: containers are warned, then killed 15 s later (FSPreemptionThread)
    preemption_profile = PreemptionProfile(
        {"queues": "a:1w,b:1w", "default_policy": "drf", "preemption": True,
         "fair_share_preemption_timeout_s": 5.0, "fair_share_preemption_threshold": 1.0},
        WAIT_BEFORE_KILL_S)
    PARAMS: ClassVar[dict[str, Param]] = {
        "allocation_file": Param("", "fair-scheduler.xml allocation file (Hadoop 3.3 format)",
                                 str, file=True),
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
        "max_running_apps": Param(
            -1, "queueMaxAppsDefault where no file sets it: running apps per queue, root "
                "included (-1: unlimited, Hadoop's default)", int, -1),
        "user_max_apps": Param(
            -1, "userMaxAppsDefault where no file sets it: running apps per user (-1: "
                "unlimited, Hadoop's default)", int, -1),
        "max_am_share": Param(
            0.5, "queueMaxAMShareDefault where no file sets it: fraction of a leaf's fair "
                 "share for AMs (Hadoop 0.5; -1: no check)", float, -1.0, 1.0),
        "locality_threshold_node": Param(
            -1.0, "yarn.scheduler.fair.locality.threshold.node: heartbeats to pass up, as a "
                  "fraction of the nodes, before rack-local (below 0: none; above 1 capped "
                  "at 1, as YARN does)", float),
        "locality_threshold_rack": Param(
            -1.0, "yarn.scheduler.fair.locality.threshold.rack: further, before off-rack "
                  "(read as the node threshold)", float),
        "continuous_scheduling": Param(
            False, "yarn.scheduler.fair.continuous-scheduling-enabled: use the time-based "
                   "locality delays below instead of the thresholds", bool),
        "locality_delay_node_ms": Param(
            -1.0, "yarn.scheduler.fair.locality-delay-node-ms (continuous scheduling)",
            float, -1.0),
        "locality_delay_rack_ms": Param(
            -1.0, "yarn.scheduler.fair.locality-delay-rack-ms (continuous scheduling)",
            float, -1.0),
        "site_file": Param("", "yarn-site.xml whose yarn.scheduler.fair.* locality settings "
                               "replace the five above", str, file=True),
        "heartbeat_s": Param(1.0, "NodeManager heartbeat interval, the opportunities the "
                                  "thresholds count", float, 1e-3),
    }
    allocation_file: str
    queues: str
    default_policy: str
    preemption: bool
    fair_share_preemption_timeout_s: float
    fair_share_preemption_threshold: float
    mem_unit_mb: float
    groups: str
    max_running_apps: int
    user_max_apps: int
    max_am_share: float
    locality_threshold_node: float
    locality_threshold_rack: float
    continuous_scheduling: bool
    locality_delay_node_ms: float
    locality_delay_rack_ms: float
    site_file: str
    heartbeat_s: float

    def queue_setup(self, trace_queues: tuple[str, ...]) -> QueueSetup:
        """The queues, placement and per-queue settings from the file or the parameters."""
        where = f"policy '{self.name}'"
        timeout = self.fair_share_preemption_timeout_s
        if -1.0 < self.max_am_share < 0.0:
            raise UsageError(f"{where} parameter 'max_am_share': must be -1 (no check) or in "
                             f"[0, 1], got {self.max_am_share!r}")
        return build(self.allocation_file, self.queues, self.default_policy, self.groups,
                     trace_queues, where, timeout if timeout >= 0 else NEVER,
                     self.fair_share_preemption_threshold,
                     UNLIMITED if self.max_running_apps < 0 else self.max_running_apps,
                     self.max_am_share,
                     UNLIMITED if self.user_max_apps < 0 else self.user_max_apps)

    def file_settings(self) -> dict[str, Setting]:
        """What ``allocation_file`` and ``site_file`` decide instead of the parameters
        (:mod:`.settings`)."""
        out = (fair_file_settings(self.allocation_file, self.queue_setup(()))
               if self.allocation_file else {})
        if self.site_file:
            out.update(site_settings(self.site_file, self.locality_settings()))
        return out

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        qs = self.queue_setup(cluster.queues)
        self.queues_: QueueSetup = qs
        self.limits_ = AppLimits(qs, cluster.users, increments(cluster.units,
                                                               self.mem_unit_mb))
        self.fair_key_: bytes = b""
        self.leaf_table_ = qs.placement.table(cluster.users, cluster.queues)
        self.index_ = NodeIndex(cluster.n_nodes)
        self.apps_ = AppNumbering()
        self.preempt_ = FairPreemption(qs.tree.n_leaves)
        self.am_row_ = np.full(1024, -1, dtype=np.int64)  # first container of each job
        self.last_fair_ = np.zeros((qs.tree.n_queues, 3))
        self.rule_ = fair_rule(**self.locality_settings())
        self.locality_ = LocalityState()
        self.beat_ = float(self.heartbeat_s)
        return Needs(running=True, heartbeat_s=self._beat_s())

    def _beat_s(self) -> float | None:
        """Node heartbeats from the core only when delay scheduling can act (offers.py)."""
        return self.beat_ if self.rule_.delays else None

    def locality_settings(self) -> dict[str, Any]:
        """The delay-scheduling settings: ``site_file``'s where it sets them, else inline;
        thresholds read as FairScheduler reads them wherever they come from
        (:func:`~.offers.hadoop_threshold`)."""
        values = {name: getattr(self, name) for name in SITE_PROPS}
        out = site_locality(self.site_file, values) if self.site_file else values
        for key in ("locality_threshold_node", "locality_threshold_rack"):
            out[key] = hadoop_threshold(out[key])
        return out

    def effective_settings(self, given: Collection[str]) -> dict[str, Setting]:
        """The base class's, with the thresholds as the scheduler reads them."""
        out = super().effective_settings(given)
        used = self.locality_settings()
        for key in ("locality_threshold_node", "locality_threshold_rack"):
            if out[key]["value"] != used[key]:
                out[key] = {"value": used[key],
                            "source": f"{out[key]['source']} ({out[key]['value']:g}, read "
                                      "as FairScheduler reads it: above 1 capped, below 0 "
                                      "none)"}
        return out

    def decide(self, view: SchedView) -> Decisions:
        self.index_.refresh(view.nodes)
        qs, tree, running = self.queues_, self.queues_.tree, view.running
        assert running is not None  # Needs(running=True)
        total = view.nodes.cap[view.nodes.up].sum(axis=0)
        min_share, max_share = qs.resources(total, self.mem_unit_mb)
        run_leaf, run_use = self._leaves(running.user, running.queue, running.req)
        pending = view.pending
        pend_leaf, pend_use = self._leaves(pending.user, pending.queue, pending.req)
        paths = self.paths()
        usage = paths.T @ run_use
        demand = usage + paths.T @ pend_use
        out = Decisions()
        if self.preemption:
            out = preempt_step(self, view, run_leaf, pend_leaf, usage, demand, min_share,
                               max_share, total)
            if len(out.preempt):  # kills, and the freed room handed over (reclaim.py)
                self._note_first(pending.job, pending.row, out.place_req)
                return out
        pend_queue, req_job, req = tree.leaves[pend_leaf], pending.job, pending.req
        lim, sel, check_am, may_start = self.limits_, None, False, False
        am_used, am_limit = _NO_AM, _NO_AM
        stamp = lim.begin(req_job, running.job) if lim.active else 0
        if lim.count_apps:  # maxRunningApps: non-runnable applications get nothing
            keep, am_used, may_start = lim.step_call(req_job, pend_queue, pending.user,
                                                     running.job)
            if keep is not None:
                sel = np.flatnonzero(keep)
                pend_queue, req_job, req = pend_queue[sel], req_job[sel], req[sel]
        # with AM limits only, the tree's pass over the running containers marks live jobs
        marks = lim.active and not lim.count_apps
        tree_ = self.apps_.tree(tree.parent, qs.kind, qs.weight, min_share, max_share, usage,
                               demand, pend_queue, req_job, req, running.job, running.req,
                               lim.mark if marks else None, stamp)
        if marks:
            _, am_used, may_start = lim.step_call(req_job, pend_queue, pending.user,
                                                  running.job[:0])
        if lim.check_am and may_start:  # unallocated = cluster - root usage (root metrics)
            check_am = True
            am_limit = am_limits(lim.am_share, self.instant_fair(total, demand),
                                 lim.computed, max_share, np.maximum(total - usage[0], 0.0),
                                 lim.step)
        started = (np.concatenate([np.ones(tree.n_queues, np.bool_),
                                   lim.started[tree_.app_job]]) if check_am else _NO_STARTED)
        m = len(req_job)
        req = np.ascontiguousarray(req)
        models = model_masks(view.nodes, pending_allow(view, sel))
        fill = self._fill_inputs(view, tree_, req, started, am_used, am_limit, check_am,
                                 models[1])
        if wants_offers(self.rule_, view, sel):
            placed, nodes = fill_on_offers(view, self.rule_, self.locality_, sel, fill,
                                           tree_.node_of_req, tree_.app_job, models)
            # waiting work: the next heartbeats count (at least every second)
            out.wake_at_s = view.now + min(self.beat_, 1.0) if len(placed) < m else None
        else:
            out_ = Placements(np.empty(m, np.int64), np.empty(m, np.int64))
            c = fair_fill_plain(*(tuple(x) for x in fill), no_offer(*models), tuple(out_))
            placed, nodes = out_.req[:c], out_.node[:c]
        if lim.active and len(placed):
            lim.note_started(req_job[placed], req[placed])
        out.place_req = placed if sel is None else sel[placed]
        out.place_node = nodes
        if self.preemption:
            self._note_first(pending.job, pending.row, out.place_req)
        return out

    def _fill_inputs(self, view: SchedView, apps: AppTree, req: np.ndarray,
                     started: np.ndarray, am_used: np.ndarray, am_limit: np.ndarray,
                     check_am: bool, bits: np.ndarray) -> Fill:
        """The fill's named inputs for this call (:mod:`.fill_state`; ``bits``: the nodes'
        GPU model bits)."""
        ix = self.index_
        indptr, order = group_by_code(apps.node_of_req, len(apps.parent))
        tree = FillTree(apps.parent, apps.child_ptr, apps.child_idx, apps.kind, apps.weight,
                        apps.min_share, apps.max_share, apps.usage, apps.demand, apps.rank,
                        inverse_capacity(view.nodes.cap, view.nodes.state),
                        self.queues_.tree.n_queues)
        nodes = Nodes(view.nodes.cap, ix.alloc, ix.ncont, ix.up, ix.key, ix.val, ix.pri,
                      ix.left, ix.right, ix.parent, ix.agg, ix.member, ix.root, ix.skey,
                      ix.sfree, ix.cnt, ix.stack, bits)
        return Fill(tree, Pending(req, indptr, order),
                    AmCheck(check_am, started, am_used, am_limit), nodes)

    def grow_am_rows(self, jobs: np.ndarray) -> None:
        """Size ``am_row_`` to the largest job code in ``jobs`` (doubling)."""
        top = int(jobs.max()) + 1 if len(jobs) else 0
        if top > len(self.am_row_):
            more = max(top, 2 * len(self.am_row_)) - len(self.am_row_)
            self.am_row_ = np.concatenate([self.am_row_, np.full(more, -1, np.int64)])

    def _note_first(self, jobs: np.ndarray, rows: np.ndarray, placed: np.ndarray) -> None:
        """Remember the first container of each job placed now: its AM (which preemption
        takes last, ``getRunningContainersWithAMsAtTheEnd``)."""
        if not len(placed):
            return
        j = np.asarray(jobs, dtype=np.int64)[placed]
        self.grow_am_rows(j)
        uniq, first = np.unique(j, return_index=True)
        new = self.am_row_[uniq] < 0
        self.am_row_[uniq[new]] = np.asarray(rows, dtype=np.int64)[placed][first[new]]

    def instant_fair(self, total: np.ndarray, demand: np.ndarray) -> np.ndarray:
        """Instantaneous fair shares (active: queues with pending or running work), kept
        while the active set and the cluster are unchanged."""
        leaf_active = demand[self.queues_.tree.leaves, :].sum(axis=1) > 0
        key = leaf_active.tobytes() + np.asarray(total, np.float64).tobytes()
        if key != self.fair_key_:
            self.last_fair_ = self.fair_shares(total, self.paths().T @ leaf_active > 0)
            self.fair_key_ = key
        return self.last_fair_

    def _leaves(self, user: np.ndarray, queue: np.ndarray,
                req: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = self.leaf_table_
        return leaf_usage(user, queue, req, t.by_user, t.by_queue, t.override,
                          t.default_leaf, self.queues_.tree.n_leaves)

    def paths(self) -> np.ndarray:
        if not hasattr(self, "paths_"):
            self.paths_ = self.queues_.tree.leaf_paths_matrix().astype(np.float64)
        return self.paths_

    def fair_shares(self, total: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
        """Fair shares per queue (``active`` per queue: instantaneous; None: steady)."""
        qs = self.queues_
        low, high = qs.resources(total, self.mem_unit_mb)
        return tree_shares(qs.tree.children, qs.weight, low, high, total, active)

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
        extra["max_running_apps"] = [None if v >= UNLIMITED else v for v in qs.max_apps.tolist()]
        extra["max_am_share"] = [v if leaf else None for v, leaf in
                                 zip(qs.am_share.tolist(), qs.tree.is_leaf.tolist(), strict=True)]
        return queue_rows(qs.tree, np.asarray(total, np.float64), extra)
