"""What kube-scheduler's filter and score gave each (node, pod shape), kept while the node
is unchanged, so the compiled cycle (:mod:`.kernel`) looks a pair up before it computes it.

Why: at 12,500 nodes the adaptive ``percentageOfNodesToScore`` has every pod filter and
score 625 nodes, and the score's integer arithmetic was most of a replay's time.  A
node's filter and score for a pod depend only on the node's state (allocatable,
requested, pod count, Ready, GPU model) and the pod's requests and GPU model mask, its
*shape*; traces repeat a few shapes (the benchmark's workload has 8, a job's tasks share
one) and a node is walked again every ``n / 625`` pods, mostly unchanged.  The numbers
are the same as computing them: an entry is used only when its node's ``version`` is the
one it was computed at, and the version moves whenever the node's state changes: in the
kernel when a pod is assumed on it, in the policy when preemption frees it, and between
calls when the core's state of it differs from what the last call left.

Each node has ``SLOTS`` entries; a shape's id picks one (``id % SLOTS``), so shapes that
share a slot replace each other (a miss recomputes, never a wrong score).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SLOTS = 8  # entries per node, a power of two
FAILS = -1  # an entry's score when the node does not pass the filter
MAX_SHAPES = 1 << 16  # shape ids kept before they are forgotten and renumbered


class Memo(NamedTuple):
    """The kernel's view of the memo."""

    version: np.ndarray  # (n,) int64 each node's state count, moved when the state changes
    entry: np.ndarray  # (SLOTS, n, 3) int64 [shape id (-1: empty), node version, score]
    shape: np.ndarray  # (m,) int64 each pending pod's shape id


class NodeState(NamedTuple):
    """What a node's filter and score read (the kernel's ``Nodes`` without the list)."""

    cap: np.ndarray
    alloc: np.ndarray
    alloc_units: np.ndarray
    pods: np.ndarray
    ready: np.ndarray
    model: np.ndarray  # (n,) GPU model bits, or empty when the replay has none


class ScoreMemo:
    """The policy's side of the memo: shape ids, and the node state the last call left."""

    def __init__(self) -> None:
        self.ids: dict[bytes, int] = {}
        self.version = np.zeros(0, np.int64)
        self.entry = np.full((SLOTS, 0, 3), -1, np.int64)
        self.seen: NodeState | None = None

    def for_call(self, req: np.ndarray, allow: np.ndarray, nodes: NodeState) -> Memo:
        """The memo for one call: ids for the pods' shapes (``req`` rows with their GPU
        model masks ``allow``, empty: none), and the versions of the nodes whose state
        differs from the last call's end moved on."""
        shape = self._shape_ids(req, allow)
        self._refresh(nodes)
        return Memo(self.version, self.entry, shape)

    def remember(self, nodes: NodeState) -> None:
        """The snapshot as the call leaves it (copied: the core's arrays move on)."""
        self.seen = NodeState(*(np.array(a, copy=True) for a in nodes))

    def _shape_ids(self, req: np.ndarray, allow: np.ndarray) -> np.ndarray:
        m = len(req)
        key = np.zeros((m, 4), np.int64)
        key[:, :3] = np.ascontiguousarray(req, np.float64).view(np.int64)
        if len(allow):
            key[:, 3] = allow
        rows, inverse = _distinct_rows(key)
        if len(self.ids) + len(rows) > MAX_SHAPES:  # forget: renumber from 0
            self.ids.clear()
            self.entry[:, :, 0] = -1
        ids = np.array([self.ids.setdefault(r.tobytes(), len(self.ids)) for r in rows],
                       np.int64)
        return ids[inverse.reshape(-1)]

    def _refresh(self, nodes: NodeState) -> None:
        n = len(nodes.cap)
        old = len(self.version)
        if n != old:  # nodes added (or the arrays shortened): new slots start empty
            self.version = np.resize(self.version, n)
            entry = np.full((SLOTS, n, 3), -1, np.int64)
            entry[:, :min(n, old)] = self.entry[:, :min(n, old)]
            self.entry = entry
            if n > old:
                self.version[old:] = 0
        seen = self.seen
        if seen is None:
            return
        k = min(n, len(seen.cap))
        changed = (nodes.pods[:k] != seen.pods[:k]) | (nodes.ready[:k] != seen.ready[:k])
        for new, old in ((nodes.cap, seen.cap), (nodes.alloc, seen.alloc),
                         (nodes.alloc_units, seen.alloc_units)):
            for r in range(new.shape[1]):  # column by column: faster than any(axis=1)
                changed |= new[:k, r] != old[:k, r]
        if len(nodes.model) != len(seen.model):
            changed[:] = True
        elif len(nodes.model):
            changed |= nodes.model[:k] != seen.model[:k]
        self.version[:k][changed] += 1


def _distinct_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_inverse=True)`` for int64 rows, by a hash of each
    row (a 1-D sort, several times faster); when two distinct rows share a hash, the
    exact row-wise form."""
    mixed = key[:, 0].copy()
    for c in range(1, key.shape[1]):
        mixed = mixed * np.int64(1_000_003) ^ key[:, c]  # wraps: any mix will do
    _, first, inverse = np.unique(mixed, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rows = key[first]
    if not np.array_equal(rows[inverse], key):  # a collision
        rows, inverse = np.unique(key, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
    return rows, inverse
