"""Karpenter's consolidation: which nodes to delete, or to replace by one cheaper node.

Source: kubernetes-sigs/karpenter v1.14 ``pkg/controllers/disruption`` (``emptiness.go``,
``multinodeconsolidation.go``, ``singlenodeconsolidation.go``, ``consolidation.go``
``computeConsolidation``, ``balanced.go``) and its design ``designs/consolidation.md``:

- A move takes candidate nodes away and simulates scheduling their pods
  (``SimulateScheduling``; :func:`.karpenter_pack.pack`, Karpenter's order) onto the other
  nodes, initialized ones first, then booting ones, plus at most one new node.  The move
  is valid when every pod is placed, none on a node still booting (not initialized).  No
  new node: *delete*.  One: *replace*, valid only when the new node's price is below the
  candidates' summed price.  (Karpenter adds the pending pods to the simulation; the
  model runs consolidation only when none are pending: :mod:`.karpenter`.)
- Candidates are Ready nodes of the pool, not already disrupted, whose pods last changed
  ``consolidateAfter`` ago or more, by ``SavingsRatio`` descending: price over
  ``RescheduleDisruptionCost`` (1 per node plus 1 per pod: ``EvictionCost`` of a pod
  without deletion cost or priority is 1); slot order on ties (Go's ``sort.Slice`` leaves
  them unspecified).
- Emptiness deletes the empty candidates (reason ``Empty``).  Multi-node consolidation
  binary-searches the longest prefix of the first 100 candidates that one move removes;
  single-node consolidation tries the candidates one by one and takes the first valid
  move (reason ``Underutilized``).
- ``Balanced`` approves a move only when its share of the pool's cost saved is at least
  half its share of the pool's disruption cost: ``(savings / pool cost) / (move's
  disruption cost / pool's disruption cost) >= 1/2``.
- Disruption budgets cap how many nodes may be disrupting at once (:func:`allowed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.sim.kubernetes.karpenter_pack import Offer, karpenter_order, pack
from pipeline.sim.kubernetes.settings import Budget

MULTI_NODE_MAX = 100  # multinodeconsolidation.go: candidates considered at most
BALANCED_K = 2  # balanced.go: approved when the score is at least 1/k


@dataclass(frozen=True)
class Move:
    """Delete ``nodes`` (node slots), launching one node of ``replacement`` first when it is
    not -1; ``savings`` in USD per hour."""

    nodes: tuple[int, ...]
    replacement: int
    savings: float
    reason: str


@dataclass(frozen=True)
class Pool:
    """The cluster as consolidation sees it: per node slot ``free`` room (n, 3), ``ready``
    (bool), ``booting`` (bool: launched, not initialized), ``price`` (USD per hour),
    ``pods`` per node (CSR ``start`` into ``req``); what a new node may be (``offer``,
    without limits: a replacement frees more than it adds)."""

    free: np.ndarray
    ready: np.ndarray
    booting: np.ndarray
    price: np.ndarray
    start: np.ndarray
    req: np.ndarray
    offer: Offer

    def pods_of(self, nodes: tuple[int, ...]) -> np.ndarray:
        rows = [self.req[self.start[n]:self.start[n + 1]] for n in nodes]
        return np.concatenate(rows) if rows else np.zeros((0, 3))

    def cost(self, node: int) -> float:
        """``RescheduleDisruptionCost``: 1 for the node, 1 per pod."""
        return 1.0 + float(self.start[node + 1] - self.start[node])

    def savings_ratio(self, node: int) -> float:
        """``SavingsRatio``: the node's price per unit of disruption cost."""
        return float(self.price[node]) / self.cost(node)


def simulate(pool: Pool, nodes: tuple[int, ...], reason: str) -> Move | None:
    """The move that takes ``nodes`` away, or None when their pods would not all fit."""
    req = pool.pods_of(nodes)
    others = np.ones(len(pool.ready), dtype=bool)
    others[list(nodes)] = False
    # initialized nodes first, then those still booting (slot order stands in for names)
    dest = np.concatenate([np.flatnonzero(others & pool.ready),
                           np.flatnonzero(others & pool.booting)])
    offer = pool.offer._replace(room=np.full(3, np.inf), max_new=1)
    out = pack(req[karpenter_order(req)], pool.free[dest], offer)
    where = out.where
    if (where < 0).any():
        return None
    on_node = where[where < len(dest)]
    if pool.booting[dest[on_node]].any():
        return None  # relies on a node not initialized yet
    price = float(pool.price[list(nodes)].sum())
    if len(out.claim_type) == 0:
        return Move(nodes, -1, price, reason)
    new = int(out.claim_type[0])
    new_price = float(offer.price[new])
    if new_price >= price:
        return None  # a replacement must be cheaper than what it replaces
    return Move(nodes, new, price - new_price, reason)


def balanced_ok(move: Move, pool: Pool, pool_nodes: np.ndarray) -> bool:
    """``Balanced``'s test: savings share over disruption share at least ``1/k``."""
    total_cost = float(pool.price[pool_nodes].sum())
    total_disruption = sum(pool.cost(int(n)) for n in pool_nodes)
    if total_cost <= 0 or total_disruption <= 0:
        return False
    disruption = sum(pool.cost(n) for n in move.nodes)
    score = (move.savings / total_cost) / (disruption / total_disruption)
    return score >= 1.0 / BALANCED_K


def allowed(budgets: tuple[Budget, ...], reason: str, pool_size: int, disrupting: int) -> int:
    """How many more nodes may be disrupted for ``reason``: the least of the budgets that
    apply to it (a percent of the pool's nodes, rounded up), minus those disrupting now."""
    caps = [math.ceil(b.nodes * pool_size / 100.0) if b.percent else int(b.nodes)
            for b in budgets if not b.reasons or reason in b.reasons]
    if not caps:
        return pool_size
    return max(0, min(caps) - disrupting)


def emptiness(candidates: list[int], pool: Pool, room: int) -> Move | None:
    """Delete the empty candidates, as many as the budget allows."""
    empty = tuple(n for n in candidates if pool.start[n + 1] == pool.start[n])[:room]
    if not empty:
        return None
    return Move(empty, -1, float(pool.price[list(empty)].sum()), "Empty")


def multi_node(candidates: list[int], pool: Pool, room: int) -> Move | None:
    """The longest prefix (at least two nodes) one move removes, by binary search."""
    first = candidates[:min(MULTI_NODE_MAX, room)]
    lo, hi, best = 2, len(first), None
    while lo <= hi:
        mid = (lo + hi) // 2
        move = simulate(pool, tuple(first[:mid]), "Underutilized")
        if move is not None:
            best, lo = move, mid + 1
        else:
            hi = mid - 1
    return best


def single_node(candidates: list[int], pool: Pool, room: int) -> Move | None:
    """The first candidate one move removes."""
    if room <= 0:
        return None
    for n in candidates:
        move = simulate(pool, (n,), "Underutilized")
        if move is not None:
            return move
    return None
