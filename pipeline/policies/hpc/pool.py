"""Free capacity during one scheduling pass of an HPC policy: where a job fits now.

A rigid job is one task asking for ``cpu`` processors (and memory, GPUs) on one node, or a
gang of such tasks (``gang``: an SWF log read as ``MaxNodes`` nodes spreads a job over the
nodes it needs, :mod:`pipeline.ingest.swf_nodes`) that must all start at once.  For a log read
as one pool of ``MaxProcs`` processors, the pool is the node.  Placements are made in order
and each one takes its room at once, so the next job of the same pass sees what is left.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from pipeline.sim.interface import NodeView
from pipeline.sim.models import may_run

SLACK = 1e-9  # the core's relative slack on capacity checks


class Pool:
    """Free capacity of the up nodes during one pass, updated as jobs are placed."""

    def __init__(self, nodes: NodeView, allow: np.ndarray | None = None) -> None:
        self.free = np.where(nodes.up[:, None], nodes.cap - nodes.alloc, -np.inf)
        # the pending requests' GPU model masks and the nodes' model bits (None: any node)
        self.allow, self.bits = allow, nodes.gpu_model

    def node_for(self, req: np.ndarray, row: int = -1) -> int:
        """The first node (lowest slot) where ``req`` (pending request ``row``) fits now and
        whose GPU model it allows, -1 if none."""
        fits = np.all(self.free >= req - SLACK * np.maximum(np.abs(req), 1.0), axis=1)
        if self.allow is not None and self.bits is not None and row >= 0 and self.allow[row]:
            fits &= may_run(self.allow[row], self.bits)
        hit = np.flatnonzero(fits)
        return int(hit[0]) if len(hit) else -1

    def take(self, node: int, req: np.ndarray) -> None:
        """Hold ``req`` on ``node`` for the rest of the pass."""
        self.free[node] -= req

    def place_job(self, req: np.ndarray, rows: np.ndarray) -> list[int] | None:
        """Nodes for every task ``rows`` of one job, taken at once; None (nothing taken)
        when some task does not fit."""
        nodes: list[int] = []
        for row in rows:
            node = self.node_for(req[row], int(row))
            if node < 0:
                for taken, back in zip(nodes, rows, strict=False):
                    self.free[taken] += req[back]
                return None
            self.take(node, req[row])
            nodes.append(node)
        return nodes

    def free_cpu(self) -> float:
        """Processors free now over the up nodes."""
        up = np.isfinite(self.free[:, 0])
        return float(self.free[up, 0].sum())


def jobs_in_queue(gang: np.ndarray) -> list[np.ndarray]:
    """The pending queue as jobs: each request alone, except that consecutive requests of
    one gang (code >= 0) form one job."""
    n = len(gang)
    if n == 0:
        return []
    starts = np.ones(n, dtype=bool)
    starts[1:] = (gang[1:] < 0) | (gang[1:] != gang[:-1])
    edges = np.append(np.flatnonzero(starts), n)
    return [np.arange(lo, hi) for lo, hi in pairwise(edges)]
