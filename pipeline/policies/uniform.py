"""``yarn-uniform``: YARN's default placement, spreading containers over qualified nodes.

Source: Hadoop YARN FairScheduler continuous scheduling visits "all nodes sorted by
unallocated resource, most free first" (FairScheduler.md / ``NodeAvailableResourceComparator``,
apache/hadoop 3.3), and the default ``DefaultResourceCalculator`` "only uses Memory"
(CapacityScheduler.md); Qubole's container-packing blog (2017) describes the result: "YARN by
default allocates uniformly among qualified nodes".  Here: requests in queue order, each on
the up node that fits it with the lowest allocated-memory fraction (ties: lower cpu
fraction, then lower node slot).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.models import pending_allow
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs


class YarnUniform(PolicyBase):
    """Least-allocated-first spreading (YARN default); no parameters."""

    name = "yarn-uniform"
    summary = "YARN default: each request on the qualified node with the least memory allocated"
    source = ("Apache Hadoop 3.3 FairScheduler/CapacityScheduler docs; Qubole, 'Container "
              "Packing: A New Algorithm for Resource Scheduling in the Cloud' (2017)")
    PARAMS: ClassVar[dict[str, Param]] = {}

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        self.index_ = NodeIndex(cluster.n_nodes)
        return Needs()

    def decide(self, view: SchedView) -> Decisions:
        self.index_.refresh(view.nodes)
        req, node = self.index_.place(view.nodes, view.pending.req, None, packing=False,
                                     allow=pending_allow(view))
        return Decisions(place_req=req, place_node=node)
