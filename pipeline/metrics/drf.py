"""Max-min fair shares of several resources given each user's demand: DRF progressive filling.

Ghodsi, Zaharia, Hindman, Konwinski, Shenker and Stoica, "Dominant Resource Fairness: Fair
Allocation of Multiple Resource Types", NSDI 2011.  A user's *dominant share* is the largest,
over resources, of what it holds divided by the cluster's capacity.  With divisible demands,
DRF's allocation is what progressive filling reaches: every user's dominant share grows at
the same rate, each user taking resources in proportion to its demand vector (Leontief
preferences: a task needs all of its resources together); a user stops when it has its whole
demand, and when a resource runs out every user still growing that needs it stops there.  In
the single-resource case this is the classic max-min fair share ("no one gets more than it
asks for; the rest split what is left equally").

Here a user's demand vector is the sum of the requests of its pending and running tasks, so
its fair allocation is ``level * demand / dominant_demand``: one number per user, its fair
dominant share ``level`` (0 <= level <= dominant_demand).  Every user is entitled equally
(the traces carry no user weights).  A resource of zero capacity that a user asks for stops
that user at 0 at once (nothing of it can be given).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Relative slack when deciding that demand fits: sums of many floats drift.
_FIT_SLACK = 1e-9


@njit(cache=True)
def _saturation(level: float, used: np.ndarray, slope: np.ndarray) -> tuple[float, int]:
    """The level at which the first resource still being taken runs out, and which one."""
    best, which = np.inf, -1
    for r in range(used.shape[0]):
        if slope[r] > 0.0:
            at = level + max(0.0, 1.0 - used[r]) / slope[r]
            if at < best:
                best, which = at, r
    return best, which


@njit(cache=True)
def _slopes(share: np.ndarray, dominant: np.ndarray, done: np.ndarray,
            slope: np.ndarray) -> None:
    """Per resource, how fast the still-growing users take it per unit of dominant share."""
    slope[:] = 0.0
    for u in range(share.shape[0]):
        if not done[u]:
            for r in range(share.shape[1]):
                slope[r] += share[u, r] / dominant[u]


@njit(cache=True)
def fair_levels(share: np.ndarray, level_out: np.ndarray) -> None:
    """Fill ``level_out[u]``: user u's fair dominant share given demand shares ``share``.

    ``share[u, r]`` is user u's demand of resource r over the capacity of r (``np.inf`` when
    the capacity is 0 and the user asks for some).  Progressive filling, exact: at most one
    step per user (it reaches its demand) plus one per resource (it runs out).
    """
    m, n_res = share.shape
    dominant = np.zeros(m)
    done = np.zeros(m, np.bool_)
    total = np.zeros(n_res)
    for u in range(m):
        for r in range(n_res):
            dominant[u] = max(dominant[u], share[u, r])
            total[r] += share[u, r]
        level_out[u] = 0.0
        if dominant[u] <= 0.0 or np.isinf(dominant[u]):
            done[u] = True  # asks for nothing, or for a resource the cluster has none of
    fits = True
    for r in range(n_res):
        fits = fits and total[r] <= 1.0 + _FIT_SLACK
    if fits:  # uncontended: everyone's fair share is its whole demand
        for u in range(m):
            if not done[u]:
                level_out[u] = dominant[u]
        return
    order = np.argsort(dominant)
    used = np.zeros(n_res)
    slope = np.zeros(n_res)
    _slopes(share, dominant, done, slope)
    level, i = 0.0, 0
    while True:
        while i < m and done[order[i]]:
            i += 1
        if i == m:
            return
        reach = dominant[order[i]]
        runs_out, res = _saturation(level, used, slope)
        step = min(reach, runs_out)
        for r in range(n_res):
            used[r] += slope[r] * (step - level)
        level = step
        if reach <= runs_out:  # the smallest remaining demand is met in full
            u = order[i]
            level_out[u], done[u] = dominant[u], True
            for r in range(n_res):
                slope[r] -= share[u, r] / dominant[u]
        else:  # resource ``res`` runs out: everyone still growing that needs it stops
            for j in range(i, m):
                u = order[j]
                if not done[u] and share[u, res] > 0.0:
                    level_out[u], done[u] = level, True
            _slopes(share, dominant, done, slope)  # afresh: no drift from subtractions
            slope[res] = 0.0


def max_min_fair_shares(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each user's fair dominant share (DRF, capped at its demand) for demand rows (users x
    resources) against a capacity vector, in the same units."""
    demand = np.atleast_2d(np.asarray(demand, dtype=np.float64))
    capacity = np.asarray(capacity, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(demand > 0, demand / capacity, 0.0)
    levels = np.zeros(demand.shape[0])
    fair_levels(np.ascontiguousarray(share), levels)
    return levels
