"""Containers to preempt for one starved request, all on one node (Hadoop 3.3, compiled).

Paraphrases apache/hadoop 3.3 ``FSPreemptionThread``: for each container a starved
application asks for, ``identifyContainersToPreemptForOneContainer`` walks the nodes and,
on each, ``identifyContainersToPreemptOnNode`` starts from the node's unallocated room minus
what is already promised to earlier preemptions there (``getTotalReserved``) and adds the
node's running containers -- non-AM containers newest first, then AM containers
(``getRunningContainersWithAMsAtTheEnd``), skipping those already marked
(``getContainersForPreemption``) -- whose owner may lose them
(``FSAppAttempt.canContainerBePreempted``: its usage, minus what is already being
preempted from it and what this set takes, stays at or above its fair share), until the
request fits (``Resources.fitsIn``, every resource).  The check comes after each container
is looked at, so a node whose room already fits the request yields a set with nothing in
it.  A node's set is kept when it holds fewer AM containers than the best so far; the walk
stops at a set without AM containers.  The freed room is then promised to the starved
application (``trackPreemptionsAgainstNode``).

tracereplay choices: owners are leaf queues (starvation is queue-level, see :mod:`.preempt`);
"at or above its fair share" is checked on the resources the leaf's policy compares
(memory for ``fair``/``fifo``, every resource for ``drf``); nodes are walked in slot order
(Hadoop's node map has no defined order).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

EPS = 1e-9


def node_order(node: np.ndarray, start: np.ndarray, row: np.ndarray, is_am: np.ndarray,
               n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Running containers grouped by node (CSR ``ptr``, ``idx``), each node's non-AM
    containers newest first, then its AM containers oldest first."""
    key = np.where(is_am, start, -start)
    idx = np.lexsort((np.where(is_am, row, -row), key, is_am, node)).astype(np.int64)
    ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(node, minlength=n_nodes))
    return ptr, idx


@njit(cache=True)
def _fits(a, b):
    ok = True
    for k in range(3):
        ok = ok and a[k] <= b[k] + EPS * max(1.0, abs(b[k]))
    return ok


@njit(cache=True)
def _may_lose(q, c, taken, room, dims):
    """Whether queue ``q`` stays at or above its fair share after also giving up ``c``."""
    for k in range(3):
        if dims[q, k] and taken[q, k] + c[k] > room[q, k] + EPS * max(1.0, abs(room[q, k])):
            return False
    return True


class Victims(NamedTuple):
    """The running containers and nodes as the victim search reads them (``marked``,
    ``promised`` and ``room`` updated in place as sets are chosen)."""

    up: np.ndarray  # (nodes,) bool: the node is up
    ptr: np.ndarray  # (nodes + 1,) int64: node -> its containers in ``idx`` (CSR) ...
    idx: np.ndarray  # ... running indices, in the order they are looked at (node_order)
    req: np.ndarray  # (running, 3) float64: each container's size
    q: np.ndarray  # (running,) int64: its owner (victim queue index)
    am: np.ndarray  # (running,) bool: it is an AM container
    marked: np.ndarray  # (running,) bool: already chosen for preemption
    free: np.ndarray  # (nodes, 3) float64: unallocated room
    promised: np.ndarray  # (nodes, 3) float64: room promised to earlier preemptions
    q_ok: np.ndarray  # (queues,) bool: the queue may lose containers
    room: np.ndarray  # (queues, 3) float64: what it may still lose (usage - fair share)
    dims: np.ndarray  # (queues, 3) bool: the resources its policy compares


@njit(cache=True)
def _on_node(req, nd, v, taken, max_am, out):
    """Containers of node ``nd`` that make room for ``req`` (``v``: :class:`Victims`): their
    count written to ``out``, and the number of AM containers among them; (-1, 0) when the
    node cannot."""
    cont_req, cont_q = v.req, v.q
    pot = np.empty(3)
    for k in range(3):
        pot[k] = max(v.free[nd, k] - v.promised[nd, k], 0.0)
    n = 0
    n_am = 0
    ok = False
    for j in range(v.ptr[nd], v.ptr[nd + 1]):
        i = v.idx[j]
        if v.marked[i]:
            continue
        q = cont_q[i]
        if v.q_ok[q] and _may_lose(q, cont_req[i], taken, v.room, v.dims):
            if v.am[i]:
                n_am += 1
                if n_am >= max_am:
                    break
            out[n] = i
            n += 1
            for k in range(3):
                taken[q, k] += cont_req[i, k]
                pot[k] += cont_req[i, k]
        if _fits(req, pot):
            ok = True
            break
    for m in range(n):  # ``taken`` is scratch for one node's set
        i = out[m]
        for k in range(3):
            taken[cont_q[i], k] -= cont_req[i, k]
    return (n, n_am) if ok else (-1, 0)


@njit(cache=True)
def victims_for(req, v, out):
    """Containers to preempt so ``req`` fits on one node (``v``: :class:`Victims`):
    ``(node, count)``, the chosen running indices in ``out[:count]``; node -1 when no node
    can make room (count 0 when a node has room already).  Marks them and updates
    ``promised`` and ``room``."""
    up, ptr = v.up, v.ptr
    taken = np.zeros_like(v.room)
    scratch = np.empty(len(out), dtype=np.int64)
    best_node, best_n, best_am = -1, 0, 1 << 30
    for nd in range(len(up)):
        if not up[nd] or ptr[nd + 1] == ptr[nd]:
            continue
        n, n_am = _on_node(req, nd, v, taken, best_am, scratch)
        if n < 0:
            continue
        best_node, best_n, best_am = nd, n, n_am
        out[:n] = scratch[:n]
        if n_am == 0:
            break
    for m in range(best_n):
        i = out[m]
        v.marked[i] = True
        for k in range(3):
            v.promised[best_node, k] += v.req[i, k]
            v.room[v.q[i], k] -= v.req[i, k]
    return best_node, best_n
