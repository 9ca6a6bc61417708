"""kube-scheduler's score arithmetic, in the framework's integer units (Kubernetes v1.31,
``pkg/scheduler/framework/plugins/noderesources``).

Each function is the one definition of its rule: the compiled cycle
(:mod:`.kernel`) inlines them and the reading reference (:mod:`.reference`) calls them
from Python.  Scores are int64 in ``0..MAX_NODE_SCORE`` with Go's truncating division.

Resources are indexed 0 ``cpu``, 1 ``memory``, 2 ``nvidia.com/gpu``.  The trace's float
requests and capacities become integers as the API server holds them: cpu in
millicores (``x 1000``), memory in bytes (``x 2**30``, the trace's GiB or normalised
unit), GPUs in thousandths (the traces have fractional GPU requests; the ratio the scores
use is the same).
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.sim.jit import inlined

MAX_NODE_SCORE = 100  # framework.MaxNodeScore
MAX_CUSTOM_PRIORITY_SCORE = 10  # config.MaxCustomPriorityScore (shape scores are 0..10)
MAX_UTILIZATION = 100
MIN_FEASIBLE_NODES_TO_FIND = 100  # schedule_one.go
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
SCALE = np.array([1000.0, float(2**30), 1000.0])  # trace unit -> integer unit

LEAST, MOST, RATIO = 0, 1, 2  # NodeResourcesFit scoringStrategy.type
STRATEGIES = {"LeastAllocated": LEAST, "MostAllocated": MOST, "RequestedToCapacityRatio": RATIO}


def to_units(x: np.ndarray) -> np.ndarray:
    """Trace quantities ``x`` (rows of cpu, memory, GPUs) as the integers the API server
    holds (rounded to the nearest)."""
    return np.floor(np.asarray(x, dtype=np.float64) * SCALE + 0.5).astype(np.int64)


@inlined
def least_requested(requested, capacity):
    """``leastRequestedScore``: the share left free, 0..100 (0 when over capacity)."""
    if capacity == 0 or requested > capacity:
        return np.int64(0)
    return ((capacity - requested) * MAX_NODE_SCORE) // capacity


@inlined
def most_requested(requested, capacity):
    """``mostRequestedScore``: the share requested, 0..100 (capped at capacity)."""
    if capacity == 0:
        return np.int64(0)
    return (min(requested, capacity) * MAX_NODE_SCORE) // capacity


@inlined
def broken_linear(shape_u, shape_s, p):
    """``helper.BuildBrokenLinearFunction``: the shape's piecewise-linear score at
    utilization ``p`` (flat before the first point and after the last).  The numbers are
    at most 100 x 100, so the float quotient truncated is Go's integer division."""
    k = len(shape_u)
    for i in range(k):
        if p <= shape_u[i]:
            if i == 0:
                return shape_s[0]
            du = shape_u[i] - shape_u[i - 1]
            # Go truncates toward zero (a decreasing shape divides a negative number)
            rise = (shape_s[i] - shape_s[i - 1]) * (p - shape_u[i - 1])
            return shape_s[i - 1] + np.int64(rise / du)
    return shape_s[k - 1]


@inlined
def ratio_requested(requested, capacity, shape_u, shape_s):
    """``RequestedToCapacityRatio``'s per-resource score: the shape at the utilization
    ``requested * 100 / capacity`` (the shape's last point when over capacity)."""
    if capacity == 0 or requested > capacity:
        return broken_linear(shape_u, shape_s, MAX_UTILIZATION)
    return broken_linear(shape_u, shape_s, (requested * MAX_UTILIZATION) // capacity)


@inlined
def fit_score(units, weights, strategy, shape_u, shape_s):
    """``NodeResourcesFit``'s score: the weighted mean over the listed resources
    (``weights[r] > 0``) the node has of the strategy's score (``units``: row 0 the
    requested amounts with the pod, row 1 the allocatable; a resource with allocatable 0
    is left out).
    ``RequestedToCapacityRatio`` counts only resources scoring above 0 and rounds the mean
    (``math.Round``, half away from zero); the others truncate."""
    total = np.int64(0)
    wsum = np.int64(0)
    for r in range(3):
        w = weights[r]
        q, a = units[0, r], units[1, r]
        if w <= 0 or a == 0:
            continue
        if strategy == LEAST:
            s = least_requested(q, a)
        elif strategy == MOST:
            s = most_requested(q, a)
        else:
            s = ratio_requested(q, a, shape_u, shape_s)
            if s <= 0:
                continue
        total += s * w
        wsum += w
    if wsum == 0:
        return np.int64(0)
    if strategy == RATIO:
        return np.int64(math.floor(total / wsum + 0.5))
    return total // wsum


@inlined
def balanced_score(units, listed):
    """``NodeResourcesBalancedAllocation``: ``(1 - std) * 100`` truncated, ``std`` the
    standard deviation of the listed resources' requested fractions (each capped at 1;
    with two resources ``|f1 - f2| / 2``; with one or none, 0); ``units`` as in
    :func:`fit_score`."""
    f0 = f1 = f2 = 0.0
    n = 0
    for r in range(3):
        if not listed[r] or units[1, r] == 0:
            continue
        f = min(units[0, r] / units[1, r], 1.0)
        if n == 0:
            f0 = f
        elif n == 1:
            f1 = f
        else:
            f2 = f
        n += 1
    std = 0.0
    if n == 2:
        std = abs((f0 - f1) / 2.0)
    elif n == 3:
        mean = (f0 + f1 + f2) / 3.0
        std = math.sqrt(((f0 - mean) ** 2 + (f1 - mean) ** 2 + (f2 - mean) ** 2) / 3.0)
    return np.int64((1.0 - std) * MAX_NODE_SCORE)


def num_feasible_nodes_to_find(percentage: int, n_nodes: int) -> int:
    """``numFeasibleNodesToFind``: how many feasible nodes the filter looks for before it
    stops.  All of them below 100 nodes; ``percentage`` 0 is the adaptive default
    ``50 - n/125`` (at least 5); never fewer than 100."""
    if n_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return n_nodes
    if percentage == 0:
        percentage = max(50 - n_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = n_nodes * percentage // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)


@inlined
def draw(state, k):
    """A uniform integer in ``0..k-1`` from the run's generator (a Park-Miller minimal
    standard generator kept in ``state[0]``; the products fit in int64)."""
    state[0] = (state[0] * 48271) % 2147483647
    return state[0] % k
