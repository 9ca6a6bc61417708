"""The NodeManager side of opportunistic containers through the core, with a hand-written
policy that sends containers where the test says (Hadoop 3.3 ContainerScheduler rules)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.sim import Decisions
from pipeline.sim.interface import SchedView
from pipeline.sim.needs import Needs, NMOptions
from pipeline.sim.tasks import EXTRA_NAMES
from tests.sim.test_core import batch, cluster, run

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

STARTS = EXTRA_NAMES.index("opp_starts")
QUEUE_S = EXTRA_NAMES.index("opp_queue_s")


class SendAll:
    """Guaranteed requests (priority 1) to node 0 while they fit; every opportunistic one
    (priority 0) to node 0 at once, whatever its queue holds."""

    name = "send-all"

    def __init__(self, options: NMOptions) -> None:
        self.options = options

    def setup(self, cluster: object, rng: np.random.Generator) -> Needs:
        return Needs(node_managers=self.options)

    def decide(self, view: SchedView) -> Decisions:
        p = view.pending
        guaranteed = np.flatnonzero(p.priority == 1)
        free = view.nodes.cap[0] - view.nodes.alloc[0]
        place = []
        for i in guaranteed.tolist():
            if np.all(p.req[i] <= free + 1e-9):
                place.append(i)
                free = free - p.req[i]
        opp = np.flatnonzero(p.priority == 0)
        return Decisions(place_req=np.array(place, dtype=np.int64),
                         place_node=np.zeros(len(place), dtype=np.int64),
                         opp_req=opp, opp_node=np.zeros(len(opp), dtype=np.int64))


def test_a_full_queue_rejects_the_fourth() -> None:
    """Max queue length 3 on a node full of running guaranteed containers: 4 opportunistic
    containers arrive, 3 queue, the 4th is rejected (sent back to the RM)."""
    b = batch([0.0] * 4 + [5.0] * 4, [50.0] * 4 + [10.0] * 4)
    b.priority = np.array([1] * 4 + [0] * 4, dtype=np.int32)
    policy = SendAll(NMOptions(max_queue=3))
    recs, sim = run(cluster(1), [b], policy=policy)
    assert sim.nm is not None
    # three waited in the queue from 5 s until the guaranteed ones ended at 50 s; the fourth
    # was rejected at 5 s and at every heartbeat after it, and started once it fit
    waits = sorted(float(recs[r]["extra"][QUEUE_S]) for r in range(4, 8))
    assert waits == [0.0, 45.0, 45.0, 45.0]
    assert sim.nm.counts["rejected"] == 1 + 44  # at 5 s, then at 6..49 s
    assert [recs[r]["start"] for r in range(4, 8)] == [50.0] * 4
    assert all(recs[r]["extra"][STARTS] == 1 for r in range(4, 8))


def test_queued_containers_start_in_fifo_order_when_room_frees() -> None:
    b = batch([0.0, 0.0, 1.0, 2.0, 3.0], [20.0, 30.0, 5.0, 5.0, 5.0], cpu=[2.0, 2.0, 2.0, 2.0,
                                                                          2.0])
    b.priority = np.array([1, 1, 0, 0, 0], dtype=np.int32)
    recs, _ = run(cluster(1), [b], policy=SendAll(NMOptions(max_queue=5)))
    # G0 ends at 20 -> O2 starts; O2 ends at 25 -> O3; G1 ends at 30 -> O4
    assert [recs[r]["start"] for r in (2, 3, 4)] == [20.0, 25.0, 30.0]


def test_usage_profiles_follow_usage_and_the_pool_stays_bounded() -> None:
    """3,000 one-after-another tasks with a 4-piece usage profile each: node usage and each
    task's usage integral follow the profile, and the pool keeps only tasks in flight."""
    n = 3000
    b = batch([float(10 * i) for i in range(n)], [8.0] * n)
    per = 4
    starts = np.tile([0.0, 2.0, 4.0, 6.0], n)
    mem = np.tile([0.1, 0.4, 0.2, 0.3], n)
    b.usage = (np.arange(0, per * n + 1, per, dtype=np.int64), starts, starts + 2.0,
               mem.copy(), mem.copy())
    recs, sim = run(cluster(1), [b])
    used = EXTRA_NAMES.index("used_mem_s")
    assert all(abs(float(recs[r]["extra"][used]) - 2.0 * (0.1 + 0.4 + 0.2 + 0.3)) < 1e-5
               for r in range(n))
    assert len(sim.usage.bp) < per * n  # compacted: not every task's pieces kept
