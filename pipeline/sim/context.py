"""What the core's components see of the simulation: one declared shape, no import of the core.

The core (:class:`pipeline.sim.core.Simulation`) owns the replay's state (task table, cluster
nodes, completion heap, records) and the event loop, and calls its components at named
points: tasks arriving (``sim.admission``, :mod:`pipeline.sim.admission`), the policy's
views (``sim.views``, :mod:`pipeline.sim.views`), the decision step
(``sim.decisions``, :mod:`pipeline.sim.decisions`), runs that end early (``sim.runs``,
:mod:`pipeline.sim.runs`), speculative copies (``sim.speculation``,
:mod:`pipeline.sim.speculation`), speed changes (:mod:`pipeline.sim.contention`) and the
NodeManagers' queues (``sim.nm``, :mod:`pipeline.sim.nodemanager`).  The components are
typed against :class:`SimContext`, not against the core class or each other, so that no
module below the core imports it (the import graph of ``pipeline.sim`` stays acyclic: the
project's import-cycle tool checks it); one component reaches another through the port it
is declared as here.  The members are exactly those the components read, write or call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:  # types only: none of these import the core
    from pipeline.sim.cluster import FixedCluster
    from pipeline.sim.deps import Dependencies
    from pipeline.sim.gangs import Gangs
    from pipeline.sim.gpus import GpuDevices
    from pipeline.sim.interface import ClusterInfo, Policy, SchedView
    from pipeline.sim.jobstats import JobStats
    from pipeline.sim.models import GpuModels
    from pipeline.sim.needs import Needs
    from pipeline.sim.pending import PendingQueue
    from pipeline.sim.tasks import Heap, Records, TaskTable
    from pipeline.sim.usage import Usage


class ViewsPort(Protocol):
    """What the decision step and speculative copies ask of the policy's views
    (:class:`pipeline.sim.views.PolicyViews`)."""

    running_slots: np.ndarray | None  # slots of the running view last shown (None: none)

    def view(self, at: float) -> SchedView: ...


class RunsPort(Protocol):
    """What the components ask of the runs that end early
    (:class:`pipeline.sim.runs.RunStops`)."""

    def release(self, at: float, slots: np.ndarray) -> np.ndarray: ...
    def free(self, slots: np.ndarray, at: np.ndarray) -> None: ...
    def stop(self, at: float, slots: np.ndarray, requeue: bool, evicted: bool = False,
             outcome: int = ..., reason: str = "") -> None: ...
    def back_to_rm(self, at: float, slots: np.ndarray) -> None: ...


class SpeculationPort(Protocol):
    """What the decision step and the runs' stops ask of speculative copies
    (:class:`pipeline.sim.speculation.Speculation`)."""

    def launch(self, at: float, run_idx: np.ndarray, node: np.ndarray) -> None: ...
    def split_stops(self, at: float, slots: np.ndarray, requeue: bool,
                    evicted: bool) -> np.ndarray: ...


class NodeManagerPort(Protocol):
    """What the decision step, the runs' stops and speculative copies ask of the
    NodeManagers' queues (:class:`pipeline.sim.nodemanager.NodeManagers`)."""

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
    job_stats: JobStats | None
    policy: Policy
    policy_name: str
    needs: Needs
    info: ClusterInfo
    # the components one another calls
    views: ViewsPort
    runs: RunsPort
    speculation: SpeculationPort
    nm: NodeManagerPort | None
    # counters, clocks and what the decision step reads
    n_tasks: int
    events: int
    calls: int
    placements: int
    last_s: float
    wake_at: float
    needs_decision: bool
    idle_calls: bool
    open_flag: int
    _read_rate: np.ndarray  # MiB/s input is read at (node-local, rack-local, off-rack)
    _incoming: list[tuple[np.ndarray, np.ndarray]]  # (enter times, slots) to queue

    # the core's own steps the components call
    def _merge_incoming(self) -> None: ...
    def _release_children(self, slots: np.ndarray, ends: np.ndarray) -> None: ...
