"""A compiled node index for placement policies, mirroring node state from the view.

Each up node has a key, its memory usage (allocated / capacity, plus ``1e-6 x`` its cpu
usage so nodes with equal memory usage still order by cpu), and ``val``: free cpu, free
memory, free gpu and -- for *medium* nodes (at least one container, usage at or below the
threshold) -- the memory headroom left under the threshold.  Two structures answer the
queries in O(log n) (expected):

- a segment tree over node slots (min key, max free room, count of empty nodes):
  *least allocated first* is its lowest-key leaf that fits (least used nodes have the most
  room, so pruning by room works), and a random *empty* node is its ``floor(u * count)``-th
  empty leaf (else the next one that fits);
- for packing, a treap of the busy nodes ordered by ``(key, slot)`` with subtree maxima of
  room (:mod:`pipeline.policies.placement.treap`): *medium set, higher usage first, staying at or
  below the threshold* is its rightmost node whose headroom covers the request, and *busy
  nodes, lower usage first* its leftmost node that fits.  (A slot-ordered tree cannot do
  the first: the most used nodes are the ones with no room.)

The segment tree's least-allocated search prunes by room alone, so on a busy cluster whose
least used nodes (by memory) are out of cpu it looks at thousands of subtrees per search
(about 3,000 on a 12,500-machine Google 2011 day, 30 on the synthetic bench).  The index
counts that cost and, once it is high (:data:`ADAPT_VISITS`), also keeps a treap of all up
nodes in ``(key, slot)`` order and answers from it: its leftmost fitting node is the same
node, found in far fewer steps, for one more re-filing per placement.

Ties in key go to the lower slot, except "highest usage first" (higher slot).  The index is
refreshed from the view's ``changed`` nodes at each call (nodes it placed on itself already
match; when many changed, both structures are rebuilt in O(n log n)) and updated as a batch
is placed.  Capacity slack (``0.5e-9`` relative) is half the
core's, so the index never accepts what the core would refuse.

An index may cover a subset of the nodes (``mask``, e.g. one node-label partition of
the capacity-scheduler): nodes outside it are never synced, so they stay "not up" and no
query returns them; an index without a mask does exactly what it did before.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.locality.candidates import busy_holder
from pipeline.policies.models import may_use, model_masks
from pipeline.policies.placement import treap
from pipeline.policies.placement.nodetree import (
    ADAPT_MIN,
    ADAPT_VISITS,
    ALL,
    BUSY,
    N_TREES,
    ON_ALL,
    ON_BUSY,
    ROOT_BUSY,
    SEARCHES,
    SLACK,
    TIE,
    VISITS,
    Mirror,
    Trees,
    _least_used,
    _pick_low,
    _update,
    drop_oldest,
    rebuild_states,
    sync,
    update_nodes,
)
from pipeline.policies.placement.treap import Walk, leftmost, rightmost
from pipeline.sim.interface import NodeView
from pipeline.sim.jit import helper


@helper
def _dominates_failure(failed, n_failed, rc, rm, rg):
    for j in range(n_failed - 1, -1, -1):  # the latest failures first
        if rc >= failed[j, 0] and rm >= failed[j, 1] and rg >= failed[j, 2]:
            return True
    return False


@helper
def _add_failure(failed, n_failed, rc, rm, rg):
    """Keep the minimal failures only (one dominating the new one is dropped); return count."""
    k = 0
    for j in range(n_failed):
        if not (failed[j, 0] >= rc and failed[j, 1] >= rm and failed[j, 2] >= rg):
            failed[k, 0], failed[k, 1], failed[k, 2] = failed[j, 0], failed[j, 1], failed[j, 2]
            k += 1
    if k == failed.shape[0]:  # full: forget the oldest
        drop_oldest(failed)
        k -= 1
    failed[k, 0], failed[k, 1], failed[k, 2] = rc, rm, rg
    return k + 1


_NO_INPUTS = np.zeros((0, 0), np.int64)


class Batch(NamedTuple):
    """The requests of one :meth:`NodeIndex.place` call, in placement order."""

    req: np.ndarray  # (requests, 3) float: cpu / mem GiB / gpu asked
    u: np.ndarray  # (requests,) float in [0, 1): draw choosing a random empty node
    inputs: np.ndarray  # (requests, k) int: nodes holding its data, -1 padded; k 0: none
    allow: np.ndarray  # (requests,) int: allowed GPU model mask; empty: any model
    bits: np.ndarray  # (nodes,) int: each node's GPU model bit (:func:`model_masks`)


@helper
def _commit(i, nd, req, mirror, trees):
    """Put request ``i`` (row of ``req``) on node ``nd``: its allocation, one container
    more, the node re-filed in every tree in use."""
    for k in range(3):
        mirror.alloc[nd, k] += req[i, k]
    mirror.ncont[nd] += 1
    _update(nd, mirror, trees)


@helper
def _packing_node(batch, i, mask, capmax_mem, mirror, trees):
    """Packing's choice for request ``i``: a medium node holding its data, else the medium
    node with the highest usage staying at or below the threshold, else a random empty
    node, else the busy node with the lowest usage; -1: none fits."""
    rc, rm, rg = batch.req[i, 0], batch.req[i, 1], batch.req[i, 2]
    bits, val, thr = batch.bits, trees.val, mirror.thr
    busy = Walk(trees.left[BUSY], trees.right[BUSY], trees.agg[BUSY], val, trees.key,
                trees.stack)
    nd = busy_holder(batch.inputs, i, mirror.cap, mirror.alloc, mirror.ncont, mirror.up, val,
                     thr, (rc, rm, rg)) if batch.inputs.shape[1] else -1
    if nd >= 0 and not may_use(mask, bits, nd):
        nd = -1
    # headroom >= rm needs usage <= thr - rm / cap: bound the key (float margin)
    bound = thr * (1 + SLACK) - rm / capmax_mem + 2 * TIE + 1e-9
    if nd < 0:
        nd = rightmost(trees.root[ROOT_BUSY], bound, (rc, rm, rg, rm), busy, mask, bits)
    if nd < 0:
        nd = _pick_low(batch.u[i], trees, (rc, rm, rg), mask, bits)
    if nd < 0:
        nd = leftmost(trees.root[ROOT_BUSY], (rc, rm, rg, -np.inf), busy, mask, bits)
    return nd


@njit(cache=True)
def place_batch(batch, packing, capmax_mem, mirror, trees, out_req, out_node):
    """Place ``batch``'s requests in order; return how many were placed (``out_*`` hold the
    pairs).

    ``packing`` False: least allocated first.  True: :func:`_packing_node` (data locality
    from ``batch.inputs``).  Each choice is among the nodes whose GPU model the request
    allows (``batch.allow`` masks, empty: every request allows any).  ``capmax_mem``: the
    largest node memory seen (bounds the packing key search).
    """
    req, sfree = batch.req, trees.sfree
    c = 0
    m = req.shape[0]
    # Room only shrinks during a batch: a request at least as large as one that fit nowhere
    # fits nowhere either, and once the smallest remaining request (suffix minimum) cannot
    # fit, the scan stops -- so a long backlog costs little when the cluster is full.
    failed = np.empty((16, 3))
    n_failed = 0
    low = np.empty((m + 1, 3))
    low[m, :] = np.inf
    for i in range(m - 1, -1, -1):
        for k in range(3):
            low[i, k] = min(req[i, k], low[i + 1, k])
    for i in range(m):
        if sfree[0, 1] < low[i, 0] or sfree[1, 1] < low[i, 1] or sfree[2, 1] < low[i, 2]:
            break
        rc, rm, rg = req[i, 0], req[i, 1], req[i, 2]
        if sfree[0, 1] < rc or sfree[1, 1] < rm or sfree[2, 1] < rg:
            continue  # fits no node now
        if _dominates_failure(failed, n_failed, rc, rm, rg):
            continue
        mask = batch.allow[i] if batch.allow.shape[0] else 0
        if packing:
            nd = _packing_node(batch, i, mask, capmax_mem, mirror, trees)
        else:
            nd = _least_used(trees, (rc, rm, rg), mask, batch.bits)
        if nd < 0:
            if mask != 0:  # it fit no node of its models: says nothing of other requests
                continue
            if rc <= low[i + 1, 0] and rm <= low[i + 1, 1] and rg <= low[i + 1, 2]:
                break
            n_failed = _add_failure(failed, n_failed, rc, rm, rg)
            continue
        _commit(i, nd, req, mirror, trees)
        out_req[c] = i
        out_node[c] = nd
        c += 1
    return c


@njit(cache=True)
def place_named(order, req, node, mirror, trees, out):
    """Place requests ``order`` (in order) each on its own node ``node[i]`` where that node is
    up and has room (the index's room, so the core never refuses it); return how many were
    placed (``out`` holds their request indices)."""
    val = trees.val
    c = 0
    for j in range(order.shape[0]):
        i = order[j]
        nd = node[i]
        if nd < 0 or not mirror.up[nd]:
            continue
        if req[i, 0] > val[nd, 0] or req[i, 1] > val[nd, 1] or req[i, 2] > val[nd, 2]:
            continue
        _commit(i, nd, req, mirror, trees)
        out[c] = i
        c += 1
    return c


class NodeIndex:
    """The policy-side mirror of node state, kept up to date from ``NodeView.changed``."""

    def __init__(self, n_nodes: int, threshold: float = 1.0, busy: bool = False,
                 mask: np.ndarray | None = None) -> None:
        p = 1
        while p < max(n_nodes, 1):
            p *= 2
        self.threshold = threshold
        self.key = np.zeros(n_nodes)
        self.val = np.full((n_nodes, 4), -np.inf)
        # fixed pseudo-random priorities: the shape, never the result, depends on them
        self.pri = np.random.default_rng(0x7EA9).random(n_nodes)
        self.left = np.full((N_TREES, n_nodes), -1, dtype=np.int64)
        self.right = np.full((N_TREES, n_nodes), -1, dtype=np.int64)
        self.parent = np.full((N_TREES, n_nodes), -1, dtype=np.int64)
        self.agg = np.full((N_TREES, n_nodes, 4), -np.inf)
        self.member = np.zeros((N_TREES, n_nodes), dtype=np.bool_)
        self.root = np.array([-1, -1, int(busy), 0, 0, 0], dtype=np.int64)
        self.skey = np.full(2 * p, np.inf)
        self.sfree = np.full((3, 2 * p), -np.inf)
        self.cnt = np.zeros(2 * p, dtype=np.int64)
        self.stack = np.zeros(max(n_nodes + 1, 3 * (2 * p + 2)), dtype=np.int64)
        self.alloc = np.zeros((n_nodes, 3))
        self.ncont = np.zeros(n_nodes, dtype=np.int32)
        self.up = np.zeros(n_nodes, dtype=np.bool_)
        self.capmax_mem = 0.0
        self.mask = None if mask is None else np.asarray(mask, dtype=np.bool_)

    def _trees(self) -> Trees:
        return Trees(self.key, self.val, self.pri, self.left, self.right, self.parent,
                     self.agg, self.member, self.root, self.skey, self.sfree, self.cnt,
                     self.stack)

    def _mirror(self, nodes: NodeView) -> Mirror:
        return Mirror(nodes.cap, self.alloc, self.ncont, self.up, float(self.threshold))

    def refresh(self, nodes: NodeView) -> None:
        """Bring the changed nodes up to date (rebuild outright when many changed)."""
        changed = np.ascontiguousarray(nodes.changed, dtype=np.int64)
        if self.mask is not None:  # a partition's index: its own nodes only
            changed = changed[self.mask[changed]]
        if len(changed) == 0:
            return
        self.capmax_mem = max(self.capmax_mem, float(nodes.cap[changed, 1].max()))
        todo = np.empty(len(changed), dtype=np.int64)
        m = sync(changed, nodes.alloc, nodes.n_containers, nodes.state, self.alloc,
                 self.ncont, self.up, todo)
        if m * 8 <= len(self.key):
            update_nodes(todo[:m], self._mirror(nodes), self._trees())
        else:
            rebuild_states(self._mirror(nodes), self._trees())
            if self.root[ON_BUSY]:
                self._build(BUSY, self.up & (self.ncont > 0))
            if self.root[ON_ALL]:
                self._build(ALL, self.up)
        self._adapt()

    def _build(self, tree: int, members: np.ndarray) -> None:
        """Rebuild treap ``tree`` from the nodes ``members`` (a mask)."""
        nodes = np.flatnonzero(members)
        order = nodes[np.argsort(self.key[nodes], kind="stable")]  # ties by slot
        treap.build(order, self.root[tree:tree + 1], self.member[tree], self.left[tree],
                    self.right[tree], self.parent[tree], self.agg[tree], self.val, self.pri,
                    self.stack)

    def use_treap(self) -> None:
        """From now on, find least-allocated nodes in the all-node treap."""
        if not self.root[ON_ALL]:
            self._build(ALL, self.up)
            self.root[ON_ALL] = 1

    def _adapt(self) -> None:
        """Switch least-allocated searches to the all-node treap once the segment tree's
        searches have been expensive (same answers, see :func:`_least_used`)."""
        root = self.root
        if root[ON_ALL] or root[SEARCHES] < ADAPT_MIN:
            return
        if root[VISITS] > ADAPT_VISITS * root[SEARCHES]:
            self.use_treap()
        else:  # weigh the recent searches most
            root[VISITS] //= 2
            root[SEARCHES] //= 2

    def _refile(self, nodes: NodeView, slots: np.ndarray) -> None:
        update_nodes(np.ascontiguousarray(slots, dtype=np.int64), self._mirror(nodes),
                     self._trees())

    def hide(self, nodes: NodeView, slots: np.ndarray) -> None:
        """Take ``slots`` out of placement (e.g. nodes reserved for one request) until
        :meth:`show`; their allocation mirror stays up to date meanwhile."""
        if len(slots):
            self.up[slots] = False
            self._refile(nodes, slots)

    def show(self, nodes: NodeView, slots: np.ndarray) -> None:
        """Put hidden ``slots`` back (those that are up)."""
        if len(slots):
            self.up[slots] = nodes.state[slots] == 2
            self._refile(nodes, slots)

    def place_on(self, nodes: NodeView, req: np.ndarray, node: np.ndarray,
                 order: np.ndarray) -> np.ndarray:
        """Place the requests ``order`` (in order) each on its given node ``node[i]`` where it
        is up and fits (e.g. where a trace recorded it); return the placed indices."""
        out = np.empty(len(order), dtype=np.int64)
        c = place_named(np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(req),
                        np.ascontiguousarray(node, dtype=np.int64), self._mirror(nodes),
                        self._trees(), out)
        return out[:c]

    def place(self, nodes: NodeView, req: np.ndarray, u: np.ndarray | None,
              packing: bool, inputs: np.ndarray | None = None,
              allow: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Place ``req`` rows in order; return ``(request indices, node slots)`` (``inputs``:
        nodes holding each request's data, -1 padded, honoured by packing; ``allow``: the
        requests' GPU model masks, e.g. ``view.pending.gpu_allow``, None: any node)."""
        m = len(req)
        out_req = np.empty(m, dtype=np.int64)
        out_node = np.empty(m, dtype=np.int64)
        uu = np.zeros(m) if u is None else u
        capmax = self.capmax_mem if self.capmax_mem > 0 else np.inf
        batch = Batch(np.ascontiguousarray(req), uu,
                      _NO_INPUTS if inputs is None else np.ascontiguousarray(inputs, np.int64),
                      *model_masks(nodes, allow))
        c = place_batch(batch, packing, capmax, self._mirror(nodes), self._trees(), out_req,
                        out_node)
        return out_req[:c], out_node[:c]
