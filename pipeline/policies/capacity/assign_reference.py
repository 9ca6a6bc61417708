"""The CapacityScheduler's assignment pass in plain Python: the reference the compiled loop
(:func:`pipeline.policies.capacity.kernel.allocate`, without a node offer) is tested
against (``tests/policies/test_capacity_assign_reference.py``).  A change of behaviour
starts here, then goes to the kernel.

Apache Hadoop 3.3, ResourceManager ``scheduler/capacity``: one container at a time,
``ParentQueue.assignContainers`` descends from the root, offering to the child queues in
``PriorityUtilizationQueueOrderingPolicy`` order (the queues that can access the partition
first; lower used capacity relative to the guarantee first; with ``priority-utilization``
the higher priority first when both are under or both over their guarantee; ties: the
larger guarantee, then configuration order).  In the leaf, ``LeafQueue.assignContainers``
walks the applications in ordering-policy order (FIFO: kernel order; fair: the least memory
used first, divided by ``log2(1 + demand)`` with size-based weight) and skips an
application when

- its user is over the user limit (``UsersManager.computeUserLimit`` times the user's
  weight, rounded down; ``used > limit``, so a user at its limit may take one more);
- it has not started and ``LeafQueue.activateApplications`` would not start it: the leaf or
  the user is at its maximum applications, or its AM would take the leaf over the AM limit
  (the leaf's first application always starts; with ``zero_am`` also one whose leaf has no
  AM use in the partition);
- its next request does not fit the free resources, or would take a queue on the path over
  its maximum capacity (``canAssignToThisQueue``).

Skipped applications of the last two kinds stay skipped for the rest of the pass (they
are *blocked*); a leaf where nothing can be assigned leaves the descent, and so does a
parent all of whose children have.  Vectors are ``(cpu, mem, gpu)``; the default
calculator compares memory only, the dominant one compares cluster shares largest first.
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.policies.capacity.inputs import Apps, Leaves, Queues, Room, Users

EPS = 1e-9  # the tolerance of every comparison (float sums of requests)

Vector = tuple[float, float, float]


def greater_than(a: Vector, b: Vector, room: Room) -> bool:
    """``Resources.greaterThan``: memory, or dominant shares compared largest first."""
    if room.calc == 0:
        return a[1] > b[1] + EPS
    shares_a = sorted((share(a[r], room.cluster[r]) for r in range(3)), reverse=True)
    shares_b = sorted((share(b[r], room.cluster[r]) for r in range(3)), reverse=True)
    for x, y in zip(shares_a, shares_b, strict=True):
        if abs(x - y) > EPS:
            return x > y
    return False


def share(x: float, total: float) -> float:
    """``x`` as a share of ``total`` (0 when there is none)."""
    return x / total if total > 0 else 0.0


def divide(a: Vector, b: Vector, room: Room) -> float:
    """``ResourceCalculator.divide``: the memory ratio, or the ratio of dominant shares."""
    if room.calc == 0:
        return a[1] / b[1] if b[1] > 0 else math.inf
    dominant_a = dominant_b = 0.0
    for r in range(3):
        if room.cluster[r] > 0:
            dominant_a = max(dominant_a, a[r] / room.cluster[r])
            dominant_b = max(dominant_b, b[r] / room.cluster[r])
    return dominant_a / dominant_b if dominant_b > 0 else math.inf


def normalize(x: Vector, room: Room, up: bool) -> Vector:
    """``Resources.roundUp``/``roundDown`` to multiples of the minimum allocation (memory
    only with the default calculator)."""
    out = []
    for r in range(3):
        step = room.minimum[r]
        if step > 0 and (r == 1 or room.calc == 1):
            q = x[r] / step
            out.append(float((np.ceil(q - EPS) if up else np.floor(q + EPS)) * step))
        else:
            out.append(x[r])
    return (out[0], out[1], out[2])


def row(a: np.ndarray, i: int) -> Vector:
    return (float(a[i, 0]), float(a[i, 1]), float(a[i, 2]))


def plus(a: Vector, b: Vector) -> Vector:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def compute_user_limit(leaves: Leaves, queues: Queues, room: Room, leaf: int) -> Vector:
    """``UsersManager.computeUserLimit`` for the active users of ``leaf`` (the request
    assumed to be one minimum allocation)."""
    q = int(leaves.q[leaf])
    minimum = (float(room.minimum[0]), float(room.minimum[1]), float(room.minimum[2]))
    capacity = row(leaves.cap, leaf)
    if greater_than(minimum, capacity, room):
        capacity = minimum  # "miniscule capacity"
    used = row(queues.used, q)
    current = capacity if greater_than(capacity, used, room) else plus(used, minimum)
    active_used = row(leaves.active_used, leaf)
    weight = max(float(leaves.active_w[leaf]), EPS)
    by_users = tuple((active_used[r] + minimum[r]) / weight for r in range(3))
    factor = leaves.mulp[leaf] / 100.0
    by_percent = tuple(current[r] * factor for r in range(3))
    limit = by_percent if greater_than(by_percent, by_users, room) else by_users
    ulf = leaves.ulf[leaf]
    cap = row(leaves.max, leaf) if ulf < 0 else tuple(capacity[r] * ulf for r in range(3))
    if greater_than(limit, cap, room):
        limit = cap
    return normalize(limit, room, up=True)


def activate(leaves: Leaves, users: Users, leaf: int, pair: int, am: Vector,
             room: Room) -> bool:
    """Whether ``LeafQueue.activateApplications`` starts an application whose AM is
    ``am``: application limits, then the AM limit ("skipping enforcement to allow at least
    one application to start" when the leaf has none)."""
    if leaves.apps[leaf] >= leaves.max_apps[leaf]:
        return False
    if users.apps[pair] >= leaves.user_max_apps[leaf]:
        return False
    am_used = row(leaves.am_used, leaf)
    if room.zero_am and all(x <= 0 for x in am_used):
        return True
    if leaves.apps[leaf] == 0:
        return True
    return not greater_than(plus(am_used, am), row(leaves.am_limit, leaf), room)


def can_assign_to_queue(queues: Queues, room: Room, q: int, r: Vector) -> bool:
    """``canAssignToThisQueue`` up the path: no queue over its maximum capacity."""
    while q >= 0:
        if greater_than(plus(row(queues.used, q), r), row(queues.max, q), room):
            return False
        q = int(queues.parent[q])
    return True


def queue_before(queues: Queues, room: Room, parent: int, a: int, b: int) -> bool:
    """``PriorityUtilizationQueueOrderingPolicy``: whether child ``a`` goes before ``b``."""
    if queues.access[a] != queues.access[b]:
        return bool(queues.access[a])
    used_a = divide(row(queues.used, a), row(queues.guar, a), room)
    used_b = divide(row(queues.used, b), row(queues.guar, b), room)
    same_side = (used_a < 1.0) == (used_b < 1.0)  # both under, or both over, the guarantee
    if queues.use_prio[parent] and same_side and queues.prio[a] != queues.prio[b]:
        return bool(queues.prio[a] > queues.prio[b])
    if queues.use_prio[parent] and (used_a < 1.0) != (used_b < 1.0):
        return used_a < 1.0
    if abs(used_a - used_b) > EPS:
        return used_a < used_b
    total = row(room.cluster[None, :], 0)
    guar_a = divide(row(queues.guar, a), total, room)
    guar_b = divide(row(queues.guar, b), total, room)
    if abs(guar_a - guar_b) > EPS:
        return guar_a > guar_b
    return a < b


def children(queues: Queues, q: int) -> list[int]:
    return [int(c) for c in queues.kids[queues.kids_lo[q]:queues.kids_lo[q + 1]]]


def assign_containers(apps: Apps, users: Users, leaves: Leaves, queues: Queues,
                      room: Room) -> list[int]:
    """The requests assigned, in order; the arrays marked *updated* in
    :mod:`.inputs` are updated as the kernel updates them."""
    next_ask = [int(x) for x in apps.lo]  # each application's next request (position)
    blocked = [False] * len(apps.lo)
    alive = [False] * len(queues.parent)  # a queue with an application left to offer to
    for leaf in range(len(leaves.q)):
        if apps.leaf_hi[leaf] > apps.leaf_lo[leaf]:
            q = int(leaves.q[leaf])
            while q >= 0:
                alive[q] = True
                q = int(queues.parent[q])
    assigned: list[int] = []
    while True:
        q = 0  # ParentQueue.assignContainers: descend to a leaf
        while children(queues, q):
            best = -1
            for c in children(queues, q):
                if alive[c] and (best < 0 or queue_before(queues, room, q, c, best)):
                    best = c
            q = best
            if q < 0:
                break
        if q < 0:
            return assigned
        leaf = int(queues.leaf[q])
        a = leaf_assign(apps, users, leaves, queues, room, leaf, next_ask, blocked)
        if a < 0:  # nothing in this leaf: it and the parents left with nothing leave
            alive[q] = False
            up = int(queues.parent[q])
            while up >= 0 and not any(alive[c] for c in children(queues, up)):
                alive[up] = False
                up = int(queues.parent[up])
            continue
        i = int(apps.req_idx[next_ask[a]])
        next_ask[a] += 1
        assigned.append(i)
        allocate_resource(apps, users, leaves, queues, room, leaf, a, row(apps.req, i))


def leaf_assign(apps: Apps, users: Users, leaves: Leaves, queues: Queues, room: Room,
                leaf: int, next_ask: list[int], blocked: list[bool]) -> int:
    """``LeafQueue.assignContainers``: the application that gets the next container
    (-1: none can)."""
    limit = compute_user_limit(leaves, queues, room, leaf)
    q = int(leaves.q[leaf])
    chosen, best_key = -1, math.inf
    for a in range(int(apps.leaf_lo[leaf]), int(apps.leaf_hi[leaf])):
        if blocked[a] or next_ask[a] >= apps.hi[a]:
            continue
        pair = int(apps.pair[a])
        weight = users.w[pair]
        user_limit = normalize(tuple(limit[r] * weight for r in range(3)), room, up=False)
        if greater_than(row(users.used, pair), user_limit, room):
            continue  # over the user limit: skipped, not blocked (another user may go)
        r = row(apps.req, int(apps.req_idx[next_ask[a]]))
        if not apps.started[a] and not activate(leaves, users, leaf, pair, r, room):
            blocked[a] = True
            continue
        fits = all(r[k] <= room.free[k] + EPS for k in range(3))
        if not fits or not can_assign_to_queue(queues, room, q, r):
            blocked[a] = True
            continue
        if not leaves.fair[leaf]:
            return a  # FIFO: the first application that can take one
        key = apps.used_mem[a]
        if leaves.sbw[leaf]:
            key = key / max(np.log2(1.0 + apps.demand_mem[a]), EPS)
        if key < best_key - EPS:
            chosen, best_key = a, key
    return chosen


def allocate_resource(apps: Apps, users: Users, leaves: Leaves, queues: Queues, room: Room,
                      leaf: int, a: int, r: Vector) -> None:
    """``LeafQueue.allocateResource`` of container ``r`` for application ``a``: its user,
    leaf, queues and the free room; the first container is the AM (the application
    starts); a user with no request left stops being active."""
    pair = int(apps.pair[a])
    for k in range(3):
        room.free[k] -= r[k]
        users.used[pair, k] += r[k]
        leaves.active_used[leaf, k] += r[k]
    apps.used_mem[a] += r[1]
    q = int(leaves.q[leaf])
    while q >= 0:
        for k in range(3):
            queues.used[q, k] += r[k]
        q = int(queues.parent[q])
    if not apps.started[a]:
        apps.started[a] = True
        for k in range(3):
            leaves.am_used[leaf, k] += r[k]
        leaves.apps[leaf] += 1
        users.apps[pair] += 1
    users.left[pair] -= 1
    if users.left[pair] == 0:
        for k in range(3):
            leaves.active_used[leaf, k] -= users.used[pair, k]
        leaves.active_w[leaf] -= users.w[pair]
