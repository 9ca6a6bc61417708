"""``quincy``: flow-based scheduling, one min-cost flow per scheduling round.

Source: M. Isard, V. Prabhakaran, J. Currey, U. Wieder, K. Talwar, A. Goldberg, "Quincy:
Fair Scheduling for Distributed Computing Clusters", SOSP 2009 (network, costs, fairness
bounds and the policies Q, QF, QFP); the cost-model defaults of Firmament's
reimplementation (camsas/firmament ``quincy_cost_model.cc``; M. Schwarzkopf, I. Gog et al.,
"Firmament: Fast, Centralized Cluster Scheduling at Scale", OSDI 2016).

Each round builds the network of :mod:`.network` over the runnable tasks, with the costs of
:mod:`.costs`, the job bounds of :mod:`.bounds` and machine capacities of :mod:`.slots`, and
solves it with OR-Tools.  Choices, and why:

- Variants: ``Q`` no fairness (E_j = 0, F_j = N_j) and no preemption; ``QF`` fair bounds
  E_j = F_j, no preemption; ``QFP`` fair bounds with preemption.  Without preemption a
  running task's only arc is to its own machine, which is the same as leaving it out of the
  network with its slot taken and its job's bounds reduced by it: that is what is built.
  (The paper's greedy baselines pair the same way: G, GF, GFP.)
- With preemption, running tasks are in the network with all their arcs; one whose flow
  leaves its machine is preempted through ``Decisions.preempt`` (the core counts the
  work lost).  A move to another machine is a preemption now and a placement at the next
  round (the core places only pending tasks).
- Integer costs: Quincy units times :data:`.costs.COST_SCALE` (100).  Ties go to running:
  the arc to U_j costs one unit more than omega * nu, the running arc one unit less.
- Rounds run whenever the flow network changes (section 2: a task is submitted, ends or is
  preempted, a machine frees, fails or joins), but at most every ``interval_s``: the core
  calls on every such change, and with QFP even when no task waits, since a running task
  may then move back to a machine that freed (``Needs.idle_calls``).  A round that
  preempts or moves a task asks for the next round, where it is placed.  Waiting costs
  grow with time, so a round that leaves a task waiting only because every placement
  costs more than its wait asks to be woken when the cheapest would win.
- Machines with cpu/memory: K slots per machine from ``K`` or a slot size
  (:mod:`.slots`); a placement the resources cannot hold is kept back for the next round
  and counted (``flow_placements_deferred``), never sent to the core.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.base import Param, PolicyBase, PreemptionProfile
from pipeline.policies.flow import network as nw
from pipeline.policies.flow.bounds import VARIANTS, job_bounds
from pipeline.policies.flow.costs import (
    COST_SCALE,
    CostModel,
    TaskArcs,
    Topology,
    task_arcs,
    to_int,
    waiting_int,
)
from pipeline.policies.flow.slots import (
    FlowPlacements,
    Machines,
    SlotSample,
    Substitutes,
    fit_in_order,
    machine_capacity,
    slot_sizes,
)
from pipeline.policies.flow.state import RoundStats
from pipeline.policies.models import NO_BITS, NO_MASK, pending_allow
from pipeline.sim.interface import ClusterInfo, Decisions, PendingView, SchedView
from pipeline.sim.needs import Needs

WAKE_MARGIN_S = 1e-6  # wake just after a waiting cost overtakes a placement cost
SUBSTITUTE_TRIES = 4  # substitutes tried per placement kept back (bounds the search)


@dataclass
class RoundPending:
    """The pending tasks in a round's network: indices into the view, data costs, nu (s)
    and job index."""

    elig: np.ndarray
    arcs: TaskArcs
    nu: np.ndarray
    job: np.ndarray


class Quincy(PolicyBase):
    """Quincy: each round, a min-cost flow over waiting, data-transfer and preemption costs."""

    name = "quincy"
    summary = ("Quincy flow scheduling: a min-cost flow per round trades data transfer "
               "against waiting and killing running work (variants Q, QF, QFP)")
    source = ("Isard et al., 'Quincy: Fair Scheduling for Distributed Computing Clusters', "
              "SOSP 2009; Firmament quincy_cost_model.cc defaults (Schwarzkopf, Gog et al., "
              "OSDI 2016)")
    preemption_profile = PreemptionProfile({"variant": "QFP"}, kill_wait_s=0.0)
    PARAMS: ClassVar[dict[str, Param]] = {
        "variant": Param("QFP", "Q: no fairness; QF: fair, no preemption; QFP: fair with "
                         "preemption", str, choices=VARIANTS),
        "omega": Param(0.5, "cost per second a task has waited (cumulative across restarts)",
                       float, 0.0),
        "psi": Param(1.0, "cost per GB read through a top-of-rack switch", float, 0.0),
        "xi": Param(2.0, "cost per GB read across the core switch (Firmament: 2; 20 for a "
                    "constrained network)", float, 0.0),
        "K": Param(None, "tasks per machine (Quincy's K; default: from the slot size)", int,
                   1),
        "slot_cpu": Param(None, "cpu of one slot when K is unset (default: the mean request "
                          "of the first 100 tasks)", float, 1e-9),
        "slot_mem": Param(None, "memory of one slot when K is unset (default: as slot_cpu)",
                          float, 1e-9),
        "interval_s": Param(1.0, "least time between two solver rounds (s)", float, 0.0),
    }

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        if self.K is not None and int(self.K) < 1:
            raise UsageError(f"policy 'quincy' parameter 'K': must be >= 1, got {self.K!r}")
        self.model_ = CostModel(float(self.omega), float(self.psi), float(self.xi))
        self.preemptive_ = self.variant == "QFP"
        self.slot_ = (None if self.slot_cpu is None and self.slot_mem is None else
                      np.array([self.slot_cpu or 0.0, self.slot_mem or 0.0]))
        self.sample_ = SlotSample()
        self.topo_: Topology | None = None
        self.prior_run_s_: dict[int, float] = {}
        self.stats_ = RoundStats()
        self.last_round_ = -np.inf
        self.warned_ = False
        # QFP's running tasks are in the network: a freed machine changes it even when
        # nothing waits (a running task may move back to its preferred machine)
        return Needs(running=True, idle_calls=self.preemptive_)

    # -- reporting hooks
    def run_metrics(self) -> dict[str, tuple[float | None, str]]:
        return self.stats_.metrics()

    def run_timings(self) -> dict[str, float | None]:
        return self.stats_.timings()

    # -- one round
    def decide(self, view: SchedView) -> Decisions:
        pend = view.pending
        if len(pend) == 0 and not self.preemptive_:
            return Decisions()  # (Q, QF: running tasks are not in the network)
        if view.now < self.last_round_ + self.interval_s:
            return Decisions(wake_at_s=self.last_round_ + self.interval_s)
        started = time.perf_counter()
        self.last_round_ = view.now
        if len(pend):
            self._warn_without_data(pend)
        decisions = self._round(view)
        self.stats_.round_ms.append((time.perf_counter() - started) * 1e3)
        if len(decisions.preempt):  # the network changed: the next round places them
            again = view.now + max(self.interval_s, WAKE_MARGIN_S)
            wake = decisions.wake_at_s
            decisions.wake_at_s = again if wake is None else min(float(wake), again)
        return decisions

    def _warn_without_data(self, pend: PendingView) -> None:
        if self.warned_:
            return
        self.warned_ = True
        if not np.any(np.nan_to_num(np.asarray(pend.input_mb)) > 0):
            warnings.warn("quincy: the first tasks to schedule read no input data (no "
                          "inputs/input_mb in the trace; try --set dfs=hdfs): Quincy then "
                          "weighs waiting against nothing", UserWarning, stacklevel=3)

    def _machines(self, view: SchedView, run_node: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per node slot: up, free room, running count, K_m and this round's capacity."""
        nodes = view.nodes
        if self.topo_ is None or len(self.topo_.rack) != len(nodes.rack):
            self.topo_ = Topology.of(np.asarray(nodes.rack))
        up = np.asarray(nodes.state) == 2
        free = np.where(up[:, None], nodes.cap - nodes.alloc, 0.0)
        slot = self.slot_
        if self.K is None and slot is None:  # the mean request of the first tasks
            if not self.sample_.fixed:
                self.sample_.add(np.asarray(view.pending.row), np.asarray(view.pending.req))
            slot = self.sample_.slot
        k_m, slot = slot_sizes(nodes.cap, self.K, slot)
        running = np.bincount(run_node, minlength=len(up)).astype(np.int64)
        cap = machine_capacity(k_m, slot, free, running, up)
        return up, free, running, np.where(up, k_m, 0), cap

    def _round(self, view: SchedView) -> Decisions:
        pend, run = view.pending, view.running
        assert run is not None and view.nodes is not None
        run_node = np.asarray(run.node, np.int64)
        up, free, running, k_m, cap = self._machines(view, run_node)
        req = np.asarray(pend.req)
        largest = view.nodes.cap[up].max(axis=0) if up.any() else np.zeros(3)
        elig = np.flatnonzero(np.all(req <= largest + 1e-9, axis=1))  # fits some machine
        run_idx = (np.arange(len(run_node)) if self.preemptive_ else np.zeros(0, np.int64))
        if len(elig) + len(run_idx) == 0:
            return Decisions()
        p_job = np.asarray(pend.job, np.int64)[elig]
        r_job = np.asarray(run.job, np.int64)
        jobs = np.unique(np.concatenate([p_job, r_job]))  # every job with runnable tasks
        pend_j = np.bincount(np.searchsorted(jobs, p_job), minlength=len(jobs))
        run_j = np.bincount(np.searchsorted(jobs, r_job), minlength=len(jobs))
        graph_cap = cap if self.preemptive_ else cap - np.where(up, running, 0)
        bounds = job_bounds(self.variant, pend_j, run_j, int(k_m.sum()),
                            int(graph_cap.sum()), self.preemptive_)
        p_arcs = task_arcs(np.asarray(pend.inputs)[elig], np.asarray(pend.input_mb)[elig],
                           self.topo_, self.model_)
        p_nu = np.asarray(pend.wait_s)[elig] - self._prior(np.asarray(pend.row)[elig])
        parts = self._pending_arcs(p_arcs, p_nu, np.searchsorted(jobs, p_job))
        if len(run_idx):
            parts += self._running_arcs(view, run_idx, np.searchsorted(jobs, r_job),
                                        len(elig))
        arcs = nw.TaskArcSet(*(np.concatenate([part[k] for part in parts]).astype(np.int64)
                               for k in range(4)))
        n_tasks = len(elig) + len(run_idx)
        net = nw.build(arcs, n_tasks, bounds, graph_cap, self.topo_.rack)
        solve_started = time.perf_counter()
        flows = nw.solve(net)
        self.stats_.solve_ms.append((time.perf_counter() - solve_started) * 1e3)
        for name, value in (("nodes", net.n_nodes), ("arcs", net.n_arcs), ("tasks", n_tasks)):
            getattr(self.stats_, name).append(value)
        dest, via = nw.assign(net, flows)
        pend_round = RoundPending(elig, p_arcs, p_nu, np.searchsorted(jobs, p_job))
        return self._decisions(view, pend_round, dest, via, free, graph_cap, net)

    def _prior(self, rows: np.ndarray) -> np.ndarray:
        """Run time each task (trace row) had in attempts this policy preempted."""
        prior = self.prior_run_s_
        if not prior:
            return np.zeros(len(rows))
        keys = np.fromiter(prior.keys(), np.int64, len(prior))
        values = np.fromiter(prior.values(), np.float64, len(prior))
        order = np.argsort(keys)
        keys, values = keys[order], values[order]
        pos = np.minimum(np.searchsorted(keys, rows), len(keys) - 1)
        return np.where(keys[pos] == rows, values[pos], 0.0)

    def _pending_arcs(self, a: TaskArcs, nu: np.ndarray, job_of: np.ndarray) -> list[tuple]:
        """Arc groups ``(task, kind, to, cost)`` of the pending tasks (vertices 0..n-1):
        waiting, X, preferred racks and machines."""
        n = len(nu)
        tasks = np.arange(n, dtype=np.int64)
        return [(tasks, _kind(n, nw.TO_U), job_of, waiting_int(self.model_, nu)),
                (tasks, _kind(n, nw.TO_X), np.zeros(n, np.int64), to_int(a.x_cost)),
                (a.r_task, _kind(len(a.r_task), nw.TO_RACK), a.r_rack, to_int(a.r_cost)),
                (a.m_task, _kind(len(a.m_task), nw.TO_MACHINE), a.m_node, to_int(a.m_cost))]

    def _running_arcs(self, view: SchedView, run_idx: np.ndarray, job_of: np.ndarray,
                      first: int) -> list[tuple]:
        """Arc groups of the running tasks (QFP; vertices from ``first``): the pending
        tasks' arcs with nu frozen at their start, except that the arc to their own machine
        is the running arc, gamma - theta (less one unit: a tie keeps the task)."""
        run = view.running
        assert run is not None and self.topo_ is not None
        rows = np.asarray(run.row, np.int64)[run_idx]
        node = np.asarray(run.node, np.int64)[run_idx]
        start = np.asarray(run.start_s)[run_idx]
        # nu frozen at the start: what it had waited then, earlier runs taken off
        nu = start - np.asarray(run.ready_s)[run_idx] - self._prior(rows)
        a = task_arcs(np.asarray(run.inputs)[run_idx], np.asarray(run.input_mb)[run_idx],
                      self.topo_, self.model_)
        parts = self._pending_arcs(a, nu, job_of)
        own = a.m_node == node[a.m_task]
        parts[3] = tuple(x[~own] for x in parts[3])
        tasks = np.arange(len(rows), dtype=np.int64)
        theta = self._prior(rows) + (view.now - start)
        gamma = a.cost_on(tasks, node, self.topo_, self.model_)
        parts.append((tasks, _kind(len(tasks), nw.TO_MACHINE), node,
                      to_int(gamma - theta) - 1))
        return [(t + first, k, to, c) for t, k, to, c in parts]

    def _decisions(self, view: SchedView, pend: RoundPending, dest: np.ndarray,
                   via: np.ndarray, free: np.ndarray, graph_cap: np.ndarray,
                   net: nw.Network) -> Decisions:
        """Preemptions, resource-checked placements and the wake-up time of one round."""
        run = view.running
        assert run is not None
        n_p = len(pend.elig)
        preempt = np.zeros(0, np.int64)
        free = free.copy()
        if self.preemptive_ and len(run.node):
            node = np.asarray(run.node, np.int64)
            preempt = np.flatnonzero(dest[n_p:] != node)
            np.add.at(free, node[preempt], np.asarray(run.req)[preempt])
            self._record_preemptions(view, preempt, dest[n_p:][preempt])
        placed = np.flatnonzero(dest[:n_p] >= 0)
        left = graph_cap - np.bincount(dest[dest >= 0], minlength=len(graph_cap))
        order = np.argsort(net.agg_of, kind="stable").astype(np.int64)
        ptr = np.zeros(net.n_aggs + 1, np.int64)
        np.cumsum(np.bincount(net.agg_of, minlength=net.n_aggs), out=ptr[1:])
        req = np.asarray(view.pending.req, np.float64)
        worst_ok = to_int(pend.arcs.x_cost) < waiting_int(self.model_, pend.nu)
        subs = np.flatnonzero((dest[:n_p] < 0) & worst_ok)
        allow, sub_allow, bits = self._models(view, pend.elig[placed], pend.elig[subs])
        flow = FlowPlacements(
            np.ascontiguousarray(req[pend.elig[placed]]), np.ascontiguousarray(dest[placed]),
            np.ascontiguousarray(via[placed]), np.ascontiguousarray(pend.job[placed]), allow)
        machines = Machines(free, np.ascontiguousarray(view.nodes.cap, np.float64),
                            left.astype(np.int64), ptr, order, bits)
        waiting = Substitutes(np.ascontiguousarray(req[pend.elig[subs]]),
                              np.ascontiguousarray(pend.job[subs]), sub_allow)
        final, sub_final = fit_in_order(flow, machines, waiting, net.n_jobs,
                                        SUBSTITUTE_TRIES)
        ok, sub_ok = final >= 0, sub_final >= 0
        self.stats_.deferred += int(np.sum(~ok))
        self.stats_.rerouted += int(np.sum(ok & (final != dest[placed]))) + int(sub_ok.sum())
        go = np.concatenate([placed[ok], subs[sub_ok]])
        at = np.concatenate([final[ok], sub_final[sub_ok]])
        by_queue = np.argsort(go, kind="stable")
        go, at = go[by_queue], at[by_queue]
        self.stats_.placed += len(go)
        wake = self._wake(view.now, pend, dest[:n_p] < 0, left, net.agg_of)
        return Decisions(place_req=pend.elig[go].astype(np.int64), place_node=at,
                         preempt=preempt.astype(np.int64), wake_at_s=wake)

    @staticmethod
    def _models(view: SchedView, placed: np.ndarray, subs: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """GPU model masks of the placements and substitutes (pending positions), and the
        machines' model bits, as :func:`fit_in_order` takes them."""
        allow = pending_allow(view)
        if allow is None or not np.any(allow):
            return NO_MASK, NO_MASK, NO_BITS
        return (np.ascontiguousarray(allow[placed]), np.ascontiguousarray(allow[subs]),
                np.ascontiguousarray(view.nodes.gpu_model))

    def _record_preemptions(self, view: SchedView, idx: np.ndarray, to: np.ndarray) -> None:
        """Count the flow's preemptions and migrations; add their run time to prior_run_s."""
        run = view.running
        assert run is not None
        self.stats_.preempted += len(idx)
        self.stats_.migrated += int(np.sum(to >= 0))
        rows = np.asarray(run.row, np.int64)[idx]
        ran = view.now - np.asarray(run.start_s)[idx]
        for row, seconds in zip(rows.tolist(), ran.tolist(), strict=True):
            self.prior_run_s_[row] = self.prior_run_s_.get(row, 0.0) + seconds

    def _wake(self, now: float, pend: RoundPending, waiting: np.ndarray, left: np.ndarray,
              agg_of: np.ndarray) -> float | None:
        """When the next round is due for the tasks left waiting although a machine they
        can reach has a slot free (``left``): when waiting starts to cost more than the
        cheapest such arc (None: no task waits for that)."""
        if self.model_.omega <= 0 or not waiting.any() or len(agg_of) == 0:
            return None
        p, inf = pend.arcs, np.iinfo(np.int64).max
        cheapest = np.where(left.sum() > 0, to_int(p.x_cost), inf)
        rack_left = np.bincount(agg_of, weights=left, minlength=int(agg_of.max()) + 1)
        for task, to, cost, room in ((p.r_task, p.r_rack, p.r_cost, rack_left),
                                     (p.m_task, p.m_node, p.m_cost, left)):
            ok = room[to] > 0
            np.minimum.at(cheapest, task[ok], to_int(cost[ok]))
        due_nu = cheapest / (self.model_.omega * COST_SCALE)
        later = waiting & (cheapest < inf) & (due_nu > pend.nu)
        if not later.any():
            return None
        at = now + float(np.min(due_nu[later] - pend.nu[later])) + WAKE_MARGIN_S
        return max(at, self.last_round_ + self.interval_s)

def _kind(n: int, kind: int) -> np.ndarray:
    return np.full(n, kind, np.int64)
