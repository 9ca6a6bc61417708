"""Cluster Autoscaler's loop driven directly: the scale-down timing rules, exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pipeline.sim.kubernetes.cluster_autoscaler import ClusterAutoscaler
from pipeline.sim.kubernetes.pool import TypedPool
from pipeline.sim.kubernetes.scale_up import Groups
from pipeline.sim.kubernetes.settings import AutoscalerSettings, NodeGroup

NONE = np.zeros((0, 3))


def _cluster(**flags: object) -> ClusterAutoscaler:
    s = replace(AutoscalerSettings(groups=(NodeGroup("m5.xlarge", 0, 4),)), **flags)
    pool = TypedPool(("m5.xlarge",), np.array([[1.0, 1.0, 0.0]]), np.array([0.192]), 4)
    groups = Groups(np.array([[4.0, 16.0, 0.0]]), np.array([[4.0, 16.0, 0.0]]),
                    np.array([0.192]))
    ca = ClusterAutoscaler(s, pool, np.array([0]), groups, np.array([4.0, 16.0, 1.0]),
                           120.0, np.random.default_rng(0))
    for _ in range(2):  # two nodes up at 0
        node = pool.provision(0.0, 0, ready_s=0.0)
        pool.nodes.ncont[node] = 1
        pool.nodes.alloc[node] = [0.8, 0.8, 0.0]
    return ca


def _run(ca: ClusterAutoscaler, until: float, empty_at: float) -> float | None:
    """Loops every 10 s; node 0's pod ends at ``empty_at``; when node 0 is deleted."""
    t = 0.0
    while t <= until:
        if t >= empty_at:
            ca.nodes.ncont[0] = 0
            ca.nodes.alloc[0] = 0.0
        ca.autoscale(t, NONE, np.zeros(0))
        pods = np.flatnonzero(ca.nodes.ncont > 0)
        for node in ca.scale_down(t, pods, ca.nodes.alloc[pods]).tolist():
            ca.remove(t, node, int(ca.nodes.ncont[node]))
            return t
        t = ca.next_check(t, np.zeros(0))
        if t == np.inf and until >= empty_at > 0 and ca.nodes.ncont[0]:
            t = empty_at  # the pod's end: a scheduling point (the core's event)
    return None


def test_scale_down_waits_exactly_the_unneeded_time() -> None:
    # emptied at 95 s, found unneeded at the 100 s loop, deleted at 100 + 10 min
    assert _run(_cluster(), 2000.0, 95.0) == 700.0
    assert _run(_cluster(unneeded_s=300.0), 2000.0, 95.0) == 400.0


def test_delay_after_add_holds_deletion_back() -> None:
    ca = _cluster()
    ca._last_up = 500.0  # a scale-up at 500 s: no scale-down before 1,100 s
    assert _run(ca, 3000.0, 95.0) == 1100.0


def test_group_min_and_busy_nodes_are_kept() -> None:
    ca = _cluster()
    ca.settings = replace(ca.settings, groups=(NodeGroup("m5.xlarge", 2, 4),))
    assert _run(ca, 1500.0, 95.0) is None  # the group is at its min
    # node 0 at 0.8 cpu is above the 0.5 threshold and never empties
    assert _run(_cluster(), 1500.0, np.inf) is None


def test_scale_up_buys_what_the_estimator_needs() -> None:
    ca = _cluster()
    req = np.array([[0.6, 0.1, 0.0]] * 3)  # three pods, one per new node (1.0 allocatable)
    assert ca.next_check(5.0, np.zeros(3)) == 10.0
    assert ca.autoscale(10.0, req, np.zeros(3)) == 2  # the group's room: 4 - 2
    assert ca.run_metrics()["nodes_added"] == (2.0, "count")
    ca.next_check(10.0, np.zeros(3))
    assert ca.autoscale(20.0, req, np.zeros(3)) == 0  # booting nodes hold two; no room
    with pytest.raises(AssertionError):
        ca.node_down(0.0, 0)


@pytest.mark.parametrize(("evictable", "deleted"), [(True, 600.0), (False, None)])
def test_an_under_used_busy_node_is_drained_unless_pods_are_not_safe_to_evict(
        evictable: bool, deleted: float | None) -> None:
    ca = _cluster(safe_to_evict=evictable)
    # both under 0.5; node 0's pod fits node 1; found unneeded at the 0 s loop
    ca.nodes.alloc[:2] = [0.3, 0.3, 0.0]
    t, out = 0.0, None
    while t <= 1500.0 and out is None:
        ca.autoscale(t, NONE, np.zeros(0))
        pods = np.flatnonzero(ca.nodes.ncont > 0)
        chosen = ca.scale_down(t, pods, ca.nodes.alloc[pods]).tolist()
        out = t if chosen else None
        t = ca.next_check(t, np.zeros(0))
    assert out == deleted
