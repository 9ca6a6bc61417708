"""The applications of the FairScheduler's leaf queues in fair order: a min segment tree.

A leaf queue may hold thousands of applications, so :func:`~.kernel.fair_fill` keeps their
comparator keys (one number each) in a segment tree over the positions of ``child_idx``
and asks it for the first application of a leaf's range with the smallest key.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.sim.jit import helper


class AppHeap(NamedTuple):
    """Min segment tree over the children positions (``child_idx``) of the applications'
    keys, lowest position on ties; queues and finished applications hold inf."""

    tv: np.ndarray  # (2p,) float64: smallest key per subtree ...
    ti: np.ndarray  # (2p,) int64: ... and its position
    pos_of: np.ndarray  # (t,) int64: tree node -> its position in ``child_idx`` (-1: root)


@helper
def seg_set(heap, pos, value):
    """Set position ``pos`` of the segment tree keeping the lowest position on ties."""
    tv, ti = heap.tv, heap.ti
    x = tv.shape[0] // 2 + pos
    tv[x], ti[x] = value, pos
    x >>= 1
    while x >= 1:
        a, b = 2 * x, 2 * x + 1
        if tv[b] < tv[a]:
            tv[x], ti[x] = tv[b], ti[b]
        else:
            tv[x], ti[x] = tv[a], ti[a]
        x >>= 1


@helper
def seg_argmin(heap, lo, hi):
    """Lowest position with the smallest value in ``[lo, hi)``; -1 when all are inf."""
    tv, ti = heap.tv, heap.ti
    p = tv.shape[0] // 2
    best_v, best_i = np.inf, -1
    lo += p
    hi += p
    while lo < hi:
        if lo & 1:
            if tv[lo] < best_v or (tv[lo] == best_v and best_i >= 0 and ti[lo] < best_i):
                best_v, best_i = tv[lo], ti[lo]
            lo += 1
        if hi & 1:
            hi -= 1
            if tv[hi] < best_v or (tv[hi] == best_v and best_i >= 0 and ti[hi] < best_i):
                best_v, best_i = tv[hi], ti[hi]
        lo >>= 1
        hi >>= 1
    return best_i if best_v < np.inf else -1
