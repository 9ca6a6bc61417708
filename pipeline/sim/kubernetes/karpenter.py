"""Karpenter as a cluster model: nodes of the cheapest instance types that fit the pending
pods, and consolidation that deletes nodes or replaces them with cheaper ones.

Source: kubernetes-sigs/karpenter v1.14 (``pkg/controllers/provisioning``,
``pkg/controllers/disruption``), its NodePool and disruption docs and
``designs/consolidation.md``.  The rules (the NodePool: :class:`~.settings.NodePool`):

- One loop every ``LOOP_S`` (10 s: provisioning's longest batch window and the disruption
  controller's poll), at its multiples, at the first scheduling point at or after one.
- Provisioning: the pending pods, except those that fit the free room of nodes still
  booting (in-flight NodeClaims), simulated onto new NodeClaims
  (:func:`.karpenter_pack.pack`: options narrow as pods join; each launches its cheapest
  option) within the pool's limits.  A new node is billed at once and Ready
  ``boot_delay_s`` later.
- Disruption, in each loop without pending pods and with no move awaiting validation
  (:mod:`.consolidation`; Karpenter runs it with pods pending too and adds them to its
  simulations, which this leaves out: ``docs/families/karpenter.md`` says why):
  emptiness, then (``WhenEmptyOrUnderutilized``, ``Balanced``) multi-node, then
  single-node consolidation, each within the budgets (``BuildDisruptionBudgetMapping``: a
  percentage of the initialized nodes, less those being disrupted).  A move is
  validated again ``VALIDATION_S`` (15 s) later and then executed: a delete at once (pods
  evicted, re-queued); a replace launches its node first and taints the old ones
  (``CORDONED``: they run their pods and take no new ones), deleted once it is Ready.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.cluster import BOOTING, CORDONED, UP
from pipeline.sim.kubernetes import consolidation as cons
from pipeline.sim.kubernetes.base import PoolCluster
from pipeline.sim.kubernetes.drain import group_pods
from pipeline.sim.kubernetes.karpenter_pack import Offer, karpenter_order, pack
from pipeline.sim.kubernetes.pool import TypedPool
from pipeline.sim.kubernetes.settings import NodePool

LOOP_S = 10.0
VALIDATION_S = 15.0  # consolidationTTL: a move is checked again this long after it is found


class Karpenter(PoolCluster):
    """One NodePool over the catalog's types, provisioned and consolidated by Karpenter."""

    kind = "karpenter"

    def __init__(self, nodepool: NodePool, pool: TypedPool, unit: np.ndarray,
                 boot_delay_s: float) -> None:
        super().__init__(pool, pool.type_cap[nodepool.allowed])
        self.nodepool = nodepool
        self.unit = np.asarray(unit, dtype=np.float64)  # vCPU, GiB, 1 per trace unit
        self.boot_delay_s = boot_delay_s
        limits = np.array([nodepool.limit_cpu, nodepool.limit_gib, np.inf]) / self.unit
        self.limits = limits  # in trace units
        self._loop_at = -np.inf
        self._pending = 0  # pods pending at this loop
        self._last_change = np.zeros(len(self.nodes))  # a pod added or removed
        self._seen = np.zeros(len(self.nodes), dtype=np.int64)  # pods at the last loop
        self._move: tuple[float, cons.Move] | None = None  # found, awaiting validation
        self._replacing: dict[int, tuple[int, ...]] = {}  # new node -> nodes it replaces
        # Karpenter marks the cluster consolidated after a pass that finds nothing and
        # skips passes until its state changes (a pod or node event, a new candidate)
        self._quiet: list[int] | None = None
        self.counts = {"nodes_added": 0, "nodes_deleted": 0, "consolidation_deletes": 0,
                       "consolidation_replaces": 0, "evictions_consolidation": 0}

    def next_check(self, now: float, pending_enter: np.ndarray) -> float:
        """The next loop while something may change: pods pending, a move in flight, or a
        node that could be consolidated."""
        busy = bool(len(pending_enter) or self._move is not None or self._replacing
                    or self.nodes.n_provisioned() > 0)
        return self._next_loop(now, LOOP_S, busy)

    # -- provisioning ------------------------------------------------------------------
    def autoscale(self, now: float, pending_req: np.ndarray, pending_enter: np.ndarray) -> int:
        """Run a loop when one is due: provisioning (disruption: :meth:`scale_down`)."""
        if not self._loop_runs(now, LOOP_S):
            return 0
        self._due = np.inf
        self._loop_at = now
        self._note_pod_changes(now)
        req = np.ascontiguousarray(pending_req, dtype=np.float64).reshape(-1, 3)
        self._pending = len(req)
        if len(req) == 0:
            return 0
        st = self.nodes
        req = req[karpenter_order(req)]
        booting = np.flatnonzero(st.state == BOOTING)
        live = st.live()
        room = self.limits - st.cap[live].sum(axis=0)
        offer = Offer(self.pool.type_cap, self.pool.type_price, self.nodepool.allowed, room,
                      max(0, len(st) - int(live.sum())))
        out = pack(req, st.cap[booting] - st.alloc[booting], offer)
        for typ in out.claim_type.tolist():
            self.pool.provision(now, int(typ), now + self.boot_delay_s)
            self._quiet = None
        self.counts["nodes_added"] += len(out.claim_type)
        return len(out.claim_type)

    def _note_pod_changes(self, now: float) -> None:
        """A node whose pod count moved since the last loop had a pod event now."""
        changed = self.nodes.ncont != self._seen
        self._last_change[changed] = now
        if changed.any():
            self._quiet = None
        self._seen = self.nodes.ncont.astype(np.int64).copy()

    # -- disruption --------------------------------------------------------------------
    def scale_down(self, now: float, pod_node: np.ndarray, pod_req: np.ndarray) -> np.ndarray:
        """The nodes this loop deletes; the core evicts their pods, then calls :meth:`remove`."""
        if now != self._loop_at:
            return np.zeros(0, dtype=np.int64)
        out = self._replaced(now)
        if out:
            return np.array(out, dtype=np.int64)
        pool = self._view(np.asarray(pod_node, np.int64), pod_req)
        if self._move is not None:
            found, move = self._move
            if now < found + VALIDATION_S:
                return np.zeros(0, dtype=np.int64)
            self._move = None
            return self._execute(now, move, pool)
        if self._pending == 0:
            self._move = self._find(now, pool)  # executed at the first loop 15 s on
        return np.zeros(0, dtype=np.int64)

    def _view(self, pod_node: np.ndarray, pod_req: np.ndarray) -> cons.Pool:
        st = self.nodes
        start, req = group_pods(len(st), pod_node, pod_req)
        price = np.where(self.pool.slot_type >= 0,
                         self.pool.type_price[np.maximum(self.pool.slot_type, 0)], 0.0)
        offer = Offer(self.pool.type_cap, self.pool.type_price, self.nodepool.allowed,
                      np.full(3, np.inf), 1)
        return cons.Pool(st.cap - st.alloc, st.state == UP, st.state == BOOTING, price, start,
                         req, offer)

    def _candidates(self, now: float, pool: cons.Pool) -> list[int]:
        """Ready nodes not being disrupted whose pods last changed consolidateAfter ago, by
        savings ratio descending (slot order on ties)."""
        disrupted = {n for olds in self._replacing.values() for n in olds}
        ok = [int(n) for n in np.flatnonzero(self.nodes.state == UP)
              if int(n) not in disrupted and int(n) not in self._replacing
              and now - self._last_change[n] >= self.nodepool.consolidate_after_s]
        return sorted(ok, key=lambda n: (-pool.savings_ratio(n), n))

    def _find(self, now: float, pool: cons.Pool) -> tuple[float, cons.Move] | None:
        """The move this loop's disruption pass finds, if any."""
        cand = self._candidates(now, pool)
        if not cand or cand == self._quiet:
            return None
        np_ = self.nodepool
        # the budgets count initialized nodes (up or cordoned); cordoned ones are disrupting
        size = int(np.count_nonzero((self.nodes.state == UP) | (self.nodes.state == CORDONED)))
        disrupting = int(np.count_nonzero(self.nodes.state == CORDONED))
        move = cons.emptiness(cand, pool, cons.allowed(np_.budgets, "Empty", size, disrupting))
        if move is None and np_.policy != "WhenEmpty":
            room = cons.allowed(np_.budgets, "Underutilized", size, disrupting)
            nodes = np.flatnonzero(self.nodes.live())
            for method in (cons.multi_node, cons.single_node):
                move = method(cand, pool, room)
                if move is not None and np_.policy == "Balanced" and not cons.balanced_ok(
                        move, pool, nodes):
                    move = None
                if move is not None:
                    break
        if move is None:
            self._quiet = cand
            return None
        return now, move

    def _execute(self, now: float, move: cons.Move, pool: cons.Pool) -> np.ndarray:
        """Validate ``move`` again and carry it out."""
        still = all(self.nodes.state[n] == UP for n in move.nodes)
        again = cons.simulate(pool, move.nodes, move.reason) if still else None
        if again is None or (move.reason == "Empty" and len(pool.pods_of(move.nodes))):
            return np.zeros(0, dtype=np.int64)
        if again.replacement < 0:
            self.counts["consolidation_deletes"] += 1
            return np.array(move.nodes, dtype=np.int64)
        new = self.pool.provision(now, again.replacement, now + self.boot_delay_s)
        for n in move.nodes:  # tainted: they run their pods but take no new ones
            self.nodes.state[n] = CORDONED
            self.nodes.dirty[n] = True
        self.counts["nodes_added"] += 1
        self.counts["consolidation_replaces"] += 1
        self._replacing[new] = move.nodes
        return np.zeros(0, dtype=np.int64)

    def _replaced(self, now: float) -> list[int]:
        """The nodes whose replacement is Ready now: deleted."""
        out: list[int] = []
        for new in [n for n in self._replacing if self.nodes.state[n] == UP]:
            out += list(self._replacing.pop(new))
        return out

    def remove(self, now: float, node: int, evicted: int) -> None:
        """Delete ``node`` (its ``evicted`` pods already sent back to the queue)."""
        self.pool.remove(now, node)
        self._seen[node] = 0
        self._quiet = None
        self.counts["nodes_deleted"] += 1
        self.counts["evictions_consolidation"] += evicted
