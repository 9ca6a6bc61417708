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

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.capacity.inputs import Apps, Leaves, Queues, Room, Users
from pipeline.policies.capacity.vectors import (
    EPS,
    exceeds,
    plus,
    ratio_of,
    rounded,
    row,
    user_limit_of,
    vec,
)
from pipeline.policies.locality.gate import (
    GateState,
    named_gate,
    pick,
    plain_gate,
    refresh_local,
    taken,
)
from pipeline.sim.jit import helper, inlined


@inlined
def _leaf_user_limit(leaves: Leaves, queues: Queues, room: Room, leaf: int,
                     q: int) -> tuple[float, float, float]:
    """The active-users user limit of ``leaf`` (queue ``q``) now."""
    return user_limit_of(row(leaves.cap, leaf), row(queues.used, q),
                       row(leaves.active_used, leaf), leaves.active_w[leaf],
                       leaves.mulp[leaf], leaves.ulf[leaf], row(leaves.max, leaf),
                       room.minimum, room.cluster, room.calc)


@inlined
def _fits_path(q: int, r: tuple, queues: Queues, room: Room) -> bool:
    """Whether ``r`` keeps ``q`` and its ancestors within their maximum capacity."""
    while q >= 0:
        if exceeds(plus(row(queues.used, q), r), row(queues.max, q), room.cluster, room.calc):
            return False
        q = queues.parent[q]
    return True


@inlined
def _before(a: int, b: int, queues: Queues, use_prio: bool, room: Room) -> bool:
    """Whether child queue ``a`` goes before ``b`` (PriorityUtilizationQueueOrderingPolicy)."""
    access, cluster, calc = queues.access, room.cluster, room.calc
    if access[a] != access[b]:
        return access[a]
    ra = ratio_of(row(queues.used, a), row(queues.guar, a), cluster, calc)
    rb = ratio_of(row(queues.used, b), row(queues.guar, b), cluster, calc)
    prio = queues.prio
    if use_prio and prio[a] != prio[b] and (ra < 1.0) == (rb < 1.0):
        return prio[a] > prio[b]
    if use_prio and (ra < 1.0) != (rb < 1.0):
        return ra < 1.0
    if abs(ra - rb) > EPS:
        return ra < rb
    total = vec(cluster)
    ga = ratio_of(row(queues.guar, a), total, cluster, calc)
    gb = ratio_of(row(queues.guar, b), total, cluster, calc)
    if abs(ga - gb) > EPS:
        return ga > gb
    return a < b


@inlined
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
    return leaves.apps[leaf] == 0 or not exceeds(plus(row(am_used, leaf), r),
                                             row(leaves.am_limit, leaf), room.cluster,
                                             room.calc)


@inlined
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


@inlined
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


@inlined
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


@inlined
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
        ulim = rounded((lim[0] * w, lim[1] * w, lim[2] * w), room.minimum, calc, False)
        if exceeds(row(users.used, p), ulim, cluster, calc):
            continue  # user over its limit (a '>' check: at the limit may take one)
        r = row(apps.req, apps.req_idx[nxt[a]])
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


class Work(NamedTuple):
    """One :func:`allocate` call's working arrays."""

    free: np.ndarray  # (3,) float: the room containers are fitted against (a node's row)
    best: np.ndarray  # (apps,) int: node-local request per application (a heartbeat), -1
    touched: np.ndarray  # (apps,) int: applications with an entry in ``best``
    q_alive: np.ndarray  # (queues,) bool: a leaf under the queue may take more
    blocked: np.ndarray  # (apps,) bool: the application takes nothing more in this call
    nxt: np.ndarray  # (apps,) int: next position in ``apps.req_idx``
    first: np.ndarray  # (leaves,) int: applications before it are done or blocked


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
    nd = gate.node
    best = np.full(len(apps.lo) if nd >= 0 else 0, -1, np.int64)
    touched = np.empty(len(best), np.int64)
    n_touched = refresh_local(gate, best, touched, 0) if nd >= 0 else 0
    work = Work(room.free if nd < 0 else gate.asks.free[nd], best, touched,
                _alive_queues(apps, leaves, queues), np.zeros(len(apps.lo), dtype=np.bool_),
                apps.lo.copy() if nd < 0 else gate.nxt, apps.leaf_lo.copy())
    return _assign(apps, users, leaves, queues, room, gate, work, n_touched, out)


@helper
def _assign(apps: Apps, users: Users, leaves: Leaves, queues: Queues, room: Room,
            gate: GateState, work: Work, n_touched: int, out: np.ndarray) -> int:
    """:func:`allocate`'s loop: a :func:`helper`, so the inlined steps read the structures'
    arrays without reference counting."""
    nd, done, node_free, fit_req = gate.node, gate.asks.done, gate.asks.free, gate.asks.need
    req, req_idx, app_hi = apps.req, apps.req_idx, apps.hi
    free, best, touched, q_alive, blocked, nxt, first = work
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
            if i >= 0 and _fits_path(q, row(req, i), queues, room):
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
        r = row(req, i)
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


def assign(apps: Apps, users: Users, leaves: Leaves, queues: Queues, room: Room,
           gate: GateState, out: np.ndarray) -> int:
    """:func:`allocate` called from Python.  The structures cross into compiled code as
    plain tuples and are named again on entry: numba's dispatcher reads a plain tuple of
    arrays in C, a NamedTuple field by field (this call's arguments: 32 us as NamedTuples,
    11 us plain, per scheduling call)."""
    return _allocate_plain(tuple(apps), tuple(users), tuple(leaves), tuple(queues),
                           tuple(room), plain_gate(gate), out)


@njit(cache=True)
def _allocate_plain(apps, users, leaves, queues, room, gate, out):
    """:func:`allocate` on :func:`assign`'s plain tuples."""
    return allocate(Apps(*apps), Users(*users), Leaves(*leaves), Queues(*queues), Room(*room),
                    named_gate(gate), out)
