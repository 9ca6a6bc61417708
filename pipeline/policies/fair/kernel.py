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

from pipeline.policies.drf import Nodes, Placements
from pipeline.policies.fair.app_heap import AppHeap, seg_argmin, seg_set
from pipeline.policies.fair.fill_state import AmCheck, FillTree, Pending
from pipeline.policies.locality.gate import pick, refresh_local, taken
from pipeline.policies.placement.nodetree import (
    Mirror,
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
def _key(c, kind, tree):
    """Comparator key ``(tier, first, second)`` of tree node ``c`` under a ``kind`` parent."""
    weight, min_share, demand, usage = tree.weight, tree.min_share, tree.demand, tree.usage
    if kind == FIFO:
        return (0.0, tree.rank[c], 0.0)
    if kind == DRF:
        inv_total = tree.inv_total
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
def _fits_max(q, tree, rc, rm, rg):
    """Whether a request ``(rc, rm, rg)`` keeps every queue from ``q`` up within its
    maxResources (``fitsInMaxShare``)."""
    parent, usage, max_share = tree.parent, tree.usage, tree.max_share
    while q >= 0:
        if (usage[q, 0] + rc > max_share[q, 0] * (1 + EPS) or
                usage[q, 1] + rm > max_share[q, 1] * (1 + EPS) or
                usage[q, 2] + rg > max_share[q, 2] * (1 + EPS)):
            return False
        q = parent[q]
    return True


@helper
def _over_max(q, tree):
    """Whether queue ``q`` already holds more than its maxResources (assignContainerPreCheck)."""
    usage, max_share = tree.usage, tree.max_share
    return (usage[q, 0] > max_share[q, 0] * (1 + EPS) or usage[q, 1] >
            max_share[q, 1] * (1 + EPS) or usage[q, 2] > max_share[q, 2] * (1 + EPS))


@helper
def _app_key(a, tree):
    """Scalar key of application ``a``: apps of one leaf share a tier (no minimum, weight 1)."""
    return _key(a, tree.kind[tree.parent[a]], tree)[1]


@helper
def _over_am(lf, req, i, am):
    """Whether request ``i`` as an AM would take leaf ``lf`` over its AM limit (maxAMShare)."""
    for k in range(3):  # noqa: SIM110 (numba compiles loops, not any())
        if am.used[lf, k] + req[i, k] > am.limit[lf, k] * (1 + EPS):
            return True
    return False


@njit(cache=True)
def _alive(tree, indptr, cursor):
    """Per tree node: an application 1 while it has requests from ``cursor`` on, a queue
    the number of its alive children."""
    parent, child_ptr = tree.parent, tree.child_ptr
    alive = np.zeros(parent.shape[0], dtype=np.int64)
    for q in range(parent.shape[0] - 1, -1, -1):  # children come after parents
        is_leaf = child_ptr[q + 1] == child_ptr[q]
        if (is_leaf and indptr[q + 1] > cursor[q]) or (not is_leaf and alive[q] > 0):
            alive[q] = 1 if is_leaf else alive[q]
            if parent[q] >= 0:
                alive[parent[q]] += 1
    return alive


@njit(cache=True)
def _app_heap(tree, alive):
    """The :class:`AppHeap` of the alive applications' keys."""
    child_idx = tree.child_idx
    n_pos = child_idx.shape[0]
    p = 1
    while p < max(n_pos, 1):
        p *= 2
    tv, ti = np.full(2 * p, np.inf), np.full(2 * p, -1, dtype=np.int64)
    pos_of = np.full(tree.parent.shape[0], -1, dtype=np.int64)
    for pos in range(n_pos):
        a = child_idx[pos]
        pos_of[a] = pos
        if a >= tree.n_queues and alive[a] > 0:
            tv[p + pos] = _app_key(a, tree)
            ti[p + pos] = pos
    for x in range(p - 1, 0, -1):
        a, b = 2 * x, 2 * x + 1
        tv[x], ti[x] = (tv[b], ti[b]) if tv[b] < tv[a] else (tv[a], ti[a])
    return AppHeap(tv, ti, pos_of)


@helper
def _best_child(q, tree, alive):
    """The alive child of queue ``q`` its policy puts first (-1: none); children over
    their maxResources are taken out on the way (``assignContainerPreCheck``)."""
    best, best_key = -1, (np.inf, np.inf, np.inf)
    for j in range(tree.child_ptr[q], tree.child_ptr[q + 1]):
        ch = tree.child_idx[j]
        if alive[ch] <= 0:
            continue
        if _over_max(ch, tree):
            _kill(ch, tree.parent, alive)
            continue
        k = _key(ch, tree.kind[q], tree)
        if k < best_key:
            best, best_key = ch, k
    return best


@helper
def _descend(tree, alive, heap):
    """The application the root's ``assignContainer`` reaches, or the inner node where the
    descent stopped (every child of it died on the way)."""
    child_ptr, child_idx = tree.child_ptr, tree.child_idx
    q = 0
    while child_ptr[q + 1] > child_ptr[q]:
        if child_idx[child_ptr[q]] >= tree.n_queues:  # a leaf queue: pick an application
            pos = seg_argmin(heap, child_ptr[q], child_ptr[q + 1])
            if pos < 0:
                break
            q = child_idx[pos]
            continue
        best = _best_child(q, tree, alive)
        if best < 0:
            break
        q = best
    return q


@helper
def _place(i, nd, q, pending, tree, am, nodes):
    """Put request ``i`` of application ``q`` on node ``nd``: the node index, the usage up
    the tree and, for its first container, the leaf's AM use."""
    req = pending.req
    needs_am = am.on and not am.started[q]
    for k in range(3):
        nodes.alloc[nd, k] += req[i, k]
    nodes.ncont[nd] += 1
    _update(nd, Mirror(nodes.cap, nodes.alloc, nodes.ncont, nodes.up, 1.0), nodes)
    a = q
    while a >= 0:
        for k in range(3):
            tree.usage[a, k] += req[i, k]
        a = tree.parent[a]
    if needs_am:  # this first container is the application's AM
        am.started[q] = True
        lf = tree.parent[q]
        for k in range(3):
            am.used[lf, k] += req[i, k]


@helper
def _pick_on_offer(q, j, local_i, tree, pending, am, gate):
    """``(request, cursor)``: application ``q``'s request the locality gate gives the
    offered node (booked: done, the node's room taken), or -1 when it lets the offer pass
    or may not take more (maxResources, maxAMShare)."""
    order, end, req = pending.order, pending.indptr[q + 1], pending.req
    i, typ = pick(gate, q, local_i, order, j, end)
    if i >= 0 and (not _fits_max(q, tree, req[i, 0], req[i, 1], req[i, 2]) or (
            am.on and not am.started[q] and _over_am(tree.parent[q], req, i, am))):
        i = -1
    if i < 0:
        return -1, j
    taken(gate, i, typ, q)
    done = gate.asks.done
    while j < end and done[order[j]]:
        j += 1
    for r in range(3):
        gate.asks.free[gate.node, r] -= gate.asks.need[i, r]
    return i, j


@helper
def _least_allocated(q, j, tree, pending, am, nodes, gate, failed, n_failed):
    """``(request, node, cursor, n_failed)``: application ``q``'s first request from
    position ``j`` that fits a node and its maxima, on the least allocated node it may use
    (-1, -1 when none: the cursor is then past them all)."""
    order, end, req = pending.order, pending.indptr[q + 1], pending.req
    allow, bits, sfree = gate.asks.allow, gate.asks.bits, nodes.sfree
    needs_am = am.on and not am.started[q]
    while j < end:
        i = order[j]
        j += 1
        rc, rm, rg = req[i, 0], req[i, 1], req[i, 2]
        if needs_am and _over_am(tree.parent[q], req, i, am):
            return -1, -1, end, n_failed  # over maxAMShare: nothing for it in this call
        if sfree[0, 1] < rc or sfree[1, 1] < rm or sfree[2, 1] < rg:
            continue
        if not _fits_max(q, tree, rc, rm, rg):
            continue
        if dominated_by_failure(failed, n_failed, rc, rm, rg):
            continue
        mask = allow[i] if allow.shape[0] else 0
        dst = _least_used(nodes, (rc, rm, rg), mask, bits)
        if dst < 0:  # anything at least as large fits nowhere either this round
            if mask == 0:  # (unless it only missed its GPU models)
                n_failed = remember_failure(failed, n_failed, rc, rm, rg)
            continue
        return i, dst, j, n_failed
    return -1, -1, j, n_failed


@helper
def _requeue(q, j, tree, pending, alive, heap):
    """After application ``q``'s turn (its cursor now ``j``): out when its requests are
    done, else back in its leaf's order with its new key."""
    if j >= pending.indptr[q + 1]:
        _kill(q, tree.parent, alive)
        if q >= tree.n_queues:
            seg_set(heap, heap.pos_of[q], np.inf)
    elif q >= tree.n_queues:
        seg_set(heap, heap.pos_of[q], _app_key(q, tree))


@njit(cache=True)
def fair_fill(tree, pending, am, nodes, gate, out):
    """Place pending requests down the tree; return how many were placed (``out``).

    ``tree`` (:class:`~.fill_state.FillTree`; ``usage`` updated in place), ``pending``
    (:class:`~.fill_state.Pending`), ``am`` (:class:`~.fill_state.AmCheck`; ``started``
    and ``used`` updated in place), ``nodes`` (:class:`~pipeline.policies.drf.Nodes`, the
    node index, updated in place), ``out`` (:class:`~pipeline.policies.drf.Placements`).
    Each request goes only to a node whose GPU model it allows (``gate.asks.allow`` and
    ``.bits``, :func:`~pipeline.policies.models.model_masks`).

    ``gate`` (a :class:`~pipeline.policies.locality.gate.GateState`, from
    :func:`pipeline.policies.locality.gate.no_offer` or the offer loop; applications are
    tree nodes): with a ``node``, this is one heartbeat of it (``FairScheduler.nodeUpdate`` ->
    ``attemptScheduling``): every request goes to ``nd`` or waits, an application's request
    comes from the locality gate, and one that lets the offer pass is skipped for this
    heartbeat; requests done, cursors and the gate's state persist between offers.
    :mod:`.fill_reference` is the pass without an offer, written for reading.
    """
    nd = gate.node
    lbest = np.full(tree.parent.shape[0] if nd >= 0 else 0, -1, np.int64)
    touched = np.empty(len(lbest), np.int64)
    n_touched = 0
    if nd >= 0:
        cursor = gate.nxt
        n_touched = refresh_local(gate, lbest, touched, 0)
    else:
        cursor = pending.indptr[:-1].copy()
    alive = _alive(tree, pending.indptr, cursor)
    heap = _app_heap(tree, alive)
    failed = np.empty((16, 3))
    n_failed = 0
    c = 0
    while alive[0] > 0:
        q = _descend(tree, alive, heap)
        if tree.child_ptr[q + 1] > tree.child_ptr[q]:
            continue  # every child of q died on the way, which took q out too
        if nd >= 0:
            i, j = _pick_on_offer(q, cursor[q], lbest[q], tree, pending, am, gate)
            if i < 0:  # lets this heartbeat pass (or may not take more): skipped for it
                _kill(q, tree.parent, alive)
                seg_set(heap, heap.pos_of[q], np.inf)
                continue
            dst = nd
        else:
            i, dst, j, n_failed = _least_allocated(q, cursor[q], tree, pending, am, nodes,
                                                   gate, failed, n_failed)
        if i >= 0:
            _place(i, dst, q, pending, tree, am, nodes)
            out.req[c] = i
            out.node[c] = dst
            c += 1
            if nd >= 0:
                n_touched = refresh_local(gate, lbest, touched, n_touched)
        cursor[q] = j
        _requeue(q, j, tree, pending, alive, heap)
    return c


@njit(cache=True)
def fair_fill_plain(tree, pending, am, nodes, gate, out):
    """:func:`fair_fill` with ``tree``, ``pending``, ``am``, ``nodes`` and ``out`` passed as
    plain tuples (``tuple(x)``): numba's dispatcher types a plain tuple in C, a NamedTuple
    field by field in Python (as :func:`pipeline.policies.drf._drf_fill_plain`)."""
    return fair_fill(FillTree(*tree), Pending(*pending), AmCheck(*am), Nodes(*nodes), gate,
                     Placements(*out))
