"""The completion heap's compiled operations: a binary min-heap over ``(time, seq)`` in four
parallel arrays (:class:`pipeline.sim.tasks.Heap`), its size and next sequence number in
the shared ``counters``.  Ties are broken by the sequence number, so simultaneous
completions come out in the order their runs started (deterministic by construction, as in
SimPy's kernel).  An entry whose ``epoch`` no longer matches its task's is stale (the run
ended otherwise) and is dropped when it reaches the top."""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.sim.jit import helper
from pipeline.sim.tasks import HEAP_N, HEAP_SEQ


@helper
def heap_push(ht, hs, hslot, hep, counters, time, slot, epoch):
    """Push ``(time, next seq, slot, epoch)``; the caller reserved room."""
    seq = counters[HEAP_SEQ]
    counters[HEAP_SEQ] = seq + 1
    i = counters[HEAP_N]
    counters[HEAP_N] = i + 1
    while i > 0:  # sift the hole up
        p = (i - 1) >> 1
        if ht[p] < time or (ht[p] == time and hs[p] < seq):
            break
        ht[i], hs[i], hslot[i], hep[i] = ht[p], hs[p], hslot[p], hep[p]
        i = p
    ht[i], hs[i], hslot[i], hep[i] = time, seq, slot, epoch


@helper
def heap_pop(ht, hs, hslot, hep, counters):
    """Remove the top entry (the caller read it first)."""
    n = counters[HEAP_N] - 1
    counters[HEAP_N] = n
    if n == 0:
        return
    t, q, sl, ep = ht[n], hs[n], hslot[n], hep[n]
    i = 0
    while True:  # sift the hole at the root down
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hs[c + 1] < hs[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and q < hs[c]):
            break
        ht[i], hs[i], hslot[i], hep[i] = ht[c], hs[c], hslot[c], hep[c]
        i = c
    ht[i], hs[i], hslot[i], hep[i] = t, q, sl, ep


@njit(cache=True)
def heap_top(ht, hs, hslot, hep, counters, task_epoch):
    """Time of the earliest live completion (stale entries are dropped), or +inf."""
    while counters[HEAP_N] > 0:
        if hep[0] == task_epoch[hslot[0]]:
            return ht[0]
        heap_pop(ht, hs, hslot, hep, counters)
    return np.inf
