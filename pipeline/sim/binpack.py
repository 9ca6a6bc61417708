"""First-fit bin packing of resource requests onto new identical nodes, compiled.

Both autoscalers count new nodes this way: the Qubole-style elastic cluster
(:func:`pipeline.sim.autoscaler.bins_needed`, the requests in queue order) and Cluster
Autoscaler's binpacking estimator (:func:`pipeline.sim.kubernetes.scale_up.estimate`, the
pods sorted largest first).  Each request goes to the first open node it fits; a new node is
opened when none fits, up to ``limit``.  A request larger than an empty node is skipped.
Once ``limit`` nodes are open, later requests still fill their room (Cluster Autoscaler's
estimator goes on), unless ``stop_when_full`` (the elastic cluster only needs the count).

Open nodes sit in a segment tree of per-resource maxima of their free room, so finding the
first that fits costs O(log nodes) in the common case.  The plain-Python reference is
:mod:`pipeline.sim.binpack_reference`, the differential test ``tests/sim/test_binpack.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

FIT_EPS = 1e-9  # a request fits when it is at most the room plus this


@njit(cache=True)
def first_fit(req, cap, limit, placed, stop_when_full):
    """Nodes of room ``cap`` (3,) first-fit packing of ``req`` rows (n, 3) opens, at most
    ``limit``; ``placed[i]`` is set for each request that found a node."""
    if limit <= 0:
        return 0
    p = 1
    while p < limit:
        p *= 2
    free = np.full((3, 2 * p), -np.inf)
    used = 0
    for i in range(req.shape[0]):
        rc, rm, rg = req[i, 0] - FIT_EPS, req[i, 1] - FIT_EPS, req[i, 2] - FIT_EPS
        if cap[0] < rc or cap[1] < rm or cap[2] < rg:
            continue
        b = _leftmost_fit(free, p, rc, rm, rg)
        if b < 0:
            if used == limit:
                if stop_when_full:
                    return used
                continue
            b = used
            used += 1
            for k in range(3):
                free[k, p + b] = cap[k]
        for k in range(3):
            free[k, p + b] -= req[i, k]
        placed[i] = True
        j = (p + b) >> 1
        while j >= 1:
            for k in range(3):
                free[k, j] = max(free[k, 2 * j], free[k, 2 * j + 1])
            j >>= 1
    return used


@njit(cache=True)
def _leftmost_fit(free, p, rc, rm, rg):
    """Leftmost leaf whose room covers the request, or -1 (depth-first, left first)."""
    stack = np.empty(64, dtype=np.int64)
    stack[0] = 1
    sp = 1
    while sp > 0:
        sp -= 1
        i = stack[sp]
        if free[0, i] < rc or free[1, i] < rm or free[2, i] < rg:
            continue
        if i >= p:
            return i - p
        stack[sp] = 2 * i + 1
        stack[sp + 1] = 2 * i
        sp += 2
    return -1
