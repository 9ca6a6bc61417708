"""Container reservations of the CapacityScheduler (Hadoop 3.3), single-partition path.

When the container Hadoop's order hands out next does not fit on the node at hand, YARN
does not give the node to whoever comes next: the application *reserves* the node for
that container (``RegularContainerAllocator.assignContainer`` returns ``RESERVED``,
``FiCaSchedulerApp.reserve``).  While the reservation stands the node serves it only
(``CapacityScheduler.allocateContainersToNode`` first calls
``allocateFromReservedContainer``, and a node with a reservation is offered to no other
application); room freed there (a task ending, or a container preempted) accumulates
until the container fits.  A reservation counts as used by its queue and user from the
moment it is made (``LeafQueue.apply`` calls ``allocateResource`` with
``getAllocatedOrReservedResource``; an allocation from a reserved container leaves the
queue untouched), so queue order, user limits and the preemption monitor see it; the
monitor also leaves it out of pending demand (``TempQueuePerPartition.offer`` adds
``pendingDeductReserved``, FifoCandidatesSelector's default).

Why it matters: on a full cluster whose free room is scattered in holes smaller than a
starved queue's containers, room that preemption frees for that queue would otherwise go
straight back to the queue it was taken from, which restarts the killed task and is
preempted again, round after round (issue 9, item 5: 101,885 preemptions, one task 871
times, on the demo with 120 elastic nodes).

Reservations happen only for a container that the cluster's headroom holds (free room
less reservations: root's ``limit - used``, passed down as every leaf's headroom, and
``RegularContainerAllocator.checkHeadroom``) but no node does: free room scattered in
holes.  A container larger than all the free room is neither allocated nor reserved.

Choices (YARN's node is the one heartbeating; a scheduling point here sees every node):

- A container of this point's assignment order that fits on no node reserves one:
  among the up nodes without a reservation that could hold it and have at least the
  minimum allocation free (a node with less is not even offered,
  ``allocateContainersToNode``), the one with the most free room (sum of its free cpu
  and memory shares: it fits soonest), ties to the lower slot.  One reservation per node
  and per request.
- At the next points a reserved container starts on its node as soon as it fits there,
  or else on any node without a reservation that fits it, which releases the
  reservation (``reservations-continue-look-all-nodes``, true by default), before the
  assignment order is followed.
- A reservation is dropped when its request is no longer pending, its node is down, its
  application may not start now (AM or application limits: kept, it would hold a node
  that nothing may use), or the preemption monitor drops it (a leaf that must give back
  loses its reservations first, :mod:`.preemption`).
- With node heartbeats (delay scheduling, :mod:`.offers`) or node labels, reservations are
  not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.sim.interface import NodeView
from pipeline.sim.models import may_run

EMPTY = np.zeros(0, dtype=np.int64)


@dataclass
class Held:
    """This point's reservations: ``done`` (request positions) start now on ``done_node``;
    ``wait`` still wait on ``wait_node``."""

    done: np.ndarray
    done_node: np.ndarray
    wait: np.ndarray
    wait_node: np.ndarray

    @property
    def all(self) -> np.ndarray:
        """Positions of every reserved request (started now or waiting)."""
        return np.concatenate([self.done, self.wait])


NONE = Held(EMPTY, EMPTY, EMPTY, EMPTY)


class Reservations:
    """The node reserved for each reserved request (task row -> node slot)."""

    def __init__(self, minimum: np.ndarray) -> None:
        self.node_of: dict[int, int] = {}
        # the room a node needs to be offered at all: the minimum allocation
        self.minimum = np.where(np.asarray(minimum[:2]) > 0, minimum[:2], 1e-9)

    def drop(self, rows: list[int]) -> None:
        """Release the reservations of task ``rows`` (the preemption monitor dropped them)
        and empty ``rows``."""
        for r in rows:
            self.node_of.pop(r, None)
        rows.clear()

    def _open(self, index: NodeIndex, nodes: NodeView, room: np.ndarray) -> np.ndarray:
        """Per node: up, not reserved, with at least the minimum allocation free
        (``room``: each node's free cpu and memory)."""
        ok = (nodes.state == 2) & (room >= self.minimum).all(axis=1)
        if self.node_of:
            ok[np.fromiter(self.node_of.values(), dtype=np.int64)] = False
        return ok

    def begin(self, index: NodeIndex, nodes: NodeView, rows: np.ndarray, fit: np.ndarray,
              eligible: np.ndarray, allow: np.ndarray | None = None) -> Held:
        """Drop stale reservations and start those that fit their node now.

        ``rows``: each pending request's task row; ``fit``: (n, 3) per pending request the
        room it needs on a node; ``eligible``: positions of the requests of applications
        running or allowed to start; ``allow``: per pending request its GPU model mask
        (None: any node).  The index takes the started ones' room.
        """
        if not self.node_of:
            return NONE
        held = np.fromiter(self.node_of, dtype=np.int64, count=len(self.node_of))
        at = _positions(rows[eligible], held)
        keep = at >= 0
        pos = eligible[at[keep]]
        slot = np.array([self.node_of[r] for r in held[keep].tolist()], dtype=np.int64)
        up = nodes.state[slot] == 2
        pos, slot = pos[up], slot[up]
        self.node_of = dict(zip(rows[pos].tolist(), slot.tolist(), strict=True))
        if not len(pos):
            return NONE
        node = np.full(len(rows), -1, dtype=np.int64)
        node[pos] = slot
        order = np.sort(pos)  # in arrival order
        done = index.place_on(nodes, fit, node, order)
        wait = np.setdiff1d(order, done)
        if len(wait):  # reservations-continue-look-all-nodes: any other node that fits
            got, where = self._place_unreserved(index, nodes, fit[wait],
                                                None if allow is None else allow[wait])
            node[wait[got]] = where
            done = np.concatenate([done, wait[got]])
            wait = np.delete(wait, got)
        for r in rows[done].tolist():
            del self.node_of[r]
        return Held(done, node[done], wait, node[wait])

    def place(self, index: NodeIndex, nodes: NodeView, order: np.ndarray, fit: np.ndarray,
              rows: np.ndarray, allow: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """Place ``order`` (positions, in assignment order; ``fit``/``rows``/``allow``: their
        room needed, task rows and GPU model masks) on the nodes without a reservation;
        each one that fits nowhere reserves a node.  Returns the placed positions and their
        nodes."""
        placed, node = self._place_unreserved(index, nodes, fit, allow)
        if len(placed) < len(order):
            mask = np.ones(len(order), dtype=bool)
            mask[placed] = False
            self._reserve(index, nodes, rows[mask], fit[mask],
                          None if allow is None else allow[mask])
        return order[placed], node

    def _place_unreserved(self, index: NodeIndex, nodes: NodeView, fit: np.ndarray,
                          allow: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``index.place`` of the rows of ``fit`` (in order) on nodes without a reservation."""
        hidden = np.fromiter(self.node_of.values(), dtype=np.int64, count=len(self.node_of))
        index.hide(nodes, hidden)
        try:
            return index.place(nodes, np.ascontiguousarray(fit), None, False, allow=allow)
        finally:
            index.show(nodes, hidden)

    def _reserve(self, index: NodeIndex, nodes: NodeView, rows: np.ndarray,
                 fit: np.ndarray, allow: np.ndarray | None = None) -> None:
        """Reserve a node for each request (task ``rows``, room ``fit``, GPU model masks
        ``allow``), in order, while nodes are left."""
        if allow is not None and np.any(allow) and nodes.gpu_model is not None:
            first = np.sort(np.unique(allow, return_index=True)[1])
            for mask in allow[first].tolist():  # each kind on nodes of its models
                own = allow == mask
                self._reserve_on(index, nodes, rows[own], fit[own],
                                 may_run(np.int64(mask), nodes.gpu_model))
            return
        self._reserve_on(index, nodes, rows, fit, None)

    def _reserve_on(self, index: NodeIndex, nodes: NodeView, rows: np.ndarray,
                    fit: np.ndarray, usable: np.ndarray | None) -> None:
        """:meth:`_reserve` on the nodes ``usable`` (None: all)."""
        room = nodes.cap[:, :2] - index.alloc[:, :2]
        open_ = self._open(index, nodes, room)
        cand = np.flatnonzero(open_ if usable is None else open_ & usable)
        if not len(cand):
            return
        share = room[cand] / np.where(nodes.cap[cand, :2] > 0, nodes.cap[cand, :2], 1.0)
        cand = cand[np.lexsort((cand, -share.sum(axis=1)))]  # most free room first
        cap = nodes.cap[cand].tolist()
        taken = [False] * len(cand)
        first = 0  # nodes before it are taken
        failed: list[np.ndarray] = []  # sizes no node could hold: larger ones cannot either
        for i in range(len(rows)):
            if any((fit[i] >= f).all() for f in failed):
                continue
            need = (fit[i] * (1 - 1e-9)).tolist()
            k = first
            while k < len(cand) and (taken[k] or any(c < f for c, f in zip(cap[k], need,
                                                                          strict=True))):
                k += 1
            if k == len(cand):
                failed.append(fit[i])
                continue
            taken[k] = True
            self.node_of[int(rows[i])] = int(cand[k])
            while first < len(cand) and taken[first]:
                first += 1
            if first == len(cand):
                return


def account(held: Held, req: np.ndarray, pair: np.ndarray, pair_used: np.ndarray,
            free: np.ndarray, fit: np.ndarray) -> np.ndarray:
    """Count the reserved requests (``req``: normalised; ``pair``: their (leaf, user)
    pairs) as used in ``pair_used`` (in place) and return the room left for the others:
    ``free`` less what the started ones took (``fit``) and what the waiting ones reserve
    (the cluster's headroom is its resource less what is used, reservations included:
    ``ParentQueue`` passes root's ``limit - used`` down as every leaf's headroom)."""
    at = held.all
    if not len(at):
        return free
    np.add.at(pair_used, pair[at], req[at])
    return np.maximum(free - fit[held.done].sum(axis=0) - req[held.wait].sum(axis=0), 0.0)


def _positions(rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per ``wanted`` row, its position in ``rows`` (-1: absent)."""
    out = np.full(len(wanted), -1, dtype=np.int64)
    if not len(rows) or not len(wanted):
        return out
    sorter = np.argsort(rows, kind="stable")
    at = np.minimum(np.searchsorted(rows, wanted, sorter=sorter), len(rows) - 1)
    found = rows[sorter[at]] == wanted
    out[found] = sorter[at[found]]
    return out
