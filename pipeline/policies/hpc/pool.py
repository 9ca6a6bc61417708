"""Free capacity during one scheduling pass of an HPC policy: where a job fits now.

A rigid job is one task asking for ``cpu`` processors (and memory, GPUs) on one node, or a
gang of such tasks (``gang``: an SWF log read as ``MaxNodes`` nodes spreads a job over the
nodes it needs, :mod:`pipeline.ingest.swf_nodes`) that must all start at once.  For a log read
as one pool of ``MaxProcs`` processors, the pool is the node.  Placements are made in order
and each one takes its room at once, so the next job of the same pass sees what is left.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.models import may_use
from pipeline.sim.interface import NodeView
from pipeline.sim.jit import helper

SLACK = 1e-9  # the core's relative slack on capacity checks


class Room(NamedTuple):
    """What the compiled passes read and update (node slots, pending positions)."""

    free: np.ndarray  # (nodes, resources) float: free room of each up node, -inf when down
    req: np.ndarray  # (pending, resources) float: what each pending request asks
    allow: np.ndarray  # (pending,) int: GPU model mask per request; empty: any node
    bits: np.ndarray  # (nodes,) int: each node's GPU model bits; empty: any node
    first: np.ndarray  # (1,) int: no node below first[0] has room for any request
    floor: np.ndarray  # (resources,) float: least room any request fits in (room_floor)


class Placed(NamedTuple):
    """Where the passes write their placements, in placement order."""

    row: np.ndarray  # (pending,) int: the pending position of each placed task
    node: np.ndarray  # (pending,) int: its node slot


class Pool:
    """Free capacity of the up nodes during one pass over the pending requests ``req``,
    updated as jobs are placed (by the compiled passes below, which place each task on the
    lowest node where it fits), and what the passes share: the room no request fits below
    (:func:`room_floor`) and the lowest node that may have room (``first[0]``)."""

    def __init__(self, nodes: NodeView, req: np.ndarray,
                 allow: np.ndarray | None = None) -> None:
        self.free = np.where(nodes.up[:, None], nodes.cap - nodes.alloc, -np.inf)
        self.req = np.asarray(req, np.float64)
        self.floor = room_floor(self.req)
        self.first = np.zeros(1, np.int64)
        # the pending requests' GPU model masks and the nodes' model bits (empty: any node)
        none = allow is None or nodes.gpu_model is None
        self.allow = np.zeros(0, np.int64) if none else np.asarray(allow, np.int64)
        self.bits = np.zeros(0, np.int64) if none else np.asarray(nodes.gpu_model, np.int64)
        # the same arrays, as the compiled passes take them (updated in place through it)
        self.room = Room(self.free, self.req, self.allow, self.bits, self.first, self.floor)

    def free_cpu(self) -> float:
        """Processors free now over the up nodes."""
        up = np.isfinite(self.free[:, 0])
        return float(self.free[up, 0].sum())


def job_starts(gang: np.ndarray) -> np.ndarray:
    """The pending queue as jobs, as ``[starts[k], starts[k + 1])`` ranges of positions:
    each request alone, except that consecutive requests of one gang (code >= 0) form one
    job."""
    n = len(gang)
    if n == 0:
        return np.zeros(1, np.int64)
    starts = np.ones(n, dtype=bool)
    starts[1:] = (gang[1:] < 0) | (gang[1:] != gang[:-1])
    return np.append(np.flatnonzero(starts), n).astype(np.int64)


@njit(cache=True)
def room_floor(req):  # pragma: no cover - compiled
    """Per resource, the least free room any request fits in (with the slack): a node below
    it in some resource has room for no request; (0, 0, 0) when nothing is pending."""
    floor = np.zeros(req.shape[1]) if len(req) == 0 else np.full(req.shape[1], np.inf)
    for i in range(len(req)):
        for r in range(req.shape[1]):
            x = req[i, r]
            floor[r] = min(floor[r], x - SLACK * max(abs(x), 1.0))
    return floor


@helper
def node_for(room, i):  # pragma: no cover - compiled
    """The first node (lowest slot) where request ``i`` fits now and whose GPU model it
    allows (``allow`` empty: any), -1 if none.  ``first[0]``: no node below it has room
    for any request (:func:`room_floor`); moved past the full nodes first."""
    free, req, allow, bits, first, floor = (room.free, room.req, room.allow, room.bits,
                                            room.first, room.floor)
    nd0 = first[0]
    while nd0 < free.shape[0]:
        full = False
        for r in range(free.shape[1]):
            full = full or free[nd0, r] < floor[r]
        if not full:
            break
        nd0 += 1
    first[0] = nd0
    for nd in range(nd0, free.shape[0]):
        ok = True
        for r in range(free.shape[1]):
            x = req[i, r]
            if not free[nd, r] >= x - SLACK * max(abs(x), 1.0):
                ok = False
                break
        if ok and (len(allow) == 0 or may_use(allow[i], bits, nd)):
            return nd
    return -1


@helper
def place_job(room, lo, hi, out, n):  # pragma: no cover - compiled
    """Nodes for every task ``lo..hi-1`` of one job, taken at once and written to
    ``out[n:]``; False (nothing taken) when some task does not fit."""
    free, req, first = room.free, room.req, room.first
    out_row, out_node = out.row, out.node
    for i in range(lo, hi):
        nd = node_for(room, i)
        if nd < 0:
            for k in range(n, n + i - lo):  # give back what this job took, in order
                for r in range(free.shape[1]):
                    free[out_node[k], r] += req[out_row[k], r]
                first[0] = min(first[0], out_node[k])
            return False
        for r in range(free.shape[1]):
            free[nd, r] -= req[i, r]
        out_row[n + i - lo] = i
        out_node[n + i - lo] = nd
    return True


@njit(cache=True)
def fcfs_pass(room, starts, out):  # pragma: no cover - compiled
    """Jobs (``starts``: :func:`job_starts`) from the head of the queue while they fit;
    returns (tasks placed, the first job that did not fit: the number of jobs when all
    did)."""
    n = 0
    for k in range(len(starts) - 1):
        lo, hi = starts[k], starts[k + 1]
        if not place_job(room, lo, hi, out, n):
            return n, k
        n += hi - lo
    return n, len(starts) - 1


@njit(cache=True)
def backfill_pass(room, starts, head, size, ends, shadow, extra, out,
                  n):  # pragma: no cover - compiled
    """EASY's backfill behind job ``head``: a later job starts if it fits now and either
    ends (``ends``: planned end per job) by the ``shadow`` time or takes no more than the
    ``extra`` processors left (``size``: processors per job); ``out[:n]`` holds the tasks
    placed before; returns the tasks placed in all."""
    for k in range(head + 1, len(starts) - 1):
        by_shadow = ends[k] <= shadow
        if not by_shadow and size[k] > extra:
            continue
        lo, hi = starts[k], starts[k + 1]
        if not place_job(room, lo, hi, out, n):
            continue
        if not by_shadow:
            extra -= size[k]
        n += hi - lo
    return n
