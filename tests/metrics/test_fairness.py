"""Fairness indices: DRF fair shares and both Jain indices on hand-computed cases."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.metrics.drf import max_min_fair_shares
from pipeline.metrics.fairness import fairness_indices, jain_equal_share, jain_fairness
from tests.metrics.frames import nodes, tasks

# -- fair shares (DRF progressive filling, capped at demand) ---------------------------


def test_fair_shares_of_the_drf_paper_example() -> None:
    # Ghodsi et al. 2011: 9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB>, B's <3 CPU, 1 GB>, both
    # wanting more than they can get (here 5 tasks each): 3 tasks for A, 2 for B, both at a
    # dominant share of 2/3.
    levels = max_min_fair_shares([[5.0, 20.0], [15.0, 5.0]], [9.0, 18.0])
    assert levels == pytest.approx([2 / 3, 2 / 3])
    assert levels[0] * 18 / 4 == pytest.approx(3.0)  # A: memory-bound, 4 GB a task
    assert levels[1] * 9 / 3 == pytest.approx(2.0)  # B: cpu-bound, 3 CPUs a task


def test_fair_shares_of_one_resource_are_max_min() -> None:
    # Demands 2, 2.6, 4, 5 of 10: the two small ones get theirs, the rest split 5.4.
    levels = max_min_fair_shares([[2.0], [2.6], [4.0], [5.0]], [10.0])
    assert levels * 10 == pytest.approx([2.0, 2.6, 2.7, 2.7])


def test_fair_shares_are_the_demand_when_it_fits() -> None:
    levels = max_min_fair_shares([[1.0, 2.0], [3.0, 0.5]], [10.0, 10.0])
    assert levels == pytest.approx([0.2, 0.3])


def test_a_resource_running_out_stops_only_its_users() -> None:
    # 10 cpu, 10 mem.  A wants 8 cpu; B 8 cpu + 1 mem; C 20 mem.  cpu runs out at dominant
    # share 1/2 (A and B stop, B holding 0.5 mem); C then takes all the memory left.
    levels = max_min_fair_shares([[8.0, 0.0], [8.0, 1.0], [0.0, 20.0]], [10.0, 10.0])
    assert levels == pytest.approx([0.5, 0.5, 0.9375])


def test_no_fair_share_of_an_absent_resource() -> None:
    levels = max_min_fair_shares([[1.0, 1.0], [1.0, 0.0]], [4.0, 0.0])
    assert levels == pytest.approx([0.0, 0.25])


# -- the indices on run tables ---------------------------------------------------------


def run(user: str, start: float | None, end: float | None, **kw: float) -> dict:
    return {"user": user, "start_s": start, "end_s": end,
            "outcome": "finished" if end is not None else "unfinished", **kw}


def test_uncontended_skewed_workload_is_fair() -> None:
    # The reported defect: one user asks for 1 cpu, another for 4, on 8 free cpus; both get
    # everything.  Equal entitlement calls it unfair ((5/8)^2 / (2 * 17/64) = 25/34).
    tr = tasks([run("a", 0.0, 10.0)] + [run("b", 0.0, 10.0)] * 4)
    ni = nodes([(0.0, 10.0)], cpu=8.0, mem=8.0)
    assert jain_fairness(tr, ni, 10.0) == pytest.approx(1.0)
    assert jain_equal_share(tr, ni, 10.0) == pytest.approx(25 / 34)


@pytest.mark.parametrize(("a_runs", "b_runs", "expected"), [
    (3, 2, 1.0),  # DRF's allocation
    (4, 1, 121 / 146),  # FIFO for A: x_A = (16/18)/(2/3) = 4/3, x_B = (3/9)/(2/3) = 1/2
])
def test_drf_paper_example_over_time(a_runs: int, b_runs: int, expected: float) -> None:
    a = [run("a", 0.0, 10.0, cpu=1.0, mem=4.0)] * a_runs
    a += [run("a", None, None, cpu=1.0, mem=4.0)] * (5 - a_runs)
    b = [run("b", 0.0, 10.0, cpu=3.0, mem=1.0)] * b_runs
    b += [run("b", None, None, cpu=3.0, mem=1.0)] * (5 - b_runs)
    ni = nodes([(0.0, 10.0)], cpu=9.0, mem=18.0)
    assert jain_fairness(tasks(a + b), ni, 10.0) == pytest.approx(expected)


def test_single_resource_max_min_time_weighted() -> None:
    # 10 cpu (memory plentiful).  [0,10): a, b, c hold 2, 2.6, 4 and d waits for 5: fair
    # shares 2, 2.6, 2.7, 2.7 -> x = 1, 1, 40/27, 0, J = (94/27)^2 / (4 * 3058/729).
    # [10,20): c is done, d runs, everything fits -> J = 1.
    tr = tasks([run("a", 0.0, 20.0, cpu=2.0), run("b", 0.0, 20.0, cpu=2.6),
                run("c", 0.0, 10.0, cpu=4.0), run("d", 10.0, 20.0, cpu=5.0)])
    ni = nodes([(0.0, 20.0)], cpu=10.0, mem=100.0)
    assert jain_fairness(tr, ni, 20.0) == pytest.approx((8836 / 12232 + 1) / 2)


def test_a_starved_user_lowers_fifo_but_not_fair_sharing() -> None:
    # 4 cpu; a and b each want 4 one-cpu tasks of 10 s from t=0.
    fifo = tasks([run("a", 0.0, 10.0)] * 4 + [run("b", 10.0, 20.0)] * 4)
    fair = tasks([run("a", 0.0, 10.0)] * 2 + [run("a", 10.0, 20.0)] * 2
                 + [run("b", 0.0, 10.0)] * 2 + [run("b", 10.0, 20.0)] * 2)
    ni = nodes([(0.0, 20.0)], mem=100.0)
    # FIFO [0,10): fair shares 2 each, a holds 4, b none: x = 2, 0 -> 1/2; then b alone: 1.
    assert jain_fairness(fifo, ni, 20.0) == pytest.approx(0.75)
    assert jain_fairness(fair, ni, 20.0) == pytest.approx(1.0)


def test_waiting_while_capacity_is_free_counts_as_unfair() -> None:
    # Nothing stops b's task from running on [0,10) but it waits: its fair share is its
    # demand, it holds nothing -> J = 1/2; [10,20) b alone -> 1.
    tr = tasks([run("a", 0.0, 10.0), run("b", 10.0, 20.0)])
    assert jain_fairness(tr, nodes([(0.0, 20.0)]), 20.0) == pytest.approx(0.75)
    assert jain_equal_share(tr, nodes([(0.0, 20.0)]), 20.0) == pytest.approx(0.75)


def test_capacity_is_what_is_ready_not_what_is_booting() -> None:
    # m0 (4 cpu) ready at 0, m1 (4 cpu) provisioned at 0 but ready at 5.  a wants 2 cpu, b 6.
    # [0,5): 4 cpu to share: 2 and 2, which is what they hold -> 1 (counting the booting
    # node, b's fair share would be 6 and J 0.8).  [5,10): everything runs -> 1.
    tr = tasks([run("a", 0.0, 10.0)] * 2 + [run("b", 0.0, 10.0)] * 2
               + [run("b", 5.0, 10.0)] * 4)
    ni = nodes([(0.0, 10.0, 0.0), (0.0, 10.0, 5.0)], mem=100.0)
    assert jain_fairness(tr, ni, 10.0) == pytest.approx(1.0)


def test_capacity_follows_the_cluster_down() -> None:
    # Two 4-cpu nodes until 5, then one.  a and b each run 2 one-cpu tasks on [0,10) and
    # each has 2 more waiting.  [0,5): 8 cpu, demand 4 + 4 fits, x = 1/2 each -> J = 1;
    # [5,10): 4 cpu, fair 2 each, held 2 each -> J = 1.  The equal-share index agrees.
    tr = tasks([run("a", 0.0, 10.0)] * 2 + [run("a", None, None)] * 2
               + [run("b", 0.0, 10.0)] * 2 + [run("b", None, None)] * 2)
    ni = nodes([(0.0, 10.0), (0.0, 5.0)], mem=100.0)
    assert fairness_indices(tr, ni, 10.0) == pytest.approx((1.0, 1.0))


def test_over_commitment_counts_as_capacity() -> None:
    # 2 cpu, yet a policy runs 3 one-cpu tasks: capacity is taken to be the 3 allocated,
    # so every ready task running still scores 1.
    tr = tasks([run("a", 0.0, 10.0)] * 2 + [run("b", 0.0, 10.0)])
    assert jain_fairness(tr, nodes([(0.0, 10.0)], cpu=2.0, mem=100.0), 10.0) == pytest.approx(1.0)


def test_a_preempted_task_counts_as_waiting_between_attempts() -> None:
    # a's task first ran at 0, was preempted, and restarted at 5 (only the last attempt is
    # in task_runs): on [0,5) it counts as waiting with room free -> 1/2; [5,10) -> 1.
    tr = tasks([{**run("a", 5.0, 10.0), "first_start_s": 0.0, "wasted_s": 3.0,
                 "preemptions": 1}, run("b", 0.0, 10.0)])
    assert jain_fairness(tr, nodes([(0.0, 10.0)]), 10.0) == pytest.approx(0.75)


def test_inconsistent_times_are_put_in_order() -> None:
    # a's row says it ended (4) before it was ready (5) and started (6): it is taken as
    # demanding on [5,6) and holding nothing, so J = 1/2 there and 1 elsewhere.
    tr = tasks([{"user": "a", "ready_s": 5.0, "start_s": 6.0, "end_s": 4.0},
                run("b", 0.0, 10.0)])
    assert jain_fairness(tr, nodes([(0.0, 10.0)]), 10.0) == pytest.approx(0.95)


def test_undefined_when_nobody_holds_anything() -> None:
    tr = tasks([run("a", None, None)])
    assert fairness_indices(tr, nodes([(0.0, 10.0)]), 10.0) == (None, None)
    assert fairness_indices(tr.clear(), nodes([(0.0, 10.0)]), 10.0) == (None, None)
    no_nodes = nodes([(0.0, 10.0)]).clear()
    assert fairness_indices(tasks([run("a", 0.0, 1.0)]), no_nodes, 10.0) == (None, None)


def test_sampled_evaluation_uses_slice_midpoints() -> None:
    # Events at 0, 10 and 20 (3 distinct times) evaluated on fewer slices of [0,20):
    fifo = tasks([run("a", 0.0, 10.0)] * 4 + [run("b", 10.0, 20.0)] * 4)
    ni = nodes([(0.0, 20.0)], mem=100.0)
    # one slice: its midpoint is 10, after the events at 10: b alone -> 1;
    assert fairness_indices(fifo, ni, 20.0, max_evaluations=1).jain_fairness == (
        pytest.approx(1.0))
    # two slices: J(5) = 1/2, J(15) = 1 -> 0.75, which is also the exact value.
    assert fairness_indices(fifo, ni, 20.0, max_evaluations=2).jain_fairness == (
        pytest.approx(0.75))


def random_rows(seed: int, n: int, n_users: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(f"u{rng.integers(n_users)}", float(rng.uniform(0, 80)),
             float(rng.uniform(1, 20)), float(rng.choice([0.5, 1.0, 2.0])),
             float(rng.choice([0.5, 1.0, 4.0])), float(rng.exponential(3.0)))
            for _ in range(n)]


def test_sampling_approximates_the_exact_value() -> None:
    tr = frame(random_rows(7, 400, 8), delayed=True)
    ni = nodes([(0.0, 60.0), (20.0, 120.0, 30.0)], cpu=8.0, mem=8.0)
    exact = fairness_indices(tr, ni, 120.0, max_evaluations=10**6)
    sampled = fairness_indices(tr, ni, 120.0, max_evaluations=500)
    assert exact.jain_fairness is not None and exact.jain_equal_share is not None
    assert sampled.jain_fairness == pytest.approx(exact.jain_fairness, abs=0.01)
    assert sampled.jain_equal_share == pytest.approx(exact.jain_equal_share, abs=0.01)


# -- properties ------------------------------------------------------------------------

users = st.sampled_from(["a", "b", "c", "d"])
sizes = st.sampled_from([0.0, 0.5, 1.0, 2.0])
task_rows = st.lists(st.tuples(users, st.floats(0.0, 50.0), st.floats(0.5, 30.0), sizes,
                               sizes, st.floats(0.0, 10.0)), min_size=1, max_size=30)


def frame(rows: list[tuple], delayed: bool) -> pl.DataFrame:
    return tasks([{"user": u, "ready_s": r, "start_s": r + (w if delayed else 0.0),
                   "end_s": r + (w if delayed else 0.0) + d, "cpu": c, "mem": m}
                  for u, r, d, c, m, w in rows])


@settings(max_examples=60, deadline=None)
@given(task_rows)
def test_every_ready_task_running_scores_one(rows: list[tuple]) -> None:
    tr = frame(rows, delayed=False)
    held = tr.select(pl.col("cpu").sum(), pl.col("mem").sum()).row(0)
    ni = nodes([(0.0, 100.0)], cpu=max(held[0], 1.0), mem=max(held[1], 1.0))
    value = jain_fairness(tr, ni, 100.0)
    assert value is None or value == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(task_rows, st.floats(1.0, 8.0))
def test_indices_lie_in_zero_one(rows: list[tuple], cpu: float) -> None:
    tr = frame(rows, delayed=True)
    for value in fairness_indices(tr, nodes([(0.0, 100.0)], cpu=cpu, mem=cpu), 100.0):
        assert value is None or 0.0 < value <= 1.0 + 1e-9


def test_same_input_same_value_whatever_the_row_order() -> None:
    tr = frame(random_rows(1, 200, 5), delayed=True)
    ni = nodes([(0.0, 100.0)], cpu=6.0, mem=6.0)
    first = fairness_indices(tr, ni, 100.0)
    assert fairness_indices(tr, ni, 100.0) == first
    assert fairness_indices(tr.reverse(), ni, 100.0) == pytest.approx(first, rel=1e-9)
