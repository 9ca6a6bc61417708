"""The elastic cluster: identical template nodes scaled by a Qubole-style autoscaler.

Upscaling (Qubole: "container requests waiting more than three minutes" trigger it and
"QDS adds as many nodes as are needed, up to the Maximum Worker Nodes"): at each scheduling
point, the requests pending for at least ``upscale_wait_s`` are bin-counted first-fit against
the template; nodes already booting are subtracted; the rest are requested, up to
``max_nodes``.  A requested node is billed from the request time and can take containers
``boot_delay_s`` later.

Downscaling ("aggressive downscaling"): an up node with no containers for ``idle_s`` seconds
is released at the first scheduling point at or after that deadline (the deadline is an
event, so with ``sched_interval_s = 0`` exactly then), never going below ``min_nodes``; the
longest-idle nodes go first.  ``idle_s = 0`` releases idle nodes at once (the blog's
example); the default of 60 s is a short cool-down so a node that empties just before the
next wave of requests is not released and re-bought.  The cluster starts with
``initial_nodes`` nodes up at time 0 (default ``min_nodes``; set it to the trace's cluster
size to start from a provisioned cluster).  When the replay ends every node still
provisioned is released.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.binpack import FIT_EPS, first_fit
from pipeline.sim.cluster import (
    ABSENT,
    BOOTING,
    UP,
    BootQueue,
    ClusterSpec,
    Intervals,
    NodeState,
)


def bins_needed(req: np.ndarray, template: np.ndarray, limit: int) -> int:
    """How many template nodes first-fit packing of ``req`` rows (queue order) needs, at
    most ``limit`` (:func:`pipeline.sim.binpack.first_fit`)."""
    placed = np.zeros(len(req), dtype=np.bool_)
    return int(first_fit(req, template, int(limit), placed, True))


class ElasticCluster(BootQueue):
    """Template nodes between ``min_nodes`` and ``max_nodes``, with boot delay and idle release."""

    kind = "elastic"
    drains = False  # deletes no busy node (pipeline.sim.kubernetes does)
    n_racks = 0

    def __init__(self, spec: ClusterSpec) -> None:
        super().__init__()
        self.spec = spec
        self.min_nodes = spec.min_nodes
        self.max_nodes = spec.max_nodes
        self.template = np.array([spec.node_cpu, spec.node_mem, spec.node_gpu])
        self.nodes = NodeState(spec.max_nodes)
        self.nodes.cap[:] = self.template
        self.shapes = self.template[None, :]
        self.machine_ids: list[str] = []
        self.intervals = Intervals()
        for _ in range(spec.initial_nodes):
            node = self._provision(0.0, ready_s=0.0)
            self.nodes.bring_up(0.0, node)

    def _provision(self, t: float, ready_s: float) -> int:
        """Take the lowest free slot for a new node instance requested at ``t``."""
        node = int(np.flatnonzero(self.nodes.state == ABSENT)[0])
        instance = len(self.machine_ids)
        self.machine_ids.append(f"elastic-{instance:06d}")
        self.nodes.instance[node] = instance
        self.nodes.state[node] = BOOTING
        self.nodes.dirty[node] = True
        self.intervals.start(instance, t, ready_s)
        return node

    def node_down(self, t: float, node: int) -> None:  # elastic nodes never fail
        raise AssertionError("elastic nodes are only released when idle")

    def fits_some(self, req: np.ndarray) -> np.ndarray:
        return np.all(req <= self.template * (1 + FIT_EPS) + 1e-12, axis=1)

    def autoscale(self, now: float, pending_req: np.ndarray, pending_enter: np.ndarray) -> int:
        """Release idle nodes and request new ones; return how many nodes changed."""
        return self._downscale(now) + self._upscale(now, pending_req, pending_enter)

    def _upscale(self, now: float, pending_req: np.ndarray, pending_enter: np.ndarray) -> int:
        room = self.max_nodes - self.nodes.n_provisioned()
        if room <= 0 or len(pending_enter) == 0:
            return 0
        waited = np.flatnonzero(pending_enter + self.spec.upscale_wait_s <= now)
        if len(waited) == 0:
            return 0
        booting = int(np.count_nonzero(self.nodes.state == BOOTING))
        demand = np.ascontiguousarray(pending_req[waited])
        need = bins_needed(demand, self.template, room + booting) - booting
        for _ in range(min(need, room)):
            ready = now + self.spec.boot_delay_s
            self.boot(self._provision(now, ready), ready)
        return max(0, min(need, room))

    def _downscale(self, now: float) -> int:
        spare = self.nodes.n_provisioned() - self.min_nodes
        if spare <= 0:
            return 0
        st = self.nodes
        idle = np.flatnonzero(
            (st.state == UP) & (st.ncont == 0) & (st.idle_since + self.spec.idle_s <= now)
        )
        if len(idle) == 0:
            return 0
        order = np.lexsort((idle, st.idle_since[idle]))
        for node in idle[order][:spare]:
            st.state[node] = ABSENT
            st.dirty[node] = True
            self.intervals.stop(int(st.instance[node]), now)
            st.instance[node] = -1
        return min(spare, len(idle))

    def next_check(self, now: float, pending_enter: np.ndarray) -> float:
        """The next time the autoscaler would act on its own (a wait or idle deadline)."""
        t = np.inf
        if len(pending_enter) and self.nodes.n_provisioned() < self.max_nodes:
            due = pending_enter + self.spec.upscale_wait_s
            due = due[due > now]
            if len(due):
                t = float(due.min())
        if self.nodes.n_provisioned() > self.min_nodes:
            st = self.nodes
            idle = (st.state == UP) & (st.ncont == 0)
            due = st.idle_since[idle] + self.spec.idle_s
            due = due[due > now]
            if len(due):
                t = min(t, float(due.min()))
        return t

    def price_per_hour(self, instance: int) -> float:
        return self.spec.price_per_hour

    def close(self, end_s: float) -> None:
        self.intervals.close_all(end_s)
