"""Karpenter's consolidation rules on small hand-built pools (v1.14.1
``pkg/controllers/disruption``): a move may not rely on a node still booting, initialized
nodes are tried first, candidates go by savings ratio, budgets round up."""

from __future__ import annotations

import numpy as np

from pipeline.sim.kubernetes import consolidation as cons
from pipeline.sim.kubernetes.karpenter_pack import Offer
from pipeline.sim.kubernetes.settings import Budget

# two types: "n2" (2 cpu, 8 GiB, 0.11 $/h) and "n4" (4 cpu, 16 GiB, 0.2 $/h)
OFFER = Offer(np.array([[2.0, 8.0, 0.0], [4.0, 16.0, 0.0]]), np.array([0.11, 0.2]),
              np.array([True, True]), np.full(3, np.inf), 1)


def pool(free: list[list[float]], pods: list[list[list[float]]], *,
         booting: list[bool] | None = None, price: list[float] | None = None) -> cons.Pool:
    """Nodes with ``free`` room and ``pods`` (per node, their requests)."""
    n = len(free)
    boot = np.array(booting or [False] * n)
    start = np.cumsum([0] + [len(p) for p in pods])
    req = np.array([r for p in pods for r in p], dtype=float).reshape(-1, 3)
    return cons.Pool(np.array(free, float), ~boot, boot, np.array(price or [0.2] * n), start,
                     req, OFFER)


def test_a_candidates_pods_that_fit_elsewhere_delete_it() -> None:
    p = pool([[3.0, 12, 0], [3.0, 12, 0]], [[[1.0, 4, 0]], [[1.0, 4, 0]]])
    move = cons.simulate(p, (0,), "Underutilized")
    assert move is not None and move.replacement == -1 and move.savings == 0.2


def test_a_move_that_relies_on_a_booting_node_is_not_taken() -> None:
    """Node 1 is launched but not initialized: the candidate's pod would go there, so the
    move waits (helpers.go: an uninitialized existing node fails the simulation)."""
    p = pool([[3.0, 12, 0], [4.0, 16, 0]], [[[1.0, 4, 0]], []], booting=[False, True])
    assert cons.simulate(p, (0,), "Underutilized") is None
    # with an initialized node that has room (slot 2, after the booting one) it goes there
    p = pool([[3.0, 12, 0], [4.0, 16, 0], [3.0, 12, 0]], [[[1.0, 4, 0]], [], []],
             booting=[False, True, False])
    move = cons.simulate(p, (0,), "Underutilized")
    assert move is not None and move.replacement == -1


def test_savings_ratio_is_price_over_reschedule_cost() -> None:
    """``SavingsRatio``: 0.2 $/h over 1 + 1 pod, 0.11 over 1 + 0 pods."""
    p = pool([[3.0, 12, 0], [2.0, 8, 0]], [[[1.0, 4, 0]], []], price=[0.2, 0.11])
    assert p.savings_ratio(0) == 0.1 and p.savings_ratio(1) == 0.11


def test_budgets_round_a_percentage_of_the_nodes_up() -> None:
    ten = (Budget(10.0, True, ()),)
    assert cons.allowed(ten, "Underutilized", 10, 0) == 1
    assert cons.allowed(ten, "Underutilized", 15, 0) == 2  # hence: initialized nodes only
    assert cons.allowed(ten, "Underutilized", 10, 1) == 0
