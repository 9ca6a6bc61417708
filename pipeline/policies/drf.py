"""``drf``: Dominant Resource Fairness across users, by progressive filling.

Source: A. Ghodsi, M. Zaharia, B. Hindman, A. Konwinski, S. Shenker, I. Stoica, "Dominant
Resource Fairness: Fair Allocation of Multiple Resource Types", NSDI 2011 (Algorithm 1,
section 4.2; weighted DRF, section 4.3).  A user's dominant share is
``s_i = max_j U_ij / R_j``, divided by its weight ``w_i`` for weighted DRF.

At each scheduling point, with ``U`` the resources of each user's running containers and
``R`` the capacity of the up nodes (a resource with zero capacity, e.g. no GPUs, is left
out):

1. offer to the user with the lowest weighted dominant share (ties: lower user code) among
   the users that still have a pending request which may fit;
2. that user's pending requests are taken in queue order; the first one that fits some node
   is placed on the *least allocated* node that fits (memory fraction, then cpu fraction,
   then lower slot: YARN's default spreading, as in ``yarn-uniform``), and the user's share
   is updated; requests that fit no node are skipped (free room only shrinks within a
   scheduling point, so they could not fit later in it either) and stay pending;
3. a user with nothing left that fits drops out; stop when none is left.

The paper's Algorithm 1 stops at the first task that does not fit ("the cluster is full"):
with one resource pool and identical tasks per user that is the same thing; with many nodes
and mixed request sizes, skipping lets smaller requests use the room left (as Mesos does
by offering the remaining resources again).  The pool is the whole cluster (the paper's
``R``), but each container must fit on one node.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from pipeline.errors import UsageError
from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.models import model_masks, pending_allow
from pipeline.policies.nodeindex import NodeIndex
from pipeline.policies.nodetree import (
    _least_used,
    _update,
    dominated_by_failure,
    remember_failure,
)
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.jit import helper


def parse_weights(text: str, names: tuple[str, ...], what: str) -> np.ndarray:
    """Weights by code from ``"name=w,name=w"`` (names absent from the trace are ignored)."""
    weights = np.ones(len(names))
    index = {n: i for i, n in enumerate(names)}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, value = item.rpartition("=")
        try:
            w = float(value)
        except ValueError:
            w = -1.0
        if not sep or not name or not np.isfinite(w) or w <= 0:
            raise UsageError(f"{what}: expected NAME=WEIGHT with WEIGHT > 0, got {item!r}")
        if name in index:
            weights[index[name]] = w
    return weights


@helper
def _tree_set(tree, p, i, value):
    """Set leaf ``i`` of a min segment tree (index of the minimum leaf kept at each node)."""
    j = (p + i) >> 1
    tree[p + i] = value
    while j >= 1:
        a, b = 2 * j, 2 * j + 1
        tree[j] = min(tree[a], tree[b])
        j >>= 1


@helper
def _argmin(tree, p):
    """Lowest leaf holding the minimum (ties to the lower index); -1 when all are inf."""
    if tree[1] == np.inf:
        return -1
    j = 1
    while j < p:
        j = 2 * j if tree[2 * j] <= tree[2 * j + 1] else 2 * j + 1
    return j - p


@njit(cache=True)
def group_by_code(code, n_codes):
    """Counting sort: ``(indptr, order)`` listing each code's rows in their original order."""
    indptr = np.zeros(n_codes + 1, dtype=np.int64)
    for i in range(code.shape[0]):
        indptr[code[i] + 1] += 1
    for c in range(n_codes):
        indptr[c + 1] += indptr[c]
    fill = indptr[:-1].copy()
    order = np.empty(code.shape[0], dtype=np.int64)
    for i in range(code.shape[0]):
        order[fill[code[i]]] = i
        fill[code[i]] += 1
    return indptr, order


@njit(cache=True)
def drf_fill(req, user, usage, weight, inv_total, cap, w_alloc, w_ncont, w_up, key, val, pri,
             left, right, parent, agg, member, root, skey, sfree, cnt, stack, allow, bits,
             out_req, out_node):
    """Progressive filling over users; return how many requests were placed (each on a
    node whose GPU model it allows: ``allow``/``bits``,
    :func:`~pipeline.policies.models.model_masks`)."""
    n_users = usage.shape[0]
    indptr, order = group_by_code(user, n_users)
    m = req.shape[0]
    low = np.empty((m, 3))  # suffix minima of request size within each user's list
    for u in range(n_users):
        lc, lm, lg = np.inf, np.inf, np.inf
        for j in range(indptr[u + 1] - 1, indptr[u] - 1, -1):
            i = order[j]
            lc, lm, lg = min(lc, req[i, 0]), min(lm, req[i, 1]), min(lg, req[i, 2])
            low[j, 0], low[j, 1], low[j, 2] = lc, lm, lg
    p = 1
    while p < max(n_users, 1):
        p *= 2
    tree = np.full(2 * p, np.inf)
    share = np.zeros(n_users)
    for u in range(n_users):
        s = 0.0
        for k in range(3):
            s = max(s, usage[u, k] * inv_total[k])
        share[u] = s / weight[u]
        if indptr[u + 1] > indptr[u]:
            _tree_set(tree, p, u, share[u])
    cursor = indptr[:-1].copy()
    failed = np.empty((16, 3))
    n_failed = 0
    c = 0
    while True:
        u = _argmin(tree, p)
        if u < 0:
            break
        placed = False
        j = cursor[u]
        while j < indptr[u + 1] and not placed:
            if (sfree[0, 1] < low[j, 0] or sfree[1, 1] < low[j, 1]
                    or sfree[2, 1] < low[j, 2]):
                j = indptr[u + 1]  # nothing left of this user fits anywhere
                break
            i = order[j]
            j += 1
            rc, rm, rg = req[i, 0], req[i, 1], req[i, 2]
            if sfree[0, 1] < rc or sfree[1, 1] < rm or sfree[2, 1] < rg:
                continue
            if dominated_by_failure(failed, n_failed, rc, rm, rg):
                continue
            mask = allow[i] if allow.shape[0] else 0
            nd = _least_used(skey, sfree, rc, rm, rg, stack, mask, bits, root, left, right,
                             agg, val)
            if nd < 0:  # anything at least as large fits nowhere either this round
                if mask == 0:  # (unless it only missed its GPU models)
                    n_failed = remember_failure(failed, n_failed, rc, rm, rg)
                continue
            for k in range(3):
                w_alloc[nd, k] += req[i, k]
                usage[u, k] += req[i, k]
            w_ncont[nd] += 1
            _update(nd, cap, w_alloc, w_ncont, w_up, 1.0, key, val, pri, left, right, parent,
                    agg, member, root, skey, sfree, cnt)
            out_req[c] = i
            out_node[c] = nd
            c += 1
            placed = True
        cursor[u] = j
        s = 0.0
        for k in range(3):
            s = max(s, usage[u, k] * inv_total[k])
        share[u] = s / weight[u]
        _tree_set(tree, p, u, share[u] if j < indptr[u + 1] else np.inf)
    return c


@njit(cache=True)
def usage_by_code(codes, req, n_codes):
    """Sum of ``req`` rows per code, shape ``(n_codes, 3)``."""
    out = np.zeros((n_codes, 3))
    for i in range(codes.shape[0]):
        for k in range(3):
            out[codes[i], k] += req[i, k]
    return out


@njit(cache=True)
def inverse_capacity(cap, state):
    """``1 / R_j`` over the up nodes (0 for a resource the cluster has none of)."""
    total = np.zeros(3)
    for nd in range(cap.shape[0]):
        if state[nd] == 2:
            for k in range(3):
                total[k] += cap[nd, k]
    for k in range(3):
        total[k] = 1.0 / total[k] if total[k] > 0 else 0.0
    return total


class DominantResourceFairness(PolicyBase):
    """Weighted DRF across users by progressive filling (Ghodsi et al., NSDI 2011)."""

    name = "drf"
    summary = ("Dominant Resource Fairness: offer to the user with the lowest (weighted) "
               "dominant share, least-allocated node")
    source = ("Ghodsi, Zaharia, Hindman, Konwinski, Shenker, Stoica, 'Dominant Resource "
              "Fairness: Fair Allocation of Multiple Resource Types', NSDI 2011")
    PARAMS: ClassVar[dict[str, Param]] = {
        "user_weights": Param(
            "", "per-user weights 'alice=2,bob=0.5' (weighted DRF, section 4.3); others 1",
            str),
    }
    needs_running = True
    user_weights: str

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> None:
        super().setup(cluster, rng)
        self.weight_ = parse_weights(self.user_weights, cluster.users,
                                     f"policy '{self.name}' parameter 'user_weights'")
        self.index_ = NodeIndex(cluster.n_nodes)

    def decide(self, view: SchedView) -> Decisions:
        self.index_.refresh(view.nodes)
        pending, running = view.pending, view.running
        n_users = len(self.weight_)
        assert running is not None  # needs_running
        usage = usage_by_code(running.user, running.req, n_users)
        req, node = self.fill(view, pending.user.astype(np.int64), usage, self.weight_)
        return Decisions(place_req=req, place_node=node)

    def fill(self, view: SchedView, codes: np.ndarray, usage: np.ndarray,
             weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Progressive filling of the pending requests grouped by ``codes``."""
        m = len(codes)
        out_req = np.empty(m, dtype=np.int64)
        out_node = np.empty(m, dtype=np.int64)
        ix = self.index_
        c = drf_fill(np.ascontiguousarray(view.pending.req), codes, usage, weight,
                     inverse_capacity(view.nodes.cap, view.nodes.state), view.nodes.cap,
                     ix.alloc, ix.ncont, ix.up, *ix._arrays(),
                     *model_masks(view.nodes, pending_allow(view)), out_req, out_node)
        return out_req[:c], out_node[:c]
