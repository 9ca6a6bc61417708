"""What a policy is shown at a scheduling point: the core's component that builds the
read-only :class:`~pipeline.sim.interface.SchedView` (nodes, pending work, the running
containers, heartbeats, job statistics) from the simulation's state.

It owns what only the views need: the read-only node view, the allocation the policy sees
when GPUs are bound to devices, the heartbeat window and the running containers it last
showed (which a policy's preemptions, kills and copies index into).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim.cluster import UP
from pipeline.sim.interface import NodeView, PendingView, RunningView, SchedView, readonly
from pipeline.sim.tasks import RUNNING

if TYPE_CHECKING:
    from pipeline.sim.context import SimContext
    from pipeline.sim.heartbeat import Heartbeats


class PolicyViews:
    """The views handed to the policy of the simulation ``sim`` (the core holds one as
    ``sim.views``)."""

    def __init__(self, sim: SimContext) -> None:
        self.sim = sim
        nodes = sim.cluster.nodes
        gpus, models = sim.gpus, sim.models
        self.node_view = NodeView(
            cap=readonly(nodes.cap), alloc=readonly(nodes.alloc), used=readonly(nodes.used),
            n_containers=readonly(nodes.ncont), state=readonly(nodes.state),
            speed=readonly(nodes.speed), rack=readonly(nodes.rack),
            opp_alloc=readonly(nodes.oalloc), opp_queued=readonly(nodes.oppq),
            opp_oldest_s=readonly(nodes.oppq_since), done=readonly(nodes.done),
            done_run_s=readonly(nodes.done_s),
            gpu_free=readonly(gpus.free) if gpus is not None else None,
            gpu_model=readonly(models.bits) if models is not None else None,
        )
        if gpus is not None:  # the GPU a request cannot use, as policies see it
            self._view_alloc = nodes.alloc.copy()
            self.node_view.alloc = readonly(self._view_alloc)
        # nodes' heartbeats, when the policy asked for them (set by the core after setup)
        self.heartbeats: Heartbeats | None = None
        self._hb_from = -np.inf  # heartbeats before this time were offered already
        # slots of the running view last shown (None: none shown in this call)
        self.running_slots: np.ndarray | None = None

    def view(self, at: float) -> SchedView:
        """The read-only view handed to the policy at scheduling point ``at``."""
        sim = self.sim
        nodes = sim.cluster.nodes
        self.running_slots = None
        if sim.gpus is not None:  # devices of tasks that ended since are free again
            sim.gpus.sync(sim.tasks)
            np.copyto(self._view_alloc, nodes.alloc)
            self._view_alloc[:, 2] = nodes.cap[:, 2] - sim.gpus.room()
        self.node_view.changed = readonly(np.flatnonzero(nodes.dirty))
        self.node_view.n_provisioned = nodes.n_provisioned()
        nodes.dirty[:] = False
        running = self.running_view(at) if sim.needs.running else None
        return SchedView(now=at, cluster=sim.info, nodes=self.node_view,
                         pending=self.pending_view(at), running=running,
                         beats=self._offers(at) if self.heartbeats is not None else None,
                         jobs=sim.job_stats.view() if sim.job_stats is not None else None)

    def _offers(self, at: float) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """Up nodes' heartbeats since the previous call (``self._hb_from``) up to ``at``, at
        most one interval's: a node's earlier reports in a longer gap offered the room it
        offers now to the same waiting work (the policy asks to be woken every interval
        while work waits, so a longer gap means nothing was waiting).

        Returned as a function, computed once when the policy first reads them during the
        call (node states do not change until it returns); the window moves on either way.
        """
        assert self.heartbeats is not None
        beats, cluster = self.heartbeats, self.sim.cluster
        t0 = max(self._hb_from, at - beats.h)
        self._hb_from = at

        @cache
        def offers() -> tuple[np.ndarray, np.ndarray]:
            nodes, times = beats.between(t0, at)
            up = cluster.nodes.state[nodes] == UP
            return readonly(nodes[up]), readonly(times[up])

        return offers

    def pending_view(self, at: float) -> PendingView:
        """The requests waiting in the RM's queue (queue order)."""
        q = self.sim.queue
        return PendingView(at, readonly(q.slots), self.sim.tasks, req=readonly(q.req),
                           job=readonly(q.job))

    def running_view(self, at: float) -> RunningView:
        """The running containers (slot order), for policies that preempt or speculate."""
        sim = self.sim
        slots = sim.tasks.in_state(RUNNING)
        self.running_slots = slots
        return RunningView(at, slots, sim.tasks, sim.cluster.nodes.speed)
