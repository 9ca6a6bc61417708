"""The compiled assignment loop of ``fair-scheduler``: walk the queue tree, place, repeat.

Each placement descends from the root as ``FSParentQueue.assignContainer`` does (apache/hadoop
3.3): at every parent, the alive children are ordered by the parent's scheduling policy and
the first is entered.  The tree's leaves are the applications (jobs with pending requests,
children of their leaf queue, weight 1, no minimum); an application's requests are tried
in queue order.  ``fifo`` (leaf queues only) orders applications by arrival (``rank``: the
position of the job's first pending request; Hadoop's FifoPolicy uses priority, then start
time).

Comparators (``FairSharePolicy`` / ``DominantResourceFairnessPolicy``, paraphrased; lower key
first, ties to the lower queue index where Hadoop uses start time, then name):

- ``fair`` (memory only): a child is *needy* when its usage is below
  ``min(minShare, demand)``; needy children come first, by ``usage / min(minShare,
  demand)``; the others by ``usage / weight``; weight-0 children after every weighted one,
  by usage;
- ``drf`` (cpu and memory): shares ``usage_j / (cluster_j * weight)``; a child is needy
  when its usage of its dominant resource is below ``min(minShare, demand)`` of it; needy
  children first by usage over that minimum, the others by dominant share, then the other
  share.  (Hadoop 3.3's comparator takes ``minShare`` alone; ``min(minShare, demand)`` is
  used here for both policies, as FairSharePolicy does.)

A child whose usage already exceeds its ``maxResources`` is skipped (``assignContainerPreCheck``);
a request is placed only if every queue on its path stays within its maximum
(``fitsInMaxShare``, "enforced recursively").  Requests that fit no node or would break a
maximum are skipped and stay pending (room and usage only grow tighter within one call).
With ``check_am``, an application that has no AM yet (``started`` false) gets its first
container only if its leaf's AM usage plus that container stays within the leaf's AM limit
(``maxAMShare``, see :mod:`.limits`); else it is passed over for the rest of the call
(``FSAppAttempt.isOverAMShareLimit``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.policies.locality.gate import pick, refresh_local, taken
from pipeline.policies.nodetree import (
    _least_used,
    _update,
    dominated_by_failure,
    remember_failure,
)
from pipeline.sim.jit import helper

FAIR, DRF, FIFO = 0, 1, 2
EPS = 1e-9


@njit(cache=True)
def leaf_usage(user, queue, req, by_user, by_queue, override, default, n_leaves):
    """Leaf of each row (as :meth:`LeafTable.leaf`) and the summed ``req`` per leaf."""
    leaf = np.empty(user.shape[0], dtype=np.int64)
    total = np.zeros((n_leaves, 3))
    for i in range(user.shape[0]):
        u, q = by_user[user[i]], by_queue[queue[i]]
        first, second = (u, q) if override else (q, u)
        lf = first if first >= 0 else (second if second >= 0 else default)
        leaf[i] = lf
        for k in range(3):
            total[lf, k] += req[i, k]
    return leaf, total


@njit(cache=True, inline="always")
def _key(c, kind, weight, min_share, demand, usage, inv_total, rank):
    """Comparator key ``(tier, first, second)`` of child ``c`` under a ``kind`` parent."""
    if kind == FIFO:
        return (0.0, rank[c], 0.0)
    if kind == DRF:
        w = weight[c] if weight[c] > 0 else 1e-300
        cpu, mem = usage[c, 0] * inv_total[0] / w, usage[c, 1] * inv_total[1] / w
        dom, other = (1, 0) if mem > cpu else (0, 1)  # Hadoop: CPU first on a tie
        first, second = max(cpu, mem), min(cpu, mem)
        ms_dom = min(min_share[c, dom], demand[c, dom])
        if ms_dom > 0 and usage[c, dom] < ms_dom:
            ms_other = min(min_share[c, other], demand[c, other])
            ratio = usage[c, other] / ms_other if ms_other > 0 else np.inf
            return (0.0, usage[c, dom] / ms_dom, ratio)
        return (1.0, first, second)
    ms = min(min_share[c, 1], demand[c, 1])
    if usage[c, 1] < ms:
        return (0.0, usage[c, 1] / ms, 0.0)
    if weight[c] > 0:
        return (1.0, usage[c, 1] / weight[c], 0.0)
    return (2.0, usage[c, 1], 0.0)  # weight 0: after every weighted sibling


@helper
def _kill(q, parent, alive):
    """Queue ``q`` has nothing left to place: take it out, and the parents it leaves empty."""
    if alive[q] <= 0:
        return
    alive[q] = 0
    p = parent[q]
    while p >= 0:
        alive[p] -= 1  # alive[parent] counts its alive children
        if alive[p] > 0:
            return
        p = parent[p]


@helper
def _fits_max(q, parent, usage, max_share, rc, rm, rg):
    while q >= 0:
        if (usage[q, 0] + rc > max_share[q, 0] * (1 + EPS) or
                usage[q, 1] + rm > max_share[q, 1] * (1 + EPS) or
                usage[q, 2] + rg > max_share[q, 2] * (1 + EPS)):
            return False
        q = parent[q]
    return True


@helper
def _seg_set(tv, ti, p, pos, value):
    """Set position ``pos`` of a min segment tree keeping the lowest position on ties."""
    x = p + pos
    tv[x], ti[x] = value, pos
    x >>= 1
    while x >= 1:
        a, b = 2 * x, 2 * x + 1
        if tv[b] < tv[a]:
            tv[x], ti[x] = tv[b], ti[b]
        else:
            tv[x], ti[x] = tv[a], ti[a]
        x >>= 1


@helper
def _seg_argmin(tv, ti, p, lo, hi):
    """Lowest position with the smallest value in ``[lo, hi)``; -1 when all are inf."""
    best_v, best_i = np.inf, -1
    lo += p
    hi += p
    while lo < hi:
        if lo & 1:
            if tv[lo] < best_v or (tv[lo] == best_v and best_i >= 0 and ti[lo] < best_i):
                best_v, best_i = tv[lo], ti[lo]
            lo += 1
        if hi & 1:
            hi -= 1
            if tv[hi] < best_v or (tv[hi] == best_v and best_i >= 0 and ti[hi] < best_i):
                best_v, best_i = tv[hi], ti[hi]
        lo >>= 1
        hi >>= 1
    return best_i if best_v < np.inf else -1


@helper
def _app_key(a, parent, kind, weight, min_share, demand, usage, inv_total, rank):
    """Scalar key of application ``a``: apps of one leaf share a tier (no minimum, weight 1)."""
    return _key(a, kind[parent[a]], weight, min_share, demand, usage, inv_total, rank)[1]


@helper
def _over_am(lf, r, am_used, am_limit):
    """Whether an AM of size ``r`` would take leaf ``lf`` over its AM limit (maxAMShare)."""
    for k in range(3):  # noqa: SIM110 (numba compiles loops, not any())
        if am_used[lf, k] + r[k] > am_limit[lf, k] * (1 + EPS):
            return True
    return False


@helper
def _place(i, nd, q, c, req, parent, usage, needs_am, started, am_used, lf, cap, w_alloc,
           w_ncont, w_up, key, val, pri, left, right, parent_t, agg, member, root, skey, sfree,
           cnt, out_req, out_node):
    """Put request ``i`` of application ``q`` on node ``nd``: the node index, the usage up
    the tree, the output (at ``c``; returns ``c + 1``) and, for its first container, the
    leaf's AM use."""
    for k in range(3):
        w_alloc[nd, k] += req[i, k]
    w_ncont[nd] += 1
    _update(nd, cap, w_alloc, w_ncont, w_up, 1.0, key, val, pri, left, right, parent_t, agg,
            member, root, skey, sfree, cnt)
    a = q
    while a >= 0:
        for k in range(3):
            usage[a, k] += req[i, k]
        a = parent[a]
    out_req[c] = i
    out_node[c] = nd
    if needs_am:  # this first container is the application's AM
        started[q] = True
        for k in range(3):
            am_used[lf, k] += req[i, k]
    return c + 1


@njit(cache=True)
def fair_fill(req, leaf_of, parent, child_ptr, child_idx, kind, weight, min_share, max_share,
              usage, demand, inv_total, rank, n_queues, started, am_used, am_limit, check_am,
              cap, w_alloc, w_ncont, w_up, key, val, pri, left, right, parent_t, agg, member,
              root, skey, sfree, cnt, stack, indptr, order, gate, out_req, out_node):
    """Place pending requests down the tree; return how many were placed.

    Each request goes only to a node whose GPU model it allows (``gate.asks.allow`` and
    ``.bits``, :func:`~pipeline.policies.models.model_masks`).

    ``indptr``/``order``: each tree node's requests (``group_by_code(leaf_of, nq)``).
    ``gate`` (a :class:`~pipeline.policies.locality.gate.GateState`, from
    :func:`pipeline.policies.locality.gate.no_offer` or the offer loop; applications are
    tree nodes): with a ``node``, this is one heartbeat of it (``FairScheduler.nodeUpdate`` ->
    ``attemptScheduling``): every request goes to ``nd`` or waits, an application's request
    comes from the locality gate, and one that lets the offer pass is skipped for this
    heartbeat; requests done, cursors and the gate's state persist between offers.

    ``leaf_of`` gives each request's node in the tree (its application); ``usage`` (updated
    in place) and ``demand`` are per node, aggregated over subtrees; ``rank`` orders the
    children of ``fifo`` parents.  Nodes from ``n_queues`` on are applications: a leaf
    queue picks among them with a segment tree (a queue may hold thousands).  With
    ``check_am``: ``started`` per node (updated in place), ``am_used`` (updated in place)
    and ``am_limit`` per queue.
    """
    nd, done, node_free, fit_req = gate.node, gate.asks.done, gate.asks.free, gate.asks.need
    allow, bits = gate.asks.allow, gate.asks.bits
    nq = parent.shape[0]
    lbest = np.full(nq if nd >= 0 else 0, -1, np.int64)
    touched = np.empty(len(lbest), np.int64)
    n_touched = 0
    if nd >= 0:
        cursor = gate.nxt
        n_touched = refresh_local(gate, lbest, touched, 0)
    else:
        cursor = indptr[:-1].copy()
    alive = np.zeros(nq, dtype=np.int64)
    for q in range(nq - 1, -1, -1):  # children come after parents (breadth-first)
        is_leaf = child_ptr[q + 1] == child_ptr[q]
        if (is_leaf and indptr[q + 1] > cursor[q]) or (not is_leaf and alive[q] > 0):
            alive[q] = 1 if is_leaf else alive[q]
            if parent[q] >= 0:
                alive[parent[q]] += 1
    n_pos = child_idx.shape[0]
    p = 1
    while p < max(n_pos, 1):
        p *= 2
    tv, ti = np.full(2 * p, np.inf), np.full(2 * p, -1, dtype=np.int64)
    pos_of = np.full(nq, -1, dtype=np.int64)
    for pos in range(n_pos):
        a = child_idx[pos]
        pos_of[a] = pos
        if a >= n_queues and alive[a] > 0:
            tv[p + pos] = _app_key(a, parent, kind, weight, min_share, demand, usage,
                                   inv_total, rank)
            ti[p + pos] = pos
    for x in range(p - 1, 0, -1):
        a, b = 2 * x, 2 * x + 1
        tv[x], ti[x] = (tv[b], ti[b]) if tv[b] < tv[a] else (tv[a], ti[a])
    failed = np.empty((16, 3))
    n_failed = 0
    c = 0
    while alive[0] > 0:
        q = 0
        while child_ptr[q + 1] > child_ptr[q]:  # descend to a leaf
            if child_idx[child_ptr[q]] >= n_queues:  # a leaf queue: pick an application
                pos = _seg_argmin(tv, ti, p, child_ptr[q], child_ptr[q + 1])
                if pos < 0:
                    break
                q = child_idx[pos]
                continue
            best, best_key = -1, (np.inf, np.inf, np.inf)
            for j in range(child_ptr[q], child_ptr[q + 1]):
                ch = child_idx[j]
                if alive[ch] <= 0:
                    continue
                if (usage[ch, 0] > max_share[ch, 0] * (1 + EPS) or usage[ch, 1] >
                        max_share[ch, 1] * (1 + EPS) or usage[ch, 2] > max_share[ch, 2] *
                        (1 + EPS)):
                    _kill(ch, parent, alive)
                    continue
                k = _key(ch, kind[q], weight, min_share, demand, usage, inv_total, rank)
                if k < best_key:
                    best, best_key = ch, k
            if best < 0:
                break
            q = best
        if child_ptr[q + 1] > child_ptr[q]:
            continue  # every child of q died on the way, which took q out too
        j = cursor[q]
        placed = False
        needs_am = check_am and not started[q]
        lf = parent[q]
        if nd >= 0:
            i, typ = pick(gate, q, lbest[q], order, j, indptr[q + 1])
            if i >= 0 and (not _fits_max(q, parent, usage, max_share, req[i, 0], req[i, 1],
                                         req[i, 2]) or
                           (needs_am and _over_am(lf, req[i], am_used, am_limit))):
                i = -1
            if i < 0:  # lets this heartbeat pass (or may not take more): skipped for it
                _kill(q, parent, alive)
                _seg_set(tv, ti, p, pos_of[q], np.inf)
                continue
            taken(gate, i, typ, q)
            while j < indptr[q + 1] and done[order[j]]:
                j += 1
            for r3 in range(3):
                node_free[nd, r3] -= fit_req[i, r3]
            c = _place(i, nd, q, c, req, parent, usage, needs_am, started, am_used, lf, cap,
                       w_alloc, w_ncont, w_up, key, val, pri, left, right, parent_t, agg,
                       member, root, skey, sfree, cnt, out_req, out_node)
            n_touched = refresh_local(gate, lbest, touched, n_touched)
        while nd < 0 and j < indptr[q + 1] and not placed:
            i = order[j]
            j += 1
            rc, rm, rg = req[i, 0], req[i, 1], req[i, 2]
            if needs_am and _over_am(lf, req[i], am_used, am_limit):
                j = indptr[q + 1]  # over maxAMShare: nothing for this app in this call
                break
            if sfree[0, 1] < rc or sfree[1, 1] < rm or sfree[2, 1] < rg:
                continue
            if not _fits_max(q, parent, usage, max_share, rc, rm, rg):
                continue
            if dominated_by_failure(failed, n_failed, rc, rm, rg):
                continue
            mask = allow[i] if allow.shape[0] else 0
            dst = _least_used(skey, sfree, rc, rm, rg, stack, mask, bits, root, left, right,
                              agg, val)
            if dst < 0:  # anything at least as large fits nowhere either this round
                if mask == 0:  # (unless it only missed its GPU models)
                    n_failed = remember_failure(failed, n_failed, rc, rm, rg)
                continue
            c = _place(i, dst, q, c, req, parent, usage, needs_am, started, am_used, lf, cap,
                       w_alloc, w_ncont, w_up, key, val, pri, left, right, parent_t, agg,
                       member, root, skey, sfree, cnt, out_req, out_node)
            placed = True
        cursor[q] = j
        if j >= indptr[q + 1]:
            _kill(q, parent, alive)
            if q >= n_queues:
                _seg_set(tv, ti, p, pos_of[q], np.inf)
        elif q >= n_queues:
            _seg_set(tv, ti, p, pos_of[q], _app_key(q, parent, kind, weight, min_share,
                                                    demand, usage, inv_total, rank))
    return c
