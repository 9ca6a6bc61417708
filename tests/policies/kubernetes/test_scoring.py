"""kube-scheduler's score arithmetic and node sampling, case by case (Kubernetes v1.31)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.policies.kubernetes.config import settings
from pipeline.policies.kubernetes.scoring import (
    LEAST,
    MOST,
    RATIO,
    balanced_score,
    broken_linear,
    fit_score,
    num_feasible_nodes_to_find,
)

pytestmark = pytest.mark.nojit

W = np.array([1, 1, 0], dtype=np.int64)
NONE = np.zeros(0, dtype=np.int64)


def units(requested: list[int], allocatable: list[int]) -> np.ndarray:
    return np.array([requested, allocatable], dtype=np.int64)


@pytest.mark.parametrize(("n", "expected"), [
    (1, 1), (99, 99),  # below minFeasibleNodesToFind: every node
    (100, 100), (200, 100),  # 49% of 200 is 98: at least 100
    (1000, 420), (5000, 500),  # 50 - n/125 percent
    (6250, 312), (12500, 625), (15000, 750),  # floored at 5%
])
def test_adaptive_percentage_of_nodes_to_score(n: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(0, n) == expected


def test_explicit_percentage_is_still_floored_at_100_nodes() -> None:
    assert num_feasible_nodes_to_find(10, 500) == 100
    assert num_feasible_nodes_to_find(100, 12500) == 12500
    assert num_feasible_nodes_to_find(30, 1000) == 300


def test_least_and_most_allocated_truncate_like_go() -> None:
    u = units([3000, 5000, 0], [4000, 10000, 0])
    assert fit_score(u, W, LEAST, NONE, NONE) == 37  # (25 + 50) / 2, truncated
    assert fit_score(u, W, MOST, NONE, NONE) == 62
    over = units([5000, 5000, 0], [4000, 10000, 0])  # cpu over capacity
    assert fit_score(over, W, LEAST, NONE, NONE) == 25  # (0 + 50) / 2
    assert fit_score(over, W, MOST, NONE, NONE) == 75  # (100 + 50) / 2: capped


def test_a_resource_the_node_lacks_is_left_out_of_the_mean() -> None:
    w = np.array([1, 1, 5], dtype=np.int64)  # GPUs weighted, but the node has none
    assert fit_score(units([3000, 5000, 0], [4000, 10000, 0]), w, LEAST, NONE, NONE) == 37


def test_requested_to_capacity_ratio_shape_rounding_and_zero_scores() -> None:
    u_pts = np.array([0, 100], dtype=np.int64)
    s_pts = np.array([0, 100], dtype=np.int64)  # shape scores 0..10 scaled by 10
    u = units([3000, 5000, 0], [4000, 10000, 0])
    assert fit_score(u, W, RATIO, u_pts, s_pts) == 63  # round(62.5), half away from zero
    empty_cpu = units([0, 5000, 0], [4000, 10000, 0])
    assert fit_score(empty_cpu, W, RATIO, u_pts, s_pts) == 50  # the 0 score does not count
    spread = np.array([100, 0], dtype=np.int64)  # a decreasing shape (spreading)
    assert fit_score(u, W, RATIO, u_pts, spread) == 38  # round((25 + 50) / 2) = 37.5 -> 38


def test_broken_linear_interpolates_and_is_flat_outside() -> None:
    u = np.array([20, 60], dtype=np.int64)
    s = np.array([10, 90], dtype=np.int64)
    assert [broken_linear(u, s, p) for p in (0, 20, 40, 59, 60, 100)] == [10, 10, 50, 88, 90, 90]
    down_u = np.array([0, 7], dtype=np.int64)
    down_s = np.array([100, 70], dtype=np.int64)
    assert broken_linear(down_u, down_s, 3) == 88  # 100 + (-90 / 7): truncated toward 0, not 87


def test_balanced_allocation() -> None:
    listed = np.array([True, True, False])
    assert balanced_score(units([3000, 5000, 0], [4000, 10000, 0]), listed) == 87
    assert balanced_score(units([3000, 5000, 0], [6000, 10000, 0]), listed) == 100
    assert balanced_score(units([9000, 5000, 0], [6000, 10000, 0]), listed) == 75  # capped at 1
    three = np.array([True, True, True])
    # fractions 0.5, 0.5, 1.0: std = sqrt(((1/6)^2 * 2 + (1/3)^2) / 3) = 0.2357
    assert balanced_score(units([1, 1, 2], [2, 2, 2]), three) == 76


def test_default_profile() -> None:
    s = settings(None, None, None, 110)
    assert s.percentage == 0
    assert s.profile.strategy == LEAST and (s.profile.w_fit, s.profile.w_bal) == (1, 1)
    assert s.profile.fit_weights.tolist() == [1, 1, 0]
    assert s.profile.balanced.tolist() == [True, True, False]
