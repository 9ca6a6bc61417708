"""The CapacityScheduler assignment loop, compiled: one container at a time, as Hadoop does.

Per container (apache/hadoop 3.3 ``ParentQueue.assignContainers`` -> ``LeafQueue`` ->
``RegularContainerAllocator``): descend from the root to a leaf choosing, among children
that can still take something, the one with the lowest relative used capacity
(``PriorityUtilizationQueueOrderingPolicy``; with ``priority-utilization`` the queue
priority decides when both are under or both over their guarantee; ties: larger
guarantee, then configuration order).  In the leaf, applications in ordering-policy order
(FIFO: higher priority, then earlier submission; fair: least memory used, optionally
divided by log2(1 + demand), then FIFO) get the first chance; an application is skipped
when its user is over the user limit (``used > limit``, so one container may overshoot),
when its first container (its AM) does not fit the AM limit or the application limits, or
when the container would take a queue on the path over its maximum capacity or exceed the
cluster's free resources.  Node choice is left to the caller.

With node labels the caller runs the loop once per partition and scheduling mode
(:mod:`.passes`): vectors are then the partition's, ``q_access`` puts the queues that can
access the partition first (``PriorityUtilizationQueueOrderingPolicy.
compareQueueAccessToPartition``; all true for DEFAULT), and ``zero_am`` applies
``LeafQueue.activateApplications``' other exemption: an application also starts when the
leaf's AM use *in that partition* is zero.

Vectors are ``(cpu, mem, gpu)``; ``calc`` is 0 for the default (memory-only) calculator and
1 for the dominant one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.policies.locality.gate import pick, refresh_local, taken

EPS = 1e-9


@njit(cache=True)
def greater(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calc: int) -> bool:
    """``Resources.greaterThan``: memory, or shares compared largest first (DRC)."""
    if calc == 0:
        return a[1] > b[1] + EPS
    return _shares_greater(a[0], a[1], a[2], b[0], b[1], b[2], cluster)


@njit(cache=True)
def _share(x: float, total: float) -> float:
    return x / total if total > 0 else 0.0


@njit(cache=True)
def _descending(x: float, y: float, z: float) -> tuple[float, float, float]:
    """Three numbers largest first (a sorting network: no array, no allocation)."""
    if x < y:
        x, y = y, x
    if y < z:
        y, z = z, y
    if x < y:
        x, y = y, x
    return x, y, z


@njit(cache=True)
def _shares_greater(a0: float, a1: float, a2: float, b0: float, b1: float, b2: float,
                    cluster: np.ndarray) -> bool:
    """DRC's comparison of two vectors given by their entries: the shares of the cluster,
    largest first, compared in turn (the first that differs decides)."""
    sa = _descending(_share(a0, cluster[0]), _share(a1, cluster[1]), _share(a2, cluster[2]))
    sb = _descending(_share(b0, cluster[0]), _share(b1, cluster[1]), _share(b2, cluster[2]))
    for r in range(3):
        if abs(sa[r] - sb[r]) > EPS:
            return sa[r] > sb[r]
    return False


@njit(cache=True)
def _sum_greater(a: np.ndarray, r: np.ndarray, b: np.ndarray, cluster: np.ndarray,
                 calc: int) -> bool:
    """``greater(a + r, b)`` without building ``a + r``."""
    if calc == 0:
        return a[1] + r[1] > b[1] + EPS
    return _shares_greater(a[0] + r[0], a[1] + r[1], a[2] + r[2], b[0], b[1], b[2], cluster)


@njit(cache=True)
def ratio(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calc: int) -> float:
    """``rc.divide``: memory ratio, or dominant share ratio."""
    if calc == 0:
        return a[1] / b[1] if b[1] > 0 else np.inf
    da = 0.0
    db = 0.0
    for r in range(3):
        if cluster[r] > 0:
            da = max(da, a[r] / cluster[r])
            db = max(db, b[r] / cluster[r])
    return da / db if db > 0 else np.inf


@njit(cache=True)
def _round_into(x: np.ndarray, minimum: np.ndarray, calc: int, up: bool,
                out: np.ndarray) -> None:
    """``x`` rounded to multiples of the minimum allocation (memory only with the default
    calculator), written to ``out`` (which may be ``x``)."""
    for r in range(3):
        if minimum[r] > 0 and (calc == 1 or r == 1):
            q = x[r] / minimum[r]
            out[r] = (np.ceil(q - EPS) if up else np.floor(q + EPS)) * minimum[r]
        else:
            out[r] = x[r]


@njit(cache=True)
def user_limit(cap: np.ndarray, queue_used: np.ndarray, active_used: np.ndarray,
               active_w: float, mulp: float, ulf: float, qmax: np.ndarray,
               minimum: np.ndarray, cluster: np.ndarray, calc: int) -> np.ndarray:
    """``UsersManager.computeUserLimit`` (active users); see formulas.user_limit."""
    out = np.empty(3)
    user_limit_into(cap, queue_used, active_used, active_w, mulp, ulf, qmax, minimum,
                    cluster, calc, np.empty((5, 3)), out)
    return out


@njit(cache=True)
def user_limit_into(cap: np.ndarray, queue_used: np.ndarray, active_used: np.ndarray,
                    active_w: float, mulp: float, ulf: float, qmax: np.ndarray,
                    minimum: np.ndarray, cluster: np.ndarray, calc: int, scratch: np.ndarray,
                    out: np.ndarray) -> None:
    """:func:`user_limit` written to ``out``, with ``scratch`` (5, 3) as working rows (the
    kernel computes it once per container: no allocation)."""
    c, current, by_users, by_pct, mx = scratch[0], scratch[1], scratch[2], scratch[3], scratch[4]
    c[:] = minimum if greater(minimum, cap, cluster, calc) else cap
    if greater(c, queue_used, cluster, calc):
        current[:] = c
    else:
        for r in range(3):
            current[r] = queue_used[r] + minimum[r]
    w = max(active_w, EPS)
    f = mulp / 100.0
    for r in range(3):
        by_users[r] = (active_used[r] + minimum[r]) / w
        by_pct[r] = current[r] * f
    limit = by_pct if greater(by_pct, by_users, cluster, calc) else by_users
    if ulf < 0:
        mx[:] = qmax
    else:
        for r in range(3):
            mx[r] = c[r] * ulf
    if greater(limit, mx, cluster, calc):
        limit = mx
    _round_into(limit, minimum, calc, True, out)


@njit(cache=True)
def _fits_path(q: int, r: np.ndarray, q_used: np.ndarray, q_max: np.ndarray,
               q_parent: np.ndarray, cluster: np.ndarray, calc: int) -> bool:
    while q >= 0:
        if _sum_greater(q_used[q], r, q_max[q], cluster, calc):
            return False
        q = q_parent[q]
    return True


@njit(cache=True)
def _before(a: int, b: int, q_used: np.ndarray, q_guar: np.ndarray, q_prio: np.ndarray,
            use_prio: bool, q_access: np.ndarray, cluster: np.ndarray, calc: int) -> bool:
    """Whether child queue ``a`` goes before ``b`` (PriorityUtilizationQueueOrderingPolicy)."""
    if q_access[a] != q_access[b]:
        return q_access[a]
    ra = ratio(q_used[a], q_guar[a], cluster, calc)
    rb = ratio(q_used[b], q_guar[b], cluster, calc)
    if use_prio and q_prio[a] != q_prio[b] and (ra < 1.0) == (rb < 1.0):
        return q_prio[a] > q_prio[b]
    if use_prio and (ra < 1.0) != (rb < 1.0):
        return ra < 1.0
    if abs(ra - rb) > EPS:
        return ra < rb
    ga = ratio(q_guar[a], cluster, cluster, calc)
    gb = ratio(q_guar[b], cluster, cluster, calc)
    if abs(ga - gb) > EPS:
        return ga > gb
    return a < b


@njit(cache=True)
def _can_activate(leaf, p, r, leaf_apps, leaf_max_apps, pair_apps, leaf_user_max_apps,
                  am_used, am_limit, zero_am, cluster, calc) -> bool:
    """Application limits and the AM limit (the first application of a leaf always starts:
    "skipping enforcement to allow at least one application to start", LeafQueue)."""
    if leaf_apps[leaf] >= leaf_max_apps[leaf] or pair_apps[p] >= leaf_user_max_apps[leaf]:
        return False
    if zero_am and am_used[leaf, 0] <= 0 and am_used[leaf, 1] <= 0 and am_used[leaf, 2] <= 0:
        return True
    return leaf_apps[leaf] == 0 or not _sum_greater(am_used[leaf], r, am_limit[leaf], cluster,
                                                    calc)


@njit(cache=True)
def _pick_leaf(q_alive, q_kids_lo, q_kids, q_used, q_guar, q_prio, q_use_prio, q_access,
               cluster, calc) -> int:
    q = 0
    while q_kids_lo[q + 1] > q_kids_lo[q]:
        best = -1
        for k in range(q_kids_lo[q], q_kids_lo[q + 1]):
            c = q_kids[k]
            if q_alive[c] and (best < 0 or _before(c, best, q_used, q_guar, q_prio,
                                                   q_use_prio[q], q_access, cluster, calc)):
                best = c
        if best < 0:
            return -1
        q = best
    return q


@njit(cache=True)
def _choose_app(q, leaf, lim, first, leaf_app_hi, blocked, nxt, app_hi, app_pair, pair_w,
                pair_used, req, req_idx, app_started, leaf_apps, leaf_max_apps, pair_apps,
                leaf_user_max_apps, am_used, am_limit, zero_am, free, q_used, q_max, q_parent,
                leaf_fair, leaf_sbw, app_used_mem, app_demand_mem, cluster, minimum, calc,
                ulim):
    """The application of leaf ``leaf`` that gets the next container (-1: none can);
    applications that cannot take one in this pass are marked ``blocked`` (``ulim``: a
    scratch row for the user's limit)."""
    chosen = -1
    best_key = np.inf
    while first[leaf] < leaf_app_hi[leaf] and (
            blocked[first[leaf]] or nxt[first[leaf]] >= app_hi[first[leaf]]):
        first[leaf] += 1
    for a in range(first[leaf], leaf_app_hi[leaf]):
        if blocked[a] or nxt[a] >= app_hi[a]:
            continue
        p = app_pair[a]
        for k in range(3):
            ulim[k] = lim[k] * pair_w[p]
        _round_into(ulim, minimum, calc, False, ulim)
        if greater(pair_used[p], ulim, cluster, calc):
            continue  # user over its limit (a '>' check: at the limit may still take one)
        r = req[req_idx[nxt[a]]]
        if not app_started[a] and not _can_activate(
                leaf, p, r, leaf_apps, leaf_max_apps, pair_apps, leaf_user_max_apps,
                am_used, am_limit, zero_am, cluster, calc):
            blocked[a] = True
            continue
        fits = True
        for k in range(3):
            if r[k] > free[k] + EPS:
                fits = False
        if not fits or not _fits_path(q, r, q_used, q_max, q_parent, cluster, calc):
            blocked[a] = True
            continue
        if not leaf_fair[leaf]:
            chosen = a
            break
        key = app_used_mem[a]
        if leaf_sbw[leaf]:
            key = key / max(np.log2(1.0 + app_demand_mem[a]), EPS)
        if key < best_key - EPS:
            best_key = key
            chosen = a
    return chosen


@njit(cache=True)
def allocate(req, req_idx, app_lo, app_hi, app_pair, app_started, app_used_mem,
             app_demand_mem, leaf_app_lo, leaf_app_hi, pair_used, pair_w, pair_left,
             pair_apps, leaf_q, leaf_cap, leaf_max, leaf_mulp, leaf_ulf, leaf_fair, leaf_sbw,
             leaf_active_used, leaf_active_w, leaf_apps, leaf_max_apps, leaf_user_max_apps,
             am_used, am_limit, q_used, q_guar, q_max, q_parent, q_kids_lo, q_kids, q_prio,
             q_use_prio, q_leaf, q_access, zero_am, free, cluster, minimum, calc, loc, out):
    """Assign containers one by one; write request indices in order to ``out``; return count.

    ``loc`` (:func:`~pipeline.policies.locality.gate.no_offer` or
    :meth:`~pipeline.policies.locality.gate.Candidates.loc`): with its
    node ``nd`` at -1, containers are chosen against the cluster's ``free`` room and placed
    by the caller.  With a node, this is one heartbeat of ``nd``: ``free`` is ignored, the
    room is the node's, and the chosen application's request comes from the locality gate
    (:func:`pipeline.policies.locality.gate.pick`; an application that lets the offer pass
    is skipped for this heartbeat, as ``RegularContainerAllocator`` returns
    ``LOCALITY_SKIPPED``); ``nxt``, ``done`` and the gate's state persist between offers.
    """
    (nd, now, kind, p0, p1, n_nodes, full_reset, node_free, fit_req, done, ready, nxt_all,
     app_job, has_in, ident, node_ptr, node_lst, rack_ptr, rack_lst, n_rack, app_of, c_out,
     n_loc, n_noin, miss, level, since, visits, app_ready, allow, bits) = loc
    best = np.full(len(app_lo) if nd >= 0 else 0, -1, np.int64)
    touched = np.empty(len(best), np.int64)
    n_touched = 0
    rack = -1
    if nd >= 0:
        free = node_free[nd]
        n_touched = refresh_local(nd, now, node_ptr, node_lst, done, ready, app_of, ident,
                                  fit_req, node_free, best, touched, 0, allow, bits)
        rack = n_rack[nd]
    n_q = len(q_parent)
    q_alive = np.zeros(n_q, dtype=np.bool_)
    for leaf in range(len(leaf_q)):
        if leaf_app_hi[leaf] > leaf_app_lo[leaf]:
            q = leaf_q[leaf]
            while q >= 0:
                q_alive[q] = True
                q = q_parent[q]
    blocked = np.zeros(len(app_lo), dtype=np.bool_)
    scratch = np.empty((7, 3))  # working rows: no allocation per container
    lim, ulim = scratch[5], scratch[6]
    nxt = app_lo.copy() if nd < 0 else nxt_all
    first = leaf_app_lo.copy()  # apps before it are done or blocked (skipped for speed)
    n = 0
    while True:
        q = _pick_leaf(q_alive, q_kids_lo, q_kids, q_used, q_guar, q_prio, q_use_prio,
                       q_access, cluster, calc)
        if q < 0:
            break
        leaf = q_leaf[q]
        user_limit_into(leaf_cap[leaf], q_used[q], leaf_active_used[leaf],
                        leaf_active_w[leaf], leaf_mulp[leaf], leaf_ulf[leaf], leaf_max[leaf],
                        minimum, cluster, calc, scratch, lim)
        i = -1
        typ = -1
        while True:
            chosen = _choose_app(q, leaf, lim, first, leaf_app_hi, blocked, nxt, app_hi,
                                 app_pair, pair_w, pair_used, req, req_idx, app_started,
                                 leaf_apps, leaf_max_apps, pair_apps, leaf_user_max_apps,
                                 am_used, am_limit, zero_am, free, q_used, q_max, q_parent,
                                 leaf_fair, leaf_sbw, app_used_mem, app_demand_mem, cluster,
                                 minimum, calc, ulim)
            if nd < 0 or chosen < 0:
                break
            # a heartbeat: the gate picks the application's request, or it lets the node pass
            i, typ = pick(kind, p0, p1, n_nodes, chosen, app_job[chosen], nd, now,
                          best[chosen], req_idx, nxt[chosen], app_hi[chosen], done, ready,
                          has_in, fit_req, node_free, n_noin, c_out, n_loc, rack_ptr,
                          rack_lst, rack, app_of, miss, level, since, visits, app_ready,
                          allow, bits)
            if i >= 0 and _fits_path(q, req[i], q_used, q_max, q_parent, cluster, calc):
                break
            blocked[chosen] = True  # the next application in the leaf's order
        if chosen < 0:
            q_alive[q] = False
            up = q_parent[q]
            while up >= 0:
                alive = False
                for k in range(q_kids_lo[up], q_kids_lo[up + 1]):
                    alive = alive or q_alive[q_kids[k]]
                if alive:
                    break
                q_alive[up] = False
                up = q_parent[up]
            continue
        a = chosen
        p = app_pair[a]
        if nd < 0:
            i = req_idx[nxt[a]]
        else:
            taken(kind, i, typ, a, app_job[a], now, p0, full_reset, done, has_in, c_out,
                  n_noin, miss, level, since)
        r = req[i]
        out[n] = i
        n += 1
        if nd < 0:
            free -= r
            nxt[a] += 1
        else:  # the node holds the raw request too (fit_req: the larger of the two)
            for k in range(3):
                node_free[nd, k] -= fit_req[i, k]
            while nxt[a] < app_hi[a] and done[req_idx[nxt[a]]]:
                nxt[a] += 1
            n_touched = refresh_local(nd, now, node_ptr, node_lst, done, ready, app_of,
                                      ident, fit_req, node_free, best, touched, n_touched,
                                      allow, bits)
        pair_used[p] += r
        leaf_active_used[leaf] += r
        app_used_mem[a] += r[1]
        up = q
        while up >= 0:
            q_used[up] += r
            up = q_parent[up]
        if not app_started[a]:
            app_started[a] = True
            am_used[leaf] += r
            leaf_apps[leaf] += 1
            pair_apps[p] += 1
        pair_left[p] -= 1
        if pair_left[p] == 0:  # no more pending: the user stops being active
            leaf_active_used[leaf] -= pair_used[p]
            leaf_active_w[leaf] -= pair_w[p]
    return n
