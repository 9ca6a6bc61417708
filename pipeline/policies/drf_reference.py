"""DRF's progressive filling in plain Python: the reference for ``drf.drf_fill``.

This is the reference the compiled kernel is tested against
(``tests/policies/test_drf_reference.py`` demands the same placements, in the same order,
on small random states).  A behaviour change starts here, then the kernel follows.

The pass is Algorithm 1 of Ghodsi et al., "Dominant Resource Fairness", NSDI 2011
(section 4.2), weighted as in section 4.3, with the placement rule of this project's
``drf`` policy (:mod:`pipeline.policies.drf` says why each choice):

- ``R_j``: the capacity of the up nodes per resource; ``U_ij``: what user ``i`` holds;
  the dominant share ``s_i = max_j U_ij / R_j``, divided by the user's weight ``w_i``;
- repeatedly offer to the waiting user with the lowest share (ties: lower user code);
  the first of its remaining requests (queue order) that fits some node is placed on the
  least allocated node it fits and may use, and its share grows; the requests before it
  fit no node and are passed over for this round;
- a user with no request left drops out; the pass ends when no user waits.

Where the kernel keeps indexes (a segment tree over users, the node index's trees, a
cache of requests that fit nowhere), this reference scans lists.  The arithmetic is the
kernel's, in its order, so the two agree to the bit: a share is ``U_ij x (1 / R_j)``, a
node's room is ``capacity x (1 + SLACK) + 0.5e-12 - allocated`` and its key
``memory fraction + TIE x cpu fraction`` (:mod:`pipeline.policies.placement.nodetree`).
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.placement.nodetree import SLACK, TIE
from pipeline.sim.interface import NodeView

RESOURCES = range(3)  # cpu, memory, gpu


def inverse_capacity(cap: np.ndarray, up: np.ndarray) -> list[float]:
    """``1 / R_j`` summed over the up nodes in slot order (0 for a resource none has)."""
    total = [0.0, 0.0, 0.0]
    for nd in range(len(cap)):
        if up[nd]:
            for k in RESOURCES:
                total[k] += float(cap[nd, k])
    return [1.0 / t if t > 0 else 0.0 for t in total]


def dominant_share(held: list[float], inv_total: list[float], weight: float) -> float:
    """Weighted dominant share: ``max_j U_j / R_j``, divided by the user's weight."""
    share = 0.0
    for k in RESOURCES:
        share = max(share, held[k] * inv_total[k])
    return share / weight


def room(cap: np.ndarray, alloc: list[float]) -> list[float]:
    """Free cpu, memory and gpu of one node, with the index's capacity slack."""
    return [float(cap[k]) * (1 + SLACK) + 0.5e-12 - alloc[k] for k in RESOURCES]


def usage_key(cap: np.ndarray, alloc: list[float]) -> float:
    """How allocated a node is: memory fraction, then (by ``TIE``) cpu fraction."""
    mem = alloc[1] / cap[1] if cap[1] > 0 else 0.0
    cpu = alloc[0] / cap[0] if cap[0] > 0 else 0.0
    return float(mem + TIE * cpu)


def least_allocated_node(ask: np.ndarray, mask: int, cap: np.ndarray, alloc: list[list[float]],
                         up: np.ndarray, model_bit: np.ndarray | None) -> int | None:
    """The up node with the lowest usage key (ties: lower slot) that has room for ``ask``
    and whose GPU model the request's ``mask`` allows (0: any); None if there is none."""
    best, best_key = None, np.inf
    for nd in range(len(cap)):
        if not up[nd]:
            continue
        if mask != 0 and (model_bit is None or (int(model_bit[nd]) & mask) == 0):
            continue
        free = room(cap[nd], alloc[nd])
        if any(free[k] < ask[k] for k in RESOURCES):
            continue
        key = usage_key(cap[nd], alloc[nd])
        if key < best_key:
            best, best_key = nd, key
    return best


def progressive_filling(nodes: NodeView, req: np.ndarray, user: np.ndarray,
                        allow: np.ndarray | None, usage: np.ndarray,
                        weight: np.ndarray) -> list[tuple[int, int]]:
    """``(request row, node slot)`` pairs DRF places at one scheduling point, in order.

    ``req``/``user``/``allow``: the pending requests in queue order (size, user code, GPU
    model mask or None: any node); ``usage``/``weight``: per user code, what it holds and
    its weight.  Nothing passed in is changed.
    """
    cap, up = nodes.cap, nodes.state == 2
    model_bit = nodes.gpu_model
    alloc = [[float(a) for a in row] for row in nodes.alloc]
    held = [[float(a) for a in row] for row in usage]
    inv_total = inverse_capacity(cap, up)
    queue: list[list[int]] = [[] for _ in held]
    for i, u in enumerate(user):
        queue[int(u)].append(i)
    offered = [0] * len(held)  # how far each user's queue has been offered
    placed: list[tuple[int, int]] = []
    while True:
        waiting = [u for u in range(len(held)) if offered[u] < len(queue[u])]
        if not waiting:
            return placed
        u = min(waiting, key=lambda w: (dominant_share(held[w], inv_total, weight[w]), w))
        while offered[u] < len(queue[u]):
            i = queue[u][offered[u]]
            offered[u] += 1
            mask = 0 if allow is None or model_bit is None else int(allow[i])
            nd = least_allocated_node(req[i], mask, cap, alloc, up, model_bit)
            if nd is not None:
                for k in RESOURCES:
                    alloc[nd][k] += float(req[i, k])
                    held[u][k] += float(req[i, k])
                placed.append((i, nd))
                break
