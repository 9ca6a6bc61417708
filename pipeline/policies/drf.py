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

from typing import ClassVar, NamedTuple

import numpy as np
from numba import njit

from pipeline.errors import UsageError
from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.models import model_masks, pending_allow
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.policies.placement.nodetree import (
    Mirror,
    _least_used,
    _update,
    dominated_by_failure,
    remember_failure,
)
from pipeline.sim.interface import ClusterInfo, Decisions, NodeView, SchedView
from pipeline.sim.jit import helper, inlined
from pipeline.sim.needs import Needs


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


class Requests(NamedTuple):
    """The pending requests, in queue order (row ``i`` is request ``i``)."""

    req: np.ndarray  # (m, 3) float64: cpu, memory, gpu asked
    user: np.ndarray  # (m,) int64: the user's code (row of ``Users``)
    allow: np.ndarray  # (m,) int64: GPU model mask (0: any); empty: every request allows any


class Users(NamedTuple):
    """What DRF knows of each user (row ``u`` is user code ``u``)."""

    usage: np.ndarray  # (n_users, 3) float64: held now (U_i); placements are added in place
    weight: np.ndarray  # (n_users,) float64: weighted DRF's w_i (> 0)
    inv_total: np.ndarray  # (3,) float64: 1 / R_j over the up nodes, 0 for an absent resource


class Nodes(NamedTuple):
    """The node index's arrays (:class:`~pipeline.policies.placement.nodeindex.NodeIndex`, same
    names) and the nodes' GPU model bits; the index is updated in place as requests land."""

    cap: np.ndarray  # (n, 3) float64: capacity (the view's)
    alloc: np.ndarray  # (n, 3) float64: the index's mirror of allocation
    ncont: np.ndarray  # (n,) int32: containers per node
    up: np.ndarray  # (n,) bool: may take containers
    key: np.ndarray  # (n,) usage key (memory fraction + 1e-6 x cpu fraction)
    val: np.ndarray  # (n, 4) room: free cpu, memory, gpu, threshold headroom
    pri: np.ndarray  # (n,) treap priorities
    left: np.ndarray  # (trees, n) treap links ...
    right: np.ndarray
    parent: np.ndarray
    agg: np.ndarray  # (trees, n, 4) ... and subtree maxima of room
    member: np.ndarray  # (trees, n) bool: node is in that treap
    root: np.ndarray  # (6,) int64: treap roots, which are in use, search costs
    skey: np.ndarray  # (2p,) segment tree: min key per subtree ...
    sfree: np.ndarray  # (3, 2p) ... max room per resource (``[:, 1]``: whole cluster)
    cnt: np.ndarray  # (2p,) ... empty nodes
    stack: np.ndarray  # int64 scratch for the searches
    bits: np.ndarray  # (n,) int64 GPU model bit per node (:mod:`pipeline.policies.models`)


class Placements(NamedTuple):
    """Output buffers, one row per placement in the order made."""

    req: np.ndarray  # (m,) int64: request row
    node: np.ndarray  # (m,) int64: node slot


class UserQueues(NamedTuple):
    """Each user's pending requests in queue order: user ``u``'s are
    ``order[indptr[u]:indptr[u + 1]]``."""

    indptr: np.ndarray  # (n_users + 1,) int64
    order: np.ndarray  # (m,) int64: request rows grouped by user
    low: np.ndarray  # (m, 3): per resource, the smallest request from here to the user's end


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
def user_queues(requests, n_users):
    """Group the requests by user (:class:`UserQueues`), with the suffix minima that let a
    user whose smallest remaining request fits nowhere drop out at once."""
    req = requests.req
    indptr, order = group_by_code(requests.user, n_users)
    low = np.empty((req.shape[0], 3))
    for u in range(n_users):
        lc, lm, lg = np.inf, np.inf, np.inf
        for j in range(indptr[u + 1] - 1, indptr[u] - 1, -1):
            i = order[j]
            lc, lm, lg = min(lc, req[i, 0]), min(lm, req[i, 1]), min(lg, req[i, 2])
            low[j, 0], low[j, 1], low[j, 2] = lc, lm, lg
    return UserQueues(indptr, order, low)


@helper
def dominant_share(users, u):
    """``max_j U_uj / R_j`` divided by the user's weight (weighted DRF, section 4.3)."""
    s = 0.0
    for k in range(3):
        s = max(s, users.usage[u, k] * users.inv_total[k])
    return s / users.weight[u]


@njit(cache=True)
def share_tree(users, queues):
    """Min segment tree over users of their dominant shares (users with no pending
    request: inf, never offered)."""
    n_users = users.usage.shape[0]
    p = 1
    while p < max(n_users, 1):
        p *= 2
    tree = np.full(2 * p, np.inf)
    for u in range(n_users):
        if queues.indptr[u + 1] > queues.indptr[u]:
            _tree_set(tree, p, u, dominant_share(users, u))
    return tree


@inlined
def _least_allocated(i, requests, nodes, failed, n_failed):
    """``(node, n_failed)``: the least allocated node request ``i`` fits and may use, or -1
    (a miss with no GPU model constraint is remembered in ``failed``)."""
    rc, rm, rg = requests.req[i, 0], requests.req[i, 1], requests.req[i, 2]
    sfree = nodes.sfree
    if sfree[0, 1] < rc or sfree[1, 1] < rm or sfree[2, 1] < rg:
        return -1, n_failed
    if dominated_by_failure(failed, n_failed, rc, rm, rg):
        return -1, n_failed
    mask = requests.allow[i] if requests.allow.shape[0] else 0
    nd = _least_used(nodes, (rc, rm, rg), mask, nodes.bits)
    if nd < 0 and mask == 0:  # anything at least as large fits nowhere either this round
        n_failed = remember_failure(failed, n_failed, rc, rm, rg)  # (unless it only
    return nd, n_failed  # missed its GPU models)


@inlined
def _assign(i, nd, u, requests, users, nodes):
    """Put request ``i`` of user ``u`` on node ``nd``: the user's usage and the index."""
    for k in range(3):
        nodes.alloc[nd, k] += requests.req[i, k]
        users.usage[u, k] += requests.req[i, k]
    nodes.ncont[nd] += 1
    _update(nd, Mirror(nodes.cap, nodes.alloc, nodes.ncont, nodes.up, 1.0), nodes)


@inlined
def _out_of_reach(sfree, low, j):
    """Whether, per some resource, the smallest of a user's requests from position ``j`` on
    asks more than any node has free (then none of them fits anywhere this round)."""
    return sfree[0, 1] < low[j, 0] or sfree[1, 1] < low[j, 1] or sfree[2, 1] < low[j, 2]


@njit(cache=True)
def drf_fill(requests, users, nodes, out):
    """Progressive filling over users; return how many requests were placed (``out``)
    (each on a node whose GPU model it allows, :func:`~pipeline.policies.models.may_use`).

    :mod:`pipeline.policies.drf_reference` is the same pass written for reading.
    """
    queues = user_queues(requests, users.usage.shape[0])
    tree = share_tree(users, queues)
    cursor = queues.indptr[:-1].copy()  # each user's next request (position in ``order``)
    failed = np.empty((16, 3))  # requests that fit no node this round
    return _fill(requests, users, nodes, out, queues, tree, cursor, failed)


@helper
def _fill(requests, users, nodes, out, queues, tree, cursor, failed):
    """:func:`drf_fill`'s loop, on the buffers it allocated; a
    :func:`~pipeline.sim.jit.helper` so that its per-offer steps (inlined) are its own code."""
    p = tree.shape[0] // 2
    n_failed = 0
    c = 0
    while True:
        u = _argmin(tree, p)
        if u < 0:
            break
        # the offer: the user's first remaining request that fits is placed; those before
        # it fit no node now, and room only shrinks in a round, so they are passed over
        end = queues.indptr[u + 1]
        j = cursor[u]
        while j < end:
            if _out_of_reach(nodes.sfree, queues.low, j):
                j = end
                break
            i = queues.order[j]
            j += 1
            nd, n_failed = _least_allocated(i, requests, nodes, failed, n_failed)
            if nd >= 0:
                _assign(i, nd, u, requests, users, nodes)
                out.req[c] = i
                out.node[c] = nd
                c += 1
                break
        cursor[u] = j
        _tree_set(tree, p, u, dominant_share(users, u) if j < end else np.inf)
    return c


@njit(cache=True)
def _drf_fill_plain(requests, users, nodes, out):
    """:func:`drf_fill` on the four structures passed as plain tuples (``tuple(x)``).

    numba's dispatcher types a plain tuple of arrays in C but a NamedTuple field by field
    in Python: about 6 us more per call for these 26 arrays (measured), paid at every
    scheduling point.  Field order is the NamedTuples' own, so nothing is positional here.
    """
    return drf_fill(Requests(*requests), Users(*users), Nodes(*nodes), Placements(*out))


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
    user_weights: str

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        self.weight_ = parse_weights(self.user_weights, cluster.users,
                                     f"policy '{self.name}' parameter 'user_weights'")
        self.index_ = NodeIndex(cluster.n_nodes)
        return Needs(running=True)

    def decide(self, view: SchedView) -> Decisions:
        self.index_.refresh(view.nodes)
        pending, running = view.pending, view.running
        n_users = len(self.weight_)
        assert running is not None  # Needs(running=True)
        usage = usage_by_code(running.user, running.req, n_users)
        req, node = self.fill(view, pending.user.astype(np.int64), usage, self.weight_)
        return Decisions(place_req=req, place_node=node)

    def fill(self, view: SchedView, codes: np.ndarray, usage: np.ndarray,
             weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Progressive filling of the pending requests grouped by ``codes``."""
        return progressive_fill(self.index_, view.nodes, view.pending.req, codes, usage,
                                weight, pending_allow(view))


def progressive_fill(index: NodeIndex, nodes: NodeView, req: np.ndarray, codes: np.ndarray,
                     usage: np.ndarray, weight: np.ndarray,
                     allow: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(request rows, node slots)`` placed by :func:`drf_fill` on ``index`` (refreshed
    from ``nodes``), which it updates, as it does ``usage`` (users' holdings by code)."""
    m = len(codes)
    gpu_allow, bits = model_masks(nodes, allow)
    requests = Requests(np.ascontiguousarray(req), codes, gpu_allow)
    users = Users(usage, weight, inverse_capacity(nodes.cap, nodes.state))
    on_nodes = Nodes(nodes.cap, index.alloc, index.ncont, index.up, index.key, index.val,
                     index.pri, index.left, index.right, index.parent, index.agg,
                     index.member, index.root, index.skey, index.sfree, index.cnt,
                     index.stack, bits)
    out = Placements(np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64))
    c = _drf_fill_plain(tuple(requests), tuple(users), tuple(on_nodes), tuple(out))
    return out.req[:c], out.node[:c]

