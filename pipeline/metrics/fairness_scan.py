"""The compiled part of :mod:`pipeline.metrics.fairness`: per-user demand, allocation and
capacity at given evaluation times, and both Jain indices there (:func:`jain_at`, the one
evaluation routine of both ways of getting that state).

The *scan* (:func:`weighted_jain`, exact evaluation of small runs) replays events in time
order.  They come as five streams, each sorted by time: tasks becoming ready, tasks starting,
tasks ending, nodes becoming ready, nodes going down (stream k holds
``times[bounds[k]:bounds[k+1]]``).  They are merged on the fly; at equal times the streams
are taken in that order, so a task is always ready before it starts and starts before it
ends.

The *slices* (:func:`scatter`, :func:`cumulate`, :func:`block_jain`, any run) need no order:
each task adds its requests to a difference array over evaluation points at the first point
at or after it becomes ready (or starts) and takes them off at the first point at or after it
ends, so a running sum over the points gives the state after every event at or before each
point, as the scan does.  Points are handled in blocks, the running sums carried from block
to block, so memory is bounded by users x block, whatever the number of tasks.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.metrics.drf import fair_levels

READY, START, END, NODE_UP, NODE_DOWN = range(5)
# Slots of the ``counts`` array of the state.
NODES_UP, RUNNING, ACTIVE = range(3)


@njit(cache=True)
def new_state(n_users: int, n_res: int) -> tuple:
    """Per-user demand and allocation, their task counts, the active-user list with each
    user's position in it (-1 = inactive), capacity, total allocation and counts."""
    return (np.zeros((n_users, n_res)), np.zeros((n_users, n_res)),
            np.zeros(n_users, np.int64), np.zeros(n_users, np.int64),
            np.zeros(n_users, np.int64), np.full(n_users, -1, np.int64),
            np.zeros(n_res), np.zeros(n_res), np.zeros(3, np.int64))


@njit(cache=True)
def _activate(u: int, active: np.ndarray, pos: np.ndarray, counts: np.ndarray) -> None:
    pos[u] = counts[ACTIVE]
    active[counts[ACTIVE]] = u
    counts[ACTIVE] += 1


@njit(cache=True)
def _deactivate(u: int, active: np.ndarray, pos: np.ndarray, counts: np.ndarray) -> None:
    last = active[counts[ACTIVE] - 1]
    active[pos[u]] = last
    pos[last] = pos[u]
    pos[u] = -1
    counts[ACTIVE] -= 1


@njit(cache=True)
def _next_stream(times: np.ndarray, heads: np.ndarray, bounds: np.ndarray) -> int:
    """The stream whose next event comes first (lowest stream on ties), -1 when all done."""
    best = -1
    for k in range(heads.shape[0]):
        if heads[k] < bounds[k + 1] and (best < 0 or times[heads[k]] < times[heads[best]]):
            best = k
    return best


@njit(cache=True)
def advance(until: float, times: np.ndarray, refs: np.ndarray, bounds: np.ndarray,
            heads: np.ndarray, tasks: tuple, node_cap: np.ndarray, state: tuple) -> None:
    """Apply every event at or before ``until`` not applied yet (``heads``: each stream's
    next event).  Sums go back to exactly 0 when nothing is left in them, so the drift of
    millions of float additions and subtractions does not build up.  One loop, with no
    array-passing calls on the common paths: this is the hot part of the scan."""
    task_user, task_req, task_ran = tasks
    demand, alloc, n_demand, n_running, active, pos, cap, held, counts = state
    k = _next_stream(times, heads, bounds)
    while k >= 0 and times[heads[k]] <= until:
        ref = refs[heads[k]]
        heads[k] += 1
        if k >= NODE_UP:  # NODE_UP or NODE_DOWN
            step = 1 if k == NODE_UP else -1
            counts[NODES_UP] += step
            for r in range(cap.shape[0]):
                cap[r] = cap[r] + step * node_cap[ref, r] if counts[NODES_UP] > 0 else 0.0
        else:
            u = task_user[ref]
            if k == READY:
                if n_demand[u] == 0:
                    _activate(u, active, pos, counts)
                n_demand[u] += 1
                for r in range(demand.shape[1]):
                    demand[u, r] += task_req[ref, r]
            if k == START or (k == END and task_ran[ref]):
                step = 1 if k == START else -1
                n_running[u] += step
                counts[RUNNING] += step
                for r in range(held.shape[0]):  # back to exact 0 when nothing is left
                    amount = step * task_req[ref, r]
                    alloc[u, r] = alloc[u, r] + amount if n_running[u] > 0 else 0.0
                    held[r] = held[r] + amount if counts[RUNNING] > 0 else 0.0
            if k == END:
                n_demand[u] -= 1
                for r in range(demand.shape[1]):
                    demand[u, r] = demand[u, r] - task_req[ref, r] if n_demand[u] > 0 else 0.0
                if n_demand[u] == 0:
                    _deactivate(u, active, pos, counts)
        k = _next_stream(times, heads, bounds)


@njit(cache=True)
def _dominant(amount: np.ndarray, cap: np.ndarray) -> float:
    """The largest share of ``cap`` that ``amount`` takes (inf: asks for what is absent)."""
    share = 0.0
    for r in range(cap.shape[0]):
        if amount[r] > 0.0:
            share = max(share, amount[r] / cap[r] if cap[r] > 0.0 else np.inf)
    return share


@njit(cache=True)
def jain_at(demand: np.ndarray, alloc: np.ndarray, active: np.ndarray, m: int,
            cap: np.ndarray, held: np.ndarray, eff: np.ndarray, share: np.ndarray,
            level: np.ndarray) -> tuple[float, float]:
    """(J against DRF fair shares, J against equal shares) of the ``m`` active users
    ``active[:m]`` given per-user ``demand`` and ``alloc`` rows, the nodes' capacity ``cap``
    and the total allocation ``held``; -1.0 where undefined.  ``eff``, ``share`` and
    ``level`` are work arrays (resources, users x resources, users)."""
    for r in range(cap.shape[0]):
        eff[r] = max(cap[r], held[r])  # a policy that over-commits gave out more
    for k in range(m):
        u = active[k]
        for r in range(cap.shape[0]):
            d = demand[u, r]
            share[k, r] = 0.0 if d <= 0.0 else (d / eff[r] if eff[r] > 0.0 else np.inf)
    fair_levels(share[:m], level[:m])
    f1 = f2 = e1 = e2 = 0.0
    n_fair = 0
    for k in range(m):
        x = _dominant(alloc[active[k]], eff)
        e1 += x
        e2 += x * x
        if level[k] > 0.0:
            n_fair += 1
            f1 += x / level[k]
            f2 += (x / level[k]) ** 2
    fair = f1 * f1 / (n_fair * f2) if f2 > 0.0 else -1.0
    equal = e1 * e1 / (m * e2) if e2 > 0.0 else -1.0
    return fair, equal


@njit(cache=True)
def _add(sums: np.ndarray, fair: float, equal: float, weight: float) -> None:
    """Add one evaluation to [sum J_fair w, sum w, sum J_equal w, sum w] where defined."""
    if fair >= 0.0:
        sums[0] += fair * weight
        sums[1] += weight
    if equal >= 0.0:
        sums[2] += equal * weight
        sums[3] += weight


@njit(cache=True)
def weighted_jain(times: np.ndarray, refs: np.ndarray, bounds: np.ndarray,
                  task_user: np.ndarray, task_req: np.ndarray, task_ran: np.ndarray,
                  node_cap: np.ndarray, n_users: int, at: np.ndarray,
                  weight: np.ndarray) -> np.ndarray:
    """[sum J_fair w, sum w, sum J_equal w, sum w] over evaluation times ``at`` (the state
    after every event at or before each), skipping times where an index is undefined."""
    n_res = task_req.shape[1]
    state = new_state(n_users, n_res)
    demand, alloc, _, _, active, _, cap, held, counts = state
    eff, share, level = np.zeros(n_res), np.zeros((n_users, n_res)), np.zeros(n_users)
    heads = bounds[:-1].copy()
    sums = np.zeros(4)
    tasks = (task_user, task_req, task_ran)
    for e in range(at.shape[0]):
        advance(at[e], times, refs, bounds, heads, tasks, node_cap, state)
        if counts[ACTIVE] == 0:
            continue
        fair, equal = jain_at(demand, alloc, active, counts[ACTIVE], cap, held, eff, share,
                              level)
        _add(sums, fair, equal, weight[e])
    return sums


@njit(cache=True)
def scatter(lo: np.ndarray, hi: np.ndarray, group: np.ndarray, amount: np.ndarray,
            b0: int, diff: np.ndarray, count: np.ndarray) -> None:
    """Add row i's ``amount`` (and 1 to its count) to ``group[i]`` over evaluation points
    ``lo[i] <= e < hi[i]``, as differences at ``lo`` and ``hi``: only those falling in the
    block of points ``b0 .. b0 + len(diff) - 1`` (``diff``: block x groups x resources)."""
    n = diff.shape[0]
    for i in range(lo.shape[0]):
        a, b, g = lo[i] - b0, hi[i] - b0, group[i]
        if lo[i] >= hi[i]:
            continue  # over before the next evaluation point
        if 0 <= a < n:
            count[a, g] += 1
            for r in range(diff.shape[2]):
                diff[a, g, r] += amount[i, r]
        if 0 <= b < n:
            count[b, g] -= 1
            for r in range(diff.shape[2]):
                diff[b, g, r] -= amount[i, r]


@njit(cache=True)
def cumulate(diff: np.ndarray, count: np.ndarray, carry: np.ndarray,
             carry_count: np.ndarray) -> None:
    """Turn a block of differences into the running sums in place, starting from the
    previous block's last sums ``carry`` (updated to this block's last).  A sum goes back to
    exactly 0 where its count does, as in the scan, so rounding does not build up."""
    for e in range(diff.shape[0]):
        for g in range(diff.shape[1]):
            c = carry_count[g] + count[e, g]
            carry_count[g] = c
            count[e, g] = c
            for r in range(diff.shape[2]):
                v = carry[g, r] + diff[e, g, r] if c > 0 else 0.0
                carry[g, r] = v
                diff[e, g, r] = v


@njit(cache=True)
def block_jain(demand: np.ndarray, alloc: np.ndarray, n_demand: np.ndarray,
               cap: np.ndarray, weight: np.ndarray, sums: np.ndarray) -> None:
    """Add a block of evaluation points to ``sums`` (see :func:`weighted_jain`), from the
    running sums per point of users' ``demand`` and ``alloc`` (points x users x resources),
    their demanding-task counts ``n_demand`` and the nodes' capacity ``cap`` (points x 1 x
    resources).  The total allocation is the sum over active users: a task holds only while
    it demands."""
    n_users, n_res = demand.shape[1], demand.shape[2]
    eff, share, level = np.zeros(n_res), np.zeros((n_users, n_res)), np.zeros(n_users)
    active, held = np.zeros(n_users, np.int64), np.zeros(n_res)
    for e in range(demand.shape[0]):
        m = 0
        held[:] = 0.0
        for u in range(n_users):
            if n_demand[e, u] > 0:
                active[m] = u
                m += 1
                for r in range(n_res):
                    held[r] += alloc[e, u, r]
        if m == 0:
            continue
        fair, equal = jain_at(demand[e], alloc[e], active, m, cap[e, 0], held, eff, share,
                              level)
        _add(sums, fair, equal, weight[e])
