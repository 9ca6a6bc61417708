"""Where speculative copies go: the room the scheduler left, and one node per copy.

Hadoop schedules a speculative attempt only after every task that is not running yet (the
JobTracker's priority order: failed tasks, non-running tasks, then speculative ones), so a
copy only uses room left after the inner policy's own placements of the same call.  A copy
takes its task's request, never goes to the node its original runs on, and the room it
takes is gone for the copies after it.
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.placement.nodetree import SLACK
from pipeline.sim.interface import NodeView
from pipeline.sim.models import may_run

# a request "fits" with the same float slack the other policies use, below the core's
TINY = 0.5e-12
# nodes checked at a time when looking for room for a copy
CHUNK = 64
# vectorized rounds of copy placement before the rest go one at a time
MAX_ROUNDS = 8


def free_room(nodes: NodeView, placed_req: np.ndarray, placed_node: np.ndarray
              ) -> np.ndarray:
    """(n, 3) room left on each node after this call's placements (-inf on nodes not up)."""
    room = np.asarray(nodes.cap, dtype=np.float64) * (1 + SLACK) + TINY - nodes.alloc
    if len(placed_node):
        n = len(room)
        node = np.asarray(placed_node, dtype=np.int64)
        req = np.asarray(placed_req, dtype=np.float64)
        for r in range(room.shape[1]):
            room[:, r] -= np.bincount(node, weights=req[:, r], minlength=n)
    room[~np.asarray(nodes.up)] = -np.inf
    return room


def task_slots(cap: np.ndarray, up: np.ndarray, req: np.ndarray) -> int:
    """The cluster's task slots: containers of the median running request that fit the up
    nodes (per node, the fewest over the resources the median request uses)."""
    if len(req) == 0:
        return 0
    median = np.median(np.asarray(req, dtype=np.float64), axis=0)
    used = median > 0
    if not used.any():
        return int(np.count_nonzero(up))
    per_node = np.floor(np.asarray(cap)[np.asarray(up)][:, used] / median[used]).min(axis=1)
    return int(per_node.sum())


class CopyPlacer:
    """The room left in one call, and the choice of a node for each copy in turn.

    Only nodes with room for the smallest candidate request (in every resource) are
    searched, in an order fixed at the call's start (``prefer`` highest first, then node
    slot).  The search is round-robin (next fit): each copy's search starts after the node
    the previous copy took, as nodes with room would each ask in turn at their heartbeats,
    so copies spread over the preferred nodes; it looks a chunk of nodes at a time, so a
    copy usually costs O(chunk), not O(nodes).
    """

    def __init__(self, room: np.ndarray, rack: np.ndarray, min_req: np.ndarray,
                 prefer: np.ndarray | None = None, allowed: np.ndarray | None = None,
                 models: np.ndarray | None = None) -> None:
        self.room = room
        self.models = models  # the nodes' GPU model bits (None: no model constraints)
        self.rack = np.asarray(rack)
        self.min_req = np.asarray(min_req, dtype=np.float64)
        ok = np.all(room >= self.min_req, axis=1)
        if allowed is not None:
            ok &= np.asarray(allowed, dtype=bool)
        nodes = np.flatnonzero(ok)
        if prefer is not None and len(nodes):  # stable: ties keep node-slot order
            nodes = nodes[np.argsort(-np.asarray(prefer)[nodes], kind="stable")]
        self.order = nodes
        self.cursor = 0  # where the next search of the whole order starts (round-robin)
        self.alive = ok  # nodes that may still take the smallest request
        self.n_dead = 0
        self._no_fit: set[bytes] = set()
        self._racks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._left = 0  # copies the current place() call may still launch
        self._group: np.ndarray | None = None
        self._budget: np.ndarray | None = None

    def __bool__(self) -> bool:
        return len(self.order) > self.n_dead

    def _first_fit(self, nodes: np.ndarray, req: np.ndarray, original: int,
                   start: int = 0, allow: int = 0) -> int:
        """Position in ``nodes`` of the first node from ``start`` on (wrapping around) that
        is alive, not ``original``, has room for ``req`` and a GPU model the mask ``allow``
        allows (-1: none).  The first chunk is looked at alone (usually enough); then all
        the others at once."""
        n = len(nodes)
        if n == 0:
            return -1
        at = (start + np.arange(min(CHUNK, n))) % n
        for part in (at, (start + np.arange(len(at), n)) % n):
            chunk = nodes[part]
            ok = self.alive[chunk] & (chunk != original)
            ok &= np.all(self.room[chunk] >= req, axis=1)
            if allow and self.models is not None:
                ok &= may_run(np.int64(allow), self.models[chunk])
            if ok.any():
                return int(part[np.argmax(ok)])
        return -1

    def _rack_nodes(self, racks: np.ndarray) -> np.ndarray:
        """Alive nodes of ``racks``, in the search order."""
        if self._racks is None:
            rk = self.rack[self.order]
            by = np.argsort(rk, kind="stable")
            keys, first = np.unique(rk[by], return_index=True)
            self._racks = (keys, first, self.order[by])
        keys, first, members = self._racks
        out = []
        for r in np.unique(racks):
            i = int(np.searchsorted(keys, r))
            if i < len(keys) and keys[i] == r:
                end = int(first[i + 1]) if i + 1 < len(keys) else len(members)
                out.append(members[int(first[i]): end])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def node_for(self, req: np.ndarray, original: int, inputs: np.ndarray | None = None,
                 allow: int = 0) -> int:
        """A node for a copy of a task asking ``req`` whose original runs on ``original``
        (-1: none), of a GPU model the mask ``allow`` allows (0: any).  With ``inputs``
        (node slots holding the task's input, -1 padded): node-local first, then
        rack-local, then any."""
        key = req.tobytes() + allow.to_bytes(8, "little")
        if key in self._no_fit or not self:
            return -1
        node = -1
        if inputs is not None:
            held = inputs[inputs >= 0]
            if len(held):
                held = held[self.alive[held]]
                at = self._first_fit(held, req, original, 0, allow)
                node = int(held[at]) if at >= 0 else -1
                racks = self.rack[inputs[inputs >= 0]]
                racks = racks[racks >= 0]
                if node < 0 and len(racks):
                    near = self._rack_nodes(racks)
                    at = self._first_fit(near, req, original, 0, allow)
                    node = int(near[at]) if at >= 0 else -1
        if node < 0:
            at = self._first_fit(self.order, req, original, self.cursor, allow)
            if at < 0:
                if self._first_fit(self.order, req, -1, 0, allow) < 0:
                    self._no_fit.add(key)  # room only shrinks within a call
                return -1
            node = int(self.order[at])
            self.cursor = (at + 1) % len(self.order)
        self._take(node, req)
        return node

    def _take(self, node: int, req: np.ndarray) -> None:
        self.room[node] -= req
        if not np.all(self.room[node] >= self.min_req):
            self.alive[node] = False
            self.n_dead += 1
            if self.n_dead > CHUNK and 4 * self.n_dead > len(self.order):
                keep = self.alive[self.order]
                self.cursor = int(np.count_nonzero(keep[: self.cursor]))
                self.order = self.order[keep]
                self.cursor = self.cursor % len(self.order) if len(self.order) else 0
                self.n_dead = 0
                self._racks = None

    def place(self, order: np.ndarray, req: np.ndarray, original: np.ndarray, *,
              limit: int | None = None, inputs: np.ndarray | None = None,
              group: np.ndarray | None = None, budget: np.ndarray | None = None,
              allow: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Copies for candidates ``order`` (positions into the per-candidate arrays
        ``req``, ``original``, ``inputs``, ``group``), in that order, while ``limit`` copies
        remain and the candidate's ``group`` has ``budget`` left; returns the positions
        launched and their nodes.

        Candidates with input data go one at a time (node-local, rack-local, then any);
        the others in rounds, vectorized: in a round each node with room (in search order
        from the round-robin cursor) is offered to one candidate (in candidate order), and a
        candidate its node cannot take waits for the next round, as a heartbeat offers a
        node's room to the next task.  After a few rounds the rest go one at a time.
        Candidates limited to some GPU models (``allow``, with the placer's ``models``) go
        one at a time too, each searching the nodes of its models."""
        self._left = len(order) if limit is None else int(limit)
        self._group = group
        self._budget = None if budget is None else np.array(budget, dtype=np.int64)
        took: list[np.ndarray] = []
        where: list[np.ndarray] = []
        order = self._could_fit(np.asarray(order, dtype=np.int64), req)
        local = (np.zeros(len(order), dtype=bool) if inputs is None
                 else np.any(inputs[order] >= 0, axis=1))
        if allow is not None and self.models is not None:  # model-bound: one at a time
            local |= allow[order] != 0
        else:
            allow = None
        self._one_by_one(order[local], req, original, inputs, took, where, allow)
        rest = self._rounds(order[~local], req, original, took, where)
        self._one_by_one(self._could_fit(rest, req), req, original, None, took, where)
        if not took:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(took), np.concatenate(where)

    def _could_fit(self, cand: np.ndarray, req: np.ndarray) -> np.ndarray:
        """``cand`` without the requests larger than every node's room (in a resource)."""
        if len(cand) == 0 or not self:
            return cand[:0]
        live = self.order[self.alive[self.order]]
        most = self.room[live].max(axis=0)
        return cand[np.all(req[cand] <= most, axis=1)]

    def _spend(self, cand: np.ndarray) -> np.ndarray:
        """Which of ``cand`` (in order, each launching) stay within the limit and their
        group's budget."""
        ok = np.ones(len(cand), dtype=bool)
        if self._budget is not None and self._group is not None and len(cand):
            g = self._group[cand]
            by = np.argsort(g, kind="stable")
            first = np.searchsorted(g[by], g[by], side="left")
            rank = np.empty(len(cand), dtype=np.int64)
            rank[by] = np.arange(len(cand)) - first
            ok &= rank < self._budget[g]
        ok &= np.cumsum(ok) <= self._left
        return ok

    def _launched(self, cand: np.ndarray, nodes: np.ndarray, took: list[np.ndarray],
                  where: list[np.ndarray]) -> None:
        took.append(cand)
        where.append(nodes)
        self._left -= len(cand)
        if self._budget is not None and self._group is not None:
            np.subtract.at(self._budget, self._group[cand], 1)

    def _one_by_one(self, cand: np.ndarray, req: np.ndarray, original: np.ndarray,
                    inputs: np.ndarray | None, took: list[np.ndarray],
                    where: list[np.ndarray], allow: np.ndarray | None = None) -> None:
        budget, group = self._budget, self._group
        for i in cand.tolist():
            if self._left <= 0 or not self:
                return
            if budget is not None and group is not None and budget[group[i]] <= 0:
                continue
            node = self.node_for(req[i], int(original[i]),
                                 None if inputs is None else inputs[i],
                                 0 if allow is None else int(allow[i]))
            if node >= 0:
                self._launched(np.array([i]), np.array([node]), took, where)

    def _rounds(self, cand: np.ndarray, req: np.ndarray, original: np.ndarray,
                took: list[np.ndarray], where: list[np.ndarray]) -> np.ndarray:
        """Place ``cand`` in vectorized rounds; return the ones left over."""
        for _ in range(MAX_ROUNDS):
            if len(cand) == 0 or self._left <= 0 or not self:
                break
            o = self.order
            nodes = np.concatenate([o[self.cursor:], o[: self.cursor]])
            nodes = nodes[self.alive[nodes]]
            m = min(len(cand), len(nodes))
            c, nd = cand[:m], nodes[:m]
            ok = (nd != original[c]) & np.all(self.room[nd] >= req[c], axis=1)
            ok[ok] = self._spend(c[ok])
            if not ok.any():
                break
            ci, ni = c[ok], nd[ok]
            self.room[ni] -= req[ci]  # distinct nodes: no two copies on one in a round
            dead = ni[~np.all(self.room[ni] >= self.min_req, axis=1)]
            self.alive[dead] = False
            self.n_dead += len(dead)
            self._launched(ci, ni, took, where)
            self.cursor = (int(np.flatnonzero(o == nd[-1])[0]) + 1) % len(o)
            cand = np.concatenate([c[~ok], cand[m:]])
        return cand
