"""The FairScheduler's assignment pass in plain Python: the reference for ``kernel.fair_fill``.

This is what the compiled pass decides at a scheduling point without a node offer
(``tests/policies/test_fair_fill_reference.py`` demands the same placements, in the same
order, and the same state after, on small random states).  A behaviour change starts here,
then the kernel follows.  With an offer (delay scheduling) the request comes from the
locality gate instead, whose reference is :mod:`pipeline.policies.locality.gate_reference`.

Source: apache/hadoop 3.3 ``scheduler/fair`` (paraphrased, as :mod:`.kernel` cites it):
``FSParentQueue.assignContainer`` / ``FSLeafQueue.assignContainer`` (descend from the root,
at each parent into the child its policy puts first), ``FairSharePolicy`` /
``DominantResourceFairnessPolicy`` comparators and FIFO order, ``assignContainerPreCheck``
(a queue over its maxResources is passed over), ``fitsInMaxShare`` (the container keeps
every queue on its path within its maximum) and ``FSAppAttempt.isOverAMShareLimit``
(maxAMShare).  The tree is :class:`~.fill_state.FillTree`: queues, then the applications
below their leaf queues.  The loop:

1. Descend from the root.  At a parent whose children are queues, look at the children
   that still have something to place in child order; one holding more than its
   maxResources is out for the rest of the call; enter the one with the smallest
   comparator key (ties: the first).  At a leaf queue, enter the application with the
   smallest *second* key component (ties: the first): the kernel keeps one number per
   application, all of a leaf's applications share a tier (weight 1, no minimum), so this
   is the whole comparator for ``fair`` and ``fifo``, and for ``drf`` the dominant share
   (equal dominant shares go to the earlier application, not to the other share).
2. The application's requests are tried in order from where it stopped: with the AM
   check on and no AM yet, one that would take the leaf over its AM limit ends the
   application's turn for the whole call; one that fits no node, or would break a
   maximum on its path, is passed over for the call.  The first that fits goes to the
   least allocated up node it fits and may use (:mod:`pipeline.policies.drf_reference`),
   and the descent starts again from the root.
3. An application with no request left is out; a queue is out when all its children are.
   The pass ends when the root is out.

The arithmetic is the kernel's, in its order, so the two agree to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.policies.drf_reference import least_allocated_node
from pipeline.policies.fair.fill_state import AmCheck, FillTree, Pending

FAIR, DRF, FIFO = 0, 1, 2  # the schedulingPolicy codes (:mod:`.config`)
EPS = 1e-9  # the kernel's tolerance on maxResources and the AM limit
RESOURCES = range(3)  # cpu, memory, gpu


@dataclass
class FillResult:
    """What one pass decides, and the state it leaves."""

    placed: list[tuple[int, int]]  # (request row, node slot) in placement order
    usage: np.ndarray  # (t, 3) the tree's usage after the pass
    started: np.ndarray  # (t,) applications with an AM
    am_used: np.ndarray  # (n_queues, 3) AM usage per leaf
    alloc: np.ndarray  # (nodes, 3) allocation per node
    ncont: np.ndarray  # (nodes,) containers per node


def comparator_key(tree: FillTree, c: int, policy: int) -> tuple[float, float, float]:
    """``(tier, first, second)`` of child ``c`` under a ``policy`` parent (lower first)."""
    usage, weight, min_share, demand = tree.usage, tree.weight, tree.min_share, tree.demand
    if policy == FIFO:  # FifoPolicy: arrival order
        return (0.0, float(tree.rank[c]), 0.0)
    if policy == DRF:  # DominantResourceFairnessPolicy
        w = weight[c] if weight[c] > 0 else 1e-300
        cpu = usage[c, 0] * tree.inv_total[0] / w
        mem = usage[c, 1] * tree.inv_total[1] / w
        dominant, other = (1, 0) if mem > cpu else (0, 1)  # CPU first on a tie
        min_dominant = min(min_share[c, dominant], demand[c, dominant])
        if min_dominant > 0 and usage[c, dominant] < min_dominant:  # needy
            min_other = min(min_share[c, other], demand[c, other])
            ratio = usage[c, other] / min_other if min_other > 0 else np.inf
            return (0.0, usage[c, dominant] / min_dominant, ratio)
        return (1.0, max(cpu, mem), min(cpu, mem))
    min_memory = min(min_share[c, 1], demand[c, 1])  # FairSharePolicy: memory only
    if usage[c, 1] < min_memory:  # needy
        return (0.0, usage[c, 1] / min_memory, 0.0)
    if weight[c] > 0:
        return (1.0, usage[c, 1] / weight[c], 0.0)
    return (2.0, usage[c, 1], 0.0)  # weight 0: after every weighted sibling


def over_max_share(tree: FillTree, q: int) -> bool:
    """``assignContainerPreCheck`` fails: queue ``q`` already holds more than its maximum."""
    return any(tree.usage[q, k] > tree.max_share[q, k] * (1 + EPS) for k in RESOURCES)


def fits_in_max_share(tree: FillTree, q: int, ask: np.ndarray) -> bool:
    """``ask`` keeps every queue from ``q`` up to the root within its maxResources."""
    while q >= 0:
        if any(tree.usage[q, k] + ask[k] > tree.max_share[q, k] * (1 + EPS)
               for k in RESOURCES):
            return False
        q = int(tree.parent[q])
    return True


def is_over_am_share_limit(am: AmCheck, leaf: int, ask: np.ndarray) -> bool:
    """The AM ``ask`` would take ``leaf``'s AM usage over its AM limit (some resource)."""
    return any(am.used[leaf, k] + ask[k] > am.limit[leaf, k] * (1 + EPS) for k in RESOURCES)


class FairFill:
    """One assignment pass over copies of the inputs (read :attr:`result` after :meth:`run`)."""

    def __init__(self, tree: FillTree, pending: Pending, am: AmCheck, cap: np.ndarray,
                 alloc: np.ndarray, up: np.ndarray, ncont: np.ndarray, allow: np.ndarray,
                 bits: np.ndarray) -> None:
        self.tree = tree._replace(usage=tree.usage.copy())
        self.am = am._replace(started=am.started.copy(), used=am.used.copy())
        self.req, self.cap, self.up = pending.req, cap, up
        self.allow, self.bits = allow, bits
        self.alloc = [[float(a) for a in row] for row in alloc]
        self.ncont = [int(n) for n in ncont]
        n = len(tree.parent)
        self.children = [[int(c) for c in tree.child_idx[tree.child_ptr[q]:tree.child_ptr[q + 1]]]
                         for q in range(n)]
        self.requests = [[int(i) for i in pending.order[pending.indptr[q]:pending.indptr[q + 1]]]
                         for q in range(n)]
        self.next = [0] * n  # how far each application's requests have been tried
        self.out: set[int] = set()  # queues passed over for the call (over their maximum)
        self.placed: list[tuple[int, int]] = []

    def has_work(self, q: int) -> bool:
        """Whether tree node ``q`` has something left to place in this call."""
        if q in self.out:
            return False
        if not self.children[q]:
            return self.next[q] < len(self.requests[q])
        return any(self.has_work(c) for c in self.children[q])

    def is_leaf_queue(self, q: int) -> bool:
        """A queue whose children are applications."""
        return bool(self.children[q]) and self.children[q][0] >= self.tree.n_queues

    def choose_child(self, q: int) -> int | None:
        """The child of ``q`` to enter (``assignContainer`` order), or None."""
        policy = int(self.tree.kind[q])
        best, best_key = None, (np.inf, np.inf, np.inf)
        for c in self.children[q]:
            if not self.has_work(c):
                continue
            if self.is_leaf_queue(q):  # applications: one number each (module doc)
                key = (0.0, comparator_key(self.tree, c, policy)[1], 0.0)
            elif over_max_share(self.tree, c):
                self.out.add(c)
                continue
            else:
                key = comparator_key(self.tree, c, policy)
            if key < best_key:
                best, best_key = c, key
        return best

    def assign_container(self, app: int) -> None:
        """The application's turn: place its first request that fits, or pass them over."""
        leaf = int(self.tree.parent[app])
        needs_am = self.am.on and not self.am.started[app]
        mine = self.requests[app]
        while self.next[app] < len(mine):
            i = mine[self.next[app]]
            self.next[app] += 1
            ask = self.req[i]
            if needs_am and is_over_am_share_limit(self.am, leaf, ask):
                self.next[app] = len(mine)  # nothing more for it in this call
                return
            if not fits_in_max_share(self.tree, app, ask):
                continue
            mask = int(self.allow[i]) if len(self.allow) else 0
            nd = least_allocated_node(ask, mask, self.cap, self.alloc, self.up, self.bits)
            if nd is None:
                continue
            self.allocate(i, nd, app, leaf, needs_am)
            return

    def allocate(self, i: int, nd: int, app: int, leaf: int, is_am: bool) -> None:
        """Book request ``i`` of ``app`` on node ``nd``: node, usage up the tree, AM use."""
        for k in RESOURCES:
            self.alloc[nd][k] += float(self.req[i, k])
        self.ncont[nd] += 1
        q = app
        while q >= 0:
            for k in RESOURCES:
                self.tree.usage[q, k] += self.req[i, k]
            q = int(self.tree.parent[q])
        if is_am:
            self.am.started[app] = True
            for k in RESOURCES:
                self.am.used[leaf, k] += self.req[i, k]
        self.placed.append((i, nd))

    def run(self) -> FillResult:
        """Descend from the root until nothing is left to place."""
        while self.has_work(0):
            q = 0
            while self.children[q]:
                child = self.choose_child(q)
                if child is None:
                    break  # every child of q turned out to be over its maximum
                q = child
            if not self.children[q]:
                self.assign_container(q)
        return FillResult(self.placed, self.tree.usage, self.am.started, self.am.used,
                          np.array(self.alloc).reshape(-1, 3),
                          np.array(self.ncont, dtype=np.int64))


def fair_fill_reference(tree: FillTree, pending: Pending, am: AmCheck, cap: np.ndarray,
                        alloc: np.ndarray, up: np.ndarray, ncont: np.ndarray,
                        allow: np.ndarray, bits: np.ndarray) -> FillResult:
    """What the fill decides with no node offer (nothing passed in is changed).

    ``cap``/``alloc``/``up``/``ncont``: the node index's view of the nodes; ``allow``: the
    requests' GPU model masks (empty: any node), ``bits``: the nodes' model bits.
    """
    return FairFill(tree, pending, am, cap, alloc, up, ncont, allow, bits).run()
