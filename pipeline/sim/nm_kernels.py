"""The NodeManagers' compiled passes (:mod:`pipeline.sim.nodemanager`): what each does
with arriving opportunistic containers, and which queued ones start when room frees."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def nm_arrivals(slots, nodes, req, cap, alloc, oalloc, queued, max_queue, eps, action):
    """What each NodeManager does with arriving opportunistic containers, in order: 0 start
    (its queue is empty and the container fits the unallocated room), 1 queue (fewer than
    ``max_queue`` queued), 2 reject.  ``queued`` (a copy of the queue lengths) and the
    room taken by earlier starts of the same call are updated as it goes."""
    taken = np.zeros((len(cap), 3))  # room taken by this call's starts, by node
    for i in range(len(slots)):
        s = slots[i]
        nd = nodes[i]
        fits = queued[nd] == 0
        if fits:
            for k in range(3):
                c = cap[nd, k]
                if req[s, k] > c - alloc[nd, k] - oalloc[nd, k] - taken[nd, k] + eps * c + 1e-12:
                    fits = False
                    break
        if fits:
            action[i] = 0
            for k in range(3):
                taken[nd, k] += req[s, k]
        elif queued[nd] < max_queue:
            action[i] = 1
            queued[nd] += 1
        else:
            action[i] = 2


@njit(cache=True)
def nm_fifo_starts(flat, indptr, nodes, req, cap, alloc, oalloc, room, eps, go):
    """How many queued containers start from the head of each node's queue (``flat`` in
    CSR form by ``indptr``): FIFO while the head fits what is available, the larger of the
    unallocated room and ``room`` (the headroom below the over-allocation threshold, cpu
    and mem; -inf off a utilization check; GPUs by allocation), resource by resource;
    each start takes its request off it (:func:`pipeline.sim.overalloc.available`)."""
    for i in range(len(nodes)):
        nd = nodes[i]
        avail = np.empty(3)
        for k in range(3):
            avail[k] = cap[nd, k] - alloc[nd, k] - oalloc[nd, k]
            if k < 2:
                avail[k] = max(avail[k], room[i, k])
        n = 0
        for j in range(indptr[i], indptr[i + 1]):
            s = flat[j]
            ok = True
            for k in range(3):
                if req[s, k] > avail[k] + eps * cap[nd, k] + 1e-12:
                    ok = False
                    break
            if not ok:
                break
            for k in range(3):
                avail[k] -= req[s, k]
            n += 1
        go[i] = n
