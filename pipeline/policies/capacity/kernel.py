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
from pipeline.sim.jit import helper

EPS = 1e-9


# Vectors inside the kernel are 3-tuples of floats, read from rows by index: a row *view*
# (``a[i]``) is a new array whose creation and release each cost an atomic reference count
# update, and in the per-container loop those updates were most of the kernel's time.

@helper
def _row(a: np.ndarray, i: int) -> tuple[float, float, float]:
    return (a[i, 0], a[i, 1], a[i, 2])


@helper
def _vec(a: np.ndarray) -> tuple[float, float, float]:
    return (a[0], a[1], a[2])


@helper
def _plus(a: tuple, b: tuple) -> tuple[float, float, float]:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@helper
def _gt(a: tuple, b: tuple, cluster: np.ndarray, calc: int) -> bool:
    """``Resources.greaterThan``: memory, or shares compared largest first (DRC)."""
    if calc == 0:
        return a[1] > b[1] + EPS
    return _shares_greater(a[0], a[1], a[2], b[0], b[1], b[2], cluster)


@njit(cache=True)
def greater(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calc: int) -> bool:
    """:func:`_gt` of two arrays."""
    return _gt(_vec(a), _vec(b), cluster, calc)


@helper
def _share(x: float, total: float) -> float:
    return x / total if total > 0 else 0.0


@helper
def _descending(x: float, y: float, z: float) -> tuple[float, float, float]:
    """Three numbers largest first (a sorting network: no array, no allocation)."""
    if x < y:
        x, y = y, x
    if y < z:
        y, z = z, y
    if x < y:
        x, y = y, x
    return x, y, z


@helper
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


@helper
def _ratio(a: tuple, b: tuple, cluster: np.ndarray, calc: int) -> float:
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
def ratio(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calc: int) -> float:
    """:func:`_ratio` of two arrays."""
    return _ratio(_vec(a), _vec(b), cluster, calc)


@helper
def _round1(x: float, step: float, on: bool, up: bool) -> float:
    if step > 0 and on:
        q = x / step
        return (np.ceil(q - EPS) if up else np.floor(q + EPS)) * step
    return x


@helper
def _rounded(x: tuple, minimum: np.ndarray, calc: int, up: bool) -> tuple[float, float, float]:
    """``x`` rounded to multiples of the minimum allocation (memory only with the default
    calculator)."""
    return (_round1(x[0], minimum[0], calc == 1, up), _round1(x[1], minimum[1], True, up),
            _round1(x[2], minimum[2], calc == 1, up))


@njit(cache=True)
def user_limit(cap: np.ndarray, queue_used: np.ndarray, active_used: np.ndarray,
               active_w: float, mulp: float, ulf: float, qmax: np.ndarray,
               minimum: np.ndarray, cluster: np.ndarray, calc: int) -> np.ndarray:
    """``UsersManager.computeUserLimit`` (active users); see formulas.user_limit."""
    lim = _user_limit(_vec(cap), _vec(queue_used), _vec(active_used), active_w, mulp, ulf,
                      _vec(qmax), minimum, cluster, calc)
    out = np.empty(3)
    out[0], out[1], out[2] = lim
    return out


@helper
def _user_limit(cap: tuple, queue_used: tuple, active_used: tuple, active_w: float,
                mulp: float, ulf: float, qmax: tuple, minimum: np.ndarray,
                cluster: np.ndarray, calc: int) -> tuple[float, float, float]:
    """:func:`user_limit` of 3-tuples (the kernel computes it once per container)."""
    mn = _vec(minimum)
    c = mn if _gt(mn, cap, cluster, calc) else cap
    current = c if _gt(c, queue_used, cluster, calc) else _plus(queue_used, mn)
    w = max(active_w, EPS)
    f = mulp / 100.0
    by_users = ((active_used[0] + mn[0]) / w, (active_used[1] + mn[1]) / w,
                (active_used[2] + mn[2]) / w)
    by_pct = (current[0] * f, current[1] * f, current[2] * f)
    limit = by_pct if _gt(by_pct, by_users, cluster, calc) else by_users
    mx = qmax if ulf < 0 else (c[0] * ulf, c[1] * ulf, c[2] * ulf)
    if _gt(limit, mx, cluster, calc):
        limit = mx
    return _rounded(limit, minimum, calc, True)


@helper
def _fits_path(q: int, r: tuple, q_used: np.ndarray, q_max: np.ndarray,
               q_parent: np.ndarray, cluster: np.ndarray, calc: int) -> bool:
    while q >= 0:
        if _gt(_plus(_row(q_used, q), r), _row(q_max, q), cluster, calc):
            return False
        q = q_parent[q]
    return True


@helper
def _before(a: int, b: int, q_used: np.ndarray, q_guar: np.ndarray, q_prio: np.ndarray,
            use_prio: bool, q_access: np.ndarray, cluster: np.ndarray, calc: int) -> bool:
    """Whether child queue ``a`` goes before ``b`` (PriorityUtilizationQueueOrderingPolicy)."""
    if q_access[a] != q_access[b]:
        return q_access[a]
    ra = _ratio(_row(q_used, a), _row(q_guar, a), cluster, calc)
    rb = _ratio(_row(q_used, b), _row(q_guar, b), cluster, calc)
    if use_prio and q_prio[a] != q_prio[b] and (ra < 1.0) == (rb < 1.0):
        return q_prio[a] > q_prio[b]
    if use_prio and (ra < 1.0) != (rb < 1.0):
        return ra < 1.0
    if abs(ra - rb) > EPS:
        return ra < rb
    total = _vec(cluster)
    ga = _ratio(_row(q_guar, a), total, cluster, calc)
    gb = _ratio(_row(q_guar, b), total, cluster, calc)
    if abs(ga - gb) > EPS:
        return ga > gb
    return a < b


@helper
def _can_activate(leaf, p, r, leaf_apps, leaf_max_apps, pair_apps, leaf_user_max_apps,
                  am_used, am_limit, zero_am, cluster, calc) -> bool:
    """Application limits and the AM limit (the first application of a leaf always starts:
    "skipping enforcement to allow at least one application to start", LeafQueue)."""
    if leaf_apps[leaf] >= leaf_max_apps[leaf] or pair_apps[p] >= leaf_user_max_apps[leaf]:
        return False
    if zero_am and am_used[leaf, 0] <= 0 and am_used[leaf, 1] <= 0 and am_used[leaf, 2] <= 0:
        return True
    return leaf_apps[leaf] == 0 or not _gt(_plus(_row(am_used, leaf), r), _row(am_limit, leaf),
                                           cluster, calc)


@helper
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
def allocate(req, req_idx, app_lo, app_hi, app_pair, app_started, app_used_mem,
             app_demand_mem, leaf_app_lo, leaf_app_hi, pair_used, pair_w, pair_left,
             pair_apps, leaf_q, leaf_cap, leaf_max, leaf_mulp, leaf_ulf, leaf_fair, leaf_sbw,
             leaf_active_used, leaf_active_w, leaf_apps, leaf_max_apps, leaf_user_max_apps,
             am_used, am_limit, q_used, q_guar, q_max, q_parent, q_kids_lo, q_kids, q_prio,
             q_use_prio, q_leaf, q_access, zero_am, free, cluster, minimum, calc, gate, out):
    """Assign containers one by one; write request indices in order to ``out``; return count.

    ``gate`` (a :class:`~pipeline.policies.locality.gate.GateState`, from
    :func:`~pipeline.policies.locality.gate.no_offer` or the offer loop): with its
    ``node`` at -1, containers are chosen against the cluster's ``free`` room and placed
    by the caller.  With a node, this is one heartbeat of that node: ``free`` is ignored, the
    room is the node's, and the chosen application's request comes from the locality gate
    (:func:`pipeline.policies.locality.gate.pick`; an application that lets the offer pass
    is skipped for this heartbeat, as ``RegularContainerAllocator`` returns
    ``LOCALITY_SKIPPED``); ``nxt``, ``done`` and the gate's state persist between offers.
    """
    nd, done, node_free, fit_req = gate.node, gate.asks.done, gate.asks.free, gate.asks.need
    best = np.full(len(app_lo) if nd >= 0 else 0, -1, np.int64)
    touched = np.empty(len(best), np.int64)
    n_touched = 0
    if nd >= 0:
        free = node_free[nd]
        n_touched = refresh_local(gate, best, touched, 0)
    n_q = len(q_parent)
    q_alive = np.zeros(n_q, dtype=np.bool_)
    for leaf in range(len(leaf_q)):
        if leaf_app_hi[leaf] > leaf_app_lo[leaf]:
            q = leaf_q[leaf]
            while q >= 0:
                q_alive[q] = True
                q = q_parent[q]
    blocked = np.zeros(len(app_lo), dtype=np.bool_)
    nxt = app_lo.copy() if nd < 0 else gate.nxt
    first = leaf_app_lo.copy()  # apps before it are done or blocked (skipped for speed)
    n = 0
    while True:
        q = _pick_leaf(q_alive, q_kids_lo, q_kids, q_used, q_guar, q_prio, q_use_prio,
                       q_access, cluster, calc)
        if q < 0:
            break
        leaf = q_leaf[q]
        lim = _user_limit(_row(leaf_cap, leaf), _row(q_used, q), _row(leaf_active_used, leaf),
                          leaf_active_w[leaf], leaf_mulp[leaf], leaf_ulf[leaf],
                          _row(leaf_max, leaf), minimum, cluster, calc)
        i = -1
        typ = -1
        while True:
            # the application of the leaf that gets the next container (-1: none can);
            # applications that cannot take one in this pass are marked ``blocked``.  Kept
            # inline: a call passing these ~30 arrays cost more than the choice itself
            chosen = -1
            best_key = np.inf
            while first[leaf] < leaf_app_hi[leaf] and (
                    blocked[first[leaf]] or nxt[first[leaf]] >= app_hi[first[leaf]]):
                first[leaf] += 1
            for a in range(first[leaf], leaf_app_hi[leaf]):
                if blocked[a] or nxt[a] >= app_hi[a]:
                    continue
                p = app_pair[a]
                w = pair_w[p]
                ulim = _rounded((lim[0] * w, lim[1] * w, lim[2] * w), minimum, calc, False)
                if _gt(_row(pair_used, p), ulim, cluster, calc):
                    continue  # user over its limit (a '>' check: at the limit may take one)
                r = _row(req, req_idx[nxt[a]])
                if not app_started[a] and not _can_activate(
                        leaf, p, r, leaf_apps, leaf_max_apps, pair_apps, leaf_user_max_apps,
                        am_used, am_limit, zero_am, cluster, calc):
                    blocked[a] = True
                    continue
                if (r[0] > free[0] + EPS or r[1] > free[1] + EPS or r[2] > free[2] + EPS
                        or not _fits_path(q, r, q_used, q_max, q_parent, cluster, calc)):
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
            if nd < 0 or chosen < 0:
                break
            # a heartbeat: the gate picks the application's request, or it lets the node pass
            i, typ = pick(gate, chosen, best[chosen], req_idx, nxt[chosen], app_hi[chosen])
            if i >= 0 and _fits_path(q, _row(req, i), q_used, q_max, q_parent, cluster, calc):
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
            taken(gate, i, typ, a)
        r = _row(req, i)
        out[n] = i
        n += 1
        if nd < 0:
            for k in range(3):
                free[k] -= r[k]
            nxt[a] += 1
        else:  # the node holds the raw request too (fit_req: the larger of the two)
            for k in range(3):
                node_free[nd, k] -= fit_req[i, k]
            while nxt[a] < app_hi[a] and done[req_idx[nxt[a]]]:
                nxt[a] += 1
            n_touched = refresh_local(gate, best, touched, n_touched)
        for k in range(3):
            pair_used[p, k] += r[k]
            leaf_active_used[leaf, k] += r[k]
        app_used_mem[a] += r[1]
        up = q
        while up >= 0:
            for k in range(3):
                q_used[up, k] += r[k]
            up = q_parent[up]
        if not app_started[a]:
            app_started[a] = True
            for k in range(3):
                am_used[leaf, k] += r[k]
            leaf_apps[leaf] += 1
            pair_apps[p] += 1
        pair_left[p] -= 1
        if pair_left[p] == 0:  # no more pending: the user stops being active
            for k in range(3):
                leaf_active_used[leaf, k] -= pair_used[p, k]
            leaf_active_w[leaf] -= pair_w[p]
    return n
