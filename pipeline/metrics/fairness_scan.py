"""The compiled part of :mod:`pipeline.metrics.fairness`: replay demand, allocation and
capacity changes in time order and evaluate both Jain indices at given times.

Events come as five streams, each sorted by time: tasks becoming ready, tasks starting,
tasks ending, nodes becoming ready, nodes going down (stream k holds
``times[bounds[k]:bounds[k+1]]``).  They are merged on the fly; at equal times the streams
are taken in that order, so a task is always ready before it starts and starts before it
ends.
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
def jain_now(state: tuple, eff: np.ndarray, share: np.ndarray,
             level: np.ndarray) -> tuple[float, float]:
    """(J against DRF fair shares, J against equal shares) now; -1.0 where undefined."""
    demand, alloc, _, _, active, _, cap, held, counts = state
    m = counts[ACTIVE]
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
def weighted_jain(times: np.ndarray, refs: np.ndarray, bounds: np.ndarray,
                  task_user: np.ndarray, task_req: np.ndarray, task_ran: np.ndarray,
                  node_cap: np.ndarray, n_users: int, at: np.ndarray,
                  weight: np.ndarray) -> np.ndarray:
    """[sum J_fair w, sum w, sum J_equal w, sum w] over evaluation times ``at`` (the state
    after every event at or before each), skipping times where an index is undefined."""
    n_res = task_req.shape[1]
    state = new_state(n_users, n_res)
    eff, share, level = np.zeros(n_res), np.zeros((n_users, n_res)), np.zeros(n_users)
    heads = bounds[:-1].copy()
    sums = np.zeros(4)
    tasks = (task_user, task_req, task_ran)
    for e in range(at.shape[0]):
        advance(at[e], times, refs, bounds, heads, tasks, node_cap, state)
        if state[8][ACTIVE] == 0:
            continue
        fair, equal = jain_now(state, eff, share, level)
        if fair >= 0.0:
            sums[0] += fair * weight[e]
            sums[1] += weight[e]
        if equal >= 0.0:
            sums[2] += equal * weight[e]
            sums[3] += weight[e]
    return sums
