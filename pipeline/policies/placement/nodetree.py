"""The node index's compiled structures: per-node key and room, the segment tree over node
slots and the treaps in usage order, and the searches and updates on them
(:mod:`pipeline.policies.placement.nodeindex` describes the queries they answer).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.models import may_use
from pipeline.policies.placement.treap import Walk, erase, insert, leftmost
from pipeline.sim.jit import helper

SLACK = 0.5e-9
TIE = 1e-6
# The treaps (rows of the tree arrays): busy nodes (packing) and all up nodes (least
# allocated first, once its searches are expensive).  ``root`` holds their roots, then
# which are in use, then the segment-tree search's cost so far (subtrees looked at, and
# searches), from which :meth:`NodeIndex.refresh` decides to switch.
BUSY, ALL, N_TREES = 0, 1, 2
ROOT_BUSY, ROOT_ALL, ON_BUSY, ON_ALL, VISITS, SEARCHES = range(6)
# Switch least-allocated searches to the all-node treap when, over at least ``ADAPT_MIN``
# searches, the segment tree looked at more than ``ADAPT_VISITS`` subtrees per search (the
# treap's searches cost O(log n) however the free room is spread, but each placement
# then re-files its node in one more tree).
ADAPT_MIN, ADAPT_VISITS = 1024, 256


class Mirror(NamedTuple):
    """The index's copy of node state (node slots; updated as it places)."""

    cap: np.ndarray  # (nodes, 3) float: capacity, cpu / mem GiB / gpu (the view's)
    alloc: np.ndarray  # (nodes, 3) float: allocated, same units
    ncont: np.ndarray  # (nodes,) int32: containers on the node
    up: np.ndarray  # (nodes,) bool: up and in the index (not hidden, inside its mask)
    thr: float  # packing threshold: memory usage (fraction of capacity) a node may reach


class Trees(NamedTuple):
    """The search structures over node slots: per-node key and room, the treaps (rows
    ``BUSY``, ``ALL``) and the segment tree (leaf of slot ``nd`` at ``p + nd``).

    The kernels here read these fields by name, so a structure with the same fields (and
    more, e.g. :class:`pipeline.policies.drf.Nodes`) may stand in for it.
    """

    key: np.ndarray  # (nodes,) float: usage key, mem usage + 1e-6 x cpu usage
    val: np.ndarray  # (nodes, 4) float: free cpu, free mem, free gpu, threshold headroom
    pri: np.ndarray  # (nodes,) float: fixed treap priorities
    left: np.ndarray  # (N_TREES, nodes) int: treap left child, -1: none
    right: np.ndarray  # (N_TREES, nodes) int: treap right child, -1: none
    parent: np.ndarray  # (N_TREES, nodes) int: treap parent, -1: root or not a member
    agg: np.ndarray  # (N_TREES, nodes, 4) float: treap subtree maxima of ``val``
    member: np.ndarray  # (N_TREES, nodes) bool: the node is in that treap
    root: np.ndarray  # (6,) int: treap roots, which treaps are on, search/visit counters
    skey: np.ndarray  # (2 p,) float: segment tree, minimum key of the subtree
    sfree: np.ndarray  # (3, 2 p) float: segment tree, maximum free cpu / mem / gpu
    cnt: np.ndarray  # (2 p,) int: segment tree, empty up nodes in the subtree
    stack: np.ndarray  # (>= 3 (2 p + 2),) int: scratch for the walks


@helper
def _node_state(nd, mirror, trees):
    """Key and room of node ``nd`` from its capacity and allocation."""
    cap, alloc, thr, val = mirror.cap, mirror.alloc, mirror.thr, trees.val
    mem = alloc[nd, 1] / cap[nd, 1] if cap[nd, 1] > 0 else 0.0
    cpu = alloc[nd, 0] / cap[nd, 0] if cap[nd, 0] > 0 else 0.0
    trees.key[nd] = mem + TIE * cpu
    for k in range(3):
        val[nd, k] = cap[nd, k] * (1 + SLACK) + 0.5e-12 - alloc[nd, k]
    headroom = thr * cap[nd, 1] * (1 + SLACK) - alloc[nd, 1]
    val[nd, 3] = headroom if mirror.ncont[nd] > 0 and headroom >= 0 else -np.inf


@helper
def _write_leaf(nd, mirror, trees):
    """Write node ``nd``'s segment-tree leaf (a down node is +inf key, -inf room)."""
    up, val = mirror.up[nd], trees.val
    i = trees.skey.shape[0] // 2 + nd
    trees.skey[i] = trees.key[nd] if up else np.inf
    for k in range(3):
        trees.sfree[k, i] = val[nd, k] if up else -np.inf
    trees.cnt[i] = 1 if up and mirror.ncont[nd] == 0 else 0


@helper
def _set_leaf(nd, mirror, trees):
    """Write node ``nd``'s segment-tree leaf and update its ancestors."""
    skey, sfree, cnt = trees.skey, trees.sfree, trees.cnt
    _write_leaf(nd, mirror, trees)
    i = (skey.shape[0] // 2 + nd) >> 1
    while i >= 1:
        a, b = 2 * i, 2 * i + 1
        k0 = min(skey[a], skey[b])
        f0, f1, f2 = max(sfree[0, a], sfree[0, b]), max(sfree[1, a], sfree[1, b]), max(
            sfree[2, a], sfree[2, b])
        c0 = cnt[a] + cnt[b]
        if (k0 == skey[i] and f0 == sfree[0, i] and f1 == sfree[1, i] and f2 == sfree[2, i]
                and c0 == cnt[i]):
            return  # unchanged here, so unchanged above
        skey[i], sfree[0, i], sfree[1, i], sfree[2, i], cnt[i] = k0, f0, f1, f2, c0
        i >>= 1


@helper
def dominated_by_failure(failed, n_failed, rc, rm, rg):  # pragma: no cover - compiled
    """Whether a request at least as large as one that fit nowhere this round is asked."""
    for f in range(n_failed):
        if rc >= failed[f, 0] and rm >= failed[f, 1] and rg >= failed[f, 2]:
            return True
    return False


@helper
def remember_failure(failed, n_failed, rc, rm, rg):  # pragma: no cover - compiled
    """Record a request that fit nowhere (oldest dropped when full); return the new count."""
    if n_failed == failed.shape[0]:
        drop_oldest(failed)
        n_failed -= 1
    failed[n_failed, 0], failed[n_failed, 1], failed[n_failed, 2] = rc, rm, rg
    return n_failed + 1


@helper
def drop_oldest(failed):  # pragma: no cover - compiled
    """Shift the rows of ``failed`` one up, the first one out (no temporary array: a
    :func:`~pipeline.sim.jit.helper` allocates nothing)."""
    for j in range(failed.shape[0] - 1):
        for k in range(failed.shape[1]):
            failed[j, k] = failed[j + 1, k]


@helper
def _least_used(trees, need, mask, bits):
    """Lowest slot with the smallest key whose room fits ``need`` (cpu, mem, gpu) and whose
    GPU model the request's mask ``mask`` allows (:func:`~pipeline.policies.models.may_use`).

    Once searches got expensive (``root[ON_ALL]``, see :meth:`NodeIndex.refresh`) it is the
    all-node treap's leftmost fitting node in ``(key, slot)`` order, the same node;
    otherwise the segment tree's (:func:`_least_used_leaf`).
    """
    root = trees.root
    if root[ON_ALL]:
        walk = Walk(trees.left[ALL], trees.right[ALL], trees.agg[ALL], trees.val, trees.key,
                    trees.stack)
        return leftmost(root[ROOT_ALL], (need[0], need[1], need[2], -np.inf), walk, mask, bits)
    return _least_used_leaf(trees, need, mask, bits)


@helper
def _least_used_leaf(trees, need, mask, bits):
    """:func:`_least_used` by branch and bound on the segment tree, counting the subtrees
    it looks at (``root[VISITS]``, ``root[SEARCHES]``): ``stack`` holds (tree index, first
    slot under it, slots under it) triples, so a subtree tying the best key is skipped only
    when all its slots come after the best one."""
    rc, rm, rg = need
    skey, sfree, stack = trees.skey, trees.sfree, trees.stack
    p = skey.shape[0] // 2
    best, best_i = np.inf, -1
    stack[0], stack[1], stack[2] = 1, 0, p
    sp = 3
    visits = 0
    while sp > 0:
        visits += 1
        sp -= 3
        i, lo, size = stack[sp], stack[sp + 1], stack[sp + 2]
        k = skey[i]
        if k > best or (k == best and lo > best_i):
            continue
        if sfree[0, i] < rc or sfree[1, i] < rm or sfree[2, i] < rg:
            continue
        if i >= p:
            if may_use(mask, bits, i - p):
                best, best_i = k, i - p
            continue
        half = size // 2
        a, b = 2 * i, 2 * i + 1
        first, second = (b, a) if skey[b] < skey[a] else (a, b)
        for child in (second, first):  # ``first`` is popped next
            stack[sp] = child
            stack[sp + 1] = lo if child == a else lo + half
            stack[sp + 2] = half
            sp += 3
    trees.root[VISITS] += visits
    trees.root[SEARCHES] += 1
    return best_i


@helper
def _erase(tr, nd, trees):
    """Take node ``nd`` out of treap ``tr``."""
    erase(trees.root[tr:tr + 1], trees.member[tr], nd, trees.left[tr], trees.right[tr],
          trees.parent[tr], trees.agg[tr], trees.val, trees.pri)


@helper
def _insert(tr, nd, trees):
    """File node ``nd`` (its key and room set) in treap ``tr``."""
    insert(trees.root[tr:tr + 1], trees.member[tr], nd, trees.left[tr], trees.right[tr],
           trees.parent[tr], trees.agg[tr], trees.val, trees.key, trees.pri)


@helper
def _update(nd, mirror, trees):
    """Re-file node ``nd`` after its allocation or state changed (in the trees in use)."""
    root = trees.root
    for tr in range(N_TREES):
        if trees.member[tr, nd]:
            _erase(tr, nd, trees)
    _node_state(nd, mirror, trees)
    if mirror.up[nd]:
        if root[ON_BUSY] and mirror.ncont[nd] > 0:
            _insert(BUSY, nd, trees)
        if root[ON_ALL]:
            _insert(ALL, nd, trees)
    _set_leaf(nd, mirror, trees)


@helper
def _pick_low(u, trees, need, mask, bits):
    """A random empty node that fits ``need`` (cpu, mem, gpu): the ``floor(u * count)``-th,
    else the next that fits."""
    rc, rm, rg = need
    cnt, val = trees.cnt, trees.val
    total = cnt[1]
    if total == 0:
        return -1
    p = cnt.shape[0] // 2
    r = min(int(u * total), total - 1)
    i = 1
    while i < p:
        if cnt[2 * i] > r:
            i = 2 * i
        else:
            r -= cnt[2 * i]
            i = 2 * i + 1
    start = i - p
    for j in range(p):
        nd = (start + j) % p
        if (cnt[p + nd] == 1 and val[nd, 0] >= rc and val[nd, 1] >= rm and val[nd, 2] >= rg
                and may_use(mask, bits, nd)):
            return nd
    return -1


@njit(cache=True)
def rebuild_states(mirror, trees):
    """Recompute every node and the whole segment tree (the treaps are rebuilt by the
    caller)."""
    skey, sfree, cnt = trees.skey, trees.sfree, trees.cnt
    for nd in range(trees.key.shape[0]):
        _node_state(nd, mirror, trees)
        _write_leaf(nd, mirror, trees)
    for i in range(skey.shape[0] // 2 - 1, 0, -1):
        a, b = 2 * i, 2 * i + 1
        skey[i] = min(skey[a], skey[b])
        for k in range(3):
            sfree[k, i] = max(sfree[k, a], sfree[k, b])
        cnt[i] = cnt[a] + cnt[b]


@njit(cache=True)
def sync(changed, alloc, ncont, state, w_alloc, w_ncont, w_up, todo):
    """Copy the changed nodes' state from the view; list in ``todo`` those that differ.

    Nodes this index placed on last time already match the view and are skipped.
    """
    m = 0
    for j in range(changed.shape[0]):
        nd = changed[j]
        up = state[nd] == 2
        if (w_up[nd] == up and w_ncont[nd] == ncont[nd] and w_alloc[nd, 0] == alloc[nd, 0]
                and w_alloc[nd, 1] == alloc[nd, 1] and w_alloc[nd, 2] == alloc[nd, 2]):
            continue
        for k in range(3):
            w_alloc[nd, k] = alloc[nd, k]
        w_ncont[nd] = ncont[nd]
        w_up[nd] = up
        todo[m] = nd
        m += 1
    return m


@njit(cache=True)
def update_nodes(todo, mirror, trees):
    """Re-file the nodes in ``todo`` one by one."""
    for j in range(todo.shape[0]):
        _update(todo[j], mirror, trees)
