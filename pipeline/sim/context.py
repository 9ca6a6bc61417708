"""What the core's components see of the simulation: one declared shape, no import of the core.

The core (:class:`pipeline.sim.core.Simulation`) owns the replay's state (task table, cluster
nodes, completion heap, records) and the event loop; the parts that act on that state through
the core's extension points (the decision step of :mod:`pipeline.sim.ops`, speculative copies
in :mod:`pipeline.sim.speculation`, speed changes in :mod:`pipeline.sim.contention`, the
NodeManagers' queues in :mod:`pipeline.sim.nodemanager`) are typed against
:class:`SimContext`, not against the core class, so that no module below the core imports it
(the import graph of ``pipeline.sim`` stays acyclic: ``tests`` check it with the project's
import-cycle tool).  The attributes are those the components read or write; the methods those
one component calls on another through the core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:  # types only: none of these import the core
    from pipeline.sim.cluster import FixedCluster
    from pipeline.sim.deps import Dependencies
    from pipeline.sim.gangs import Gangs
    from pipeline.sim.gpus import GpuDevices
    from pipeline.sim.heartbeat import Heartbeats
    from pipeline.sim.interface import ClusterInfo, NodeView, Policy
    from pipeline.sim.jobstats import JobStats
    from pipeline.sim.models import GpuModels
    from pipeline.sim.needs import Needs
    from pipeline.sim.pending import PendingQueue
    from pipeline.sim.tasks import Heap, Records, TaskTable
    from pipeline.sim.usage import Usage


class NodeManagerPort(Protocol):
    """What the decision step and speculative copies ask of the NodeManagers' queues
    (:class:`pipeline.sim.nodemanager.NodeManagers`, which is typed against
    :class:`SimContext` itself, hence a port here rather than an import)."""

    def dispatch(self, sim: SimContext, at: float, slots: np.ndarray, nodes: np.ndarray
                 ) -> list[int]: ...
    def make_room(self, sim: SimContext, at: float, slots: np.ndarray, nodes: np.ndarray
                  ) -> None: ...
    def shed(self, sim: SimContext, at: float, limit: int) -> np.ndarray: ...
    def take_queued(self, nd: int) -> np.ndarray: ...
    def sync(self, sim: SimContext, nd: int) -> None: ...


class SimContext(Protocol):
    """The simulation as its components see it (see the module docstring)."""

    # state the core owns
    tasks: TaskTable
    cluster: FixedCluster  # or pipeline.sim.autoscaler.ElasticCluster (same duck type)
    heap: Heap
    records: Records
    queue: PendingQueue
    usage: Usage
    deps: Dependencies
    gangs: Gangs | None
    gpus: GpuDevices | None
    models: GpuModels | None
    nm: NodeManagerPort | None
    job_stats: JobStats | None
    policy: Policy
    policy_name: str
    needs: Needs
    info: ClusterInfo
    node_view: NodeView
    # counters and clocks
    events: int
    calls: int
    placements: int
    last_s: float
    wake_at: float
    needs_decision: bool
    idle_calls: bool
    open_flag: int
    _read_rate: np.ndarray
    _running_slots: np.ndarray | None
    _heartbeats: Heartbeats | None
    _hb_from: float
    _view_alloc: np.ndarray
    _incoming: list[tuple[np.ndarray, np.ndarray]]

    # extension points one component calls on another
    def release_runs(self, at: float, slots: np.ndarray) -> np.ndarray: ...
    def free_runs(self, slots: np.ndarray, at: np.ndarray) -> None: ...
    def _stop(self, at: float, slots: np.ndarray, requeue: bool, reason: str,
              evicted: bool = False) -> None: ...
    def _back_to_rm(self, at: float, slots: np.ndarray) -> None: ...
    def _release_children(self, slots: np.ndarray, ends: np.ndarray) -> None: ...
    def _merge_incoming(self) -> None: ...
    def is_copy(self, slots: np.ndarray) -> np.ndarray: ...
    def work_done(self, at: float, slots: np.ndarray) -> np.ndarray: ...
