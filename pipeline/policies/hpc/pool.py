"""Free capacity during one scheduling pass of an HPC policy: which node a job fits on now.

A rigid job is one task asking for ``cpu`` processors (and memory, GPUs) on one node; for a
Standard Workload Format log the cluster is one pool of ``MaxProcs`` processors, so the pool
is the node.  Placements are made in order and each one takes its room at once, so the next
job of the same pass sees what is left.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.interface import NodeView

SLACK = 1e-9  # the core's relative slack on capacity checks


class Pool:
    """Free capacity of the up nodes during one pass, updated as jobs are placed."""

    def __init__(self, nodes: NodeView) -> None:
        self.free = np.where(nodes.up[:, None], nodes.cap - nodes.alloc, -np.inf)

    def node_for(self, req: np.ndarray) -> int:
        """The first node (lowest slot) where ``req`` fits now, -1 if none."""
        fits = np.all(self.free >= req - SLACK * np.maximum(np.abs(req), 1.0), axis=1)
        hit = np.flatnonzero(fits)
        return int(hit[0]) if len(hit) else -1

    def take(self, node: int, req: np.ndarray) -> None:
        """Hold ``req`` on ``node`` for the rest of the pass."""
        self.free[node] -= req

    def free_cpu(self) -> float:
        """Processors free now over the up nodes."""
        up = np.isfinite(self.free[:, 0])
        return float(self.free[up, 0].sum())
