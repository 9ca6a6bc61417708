"""Cluster Autoscaler's drain simulation (kernel against its reference) and the typed pool."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim.cluster import ABSENT, BOOTING, UP
from pipeline.sim.kubernetes import drain_reference
from pipeline.sim.kubernetes.drain import Snapshot, group_pods, removable
from pipeline.sim.kubernetes.pool import TypedPool

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


def _both(free, up, cands, pod_node, pod_req):
    ref_free = free.copy()
    want = drain_reference.removable(ref_free, up, cands, pod_node, pod_req)
    start, req = group_pods(len(free), pod_node, pod_req)
    snap = Snapshot(free.copy(), up, start, req)
    got = removable(snap, cands)
    return want, got, ref_free, snap.free


def test_worked_case() -> None:
    # node 0 holds one pod of 0.5 that fits node 2; node 1's pod of 0.9 fits nowhere once
    # node 2 took the first (0.6 room left, and node 0 is gone)
    free = np.array([[0.5, 0.5, 0.0], [0.1, 0.1, 0.0], [1.1, 1.1, 0.0]])
    up = np.ones(3, dtype=np.bool_)
    pod_node = np.array([0, 1])
    pod_req = np.array([[0.5, 0.5, 0.0], [0.9, 0.9, 0.0]])
    want, got, rf, kf = _both(free, up, np.array([0, 1]), pod_node, pod_req)
    assert want.tolist() == got.tolist() == [True, False]
    assert np.allclose(rf, kf) and np.allclose(kf[2], [0.6, 0.6, 0.0])


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_kernel_matches_reference(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 8))
    grid = st.integers(0, 8).map(lambda k: k / 8)
    free = np.array(data.draw(st.lists(st.tuples(grid, grid, st.just(0.0)), min_size=n,
                                       max_size=n)), dtype=np.float64)
    up = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    m = data.draw(st.integers(0, 12))
    pod_node = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)),
                        dtype=np.int64)
    pod_req = np.array(data.draw(st.lists(st.tuples(grid, grid, st.just(0.0)), min_size=m,
                                          max_size=m)), dtype=np.float64).reshape(-1, 3)
    cands = np.array(data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n)),
                     dtype=np.int64)
    want, got, rf, kf = _both(free, up, cands, pod_node, pod_req)
    assert want.tolist() == got.tolist()
    assert np.allclose(rf, kf)


def test_pool_buys_and_releases_typed_nodes() -> None:
    pool = TypedPool(("small", "big"), np.array([[1.0, 2.0, 0.0], [4.0, 8.0, 0.0]]),
                     np.array([0.1, 0.4]), 3)
    a = pool.provision(0.0, 1, ready_s=0.0)
    b = pool.provision(5.0, 0, ready_s=65.0)
    assert pool.nodes.state[a] == UP and pool.nodes.state[b] == BOOTING
    assert pool.next_event() == 65.0 and pool.pop_event() == (65.0, b, True)
    pool.node_up(65.0, b)
    assert pool.machine_ids == ["big-000000", "small-000001"]
    assert pool.size(0) == 1 and pool.size(1) == 1
    pool.remove(100.0, a)
    assert pool.nodes.state[a] == ABSENT and pool.size(1) == 0
    c = pool.provision(120.0, 0, ready_s=120.0)
    assert c == a  # the lowest free slot, a new instance
    assert pool.price_per_hour(0) == 0.4 and pool.price_per_hour(2) == 0.1
    assert np.array_equal(pool.instance_caps()[:, 0], [4.0, 1.0, 1.0])
    pool.close(200.0)
    assert [r[3] for r in pool.intervals.rows] == [100.0, 200.0, 200.0]
