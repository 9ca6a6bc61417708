"""The opportunistic-container layer: any guaranteed policy plus YARN's opportunistic
containers (YARN-2877, Hadoop 3.3; over-allocation from the YARN-1011 branch).

The layer sits between the core and a guaranteed policy (``yarn-uniform``,
``capacity-scheduler``, ``fair-scheduler``, ...), without that policy knowing:

- it splits the pending requests into guaranteed ones, which the inner policy sees and
  places as before, and opportunistic ones (:mod:`.types`), which the inner policy never
  sees (they ignore queues, fairness and capacity, as in YARN);
- the inner policy sees only guaranteed running containers (it cannot preempt an
  opportunistic one) and the RM's allocation (``alloc``: guaranteed containers only);
- opportunistic requests go to the k least-loaded nodes round-robin (:mod:`.loadmonitor`),
  and the queue limit is pushed to the NodeManagers at each re-sort;
- the NodeManagers themselves (queues, kills, pauses, over-allocation) are the core's
  (:mod:`pipeline.sim.nodemanager`), set up from what :meth:`own_needs` returns;
- it wraps any policy, a layer included: speculative copies a speculation layer inside it
  asks for are mapped back to the full running view (copies are made of guaranteed
  containers only, :mod:`..speculation.layer`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from pipeline.policies.layers.base import Layered
from pipeline.policies.layers.opportunistic.loadmonitor import LoadMonitor
from pipeline.policies.layers.opportunistic.types import ContainerTypes
from pipeline.sim.interface import ClusterInfo, Decisions, Policy, SchedView
from pipeline.sim.needs import Needs, NMOptions

EMPTY = np.zeros(0, dtype=np.int64)


class Opportunistic(Layered):
    """``inner`` with opportunistic containers; ``opp`` holds the resolved ``opp_*`` values
    (the pass-throughs to ``inner``: :class:`pipeline.policies.layers.base.Layered`)."""

    def __init__(self, inner: Policy, opp: dict[str, Any]) -> None:
        super().__init__(inner, opp)
        self.opp = self.layer_params
        self.types_: ContainerTypes | None = None
        self.monitor_: LoadMonitor | None = None

    def nm_options(self) -> NMOptions:
        o = self.opp
        return NMOptions(
            max_queue=int(o["opp_nm_queue"]), pause=bool(o["opp_pause"]),
            overalloc=(float(o["opp_overalloc_cpu"]), float(o["opp_overalloc_mem"])),
            preempt=(float(o["opp_preempt_cpu"]), float(o["opp_preempt_mem"])),
            preempt_cpu_count=int(o["opp_preempt_cpu_count"]),
            monitor_s=float(o["opp_monitor_s"]),
        )

    # -- the scheduling -----------------------------------------------------------------
    def own_needs(self, inner: Needs, cluster: ClusterInfo,
                  rng: np.random.Generator) -> Needs:
        """The container types and load monitor; the NodeManagers (with ``inner``'s needs)."""
        o = self.opp
        self.types_ = ContainerTypes(o["opp_by"], o["opp_percent"], o["opp_max_priority"],
                                     o["opp_queues"], cluster)
        self.monitor_ = LoadMonitor(o["opp_nodes_used"], o["opp_sort_interval_s"],
                                    o["opp_load"], o["opp_nm_queue"], o["opp_queue_stdev"],
                                    o["opp_min_queue"], o["opp_max_queue"])
        self._oldest: dict[int, float] = {}
        return inner.merged(node_managers=self.nm_options())

    def decide(self, view: SchedView) -> Decisions:
        assert self.types_ is not None and self.monitor_ is not None
        pending = view.pending
        opp = self.types_.mask(pending)
        g_idx = np.flatnonzero(~opp)
        o_idx = np.flatnonzero(opp)
        running, r_idx = view.running, None
        if running is not None:
            r_idx = np.flatnonzero(~running.opportunistic)
            running = running.subset(r_idx)
        inner = self.inner.decide(dataclasses.replace(
            view, pending=pending.subset(g_idx),
            running=running if self.inner_needs_.running else None))
        d = Decisions(
            place_req=g_idx[np.asarray(inner.place_req, dtype=np.int64)],
            place_node=np.asarray(inner.place_node, dtype=np.int64),
            preempt=_back(r_idx, inner.preempt), kill=_back(r_idx, inner.kill),
            spec_run=_back(r_idx, inner.spec_run),
            spec_node=np.asarray(inner.spec_node, dtype=np.int64),
            wake_at_s=inner.wake_at_s,
        )
        if len(inner.opp_req):
            raise ValueError("a policy inside the opportunistic layer returned "
                             "opportunistic decisions (stack one opportunistic layer only)")
        monitor = self.monitor_
        oldest = view.nodes.opp_oldest_s
        wait = None if oldest is None else np.nan_to_num(view.now - oldest, nan=0.0)
        if monitor.refresh(view.now, view.nodes, wait):
            d.opp_queue_limit = monitor.limit
        if len(o_idx):
            node = monitor.assign(len(o_idx))
            sent = node >= 0
            d.opp_req, d.opp_node = o_idx[sent], node[sent]
            if not sent.all() and monitor.room_at_sort:
                # the listed nodes took all they may until the next sort: ask for it (when
                # their queues were full at the sort, freed room brings the next call)
                again = monitor.sorted_at + max(monitor.interval_s, 1e-3)
                d.wake_at_s = again if d.wake_at_s is None else min(d.wake_at_s, again)
        return d


def _back(index: np.ndarray | None, positions: np.ndarray) -> np.ndarray:
    """Positions in the inner policy's running view as positions in the full view."""
    pos = np.asarray(positions, dtype=np.int64)
    if index is None:
        return EMPTY if len(pos) == 0 else pos
    return index[pos]
