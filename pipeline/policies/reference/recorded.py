"""``recorded``: the real cluster as a reference, each task started where and when the trace
says it ran.

The trace's own scheduling decisions (``recorded_machine_id``, ``recorded_start_s``: the
SCHEDULE event and machine of the attempt the trace records, Google 2011 task_events; the
instance's start and machine, Alibaba batch_instance and container_meta) are replayed on
the trace's machines, so the report can put what the real cluster did next to every policy,
metric for metric.  It is not a scheduler: it knows the future (when each task started).

Where the recorded decision cannot be replayed exactly, this is what happens, and the
fidelity test (tests/policies/test_recorded.py) measures how often on the real samples:

- Scheduling points fall on the core's 1 s grid, so a task starts up to 1 s after its
  recorded start; a task is placed at the first point at or after that start (and never
  before its submit or its parents).
- The recorded machine may lack room: the real clusters over-committed (Google 2011's
  requests could add up to more than a machine's capacity), a trace may not give the
  machines' capacities (the Google sample has no machine_events: capacities are assumed),
  and the core refuses a placement that does not fit.  The task then starts at its recorded
  time on another node (the one with the least memory allocated that fits it, as
  ``yarn-uniform``): the trace says it ran then, so its time and the cluster's allocated
  load are kept, its placement is not.  When nothing fits it waits.
- No recorded machine (not in the trace, not among its machines, an Alibaba 2017 trace
  without batch_instance, a user's trace without the columns), or a machine that is down (a
  task evicted by a failure restarts elsewhere, as in the trace): the same, at its recorded
  start (else when it is ready).

It needs the trace's machines: it runs on the fixed cluster only (``clusters``), and a
replay on an elastic one is refused before it starts.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.models import pending_allow
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.models import may_run
from pipeline.sim.needs import Needs

UP = 2


@njit(cache=True)
def split_due(start, node, state, now):  # pragma: no cover - compiled
    """The waiting tasks due now (recorded start passed, or none recorded): those with an
    up recorded node, and the others (both in index order); and the earliest start to
    come (inf if none)."""
    n = start.size
    mine = np.empty(n, dtype=np.int64)
    rest = np.empty(n, dtype=np.int64)
    a = 0
    b = 0
    wake = np.inf
    for i in range(n):
        s = start[i]
        if s > now:  # not due yet (NaN compares false: due)
            if s < wake:
                wake = s
            continue
        nd = node[i]
        if nd >= 0 and state[nd] == UP:
            mine[a] = i
            a += 1
        else:
            rest[b] = i
            b += 1
    return mine[:a], rest[:b], wake


class RecordedCluster(PolicyBase):
    """Starts each task where and when the trace recorded it (a reference, not a policy)."""

    name = "recorded"
    summary = ("The real cluster as recorded: each task on its recorded machine at its "
               "recorded start (a reference for the policies)")
    source = ("The traces' own decisions: Google clusterdata-2011-2 task_events SCHEDULE "
              "(time, machine); Alibaba 2017/2018 batch_instance start_time and machine_id, "
              "container_meta")
    PARAMS: ClassVar[dict[str, Param]] = {}
    clusters: ClassVar[tuple[str, ...]] = ("fixed",)
    reference: ClassVar[bool] = True

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        self.index_ = NodeIndex(cluster.n_nodes)
        return Needs()

    def decide(self, view: SchedView) -> Decisions:
        pending, nodes, now = view.pending, view.nodes, view.now
        self.index_.refresh(nodes)  # every call: it follows the nodes that changed since
        if len(pending) == 0:
            return Decisions()
        start = np.asarray(pending.recorded_start_s)
        node = np.asarray(pending.recorded_node, dtype=np.int64)
        # one compiled pass over the waiting tasks (a backlog can hold millions)
        mine, rest, wake = split_due(start, node, np.asarray(nodes.state), float(now))
        allow = pending_allow(view)
        if allow is not None and len(mine):  # a recorded node of another GPU model: elsewhere
            other = ~may_run(allow[mine], np.asarray(nodes.gpu_model)[node[mine]])
            if other.any():
                rest = np.sort(np.concatenate([rest, mine[other]]))
                mine = mine[~other]
        placed_req, placed_node = [], []
        if len(mine):  # first, what can start where it was recorded
            order = mine[np.lexsort((mine, start[mine]))]  # recorded start order
            ok = self.index_.place_on(nodes, pending.req, node, order)
            if len(ok):
                placed_req.append(ok)
                placed_node.append(node[ok])
            if len(ok) < len(mine):  # no room there: with the rest
                missed = np.ones(len(mine), dtype=bool)
                missed[np.searchsorted(mine, ok)] = False  # mine is in index order
                rest = np.sort(np.concatenate([rest, mine[missed]]))
        if len(rest):  # then the rest, where there is room
            req = pending.req if len(rest) == len(pending) else pending.req[rest]
            r, nd = self.index_.place(nodes, np.ascontiguousarray(req), None, packing=False,
                                      allow=allow if allow is None or len(rest) == len(pending)
                                      else allow[rest])
            placed_req.append(rest[r])
            placed_node.append(nd)
        wake_at = None if np.isinf(wake) else wake
        if not placed_req:
            return Decisions(wake_at_s=wake_at)
        return Decisions(place_req=np.concatenate(placed_req),
                         place_node=np.concatenate(placed_node), wake_at_s=wake_at)
