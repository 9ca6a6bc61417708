"""The replay core: event-driven, policy-blind, deterministic (see :mod:`pipeline.sim.core`).

The policy interface is documented in :mod:`pipeline.sim.interface`.
"""

from pipeline.sim.autoscaler import ElasticCluster
from pipeline.sim.cluster import ClusterSpec, FixedCluster
from pipeline.sim.core import SimOptions, SimSummary, Simulation
from pipeline.sim.interface import Decisions, PolicyError, SchedView
from pipeline.sim.source import TaskBatch

__all__ = ["ClusterSpec", "Decisions", "ElasticCluster", "FixedCluster", "PolicyError",
           "SchedView", "SimOptions", "SimSummary", "Simulation", "TaskBatch"]
