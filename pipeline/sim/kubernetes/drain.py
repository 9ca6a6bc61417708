"""Cluster Autoscaler's drain simulation, compiled: which scale-down candidates' pods all fit
elsewhere (the rules and their source: :mod:`.drain_reference`, its plain-Python twin,
which the differential test holds this to).

The pods are given grouped by node (``pods_of`` CSR offsets into ``pod_req``), so each
candidate's pods are found without a scan of every pod; the destination search is first fit
in slot order, as the reference's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

EPS = 1e-9


class Snapshot(NamedTuple):
    """The cluster as the simulation sees it: per node slot ``free`` (n, 3) room (updated
    with committed moves), ``up`` (bool); pods grouped by node: node ``k``'s pods are rows
    ``start[k]:start[k + 1]`` of ``req`` (pods, 3)."""

    free: np.ndarray
    up: np.ndarray
    start: np.ndarray
    req: np.ndarray


def removable(snap: Snapshot, candidates: np.ndarray) -> np.ndarray:
    """Which ``candidates`` (node slots, tried in this order) can be drained."""
    out = np.zeros(len(candidates), dtype=np.bool_)
    _simulate(snap.free, snap.up, snap.start, snap.req, np.asarray(candidates, np.int64), out)
    return out


@njit(cache=True)
def _simulate(free, up, start, req, candidates, out):
    n = free.shape[0]
    gone = np.zeros(n, dtype=np.bool_)
    taken = np.empty((max(start[n] - start[0], 1), 2), dtype=np.int64)
    for c in range(len(candidates)):
        node = candidates[c]
        ok = True
        k = 0
        for p in range(start[node], start[node + 1]):
            dest = -1
            for d in range(n):
                if d == node or not up[d] or gone[d]:
                    continue
                if (req[p, 0] <= free[d, 0] + EPS and req[p, 1] <= free[d, 1] + EPS
                        and req[p, 2] <= free[d, 2] + EPS):
                    dest = d
                    break
            if dest < 0:
                ok = False
                break
            for r in range(3):
                free[dest, r] -= req[p, r]
            taken[k, 0] = p
            taken[k, 1] = dest
            k += 1
        if ok:
            out[c] = True
            gone[node] = True
        else:  # the trial moves are undone
            for j in range(k):
                for r in range(3):
                    free[taken[j, 1], r] += req[taken[j, 0], r]


def group_pods(n_nodes: int, pod_node: np.ndarray, pod_req: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``start`` (n_nodes + 1,) and the pods' requests ordered by node (stable)."""
    order = np.argsort(pod_node, kind="stable")
    counts = np.bincount(pod_node, minlength=n_nodes)
    start = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    return start, np.ascontiguousarray(pod_req[order], dtype=np.float64).reshape(-1, 3)
