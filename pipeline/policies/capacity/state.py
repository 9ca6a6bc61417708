"""Per-call arrays for the assignment kernel, gathered from the view and the policy's memory.

Applications are trace jobs.  tracereplay models an application's AM container as **the
first container the scheduler gives the job** (its first task to start); the AM's
resources count against the leaf's AM limit while the job has tasks pending or running
(YARN keeps the AM for the application's lifetime).  Users are keyed per leaf, as YARN's
``UsersManager`` is per queue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from pipeline.policies.capacity.formulas import (
    am_limit,
    max_applications,
    per_user_applications,
)
from pipeline.policies.queues.tree import QueueTree
from pipeline.sim.interface import NodeView


def up_resources(nodes: NodeView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cluster total, largest node, free room) over the up nodes, one compiled pass per
    call (the same row-by-row sums numpy's ``sum(axis=0)`` makes, so the same bits)."""
    total, largest, free = np.zeros(3), np.full(3, -np.inf), np.zeros(3)
    if not _up_sums(nodes.state, nodes.cap, nodes.alloc, total, largest, free):
        return np.zeros(3), np.full(3, np.inf), np.zeros(3)
    return total, largest, free


@njit(cache=True)
def _up_sums(state: np.ndarray, cap: np.ndarray, alloc: np.ndarray, total: np.ndarray,
             largest: np.ndarray, free: np.ndarray) -> int:
    """Accumulate the up nodes' capacity, largest capacity and free room; count them."""
    n = 0
    for i in range(len(state)):
        if state[i] != 2:
            continue
        n += 1
        for r in range(3):
            c = cap[i, r]
            total[r] += c
            if c > largest[r]:
                largest[r] = c
            room = c - alloc[i, r]
            free[r] += room if room > 0.0 else 0.0
    return n


def dense_sum(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """(n, 3) sums of ``values`` rows by integer ``keys`` in ``0..n-1``."""
    out = np.zeros((n, 3))
    for r in range(3):
        out[:, r] = np.bincount(keys, weights=values[:, r], minlength=n)
    return out


@dataclass
class LeafSettings:
    """Per-leaf constants from the configuration (cluster-independent)."""

    mulp: np.ndarray
    ulf: np.ndarray
    fair: np.ndarray
    size_weight: np.ndarray
    am_percent: np.ndarray
    max_apps_override: np.ndarray  # -1 = derived from the system maximum
    user_weights: list[dict[str, float]]
    q_prio: np.ndarray
    q_use_prio: np.ndarray
    q_kids_lo: np.ndarray
    q_kids: np.ndarray
    q_leaf: np.ndarray


def leaf_settings(tree: QueueTree, max_am_percent: float) -> LeafSettings:
    """Arrays of the per-queue properties the kernel needs."""
    lo = np.zeros(tree.n_queues + 1, dtype=np.int64)
    lo[1:] = np.cumsum([len(k) for k in tree.children])
    kids = np.array([k for ks in tree.children for k in ks], dtype=np.int64)
    q_leaf = np.full(tree.n_queues, -1, dtype=np.int64)
    q_leaf[tree.leaves] = np.arange(tree.n_leaves)
    return LeafSettings(
        mulp=np.array(tree.leaf_prop("minimum_user_limit_percent", 100.0), dtype=np.float64),
        ulf=np.array(tree.leaf_prop("user_limit_factor", 1.0), dtype=np.float64),
        fair=np.array([o == "fair" for o in tree.leaf_prop("ordering", "fifo")]),
        size_weight=np.array(tree.leaf_prop("size_based_weight", False), dtype=np.bool_),
        am_percent=np.array(tree.leaf_prop("max_am_percent", max_am_percent), np.float64),
        max_apps_override=np.array(tree.leaf_prop("maximum_applications", -1), np.int64),
        user_weights=tree.leaf_prop("user_weights", {}),
        q_prio=np.array([tree.prop(i, "priority", 0) for i in range(tree.n_queues)],
                        dtype=np.int64),
        q_use_prio=np.array([tree.prop(i, "ordering") == "priority-utilization"
                             for i in range(tree.n_queues)]),
        q_kids_lo=lo, q_kids=kids, q_leaf=q_leaf,
    )


def app_limits(s: LeafSettings, abs_cap: np.ndarray, system_max: int,
               ) -> tuple[np.ndarray, np.ndarray]:
    """(per-leaf, per-user) maximum applications."""
    per_q, per_u = [], []
    for i in range(len(s.mulp)):
        q, u = max_applications(system_max, float(abs_cap[i]), float(s.mulp[i]),
                                float(s.ulf[i]))
        if s.max_apps_override[i] >= 0:
            q = int(s.max_apps_override[i])
            u = per_user_applications(q, float(s.mulp[i]), float(s.ulf[i]))
        per_q.append(max(q, 1))  # a zero limit would starve the queue for good
        per_u.append(max(u, 1))
    return np.array(per_q, dtype=np.int64), np.array(per_u, dtype=np.int64)


def am_limits(s: LeafSettings, leaf_max: np.ndarray, minimum: np.ndarray,
              calculator: str, percent: np.ndarray | None = None) -> np.ndarray:
    """(n_leaves, 3) AM limits from each leaf's usable resource: its maximum capacity in
    DEFAULT, its guarantee in a label partition (``calculateAndGetAMResourceLimitPer
    Partition``: "For labeled partition, consider only the absolute resources guaranteed");
    ``percent`` overrides the leaves' maximum-am-resource-percent (per-label values)."""
    pct = s.am_percent if percent is None else percent
    return np.array([am_limit(leaf_max[i], float(pct[i]), minimum, calculator)
                     for i in range(len(pct))]).reshape(-1, 3)
