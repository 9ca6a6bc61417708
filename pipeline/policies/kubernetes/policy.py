"""``kube-scheduler``: Kubernetes' default scheduler, its filter and score cycle per pod.

Source: Kubernetes v1.31 ``pkg/scheduler`` (``schedule_one.go``; plugins
``NodeResourcesFit``, ``NodeResourcesBalancedAllocation``, ``PrioritySort``); the rules
modelled are in ``docs/families/kubernetes.md``, the cycle in :mod:`.kernel`.

At each scheduling point the pending pods are taken in ``PrioritySort`` order (higher
``priority`` first, then queue order) and each gets one scheduling cycle against the
scheduler's snapshot: the nodes provisioned now (booting ones are in the list but not
Ready, so they pass no filter).  A pod that passes no node stays pending and is tried
again at the next scheduling point.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.kubernetes.config import FIT, Settings, file_strategy, settings
from pipeline.policies.kubernetes.kernel import Cycle, Nodes, Pods, schedule
from pipeline.policies.kubernetes.scoring import num_feasible_nodes_to_find, to_units
from pipeline.policies.models import model_masks, pending_allow
from pipeline.policies.settings import Setting, from_file
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs

BOOTING, UP = 1, 2  # NodeView.state codes in the snapshot


class KubeScheduler(PolicyBase):
    """kube-scheduler's default profile, or the user's KubeSchedulerConfiguration."""

    name = "kube-scheduler"
    summary = ("Kubernetes kube-scheduler: filter nodes, score NodeResourcesFit + "
               "BalancedAllocation, highest score wins (ties random)")
    source = ("Kubernetes v1.31 pkg/scheduler: schedule_one.go, plugins/noderesources "
              "(fit.go, least/most_allocated.go, requested_to_capacity_ratio.go, "
              "balanced_allocation.go)")
    clusters: ClassVar[tuple[str, ...]] = ("fixed", "elastic", "cluster-autoscaler",
                                            "karpenter")
    PARAMS: ClassVar[dict[str, Param]] = {
        "config": Param("", "path of a KubeSchedulerConfiguration YAML (its first or "
                            "default-scheduler profile)", str, file=True),
        "scoring": Param("", "NodeResourcesFit scoringStrategy.type, overriding the file's",
                         str, choices=("", "LeastAllocated", "MostAllocated",
                                       "RequestedToCapacityRatio")),
        "percentage_of_nodes_to_score": Param(-1, "percentageOfNodesToScore (0: adaptive "
                                                  "default; -1: the file's)", int, -1, 100),
        "max_pods": Param(110, "pods per node (kubelet maxPods)", int, 1, 100000),
    }

    def file_settings(self) -> dict[str, Setting]:
        """The scoring strategy the run used when ``scoring`` leaves it to the file or to
        the scheduler's default (LeastAllocated), so the warehouse names it."""
        if self.scoring:
            return {}
        if not self.config:
            return {"scoring": {"value": "LeastAllocated", "source": "default"}}
        kind, present = file_strategy(self.config)
        return {"scoring": from_file(kind, self.config,
                                     f"{FIT} args scoringStrategy.type", present)}

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        pct = self.percentage_of_nodes_to_score
        self.settings_: Settings = settings(self.config or None, self.scoring or None,
                                            None if pct < 0 else pct, self.max_pods)
        self.start_ = np.zeros(1, dtype=np.int64)  # nextStartNodeIndex
        self.rng_state_ = np.array([int(rng.integers(1, 2**31 - 1))], dtype=np.int64)
        self.units_ = np.zeros((2, 3), dtype=np.int64)
        return Needs()

    def decide(self, view: SchedView) -> Decisions:
        nodes, pending = view.nodes, view.pending
        listed = np.flatnonzero((nodes.state == BOOTING) | (nodes.state == UP))
        m = len(pending.req)
        if m == 0 or len(listed) == 0:
            return Decisions()
        allow, bits = model_masks(nodes, pending_allow(view))
        prio = np.asarray(pending.priority)
        order = (np.argsort(-prio.astype(np.int64), kind="stable") if np.any(prio != prio[0])
                 else np.arange(m, dtype=np.int64))
        req = np.ascontiguousarray(pending.req, dtype=np.float64)
        pods = Pods(req, to_units(req), order, allow)
        cap, alloc = np.ascontiguousarray(nodes.cap, np.float64), np.array(nodes.alloc, np.float64)
        snapshot = Nodes(cap, alloc, to_units(cap), to_units(alloc),
                         np.array(nodes.n_containers, dtype=np.int64), nodes.up, bits,
                         listed.astype(np.int64))
        self.start_[0] %= len(listed)  # the list changed length: the index wraps
        cycle = Cycle(self.start_, self.rng_state_, np.empty(m, dtype=np.int64),
                      np.empty(m, dtype=np.int64), self.units_)
        to_find = num_feasible_nodes_to_find(self.settings_.percentage, len(listed))
        c = schedule(pods, snapshot, self.settings_.profile, cycle, to_find)
        return Decisions(place_req=cycle.out_req[:c], place_node=cycle.out_node[:c])
