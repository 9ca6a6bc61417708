"""Fair shares of a queue hierarchy, as Hadoop 3.3's FairScheduler computes them.

Source: apache/hadoop 3.3 ``ComputeFairShares`` (``scheduler/fair/policies``), javadoc and
FairScheduler.md.  For siblings with weights ``w_i``, minimum ``min_i`` and maximum
``max_i`` sharing a total ``T`` (one resource type at a time), find a weight-to-resource
ratio ``R`` such that ``sum_i clamp(w_i * R, min_i, max_i) = min(T, sum_i max_i)``; ``R`` is
found by doubling an upper bound from 1, then 25 rounds of bisection, and each share is
``clamp(w_i * R_upper, min_i, max_i)``.  Fixed cases (``getFairShareIfFixed``): a maximum
<= 0 gives 0; an inactive queue gives 0 for the *instantaneous* share; a weight <= 0 gives
the queue its minimum (or 0).  Fixed shares are taken off the total first.

- *Steady* fair share: every queue counts (changes only with configuration or capacity).
- *Instantaneous* fair share: only active queues (with running or pending work) count.

A parent's share is split among its children the same way, top-down from the cluster.
Hadoop keeps resources as integers (MB, vcores) and truncates each share (``long``);
``truncate=True`` reproduces that (shares can then add up to a little more or less than
``T``).  Trace units may be normalized (Google 2011: fractions of the largest machine), so
the policy uses ``truncate=False`` (a documented choice): same search, no rounding.
Fair shares do not cap at demand (demand matters only in the starvation checks).
"""

from __future__ import annotations

import numpy as np

BISECTION_ROUNDS = 25  # ComputeFairShares.COMPUTE_FAIR_SHARES_ITERATIONS


def _planned(ratio: float, weight: np.ndarray, low: np.ndarray, high: np.ndarray,
             truncate: bool) -> np.ndarray:
    share = np.minimum(np.maximum(weight * ratio, low), high)
    return np.floor(share) if truncate else share


def compute_shares(weight: np.ndarray, min_share: np.ndarray, max_share: np.ndarray,
                   total: float, active: np.ndarray | None = None,
                   truncate: bool = False) -> np.ndarray:
    """Fair share of each sibling of one resource type (``active`` None: steady share)."""
    weight = np.asarray(weight, dtype=np.float64)
    low = np.asarray(min_share, dtype=np.float64)
    high = np.asarray(max_share, dtype=np.float64)
    share = np.zeros(len(weight))
    fixed = high <= 0
    if active is not None:
        fixed |= ~np.asarray(active, dtype=bool)
    by_min = ~fixed & (weight <= 0)
    share[by_min] = np.maximum(low[by_min], 0.0)
    free = ~fixed & ~by_min
    rest = max(total - float(share.sum()), 0.0)
    if not free.any():
        return np.floor(share) if truncate else share
    w, lo, hi = weight[free], low[free], high[free]
    target = min(rest, float(hi.sum()))
    upper = 1.0
    while _planned(upper, w, lo, hi, truncate).sum() < target:
        upper *= 2.0
    left, right = 0.0, upper
    for _ in range(BISECTION_ROUNDS):
        mid = (left + right) / 2.0
        planned = _planned(mid, w, lo, hi, truncate).sum()
        if planned == target:
            right = mid
            break
        if planned < target:
            left = mid
        else:
            right = mid
    share[free] = _planned(right, w, lo, hi, truncate)
    return share


def tree_shares(children: tuple[tuple[int, ...], ...], weight: np.ndarray,
                min_share: np.ndarray, max_share: np.ndarray, total: np.ndarray,
                active: np.ndarray | None = None, truncate: bool = False) -> np.ndarray:
    """Fair shares ``(n_queues, n_resources)`` of a tree (queue 0 = root, parents first).

    ``children[q]`` lists queue ``q``'s children; ``min_share``/``max_share`` are
    ``(n_queues, n_resources)``; ``active`` (per queue) None gives the steady shares.
    """
    n, r = np.asarray(min_share).shape
    out = np.zeros((n, r))
    out[0] = np.minimum(total, max_share[0])
    if active is not None and not active[0]:
        out[0] = 0.0
    for q, kids in enumerate(children):  # breadth-first: a parent is done before its kids
        if not kids:
            continue
        idx = np.asarray(kids, dtype=np.int64)
        act = None if active is None else active[idx]
        for k in range(r):
            out[idx, k] = compute_shares(weight[idx], min_share[idx, k], max_share[idx, k],
                                         float(out[q, k]), act, truncate)
    return out
