"""Dependency cycles among tasks, found on integer-coded edges in O(tasks + edges).

A task in a cycle (or waiting on one) can never start: the replay would report it as
``unfinished`` and every metric would quietly count it.  Kahn's algorithm removes tasks whose
dependencies are all removed; what is left is exactly the tasks in or behind a cycle, and
walking back from one of them along dependencies that are also left must close a cycle,
which makes a readable example.  Memory is the edges (two integer arrays) and a few integer
arrays per task named in an edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@dataclass(frozen=True)
class Cycles:
    """Tasks that can never start, and one cycle among them (node codes, in dependency order)."""

    stuck: int
    cycle: list[int]


def find_cycles(n: int, parent: np.ndarray, child: np.ndarray) -> Cycles | None:
    """Cycles of the graph with nodes ``0..n-1`` and edges ``parent[i] -> child[i]``.

    ``child`` depends on ``parent``; self-loops should be left out (reported on their own).
    Returns None when the graph has no cycle.
    """
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    child = np.ascontiguousarray(child, dtype=np.int64)
    left = _left_after_kahn(n, parent, child)
    stuck = int(left.sum())
    if not stuck:
        return None
    return Cycles(stuck, _walk_back(int(np.argmax(left)), left, parent, child))


@numba.njit(cache=True)
def _left_after_kahn(n: int, parent: np.ndarray, child: np.ndarray
                     ) -> np.ndarray:  # pragma: no cover - compiled
    """Nodes Kahn's algorithm cannot remove (in a cycle or depending on one)."""
    indegree = np.zeros(n, np.int64)
    out_count = np.zeros(n + 1, np.int64)
    for e in range(parent.size):
        indegree[child[e]] += 1
        out_count[parent[e] + 1] += 1
    start = np.cumsum(out_count)
    fill = start[:-1].copy()
    targets = np.empty(parent.size, np.int64)
    for e in range(parent.size):
        targets[fill[parent[e]]] = child[e]
        fill[parent[e]] += 1
    queue = np.empty(n, np.int64)
    head, tail = 0, 0
    for v in range(n):
        if indegree[v] == 0:
            queue[tail] = v
            tail += 1
    while head < tail:
        v = queue[head]
        head += 1
        for k in range(start[v], start[v + 1]):
            w = targets[k]
            indegree[w] -= 1
            if indegree[w] == 0:
                queue[tail] = w
                tail += 1
    return indegree > 0


def _walk_back(node: int, left: np.ndarray, parent: np.ndarray, child: np.ndarray) -> list[int]:
    """From a stuck node, follow stuck dependencies until a node repeats: that loop is a cycle.

    Every stuck node has a stuck dependency (else Kahn would have removed it).
    """
    useful = left[parent] & left[child]
    parent, child = parent[useful], child[useful]
    order = np.argsort(child, kind="stable")
    by_child, first_parent = child[order], parent[order]
    seen: dict[int, int] = {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = int(first_parent[np.searchsorted(by_child, node)])
    loop = path[seen[node]:]
    return [*loop[::-1], loop[-1]]  # dependency order: each is a dependency of the next
