"""Compiled treaps ordering node slots by a usage key, with subtree maxima of their room.

A treap holds a set of nodes in ``(key, slot)`` order; each node carries ``val`` (free cpu,
free mem, free gpu, threshold headroom) and ``agg`` holds the maxima of ``val`` over its
subtree.  Queries walk the order and skip any subtree whose maxima cannot fit the request:

- ``leftmost``: the lowest-key node that fits (least allocated first);
- ``rightmost``: the highest-key node with key <= a bound that fits (most allocated first).

Insertion and removal are iterative (parent pointers and rotations), so each costs
O(depth) simple steps.  Priorities are fixed pseudo-random numbers: the shape, and so the
cost, is balanced in expectation; results depend only on keys.  ``key``, ``val`` and
``pri`` are shared by the treaps of one index; each treap owns ``left``, ``right``,
``parent``, ``agg``, ``member`` and ``root[0]``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.models import may_use
from pipeline.sim.jit import helper


class Walk(NamedTuple):
    """One treap as a query walks it (:func:`leftmost`, :func:`rightmost`): its links and
    maxima, the shared node keys and rooms, and a scratch stack.  Built in the caller's
    compiled loop from the index's arrays (views, no copies)."""

    left: np.ndarray  # (nodes,) int: left child of each node slot, -1: none
    right: np.ndarray  # (nodes,) int: right child, -1: none
    agg: np.ndarray  # (nodes, 4) float: maxima of ``val`` over the node's subtree
    val: np.ndarray  # (nodes, 4) float: free cpu, free mem, free gpu, threshold headroom
    key: np.ndarray  # (nodes,) float: usage key the treap is ordered by (with the slot)
    stack: np.ndarray  # (>= nodes,) int: scratch for the iterative walk


@helper
def _pull(t, left, right, agg, val):
    """Recompute ``agg[t]``; return whether it changed."""
    a, b = left[t], right[t]
    changed = False
    for k in range(4):
        m = val[t, k]
        if a >= 0 and agg[a, k] > m:
            m = agg[a, k]
        if b >= 0 and agg[b, k] > m:
            m = agg[b, k]
        if agg[t, k] != m:
            agg[t, k] = m
            changed = True
    return changed


@helper
def _replace_child(p, old, new, left, right, root):
    """Make ``new`` take ``old``'s place under ``p`` (-1: ``old`` was the root)."""
    if p < 0:
        root[0] = new
    elif left[p] == old:
        left[p] = new
    else:
        right[p] = new


@helper
def _rotate_up(x, left, right, parent, root, agg, val):
    """Rotate ``x`` above its parent."""
    p = parent[x]
    g = parent[p]
    if left[p] == x:
        b = right[x]
        left[p] = b
        right[x] = p
    else:
        b = left[x]
        right[p] = b
        left[x] = p
    if b >= 0:
        parent[b] = p
    parent[p] = x
    parent[x] = g
    _replace_child(g, p, x, left, right, root)
    _pull(p, left, right, agg, val)
    _pull(x, left, right, agg, val)


@helper
def _pull_up(t, must, left, right, parent, agg, val):
    """Recompute maxima from ``t`` to the root: the first ``must`` nodes always, then only
    while something changes (an unchanged node leaves its ancestors unchanged)."""
    while t >= 0:
        if not _pull(t, left, right, agg, val) and must <= 0:
            return
        must -= 1
        t = parent[t]


@helper
def insert(root, member, node, left, right, parent, agg, val, key, pri):
    """Add ``node`` (its key and val already set)."""
    left[node] = -1
    right[node] = -1
    member[node] = True
    t = root[0]
    if t < 0:
        root[0] = node
        parent[node] = -1
        _pull(node, left, right, agg, val)
        return
    while True:
        if key[node] < key[t] or (key[node] == key[t] and node < t):
            if left[t] < 0:
                left[t] = node
                break
            t = left[t]
        else:
            if right[t] < 0:
                right[t] = node
                break
            t = right[t]
    parent[node] = t
    _pull(node, left, right, agg, val)
    while parent[node] >= 0 and pri[node] > pri[parent[node]]:
        _rotate_up(node, left, right, parent, root, agg, val)
    _pull_up(parent[node], 0, left, right, parent, agg, val)


@helper
def erase(root, member, node, left, right, parent, agg, val, pri):
    """Remove ``node`` (before its key changes)."""
    rotations = 0
    while left[node] >= 0 and right[node] >= 0:
        a, b = left[node], right[node]
        _rotate_up(a if pri[a] > pri[b] else b, left, right, parent, root, agg, val)
        rotations += 1
    child = left[node] if left[node] >= 0 else right[node]
    p = parent[node]
    if child >= 0:
        parent[child] = p
    _replace_child(p, node, child, left, right, root)
    # the nodes rotated above ``node`` still count it: recompute them all, then go on
    # while maxima change
    _pull_up(p, rotations, left, right, parent, agg, val)
    left[node] = right[node] = parent[node] = -1
    member[node] = False


@helper
def _fits(row, need):
    """Whether a room row (cpu, mem, gpu, headroom) covers ``need``."""
    return row[0] >= need[0] and row[1] >= need[1] and row[2] >= need[2] and row[3] >= need[3]


@helper
def _first_fit(t, bound, need, walk, mask, bits, ascending):
    """The first node met in key order (``ascending``) or reverse key order among those
    with key <= ``bound`` that fits ``need`` and whose model ``mask`` allows, or -1.

    In-order walk from ``t``, pruned by ``agg``: the near side (the smaller keys when
    ascending) is stacked first, the far side visited after its node.
    """
    near, far = (walk.left, walk.right) if ascending else (walk.right, walk.left)
    left, agg, val, key, stack = walk.left, walk.agg, walk.val, walk.key, walk.stack
    sp = 0
    while True:
        while t >= 0 and _fits(agg[t], need):
            if key[t] > bound:  # t and its right subtree are out of range
                t = left[t]
                continue
            stack[sp] = t
            sp += 1
            t = near[t]
        if sp == 0:
            return -1
        sp -= 1
        t = stack[sp]
        if _fits(val[t], need) and may_use(mask, bits, t):
            return t
        t = far[t]


@helper
def leftmost(t, need, walk, mask, bits):
    """The first node in key order that fits ``need`` (cpu, mem, gpu, headroom) and whose
    model ``mask`` allows, or -1 (in-order walk of ``walk`` from ``t``)."""
    return _first_fit(t, np.inf, need, walk, mask, bits, True)


@helper
def rightmost(t, bound, need, walk, mask, bits):
    """The last node with key <= ``bound`` that fits ``need`` (cpu, mem, gpu, headroom) and
    whose model ``mask`` allows, or -1 (reverse in-order walk of ``walk`` from ``t``)."""
    return _first_fit(t, bound, need, walk, mask, bits, False)


@njit(cache=True)
def build(order, root, member, left, right, parent, agg, val, pri, queue):
    """Rebuild the treap from ``order`` (nodes sorted by ``(key, slot)``) in O(n).

    Cartesian-tree construction on the priorities with a stack, then maxima from the leaves
    up (reverse breadth-first order).  ``queue`` is scratch space of at least n entries.
    """
    member[:] = False
    sp = 0
    for j in range(order.shape[0]):
        node = order[j]
        member[node] = True
        last = -1
        while sp > 0 and pri[queue[sp - 1]] < pri[node]:
            sp -= 1
            last = queue[sp]
        left[node] = last
        right[node] = -1
        if last >= 0:
            parent[last] = node
        if sp > 0:
            right[queue[sp - 1]] = node
            parent[node] = queue[sp - 1]
        else:
            parent[node] = -1
        queue[sp] = node
        sp += 1
    root[0] = queue[0] if sp > 0 else -1
    if root[0] < 0:
        return
    queue[0] = root[0]
    head, tail = 0, 1
    while head < tail:  # breadth-first listing
        t = queue[head]
        head += 1
        for c in (left[t], right[t]):
            if c >= 0:
                queue[tail] = c
                tail += 1
    for j in range(tail - 1, -1, -1):
        _pull(queue[j], left, right, agg, val)
