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
memory allocated (as ``yarn-uniform``; YARN's node is the one heartbeating), and a
container that fits on no node reserves one (:mod:`.reservations`).  Queue, user and AM
accounting use the normalised sizes.  What the policy remembers between scheduling points
is one :class:`~pipeline.policies.capacity.runtime.CapacityState`, which the modules below
take in place of the policy.

Node labels (partitions, exclusive and non-exclusive; :mod:`.partitions`, :mod:`.labels`,
:mod:`.passes`) and absolute-resource capacities (:mod:`.resources`) are modelled; the
nodes' labels are a tracereplay extension (``node_labels``), since traces have none.
Without labels a scheduling point takes the single-partition path below, unchanged.
Delay scheduling (``node-locality-delay``, ``rack-locality-additional-delay``): when the
pending requests say where their data is, the loop runs once per node heartbeat and the
locality gate decides (:mod:`.offers`, :mod:`pipeline.policies.locality.gate`).
Choices are documented where they are made; reservations with heartbeats or node labels,
locality with node labels,
label expressions other than a single label, per-request labels and auto-created queues
are not modelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.base import Param, PolicyBase, PreemptionProfile
from pipeline.policies.capacity import config as cfg
from pipeline.policies.capacity.batch import Admission, admission, kernel_inputs, normalized
from pipeline.policies.capacity.formulas import (
    DEFAULT,
    DOMINANT,
    mb_per_unit,
    minimum_allocation,
)
from pipeline.policies.capacity.kernel import assign
from pipeline.policies.capacity.offers import place_on_offers, wants_offers
from pipeline.policies.capacity.partitions import Partitions
from pipeline.policies.capacity.passes import decide_partitioned
from pipeline.policies.capacity.pending import leaf_pending
from pipeline.policies.capacity.preemption import PartitionRound, PreemptionTimer
from pipeline.policies.capacity.prepare import JobSums, scan_running, stamp_pending
from pipeline.policies.capacity.report import label_columns
from pipeline.policies.capacity.reservations import NONE, Held, Reservations, account
from pipeline.policies.capacity.resources import QueueCaps
from pipeline.policies.capacity.runtime import CapacityState
from pipeline.policies.capacity.settings import capacity_file_settings
from pipeline.policies.capacity.state import (
    LeafSettings,
    app_limits,
    dense_sum,
    leaf_settings,
    up_resources,
)
from pipeline.policies.locality.gate import CS, LocalityRule, LocalityState, no_offer
from pipeline.policies.models import pending_allow
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.policies.queues import QueuePlacement, groups_provider
from pipeline.policies.queues.placement import LeafTable
from pipeline.policies.queues.report import queue_rows
from pipeline.policies.queues.tree import QueueTree
from pipeline.policies.settings import Setting
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs


class CapacityScheduler(PolicyBase):
    """Hierarchical capacity queues with user limits, AM limits and preemption (YARN 3.3)."""

    name = "capacity-scheduler"
    summary = ("Hadoop 3.3 CapacityScheduler: capacity queues, user limits, AM limits, "
               "cross-queue preemption")
    source = ("Apache Hadoop 3.3 CapacityScheduler.md; ResourceManager scheduler/capacity "
              "(LeafQueue, UsersManager, ProportionalCapacityPreemptionPolicy)")
    # max_wait_before_kill (15 s): a container is killed only when selected that long
    # after it was first marked, and it is marked at the earliest at the first round
    # after it started (ProportionalCapacityPreemptionPolicy)
    preemption_profile = PreemptionProfile(
        {"queues": "a:50,b:50", "user_limit_factor": 2, "preemption": True,
         "resource_calculator": DOMINANT, "max_am_resource_percent": 1.0}, 15.0)
    PARAMS: ClassVar[dict[str, Param]] = {
        "config": Param("", "path of a capacity-scheduler.xml (overrides the inline "
                            "queue settings)", str, file=True),
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
        "node_labels": Param("", "tracereplay extension: cluster node labels and their "
                                 "nodes, label[(exclusive=false)]:selector;... with "
                                 "selectors gpu, P%, cpu>=V, mem>=V, gpu>=V (overrides "
                                 "the config's tracereplay.node-labels)", str),
        "mem_unit_mb": Param(None, "MB per trace memory unit for absolute capacities "
                                   "[memory=...] (default from the trace's units)",
                             float, 1e-9),
        "node_locality_delay": Param(40, "inline: node-locality-delay, missed heartbeats "
                                         "before a rack-local container (-1: no delay)",
                                     int, -1),
        "rack_locality_additional_delay": Param(
            -1, "inline: rack-locality-additional-delay, further misses before off-switch "
                "(-1: the L*C/N rule)", int, -1),
        "rack_locality_full_reset": Param(True, "inline: rack-locality-full-reset", bool),
        "heartbeat_s": Param(1.0, "NodeManager heartbeat interval (yarn.resourcemanager."
                                  "nodemanagers.heartbeat-interval-ms), the opportunities "
                                  "delay scheduling counts", float, 1e-3),
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
    node_labels: str
    mem_unit_mb: float | None
    node_locality_delay: int
    rack_locality_additional_delay: int
    rack_locality_full_reset: bool
    heartbeat_s: float

    # -- setup ---------------------------------------------------------------------------
    def load_config(self) -> cfg.CapacityConfig:
        """The configuration from ``config`` (XML) or the inline parameters."""
        if self.config:
            return cfg.from_xml(Path(self.config), self.node_labels)
        return cfg.from_inline(
            self.queues, self.mappings, user_limit_factor=self.user_limit_factor,
            minimum_user_limit_percent=self.minimum_user_limit_percent,
            ordering=self.ordering, calculator=self.resource_calculator,
            max_am_percent=self.max_am_resource_percent, preemption=self.preemption,
            max_applications=self.maximum_applications, node_labels=self.node_labels,
            locality=cfg.Locality(self.node_locality_delay,
                                  self.rack_locality_additional_delay,
                                  self.rack_locality_full_reset))

    def _beat_s(self) -> float | None:
        """Node heartbeats from the core only when delay scheduling can act (offers.py)."""
        return self.beat_ if self.rule_.delays and self.parts_ is None else None

    def file_settings(self) -> dict[str, Setting]:
        """What ``config`` decides instead of the inline parameters (:mod:`.settings`)."""
        return capacity_file_settings(self.config, self.node_labels) if self.config else {}

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        conf = self.load_config()
        groups = groups_provider(self.groups, source="capacity-scheduler parameter 'groups'")
        placement = QueuePlacement(conf.tree, conf.mappings, groups, override=conf.override)
        self.state_ = self._state(conf, cluster, placement.table(cluster.users,
                                                                 cluster.queues))
        self.parts_ = Partitions(conf.labels, cluster.n_nodes) if conf.labels else None
        if self.parts_ is not None and cluster.kind == "elastic":
            # The autoscaler boots the lowest free slot whatever its label: a request its
            # partition cannot serve would have nodes bought and released forever.
            raise UsageError(f"policy '{self.name}': node labels need a fixed cluster (the "
                             "elastic autoscaler does not know node labels)")
        self.index_ = NodeIndex(cluster.n_nodes)
        self.reserved_ = Reservations(self.state_.minimum)
        self.timer_ = PreemptionTimer(conf.tree, conf.preemption)
        self.last_rows_ = np.zeros(0, dtype=np.int64)  # pending rows at the previous call
        loc = conf.locality
        self.rule_ = LocalityRule(CS, loc.node_delay, loc.rack_additional_delay,
                                  loc.full_reset)
        self.locality_ = LocalityState()
        self.beat_ = float(self.heartbeat_s)
        return Needs(running=True, heartbeat_s=self._beat_s())

    def _caps_in_units(self, conf: cfg.CapacityConfig, cluster: ClusterInfo) -> QueueCaps:
        """The configuration's capacities, absolute memory converted to trace units."""
        caps = conf.caps
        assert caps is not None
        if not caps.any_absolute:
            return caps
        mb = mb_per_unit(cluster.units, self.mem_unit_mb)
        if mb is None:
            raise UsageError(f"policy '{self.name}': absolute capacities ([memory=...]) need "
                             f"the MB per trace memory unit; the trace's memory unit is "
                             f"{cluster.units.get('mem', 'unknown')!r}: set mem_unit_mb")
        return caps.in_units(mb)

    def _state(self, conf: cfg.CapacityConfig, cluster: ClusterInfo,
               placement: LeafTable) -> CapacityState:
        """The state the scheduling points read and update, empty of applications."""
        tree = conf.tree
        settings = leaf_settings(tree, conf.max_am_percent)
        calc = 1 if conf.calculator == DOMINANT else 0
        caps = self._caps_in_units(conf, cluster)
        app_max, user_app_max = app_limits(settings, caps.app_shares(None, [], calc),
                                           conf.max_applications)
        minimum = np.array([*minimum_allocation(cluster.units, self.min_alloc_cpu,
                                                self.min_alloc_mem), 0.0])
        return CapacityState(
            tree=tree, settings=settings, caps=caps, calc=calc, minimum=minimum,
            weights=_pair_weights(tree, settings, cluster.users),
            paths=tree.leaf_paths_matrix().T.astype(np.float64),
            all_access=np.ones(tree.n_queues, dtype=np.bool_), app_max=app_max,
            user_app_max=user_app_max, max_applications=conf.max_applications,
            placement=placement)

    # -- decisions -----------------------------------------------------------------------
    def decide(self, view: SchedView) -> Decisions:
        st = self.state_
        if self.parts_ is not None:
            return decide_partitioned(st, self.parts_, self.timer_, self.rng_, view)
        self.index_.refresh(view.nodes)
        nodes, pend, run = view.nodes, view.pending, view.running
        assert run is not None
        cluster, largest, free = up_resources(nodes)
        jobs = np.asarray(pend.job, dtype=np.int64)
        run_slots, run_t_job = run.rows_of("job")
        run_job = np.empty(len(run_slots), dtype=np.int64)  # filled by scan_running
        st.grow(jobs)
        first = np.empty(len(jobs), dtype=np.int64)
        n_first = stamp_pending(jobs, st.first_seen, view.now, first)
        if n_first:
            st.submit(pend, jobs, first[:n_first])
        pend_leaf = np.take(st.job_leaf, jobs)
        run_req = np.empty((len(run_job) if self.timer_.s.enabled else 0, 3))
        job_mem = st.job_mem if st.settings.fair.any() else st.job_mem[:0]
        pair_used = scan_running(run_slots, run_t_job, run.rows_of("req")[1], st.sizing,
                                 JobSums(st.first_seen, st.job_pair, job_mem),
                                 st.weights.size, run_req, run_job)
        serve = len(pend) > 0 and bool(nodes.up.any())
        adm = admission(st, jobs, pend_leaf, run_job, cluster) if serve else None
        offers = wants_offers(self.rule_, view)
        every = bool(offers or self.reserved_.node_of or self.timer_.s.enabled)
        req = normalized(st, pend.req, largest, None if every else
                         adm.sel if adm is not None else np.zeros(0, np.int64))
        held, fit_all = NONE, None
        if adm is None or offers:  # nothing waits, or heartbeats: no reservations
            self.reserved_.node_of.clear()
        elif self.reserved_.node_of:
            fit_all = np.maximum(req, pend.req)
            held = self.reserved_.begin(self.index_, nodes, np.asarray(pend.row), fit_all,
                                        adm.sel, pending_allow(view))
            free = account(held, req, np.take(st.job_pair, jobs), pair_used, free,
                           fit_all)
        rounds = None
        if self.timer_.due(view.now):
            rounds = [self._round(view, req, jobs, pend_leaf, pair_used, cluster, adm, held)]
        run_leaf = np.take(st.job_leaf, run_job) if len(run_req) else run_job[:0]
        preempt, wake = self.timer_.step(
            view.now, run, run_leaf, run_req, pend_leaf, req,
            st.first_seen, st.am_row, cluster, st.calc, rounds)
        self.reserved_.drop(self.timer_.dropped)
        # a monitor wake-up (skipped when nothing changed, unless heartbeats count misses)
        idle = (self.timer_.s.enabled and self._nothing_new(view) and not offers
                and not len(held.done))
        if adm is None or (idle and not len(preempt)):
            if len(job_mem):
                job_mem[run_job] = 0.0
            return Decisions(preempt=preempt, wake_at_s=wake)
        args = kernel_inputs(st, req, jobs, pend_leaf, pair_used, run_job, cluster, free,
                             adm, held.all)
        if offers:  # the node must hold the raw request too (above a capped normalised one)
            chosen, node = place_on_offers(self.rule_, self.locality_, view, args,
                                           np.maximum(req, pend.req))
        else:
            out = np.empty(len(req), dtype=np.int64)
            order = out[:assign(*args, no_offer(), out)]
            fit = np.maximum(np.take(req, order, axis=0), np.take(pend.req, order, axis=0))
            allow = pending_allow(view)
            chosen, node = self.reserved_.place(self.index_, nodes, order, fit,
                                                pend.take("row", order),
                                                None if allow is None else allow[order])
            chosen = np.concatenate([held.done, chosen])
            node = np.concatenate([held.done_node, node])
        st.mark_started(jobs[chosen], np.take(req, chosen, axis=0), pend.take("row", chosen))
        wake = self.timer_.after_placement(wake, len(chosen), len(pend) - len(chosen))
        if offers and len(chosen) < len(pend):  # waiting work: the next heartbeats count
            # (at least every second, so a placement lags its heartbeat by under 1 s)
            wake = min(wake if wake is not None else np.inf,
                       view.now + min(self.beat_, 1.0))
        return Decisions(place_req=chosen, place_node=node, preempt=preempt, wake_at_s=wake)

    def _round(self, view: SchedView, req: np.ndarray, jobs: np.ndarray,
               pend_leaf: np.ndarray, pair_used: np.ndarray, cluster: np.ndarray,
               adm: Admission | None, held: Held) -> PartitionRound:
        """The preemption monitor's view of the cluster (one partition, no labels)."""
        st = self.state_
        guar, maxi = st.caps.effective(0, cluster, st.calc)
        demand = np.zeros((st.tree.n_leaves, 3))
        if adm is not None:  # reserved requests are used, not pending
            sel = np.setdiff1d(adm.sel, held.all) if len(held.all) else adm.sel
            demand = leaf_pending(st, req, jobs, sel, pair_used, guar, maxi, cluster)
        wait = held.wait
        return PartitionRound(
            cluster, guar, maxi, pending=demand,
            reserved=dense_sum(pend_leaf[held.all], req[held.all], st.tree.n_leaves),
            held_leaf=pend_leaf[wait], held_req=req[wait],
            held_row=np.asarray(view.pending.row)[wait])

    def _nothing_new(self, view: SchedView) -> bool:
        """Whether no node changed and the same requests wait as at the previous call
        (a monitor wake-up then finds no more room than that call did, so the assignment
        pass would place nothing: it is skipped)."""
        rows = np.asarray(view.pending.row)
        same = len(view.nodes.changed) == 0 and np.array_equal(rows, self.last_rows_)
        self.last_rows_ = rows
        return same

    # -- reporting hooks -----------------------------------------------------------------
    def assigned_queues(self, user: np.ndarray,
                        queue: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
        """The leaf each job ran in (full queue paths)."""
        return self.state_.placement.leaf(user, queue), self.state_.tree.leaf_names

    def queue_rows(self, total: np.ndarray) -> dict[str, list[Any]]:
        """Queue configuration with the CapacityScheduler's per-leaf settings."""
        t = self.state_.tree
        extra: dict[str, list[Any]] = {
            "user_limit_factor": [t.prop(i, "user_limit_factor") for i in range(t.n_queues)],
            "minimum_user_limit_percent": [t.prop(i, "minimum_user_limit_percent")
                                           for i in range(t.n_queues)],
            "ordering_policy": [t.prop(i, "ordering") for i in range(t.n_queues)],
        }
        rows = queue_rows(t, total, extra)
        rows.update(label_columns(self.state_.caps, np.asarray(total, dtype=np.float64),
                                  self.state_.calc, self.parts_))
        return rows


def _pair_weights(tree: QueueTree, settings: LeafSettings,
                  users: tuple[str, ...]) -> np.ndarray:
    """(n_leaves, n_users) user weights (``user-settings.<user>.weight``, default 1)."""
    w = np.ones((tree.n_leaves, max(len(users), 1)))
    for leaf, table in enumerate(settings.user_weights):
        for u, name in enumerate(users):
            if name in table:
                w[leaf, u] = table[name]
    return w
