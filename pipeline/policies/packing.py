"""``container-packing``: Qubole's packing of containers onto few nodes so others go idle.

Source: Qubole, "Container Packing: A New Algorithm for Resource Scheduling in the Cloud"
(blog, June 2017, updated Nov 2018) and Qubole's YARN docs (see docs/semantics.md section 4).
Nodes are Medium (at least one container, memory usage at or below the threshold), Low (no
containers) or High (usage above it); usage = allocated memory / node memory.  Each request,
in queue order, goes to:

1. a Medium node, higher usage first, if its usage *after* placement stays at or below the
   threshold (the blog's 10-node example with threshold 80% gives 8/8/4 only with this rule);
   a request whose data is on some nodes (``inputs``) tries the Medium nodes among those
   first (Qubole's ``locality-delay-node-ms``, 6 ms: "tried on preferred nodes in the Medium
   set before other nodes, in a later iteration"; 6 ms is below tracereplay's scheduling
   step, so the fallback to other nodes comes in the same step; -1 turns this off);
2. else a Low node picked at random (the run's seeded generator);
3. else a node with containers (High, or Medium the threshold turned away), lower usage first.

Packing is off (falling back to ``yarn-uniform``'s least-allocated-first) while the cluster
is at its minimum size (elastic clusters) or has fewer than ``packing_min_nodes`` provisioned
nodes (Qubole ``continuous-scheduling-packed.min.nodes``; named apart from the elastic
cluster's own ``min_nodes``).  A fixed cluster cannot scale, so it has no minimum size and
only ``packing_min_nodes`` applies.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.models import pending_allow
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs


class ContainerPacking(PolicyBase):
    """Pack containers on busy nodes up to a memory threshold (Qubole 2017)."""

    name = "container-packing"
    summary = ("Qubole container packing: fill busy nodes up to a memory threshold, then "
               "random empty ones")
    source = ("Qubole, 'Container Packing: A New Algorithm for Resource Scheduling in the Cloud' "
              "(2017); yarn.scheduler.fair.continuous-scheduling-packed.* settings")
    PARAMS: ClassVar[dict[str, Param]] = {
        "high_memory_threshold": Param(
            0.6, "memory usage above which a node is High (Qubole default 60%)", float, 0.0, 1.0),
        "packing_min_nodes": Param(
            5, "below this many provisioned nodes, place uniformly (Qubole min.nodes, 5)", int,
            0),
        "locality_delay_node_ms": Param(
            6.0, "Qubole locality-delay-node-ms: Medium nodes holding a request's data first "
                 "(-1: ignore where data is)", float, -1.0),
    }
    high_memory_threshold: float
    packing_min_nodes: int
    locality_delay_node_ms: float

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        self.index_ = NodeIndex(cluster.n_nodes, self.high_memory_threshold, busy=True)
        return Needs()

    def packing_active(self, view: SchedView) -> bool:
        """Whether packing applies now (else the uniform fallback)."""
        size = view.nodes.n_provisioned
        at_min = view.cluster.min_nodes is not None and size <= view.cluster.min_nodes
        return size >= self.packing_min_nodes and not at_min

    def decide(self, view: SchedView) -> Decisions:
        self.index_.refresh(view.nodes)
        req = view.pending.req
        active = self.packing_active(view)
        u = self.rng_.random(len(req)) if active else None
        inputs = (view.pending.inputs if active and self.locality_delay_node_ms >= 0
                  else None)
        placed, node = self.index_.place(view.nodes, req, u, packing=active, inputs=inputs,
                                         allow=pending_allow(view))
        return Decisions(place_req=placed, place_node=node)
