"""What the Kubernetes cluster models share: the core's cluster interface over a
:class:`~.pool.TypedPool` (node events, fit checks, prices and types per instance)."""

from __future__ import annotations

import numpy as np

from pipeline.sim.cluster import fits_some
from pipeline.sim.kubernetes.pool import TypedPool


class PoolCluster:
    """The core's view of a cluster model that buys priced instance types and deletes busy
    nodes itself (``drains``); subclasses decide what to buy and what to delete."""

    n_racks = 0
    drains = True

    def __init__(self, pool: TypedPool, shapes: np.ndarray) -> None:
        self.pool = pool
        self.nodes = pool.nodes
        self.machine_ids = pool.machine_ids
        self.intervals = pool.intervals
        self.shapes = shapes  # the allocatables a new node may have (admission's check)
        self.max_nodes = len(self.nodes)
        self.min_nodes = 0
        self.counts: dict[str, int] = {}
        self._due = np.inf  # the loop the core was last told of

    # -- the model's loop on a grid of ``step`` seconds -----------------------------------
    def _next_loop(self, now: float, step: float, busy: bool) -> float:
        """The next multiple of ``step`` after ``now`` while a loop could change something
        (``busy``; else none), remembered as the loop due."""
        if not busy:
            self._due = np.inf
        else:
            self._due = float((np.floor(now / step) + 1.0) * step) if np.isfinite(now) else 0.0
        return self._due

    def _loop_runs(self, now: float, step: float) -> bool:
        """Whether a loop runs at ``now``: the one the core was woken for, or one on the
        grid (a scheduling point that falls on it)."""
        return now >= self._due or now == np.floor(now / step) * step

    def next_event(self) -> float:
        return self.pool.next_event()

    def pop_event(self) -> tuple[float, int, bool]:
        return self.pool.pop_event()

    def node_up(self, t: float, node: int) -> None:
        self.pool.node_up(t, node)

    def node_down(self, t: float, node: int) -> None:  # pragma: no cover - never asked
        raise AssertionError(f"{type(self).__name__}'s nodes are only deleted by the model")

    def fits_some(self, req: np.ndarray) -> np.ndarray:
        return fits_some(req, self.shapes)

    def price_per_hour(self, instance: int) -> float:
        return self.pool.price_per_hour(instance)

    def instance_caps(self) -> np.ndarray:
        return self.pool.instance_caps()

    def instance_types(self) -> list[str]:
        return self.pool.instance_types()

    def close(self, end_s: float) -> None:
        self.pool.close(end_s)

    def run_metrics(self) -> dict[str, tuple[float, str]]:
        return {name: (float(v), "count") for name, v in self.counts.items()}
