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
(:mod:`.passes`): vectors are then the partition's, ``queues.access`` puts the queues that can
access the partition first (``PriorityUtilizationQueueOrderingPolicy.
compareQueueAccessToPartition``; all true for DEFAULT), and ``room.zero_am`` applies
``LeafQueue.activateApplications``' other exemption: an application also starts when the
leaf's AM use *in that partition* is zero.

Vectors are ``(cpu, mem, gpu)``; ``room.calc`` is 0 for the default (memory-only) calculator
and 1 for the dominant one.  The state is the named structures of :mod:`.inputs`;
:mod:`.assign_reference` is the same pass in plain Python (the differential test's
reference).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.policies.capacity.inputs import Apps, Leaves, Queues, Room, Users
from pipeline.policies.locality.gate import GateState, pick, refresh_local, taken
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
    """The active-users user limit of a leaf queue (``UsersManager.computeUserLimit``,
    Hadoop 3.3): the one definition, shared by the assignment loop (:func:`_user_limit`),
    the preemption monitor's pending demand (:mod:`.pending`) and the tests.

    ``cap`` is the queue's guaranteed resource, ``queue_used`` what all its users use,
    ``active_used`` what its active users (with pending requests) use and ``active_w`` the
    sum of their weights; ``mulp`` minimum-user-limit-percent, ``ulf`` user-limit-factor
    (< 0: off, capped by the queue's maximum ``qmax``).  As in Hadoop 3.3 the request is
    assumed to be one minimum allocation; per user, multiply by the user's weight and round
    *down* (:func:`~pipeline.policies.capacity.formulas.user_specific_limit`).
    """
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
    c = mn if _gt(mn, cap, cluster, calc) else cap  # "miniscule capacity"
    current = c if _gt(c, queue_used, cluster, calc) else _plus(queue_used, mn)
    w = max(active_w, EPS)
    f = mulp / 100.0
    # divideAndCeil rounds to whole MB/vcores; in the trace's float units that is a no-op
    # next to the final round-up to the minimum allocation.
    by_users = ((active_used[0] + mn[0]) / w, (active_used[1] + mn[1]) / w,
                (active_used[2] + mn[2]) / w)
    by_pct = (current[0] * f, current[1] * f, current[2] * f)
    limit = by_pct if _gt(by_pct, by_users, cluster, calc) else by_users
    mx = qmax if ulf < 0 else (c[0] * ulf, c[1] * ulf, c[2] * ulf)
    if _gt(limit, mx, cluster, calc):
        limit = mx
    return _rounded(limit, minimum, calc, True)


@helper
def _leaf_user_limit(leaves: Leaves, queues: Queues, room: Room, leaf: int,
                     q: int) -> tuple[float, float, float]:
    """The active-users user limit of ``leaf`` (queue ``q``) now."""
    return _user_limit(_row(leaves.cap, leaf), _row(queues.used, q),
                       _row(leaves.active_used, leaf), leaves.active_w[leaf],
                       leaves.mulp[leaf], leaves.ulf[leaf], _row(leaves.max, leaf),
                       room.minimum, room.cluster, room.calc)


@helper
def _fits_path(q: int, r: tuple, queues: Queues, room: Room) -> bool:
    """Whether ``r`` keeps ``q`` and its ancestors within their maximum capacity."""
    while q >= 0:
        if _gt(_plus(_row(queues.used, q), r), _row(queues.max, q), room.cluster, room.calc):
            return False
        q = queues.parent[q]
    return True


@helper
def _before(a: int, b: int, queues: Queues, use_prio: bool, room: Room) -> bool:
    """Whether child queue ``a`` goes before ``b`` (PriorityUtilizationQueueOrderingPolicy)."""
    access, cluster, calc = queues.access, room.cluster, room.calc
    if access[a] != access[b]:
        return access[a]
    ra = _ratio(_row(queues.used, a), _row(queues.guar, a), cluster, calc)
    rb = _ratio(_row(queues.used, b), _row(queues.guar, b), cluster, calc)
    prio = queues.prio
    if use_prio and prio[a] != prio[b] and (ra < 1.0) == (rb < 1.0):
        return prio[a] > prio[b]
    if use_prio and (ra < 1.0) != (rb < 1.0):
        return ra < 1.0
    if abs(ra - rb) > EPS:
        return ra < rb
    total = _vec(cluster)
    ga = _ratio(_row(queues.guar, a), total, cluster, calc)
    gb = _ratio(_row(queues.guar, b), total, cluster, calc)
    if abs(ga - gb) > EPS:
        return ga > gb
    return a < b


@helper
def _can_activate(leaves: Leaves, users: Users, leaf: int, p: int, r: tuple,
                  room: Room) -> bool:
    """Application limits and the AM limit (the first application of a leaf always starts:
    "skipping enforcement to allow at least one application to start", LeafQueue)."""
    if (leaves.apps[leaf] >= leaves.max_apps[leaf]
            or users.apps[p] >= leaves.user_max_apps[leaf]):
        return False
    am_used = leaves.am_used
    if (room.zero_am and am_used[leaf, 0] <= 0 and am_used[leaf, 1] <= 0
            and am_used[leaf, 2] <= 0):
        return True
    return leaves.apps[leaf] == 0 or not _gt(_plus(_row(am_used, leaf), r),
                                             _row(leaves.am_limit, leaf), room.cluster,
                                             room.calc)


@helper
def _pick_leaf(q_alive: np.ndarray, queues: Queues, room: Room) -> int:
    """Descend from the root to the leaf queue that gets the next container (-1: none)."""
    q = 0
    kids_lo, kids = queues.kids_lo, queues.kids
    while kids_lo[q + 1] > kids_lo[q]:
        best = -1
        for k in range(kids_lo[q], kids_lo[q + 1]):
            c = kids[k]
            if q_alive[c] and (best < 0 or _before(c, best, queues, queues.use_prio[q], room)):
                best = c
        if best < 0:
            return -1
        q = best
    return q


@njit(cache=True)
def _alive_queues(apps: Apps, leaves: Leaves, queues: Queues) -> np.ndarray:
    """Per queue: whether a leaf under it has applications in this pass."""
    q_alive = np.zeros(len(queues.parent), dtype=np.bool_)
    for leaf in range(len(leaves.q)):
        if apps.leaf_hi[leaf] > apps.leaf_lo[leaf]:
            q = leaves.q[leaf]
            while q >= 0:
                q_alive[q] = True
                q = queues.parent[q]
    return q_alive


@helper
def _retire(q: int, q_alive: np.ndarray, queues: Queues) -> None:
    """Leaf queue ``q`` can take nothing more in this pass: so can every ancestor whose
    children all cannot."""
    q_alive[q] = False
    up = queues.parent[q]
    while up >= 0:
        alive = False
        for k in range(queues.kids_lo[up], queues.kids_lo[up + 1]):
            alive = alive or q_alive[queues.kids[k]]
        if alive:
            break
        q_alive[up] = False
        up = queues.parent[up]


@helper
def _account(apps: Apps, users: Users, leaves: Leaves, queues: Queues, leaf: int, q: int,
             a: int, r: tuple) -> None:
    """Charge container ``r`` of application ``a`` (leaf ``leaf``, queue ``q``) to its
    user, leaf and queues; its first container is the AM (the application starts)."""
    p = apps.pair[a]
    for k in range(3):
        users.used[p, k] += r[k]
        leaves.active_used[leaf, k] += r[k]
    apps.used_mem[a] += r[1]
    up = q
    while up >= 0:
        for k in range(3):
            queues.used[up, k] += r[k]
        up = queues.parent[up]
    if not apps.started[a]:
        apps.started[a] = True
        for k in range(3):
            leaves.am_used[leaf, k] += r[k]
        leaves.apps[leaf] += 1
        users.apps[p] += 1
    users.left[p] -= 1
    if users.left[p] == 0:  # no more pending: the user stops being active
        for k in range(3):
            leaves.active_used[leaf, k] -= users.used[p, k]
        leaves.active_w[leaf] -= users.w[p]


@helper
def _leaf_choice(apps: Apps, users: Users, leaves: Leaves, queues: Queues, room: Room,
                 free: np.ndarray, blocked: np.ndarray, nxt: np.ndarray, first: np.ndarray,
                 leaf: int) -> int:
    """The application of ``leaf`` that gets the next container (-1: none can), in the
    leaf's ordering-policy order; applications that cannot take one in this pass are
    marked ``blocked`` (a user over its limit is only skipped).  ``free``: the room to
    fit; ``nxt``: each application's next position in ``apps.req_idx``; ``first``: per
    leaf, the applications before it are done or blocked (skipped for speed)."""
    q, cluster, calc, app_hi = leaves.q[leaf], room.cluster, room.calc, apps.hi
    lim = _leaf_user_limit(leaves, queues, room, leaf, q)
    chosen = -1
    best_key = np.inf
    while first[leaf] < apps.leaf_hi[leaf] and (
            blocked[first[leaf]] or nxt[first[leaf]] >= app_hi[first[leaf]]):
        first[leaf] += 1
    for a in range(first[leaf], apps.leaf_hi[leaf]):
        if blocked[a] or nxt[a] >= app_hi[a]:
            continue
        p = apps.pair[a]
        w = users.w[p]
        ulim = _rounded((lim[0] * w, lim[1] * w, lim[2] * w), room.minimum, calc, False)
        if _gt(_row(users.used, p), ulim, cluster, calc):
            continue  # user over its limit (a '>' check: at the limit may take one)
        r = _row(apps.req, apps.req_idx[nxt[a]])
        if not apps.started[a] and not _can_activate(leaves, users, leaf, p, r, room):
            blocked[a] = True
            continue
        if (r[0] > free[0] + EPS or r[1] > free[1] + EPS or r[2] > free[2] + EPS
                or not _fits_path(q, r, queues, room)):
            blocked[a] = True
            continue
        if not leaves.fair[leaf]:
            return a  # FIFO: the first that can take one
        key = apps.used_mem[a]
        if leaves.sbw[leaf]:
            key = key / max(np.log2(1.0 + apps.demand_mem[a]), EPS)
        if key < best_key - EPS:
            best_key = key
            chosen = a
    return chosen


@njit(cache=True)
def allocate(apps: Apps, users: Users, leaves: Leaves, queues: Queues, room: Room,
             gate: GateState, out: np.ndarray) -> int:
    """Assign containers one by one; write request indices in order to ``out``; return count.

    ``gate`` (a :class:`~pipeline.policies.locality.gate.GateState`, from
    :func:`~pipeline.policies.locality.gate.no_offer` or the offer loop): with its
    ``node`` at -1, containers are chosen against ``room.free`` and placed by the caller.
    With a node, this is one heartbeat of that node: ``room.free`` is ignored, the room is
    the node's, and the chosen application's request comes from the locality gate
    (:func:`pipeline.policies.locality.gate.pick`; an application that lets the offer pass
    is skipped for this heartbeat, as ``RegularContainerAllocator`` returns
    ``LOCALITY_SKIPPED``); ``nxt``, ``done`` and the gate's state persist between offers.
    """
    nd, done, node_free, fit_req = gate.node, gate.asks.done, gate.asks.free, gate.asks.need
    req, req_idx, app_hi = apps.req, apps.req_idx, apps.hi
    best = np.full(len(apps.lo) if nd >= 0 else 0, -1, np.int64)
    touched = np.empty(len(best), np.int64)
    n_touched = 0
    free = room.free
    if nd >= 0:
        free = node_free[nd]
        n_touched = refresh_local(gate, best, touched, 0)
    q_alive = _alive_queues(apps, leaves, queues)
    blocked = np.zeros(len(apps.lo), dtype=np.bool_)
    nxt = apps.lo.copy() if nd < 0 else gate.nxt
    first = apps.leaf_lo.copy()  # apps before it are done or blocked (skipped for speed)
    n = 0
    while True:
        q = _pick_leaf(q_alive, queues, room)
        if q < 0:
            break
        leaf = queues.leaf[q]
        i = -1
        typ = -1
        while True:
            chosen = _leaf_choice(apps, users, leaves, queues, room, free, blocked, nxt,
                                  first, leaf)
            if nd < 0 or chosen < 0:
                break
            # a heartbeat: the gate picks the application's request, or it lets the node pass
            i, typ = pick(gate, chosen, best[chosen], req_idx, nxt[chosen], app_hi[chosen])
            if i >= 0 and _fits_path(q, _row(req, i), queues, room):
                break
            blocked[chosen] = True  # the next application in the leaf's order
        if chosen < 0:
            _retire(q, q_alive, queues)
            continue
        a = chosen
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
        _account(apps, users, leaves, queues, leaf, q, a, r)
    return n
