"""Cluster Autoscaler's estimator and expanders on worked cases."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.sim.kubernetes.scale_up import (
    Groups,
    Option,
    choose,
    estimate,
    pod_price,
    preferred_vcpu,
    price_score,
    waste,
)

pytestmark = pytest.mark.nojit


def test_estimator_sorts_largest_first_and_stops_at_the_limit() -> None:
    req = np.array([[1.0, 1.0, 0.0], [3.0, 3.0, 0.0], [2.0, 2.0, 0.0], [9.0, 1.0, 0.0]])
    used, placed = estimate(req, np.array([4.0, 4.0, 0.0]), limit=10)
    # 3 then 2 then 1: {3, 1}, {2}; the 9-cpu pod fits no node of this group
    assert used == 2 and placed.tolist() == [True, True, True, False]
    used, placed = estimate(req, np.array([4.0, 4.0, 0.0]), limit=1)
    assert used == 1 and placed.tolist() == [True, True, False, False]


# two groups: 4 vCPU / 16 GiB at $0.192 and 4 vCPU / 8 GiB at $0.17
GROUPS = Groups(np.array([[4.0, 16.0, 0.0], [4.0, 8.0, 0.0]]),
                np.array([[4.0, 16.0, 0.0], [4.0, 8.0, 0.0]]), np.array([0.192, 0.17]))
PODS = np.array([[1.0, 2.0, 0.0]] * 3)  # three pods of 1 vCPU, 2 GiB


def test_least_waste_worked_pair() -> None:
    a, b = Option(0, 1, np.arange(3)), Option(1, 1, np.arange(3))
    # a: cpu (4-3)/4 + mem (16-6)/16 = 0.875; b: 0.25 + (8-6)/8 = 0.5
    assert waste(a, GROUPS, PODS) == pytest.approx(0.875)
    assert waste(b, GROUPS, PODS) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    assert choose([a, b], ("least-waste",), GROUPS, PODS, 3, rng) is b


def test_most_pods_then_random_fallback() -> None:
    a, b, c = Option(0, 1, np.arange(3)), Option(1, 1, np.arange(2)), Option(0, 2, np.arange(3))
    picks = {choose([a, b, c], ("most-pods",), GROUPS, PODS, 3, np.random.default_rng(s)).count
             for s in range(20)}
    assert picks == {1, 2}  # a or c, never b


def test_price_expander_formula() -> None:
    a = Option(0, 1, np.arange(3))
    stab = pod_price(np.array([0.5, 500 / 1024, 0.0]))
    ratio = (0.192 + stab) / (pod_price(PODS) + stab)
    assert preferred_vcpu(3) == 2.0  # a cluster of 3-6 nodes prefers 2 vCPUs
    # unfitness max(2/4, 4/2) = 2, one node: not suppressed
    assert price_score(a, GROUPS, PODS, 3) == pytest.approx(2.0 * ratio)
    b = Option(1, 1, np.arange(3))
    assert choose([a, b], ("price",), GROUPS, PODS, 3, np.random.default_rng(0)) is b
