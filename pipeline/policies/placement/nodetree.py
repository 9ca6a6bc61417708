"""The node index's compiled structures: per-node key and room, the segment tree over node
slots and the treaps in usage order, and the searches and updates on them
(:mod:`pipeline.policies.placement.nodeindex` describes the queries they answer).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.policies.models import may_use
from pipeline.policies.placement.treap import erase, insert, leftmost
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


@helper
def _node_state(nd, cap, alloc, ncont, thr, key, val):
    """Key and room of node ``nd`` from its capacity and allocation."""
    mem = alloc[nd, 1] / cap[nd, 1] if cap[nd, 1] > 0 else 0.0
    cpu = alloc[nd, 0] / cap[nd, 0] if cap[nd, 0] > 0 else 0.0
    key[nd] = mem + TIE * cpu
    for k in range(3):
        val[nd, k] = cap[nd, k] * (1 + SLACK) + 0.5e-12 - alloc[nd, k]
    headroom = thr * cap[nd, 1] * (1 + SLACK) - alloc[nd, 1]
    val[nd, 3] = headroom if ncont[nd] > 0 and headroom >= 0 else -np.inf


@helper
def _set_leaf(nd, up, ncont, key, val, skey, sfree, cnt):
    """Write node ``nd``'s segment-tree leaf and update its ancestors."""
    p = skey.shape[0] // 2
    i = p + nd
    skey[i] = key[nd] if up[nd] else np.inf
    for k in range(3):
        sfree[k, i] = val[nd, k] if up[nd] else -np.inf
    cnt[i] = 1 if up[nd] and ncont[nd] == 0 else 0
    i >>= 1
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
def _least_used(skey, sfree, rc, rm, rg, stack, mask, bits, root, left, right, agg, val):
    """Lowest slot with the smallest key whose leaf fits (and whose GPU model the request's
    mask ``mask`` allows, :func:`~pipeline.policies.models.may_use`).

    Once searches got expensive (``root[ON_ALL]``, see :meth:`NodeIndex.refresh`) it is the
    all-node treap's leftmost fitting node in ``(key, slot)`` order, the same node.
    Otherwise it is found by branch and bound on the segment tree, counting the subtrees it
    looks at (``root[VISITS]``, ``root[SEARCHES]``): ``stack`` holds (tree index, first slot
    under it, slots under it) triples, so a subtree tying the best key is skipped only when
    all its slots come after the best one.
    """
    if root[ON_ALL]:
        return leftmost(root[ROOT_ALL], rc, rm, rg, -np.inf, left[ALL], right[ALL], agg[ALL],
                        val, stack, mask, bits)
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
    root[VISITS] += visits
    root[SEARCHES] += 1
    return best_i


@helper
def _update(nd, cap, alloc, ncont, up, thr, key, val, pri, left, right, parent, agg, member,
            root, skey, sfree, cnt):
    """Re-file node ``nd`` after its allocation or state changed (in the trees in use)."""
    for tr in range(N_TREES):
        if member[tr, nd]:
            erase(root[tr:tr + 1], member[tr], nd, left[tr], right[tr], parent[tr], agg[tr],
                  val, pri)
    _node_state(nd, cap, alloc, ncont, thr, key, val)
    if up[nd]:
        if root[ON_BUSY] and ncont[nd] > 0:
            insert(root[BUSY:BUSY + 1], member[BUSY], nd, left[BUSY], right[BUSY],
                   parent[BUSY], agg[BUSY], val, key, pri)
        if root[ON_ALL]:
            insert(root[ALL:ALL + 1], member[ALL], nd, left[ALL], right[ALL], parent[ALL],
                   agg[ALL], val, key, pri)
    _set_leaf(nd, up, ncont, key, val, skey, sfree, cnt)


@helper
def _pick_low(u, cnt, val, rc, rm, rg, mask, bits):
    """A random empty node that fits: the ``floor(u * count)``-th, else the next that fits."""
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
def rebuild_states(cap, alloc, ncont, up, thr, key, val, skey, sfree, cnt):
    """Recompute every node and the whole segment tree (the treap is rebuilt by the caller)."""
    p = skey.shape[0] // 2
    for nd in range(key.shape[0]):
        _node_state(nd, cap, alloc, ncont, thr, key, val)
        i = p + nd
        skey[i] = key[nd] if up[nd] else np.inf
        for k in range(3):
            sfree[k, i] = val[nd, k] if up[nd] else -np.inf
        cnt[i] = 1 if up[nd] and ncont[nd] == 0 else 0
    for i in range(p - 1, 0, -1):
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
def update_nodes(todo, cap, alloc, ncont, up, thr, key, val, pri, left, right, parent, agg,
                 member, root, skey, sfree, cnt):
    """Re-file the nodes in ``todo`` one by one."""
    for j in range(todo.shape[0]):
        _update(todo[j], cap, alloc, ncont, up, thr, key, val, pri, left, right, parent, agg,
                member, root, skey, sfree, cnt)
