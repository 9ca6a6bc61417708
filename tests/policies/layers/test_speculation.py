"""Speculation rules as pure functions: the progress score (LATE, OSDI 2008, section 4), Hadoop
0.20's native rule (TaskInProgress SPECULATIVE_GAP/LAG, MAX_TASK_EXECS), LATE's thresholds
and cap (paper and Hadoop 0.21 JobInProgress) and MRv2's DefaultSpeculator; golden cases
from the papers and the Hadoop sources."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import UsageError
from pipeline.policies.layers.speculation import (
    parse_phases,
    progress_rate,
    progress_score,
    time_left_s,
)
from pipeline.policies.layers.speculation.groups import Groups, category, lookup
from pipeline.policies.layers.speculation.hadoop import hadoop_candidates, job_kind_progress
from pipeline.policies.layers.speculation.late import (
    copies_left_hadoop021,
    copies_left_paper,
    late_order,
    slow_nodes_by_duration,
    slow_nodes_by_progress,
    slow_tasks_by_percentile,
    slow_tasks_by_stddev,
)
from pipeline.policies.layers.speculation.mrv2 import (
    mrv2_allowed,
    mrv2_estimates_ok,
    mrv2_picks,
    mrv2_value,
)
from pipeline.policies.layers.speculation.placement import CopyPlacer, task_slots
from pipeline.sim.tasks import KIND_MAP, KIND_ONE, KIND_REDUCE

PHASES = parse_phases("0.5,0.25,0.25")


# -- progress score -------------------------------------------------------------------------
def test_reduce_progress_score_golden() -> None:
    """Copy is half the reduce's run time, sort and reduce a quarter each (2:1:1 per MiB:
    shuffle at 64 MiB/s, sort and reduce passes at 128 MiB/s)."""
    fraction = np.array([0.25, 0.625, 0.875, 0.5, 0.75, 1.0, 0.0])
    kind = np.full(len(fraction), KIND_REDUCE)
    score = progress_score(kind, fraction, PHASES)
    # halfway through copy; done copying and halfway through sort; halfway through reduce;
    # phase boundaries
    assert score == pytest.approx([1 / 6, 0.5, 5 / 6, 1 / 3, 2 / 3, 1.0, 0.0])


def test_map_and_one_phase_scores_are_the_fraction() -> None:
    """A map that read 30 of 120 MB has PS 0.25."""
    score = progress_score(np.array([KIND_MAP, KIND_ONE]), np.array([30 / 120, 0.4]), PHASES)
    assert score == pytest.approx([0.25, 0.4])


def test_time_left_golden() -> None:
    """A task at PS 0.25 after 60 s runs at 1/240 per s and has 180 s left."""
    rate = progress_rate(np.array([0.25, 0.0]), np.array([60.0, 0.0]))
    assert rate == pytest.approx([0.25 / 60, 0.0])
    assert time_left_s(np.array([0.25, 0.0]), rate) == pytest.approx([180.0, np.inf])


def test_zero_length_phase_is_done_at_once() -> None:
    score = progress_score(np.array([KIND_REDUCE] * 2), np.array([0.0, 0.5]),
                           parse_phases("0,0.5,0.5"))
    assert score == pytest.approx([1 / 3, 2 / 3])


@pytest.mark.parametrize("bad", ["0.5,0.5,0.5", "-0.5,1,0.5", "0.5,0.5", "a,b,c",
                                 "0.5,0.25,0.25,0"])
def test_bad_phases_name_the_parameter(bad: str) -> None:
    with pytest.raises(UsageError, match="spec_reduce_phases"):
        parse_phases(bad)


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=50))
@settings(max_examples=50, deadline=None)
def test_reduce_score_is_monotone_and_bounded(fractions: list[float]) -> None:
    f = np.sort(np.array(fractions))
    score = progress_score(np.full(len(f), KIND_REDUCE), f, PHASES)
    assert np.all(np.diff(score) >= -1e-12)
    assert np.all((score >= 0) & (score <= 1))


# -- groups -----------------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0.0, 10.0)), min_size=1, max_size=60),
       st.floats(0.0, 100.0))
@settings(max_examples=50, deadline=None)
def test_group_percentile_is_numpy_linear(pairs: list[tuple[int, float]], pct: float) -> None:
    keys = np.array([k for k, _ in pairs])
    values = np.array([v for _, v in pairs])
    for space in (None, 18):
        groups = Groups(keys, space=space)
        got = groups.percentile(values, pct)
        for g, key in enumerate(groups.keys):
            want = np.percentile(values[keys == key], pct, method="linear")
            assert got[g] == pytest.approx(want)


def test_lookup_treats_unknown_jobs_as_zero() -> None:
    table = np.array([[1, 2, 3], [4, 5, 6]])
    assert lookup(table, np.array([1, 5]), np.array([2, 0])).tolist() == [6.0, 0.0]
    assert category(np.array([2]), np.array([1])).tolist() == [7]


# -- Hadoop 0.20 native rule ----------------------------------------------------------------
def test_hadoop_rule_golden() -> None:
    """Average progress 0.6: a task at 0.39 running 61 s is a candidate; 0.41 is not (gap
    0.19); 0.39 running 59 s is not (SPECULATIVE_LAG); nor one with a copy or a past copy."""
    ps = np.array([0.39, 0.41, 0.39, 0.39, 0.39])
    elapsed = np.array([61.0, 61.0, 59.0, 61.0, 61.0])
    has_copy = np.array([False, False, False, True, False])
    copies = np.array([0, 0, 0, 1, 1])
    got = hadoop_candidates(ps, elapsed, np.full(5, 0.6), has_copy, copies)
    assert got.tolist() == [True, False, False, False, False]


def test_hadoop_never_speculates_past_08() -> None:
    ps = np.array([0.8001, 0.81, 0.95])
    got = hadoop_candidates(ps, np.full(3, 1e4), np.ones(3), np.zeros(3, bool), np.zeros(3))
    assert not got.any()


def test_job_progress_counts_pending_as_zero() -> None:
    # 10 tasks: 3 finished, running at 0.5 and 0.4, 5 pending -> (3 + 0.9) / 10
    got = job_kind_progress(np.array([3]), np.array([0.9]), np.array([10]), np.array([2]))
    assert got == pytest.approx([0.39])
    assert job_kind_progress(np.array([0]), np.array([0.0]), np.array([0]),
                             np.array([0])).tolist() == [0.0]


def _cascade(n: int = 100, finished: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """30% of a job's reducers finished, the rest at the end of copy (PS 1/3), started at
    different times (so their rates differ)."""
    running = n - finished
    ps = progress_score(np.full(running, KIND_REDUCE), np.full(running, 0.5), PHASES)
    elapsed = 100.0 + np.arange(running, dtype=np.float64)
    return ps, elapsed


def test_cascade_native_rule_marks_every_remaining_reducer() -> None:
    ps, elapsed = _cascade()
    avg = job_kind_progress(np.array([30]), np.array([ps.sum()]), np.array([100]),
                            np.array([len(ps)]))
    assert avg[0] - ps[0] == pytest.approx(0.2)  # exactly the gap
    got = hadoop_candidates(ps, elapsed, np.full(len(ps), avg[0]),
                            np.zeros(len(ps), bool), np.zeros(len(ps)))
    assert got.all()


def test_cascade_late_launches_at_most_the_cap() -> None:
    ps, elapsed = _cascade()
    rate = progress_rate(ps, elapsed)
    groups = Groups(np.zeros(len(ps), dtype=np.int64))
    slow = slow_tasks_by_percentile(rate, groups, 25.0)
    assert 0 < slow.sum() < len(ps)  # only the slowest quarter
    left = copies_left_paper(0, 100, 0.1)  # 100 task slots, cap 10%
    assert left == 10
    order = late_order(ps[slow], rate[slow], np.flatnonzero(slow))
    assert min(left, len(order)) == 10


# -- LATE ---------------------------------------------------------------------------------------
def test_slow_nodes_by_progress_is_below_the_percentile_of_up_nodes() -> None:
    progress = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 100.0])
    up = np.array([True, True, True, True, True, False])
    slow = slow_nodes_by_progress(progress, up, 25.0)  # type 7 over [0..4]: 1.0
    assert slow.tolist() == [True, False, False, False, False, False]


def test_slow_nodes_by_duration_hadoop021() -> None:
    # all finished tasks: mean 100 s, std 20 s; node means 100, 125, 119 s; none on node 3
    slow = slow_nodes_by_duration(np.array([2, 4, 1, 0]), np.array([200.0, 500.0, 119.0, 0]),
                                  100.0, 20.0, 1.0)
    assert slow.tolist() == [False, True, False, False]


def test_slow_tasks_by_stddev_per_group_and_clamped() -> None:
    rate = np.array([1.0, 1.0, 1.0, 0.1, 5.0, 5.0])
    groups = Groups(np.array([0, 0, 0, 0, 1, 1]))
    assert slow_tasks_by_stddev(rate, groups, 1.0).tolist() == [False] * 3 + [True, False,
                                                                               False]
    # a negative threshold counts as 0: below the mean
    assert slow_tasks_by_stddev(rate, groups, -3.0).tolist() == [False] * 3 + [True, False,
                                                                                False]


def test_late_order_longest_time_left_first() -> None:
    ps = np.array([0.5, 0.5, 0.9, 1.0])
    rate = np.array([0.01, 0.001, 0.001, 0.5])
    # time left: 50, 500, 100, 0 -> [1, 2, 0, 3]
    assert late_order(ps, rate, np.arange(4)).tolist() == [1, 2, 0, 3]


def test_hadoop021_cap() -> None:
    """Not at cap while copies < 10 or < 1% of slots; otherwise at cap at 10% of running."""
    left = copies_left_hadoop021(np.array([9, 10, 10, 50]), np.array([20, 20, 500, 100]),
                                 100, 0.1)
    assert left.tolist() == [1, 0, 40, 0]
    assert copies_left_hadoop021(np.array([10]), np.array([20]), 2000, 0.1).tolist() == [10]


def test_paper_cap_counts_copies_running() -> None:
    assert copies_left_paper(3, 100, 0.1) == 7
    assert copies_left_paper(10, 100, 0.1) == 0
    assert copies_left_paper(0, 5, 0.1) == 1  # fewer than 0.5 run: one may start


# -- MRv2 DefaultSpeculator -----------------------------------------------------------------
def test_mrv2_allowed() -> None:
    # max(10, 0.01 x 2000 = 20, 0.1 x 300 = 30); small jobs keep the minimum 10
    assert mrv2_allowed(np.array([2000, 50, 5000]), np.array([300, 5, 40])).tolist() == [
        30, 10, 50]


def test_mrv2_needs_finished_tasks() -> None:
    got = mrv2_estimates_ok(np.array([0, 1, 2, 1]), np.array([10, 30, 30, 1]))
    assert got.tolist() == [False, False, True, True]


def test_mrv2_value() -> None:
    # started at 0, now 100: PS 0.5 -> ends at 200; a new attempt of mean 50 s ends at 150
    value = mrv2_value(100.0, np.zeros(4), np.array([0.5, 0.0, 0.8, 0.5]),
                       np.array([50.0, 50.0, 50.0, 150.0]))
    assert value[0] == pytest.approx(50.0)
    assert np.isnan(value[1])  # no estimate at PS 0
    assert np.isnan(value[2])  # ends at 125 before a replacement would (150)
    assert np.isnan(value[3])  # replacement ends at 250: too late


def test_mrv2_picks_one_per_group_highest_value() -> None:
    group = np.array([0, 0, 1, 1, 2])
    value = np.array([5.0, 9.0, np.nan, 3.0, 7.0])
    got = mrv2_picks(group, value, np.arange(5), np.array([True, True, False]))
    assert got.tolist() == [1, 3]


# -- placement -------------------------------------------------------------------------------
def test_placer_prefers_input_then_rack_and_never_the_original() -> None:
    room = np.array([[4.0, 4, 0], [4, 4, 0], [4, 4, 0], [4, 4, 0]])
    rack = np.array([0, 0, 1, 1])
    placer = CopyPlacer(room.copy(), rack, np.array([1.0, 1, 0]))
    req = np.array([2.0, 2, 0])
    # input on node 3 (the original's node is 3): rack-local node 2, not 3
    assert placer.node_for(req, 3, np.array([3, -1])) == 2
    assert placer.node_for(req, 0, np.array([1, -1])) == 1  # node-local
    assert placer.node_for(np.array([9.0, 1, 0]), 0) == -1  # fits nowhere


def test_task_slots_median_request() -> None:
    cap = np.array([[16.0, 64, 0], [32, 128, 0], [32, 128, 0]])
    up = np.array([True, True, False])
    req = np.array([[1.0, 4, 0], [1, 4, 0], [4, 8, 0]])
    assert task_slots(cap, up, req) == 16 + 32
