"""``kube-scheduler``: Kubernetes' default scheduler, its filter and score cycle per pod.

Source: Kubernetes v1.31 ``pkg/scheduler`` (``schedule_one.go``; plugins
``NodeResourcesFit``, ``NodeResourcesBalancedAllocation``, ``PrioritySort``); the rules
modelled are in ``docs/families/kubernetes.md``, the cycle in :mod:`.kernel`.

At each scheduling point the pending pods are taken in ``PrioritySort`` order (higher
``priority`` first, then queue order) and each gets one scheduling cycle against the
scheduler's snapshot: the nodes provisioned now (booting ones are in the list but not
Ready, so they pass no filter).  A pod that passes no node stays pending and is tried
again at the next scheduling point, unless ``DefaultPreemption`` (on by default) frees a
node for it by preempting lower-priority pods (:mod:`.preemption`): pods in traces with
priorities (Google's tiers, Alibaba's) take room from lower tiers before they wait for
an autoscaler.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.kubernetes.config import (
    FIT,
    PREEMPTION,
    Settings,
    file_preemption,
    file_strategy,
    settings,
)
from pipeline.policies.kubernetes.dryrun import dry_run
from pipeline.policies.kubernetes.kernel import Cycle, Nodes, Pods, schedule
from pipeline.policies.kubernetes.memo import NodeState, ScoreMemo
from pipeline.policies.kubernetes.preemption import (
    Running,
    Snapshot,
    importance_order,
    lowest_priority,
    preempt,
)
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
        "preemption": Param(True, "DefaultPreemption on (false: off; also off when the "
                                  "config's profile disables it)", bool),
    }

    def file_settings(self) -> dict[str, Setting]:
        """The scoring strategy the run used when ``scoring`` leaves it to the file or to
        the scheduler's default (LeastAllocated), so the warehouse names it."""
        out: dict[str, Setting] = {}
        if not self.scoring:
            if not self.config:
                out["scoring"] = {"value": "LeastAllocated", "source": "default"}
            else:
                kind, present = file_strategy(self.config)
                out["scoring"] = from_file(kind, self.config,
                                           f"{FIT} args scoringStrategy.type", present)
        if self.preemption and self.config and not file_preemption(self.config):
            out["preemption"] = from_file(False, self.config, f"plugins {PREEMPTION}")
        return out

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        pct = self.percentage_of_nodes_to_score
        self.settings_: Settings = settings(self.config or None, self.scoring or None,
                                            None if pct < 0 else pct, self.max_pods,
                                            None if self.preemption else False)
        self.start_ = np.zeros(1, dtype=np.int64)  # nextStartNodeIndex
        self.rng_state_ = np.array([int(rng.integers(1, 2**31 - 1))], dtype=np.int64)
        self.units_ = np.zeros((2, 3), dtype=np.int64)
        self.lowest_seen_ = int(np.iinfo(np.int64).max)  # lowest pending priority so far
        self.memo_ = ScoreMemo()
        return Needs(running=self.settings_.preemption is not None)

    def decide(self, view: SchedView) -> Decisions:
        nodes, pending = view.nodes, view.pending
        listed = np.flatnonzero((nodes.state == BOOTING) | (nodes.state == UP))
        m = len(pending.req)
        if m == 0 or len(listed) == 0:
            return Decisions()
        allow, bits = model_masks(nodes, pending_allow(view))
        prio = np.asarray(pending.priority).astype(np.int64)
        order = (np.argsort(-prio, kind="stable") if np.any(prio != prio[0])
                 else np.arange(m, dtype=np.int64))
        running = self._running(view, prio)
        req = np.ascontiguousarray(pending.req, dtype=np.float64)
        pods = Pods(req, to_units(req), order, allow, prio, _preempt_above(running))
        cap, alloc = np.ascontiguousarray(nodes.cap, np.float64), np.array(nodes.alloc, np.float64)
        snapshot = Nodes(cap, alloc, to_units(cap), to_units(alloc),
                         np.array(nodes.n_containers, dtype=np.int64), nodes.up, bits,
                         listed.astype(np.int64))
        self.start_[0] %= len(listed)  # the list changed length: the index wraps
        model = NO_MODEL if nodes.gpu_model is None else nodes.gpu_model
        state = NodeState(cap, snapshot.alloc, snapshot.alloc_units, snapshot.pods,
                          snapshot.ready, model)
        memo = self.memo_.for_call(req, allow, state)
        cycle = Cycle(self.start_, self.rng_state_, np.empty(m, dtype=np.int64),
                      np.empty(m, dtype=np.int64), self.units_, np.zeros(2, dtype=np.int64))
        to_find = num_feasible_nodes_to_find(self.settings_.percentage, len(listed))
        victims: list[np.ndarray] = []
        ranked = None
        c = schedule(pods, snapshot, self.settings_.profile, cycle, memo, to_find)
        while cycle.pos[0] < m:  # stopped at a pod that may preempt
            assert running is not None
            if ranked is None:
                ranked = importance_order(running)
            got = self._preempt(int(order[cycle.pos[0]]), pods, snapshot, running, ranked)
            if got is not None:
                memo.version[got[0]] += 1  # its state changed: its entries are stale
                victims.append(got[1])
                cycle.out_req[c], cycle.out_node[c] = order[cycle.pos[0]], got[0]
                c += 1
                pods = pods._replace(preempt_above=_preempt_above(running))
            cycle.pos[0], cycle.pos[1] = cycle.pos[0] + 1, c
            c = schedule(pods, snapshot, self.settings_.profile, cycle, memo, to_find)
        self.memo_.remember(state)
        return Decisions(place_req=cycle.out_req[:c], place_node=cycle.out_node[:c],
                         preempt=np.concatenate(victims) if victims else np.zeros(0, np.int64))

    def _running(self, view: SchedView, prio: np.ndarray) -> Running | None:
        """The running pods preemption may take room from (None: preemption is off, or
        no pending pod is above the lowest priority seen: every running pod was pending
        at an earlier call, so none is below it, and the running pods are not read)."""
        self.lowest_seen_ = min(self.lowest_seen_, int(prio.min()))
        if (self.settings_.preemption is None or view.running is None
                or int(prio.max()) <= self.lowest_seen_):
            return None
        run = view.running
        req = np.asarray(run.req, dtype=np.float64)
        return Running(np.asarray(run.node, np.int64), req,
                       np.asarray(run.priority, np.int64), np.asarray(run.start_s, np.float64),
                       np.ones(len(req), dtype=bool))

    def _preempt(self, i: int, pods: Pods, nodes: Nodes, running: Running,
                 ranked: np.ndarray) -> tuple[int, np.ndarray] | None:
        """DefaultPreemption for pending pod ``i``; on success the victims leave the
        snapshot and the pod is assumed on the node (it binds there now)."""
        assert self.settings_.preemption is not None
        mask = int(pods.allow[i]) if len(pods.allow) else 0
        got = preempt(pods.req[i], int(pods.priority[i]), mask,
                      Snapshot(nodes.cap, nodes.alloc, nodes.pods, nodes.ready, nodes.bits,
                               nodes.order),
                      running, self.settings_.profile.max_pods, self.settings_.preemption,
                      self.rng_, ranked, dry_run)
        if got is None:
            return None
        nd, victims = got
        running.alive[victims] = False
        nodes.alloc[nd] += pods.req[i] - running.req[victims].sum(axis=0)
        nodes.alloc_units[nd] += pods.units[i] - to_units(running.req[victims]).sum(axis=0)
        nodes.pods[nd] += 1 - len(victims)
        return got


NO_MODEL = np.zeros(0, np.int64)  # NodeState.model when the replay has no GPU models
NEVER = np.iinfo(np.int64).max  # preempt_above when no pod may preempt


def _preempt_above(running: Running | None) -> int:
    """The priority a pod must exceed to preempt: the lowest of those running."""
    low = None if running is None else lowest_priority(running)
    return NEVER if low is None else low
