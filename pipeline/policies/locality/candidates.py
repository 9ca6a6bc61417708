"""Candidate lookups of the delay-scheduling kernel: does a task fit a node, where is its
data, and which pending tasks of which job are local to a node or a rack (lists built once
per call, so a heartbeat costs the tasks with data on its node, not every task)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.models import may_use
from pipeline.sim.jit import helper

NODE, RACK, ANY = 0, 1, 2


class Asks(NamedTuple):
    """The pending requests as the candidate lookups see them, and the room they may take.

    The lookups' hot loops read it by field: a request ``i`` is *usable* on node ``nd`` at
    time ``tau`` when it is not ``done``, is ``ready`` by ``tau``, its ``need`` fits the
    node's ``free`` room and its GPU model masks allow the node.  ``group`` and ``slot``
    say where a lookup files request ``i``: under ``slot[group[i]]`` (delay scheduling: the
    job and its position in the fair order; the locality gate: the application and itself).
    """

    done: np.ndarray  # (requests,) bool: placed already, or never to be placed in this call
    ready: np.ndarray  # (requests,) float: the time, s, from which the request may start
    need: np.ndarray  # (requests, 3) float: the room it takes on a node (cpu, mem, gpu)
    free: np.ndarray  # (nodes, 3) float: each node's free room, updated as requests land
    allow: np.ndarray  # (requests,) int: GPU model masks (empty: any node will do)
    bits: np.ndarray  # (nodes,) int: each node's GPU model bit (:mod:`pipeline.policies.models`)
    group: np.ndarray  # (requests,) int: the job or application of each request
    slot: np.ndarray  # (groups,) int: where a group's entry goes in a lookup's output


@helper
def fits(r, free, nd):
    return r[0] <= free[nd, 0] + 1e-9 and r[1] <= free[nd, 1] + 1e-9 and \
        r[2] <= free[nd, 2] + 1e-9


@helper
def usable(i, asks, nd):
    """Whether request ``i`` fits node ``nd`` and may use its GPU model (:class:`Asks`)."""
    return fits(asks.need[i], asks.free, nd) and (
        asks.allow.shape[0] == 0 or may_use(asks.allow[i], asks.bits, nd))


@helper
def locality_of(rows, inputs, nd, rack, n_rack):
    """Locality of a task with ``inputs`` row if run on ``nd`` (2 when it has none: -1)."""
    level = ANY
    for k in range(inputs.shape[1]):
        x = inputs[rows, k]
        if x < 0:
            break
        if x == nd:
            return NODE
        if rack >= 0 and n_rack[x] == rack:
            level = RACK
    return level


@helper
def first_usable(asks, by_job, cur, k, hi, nd, tau, lb):
    """First task in ``by_job[cur[k]:hi]`` usable on ``nd`` at ``tau`` (:class:`Asks`; -1 if
    none); ``cur[k]`` first moves past the done ones.  When there is none, ``lb[k]``
    becomes the earliest ready time of the tasks left (inf: none): until then no task of
    the range can be usable, so the caller skips the scan (heartbeats come in time order)."""
    done, ready = asks.done, asks.ready
    q = cur[k]
    while q < hi and done[by_job[q]]:
        q += 1
    cur[k] = q
    nxt = np.inf
    for q in range(cur[k], hi):
        i = by_job[q]
        if done[i]:
            continue
        if ready[i] <= tau and usable(i, asks, nd):
            return i
        nxt = min(nxt, ready[i])
    lb[k] = nxt
    return -1


@helper
def best_in(asks, lst, lst_lo, lst_hi, nd, tau, best, touched, n_touched):
    """For every group (:class:`Asks`), its first task (queue order) in
    ``lst[lst_lo:lst_hi]`` usable on ``nd`` at ``tau``, into ``best`` at its slot; returns
    the new count of ``touched`` (the slots filled, in the order they were)."""
    done, ready = asks.done, asks.ready
    for q in range(lst_lo, lst_hi):
        i = lst[q]
        if done[i] or ready[i] > tau or not usable(i, asks, nd):
            continue
        k = asks.slot[asks.group[i]]
        if best[k] < 0:
            touched[n_touched] = k
            n_touched += 1
            best[k] = i
        elif i < best[k]:
            best[k] = i
    return n_touched


@njit(cache=True)
def csr(n_keys, task_keys, n_per_task):
    """Key -> tasks lists from ``task_keys`` ((tasks, width), -1 padded), tasks ascending."""
    counts = np.zeros(n_keys + 1, np.int64)
    n_t = task_keys.shape[0]
    for i in range(n_t):
        for c in range(n_per_task):
            x = task_keys[i, c]
            if x < 0:
                break
            counts[x + 1] += 1
    ptr = np.cumsum(counts)
    fill = ptr[:-1].copy()
    lst = np.empty(ptr[-1], np.int64)
    for i in range(n_t):
        for c in range(n_per_task):
            x = task_keys[i, c]
            if x < 0:
                break
            lst[fill[x]] = i
            fill[x] += 1
    return ptr, lst


@njit(cache=True)
def task_racks(inputs, n_rack):
    """Each task's distinct racks holding its input (-1 padded)."""
    out = np.full(inputs.shape, -1, np.int64)
    for i in range(inputs.shape[0]):
        m = 0
        for c in range(inputs.shape[1]):
            x = inputs[i, c]
            if x < 0:
                break
            r = n_rack[x]
            if r < 0:
                continue
            seen = False
            for e in range(m):
                seen = seen or out[i, e] == r
            if not seen:
                out[i, m] = r
                m += 1
    return out


@helper
def room_for_any(shapes, shape_left, free, nd):
    """Whether node ``nd`` has room for some request shape still pending."""
    for s in range(len(shapes)):  # noqa: SIM110 (numba compiles loops, not any())
        if shape_left[s] > 0 and fits(shapes[s], free, nd):
            return True
    return False


@helper
def busy_holder(inputs, i, cap, alloc, ncont, up, room, thr, size):
    """Among the nodes holding request ``i``'s data (``inputs`` row), the up node with at
    least one container whose memory usage stays at or below ``thr`` after taking the
    request (``size``: its cpu, memory and gpu; a Medium node of container packing) and
    that has room, the one with the highest usage; -1 if none."""
    rc, rm, rg = size
    best, best_u = -1, -1.0
    for k in range(inputs.shape[1]):
        nd = inputs[i, k]
        if nd < 0:
            break
        if not up[nd] or ncont[nd] == 0 or cap[nd, 1] <= 0:
            continue
        if rc > room[nd, 0] or rm > room[nd, 1] or rg > room[nd, 2]:
            continue
        used = alloc[nd, 1] / cap[nd, 1]
        if (alloc[nd, 1] + rm) / cap[nd, 1] <= thr + 1e-9 and used > best_u:
            best, best_u = nd, used
    return best
