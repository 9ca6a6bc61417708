"""Speculative-execution metrics and ``jct_mean_s`` on hand-made task runs."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from pipeline.metrics import metrics_table
from pipeline.metrics.cluster import util_alloc_cpu
from pipeline.metrics.speculation import own_run_task_s, spec_rule, speculation_on
from tests.metrics.frames import nodes, tasks

SPEC_METRICS = ["spec_launched", "spec_won", "spec_wasted_task_s", "spec_run_task_s",
                "spec_extra_pct"]
SPEC_DEFAULTS: dict[str, Any] = {"spec_copies": 0, "spec_won": False, "spec_machine_id": None,
                                 "spec_start_s": None, "spec_run_s": 0.0, "spec_wasted_s": 0.0}


def spec_tasks(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Task runs with the six speculation columns a replay writes (defaults: no copy)."""
    frame = tasks([{**SPEC_DEFAULTS, **r} for r in rows])
    return frame.with_columns(
        pl.col("spec_copies").cast(pl.Int32), pl.col("spec_won").cast(pl.Boolean),
        pl.col("spec_machine_id").cast(pl.String),
        pl.col("spec_start_s", "spec_run_s", "spec_wasted_s").cast(pl.Float64))


def _values(table: pl.DataFrame) -> dict[str, float | None]:
    return dict(zip(table["metric"].to_list(), table["value"].to_list(), strict=True))


def _spec_run() -> pl.DataFrame:
    """a1's copy (started at 25 s, ran 15 s) won, its original (0-40 s) was killed; a2 had
    two copies (one died, one killed when a2 won: 12 s between them); b1 was preempted once
    (10 s lost) and is still running at the window's end; c1 ran without a copy."""
    return spec_tasks([
        {"task_id": "a1", "job_id": "j1", "start_s": 0.0, "end_s": 40.0, "spec_copies": 1,
         "spec_won": True, "spec_machine_id": "m1", "spec_start_s": 25.0, "spec_run_s": 15.0,
         "spec_wasted_s": 40.0},
        {"task_id": "a2", "job_id": "j1", "start_s": 0.0, "end_s": 20.0, "spec_copies": 2,
         "spec_machine_id": "m1", "spec_start_s": 8.0, "spec_run_s": 12.0,
         "spec_wasted_s": 12.0},
        {"task_id": "b1", "job_id": "j2", "start_s": 50.0, "end_s": None,
         "outcome": "unfinished", "wasted_s": 10.0, "preemptions": 1},
        {"task_id": "c1", "job_id": "j3", "submit_s": 5.0, "start_s": 10.0, "end_s": 30.0},
    ])


def test_counts_run_time_and_extra_capacity() -> None:
    values = _values(metrics_table("r", _spec_run(), nodes([(0.0, 100.0)]), 100.0,
                                   speculation=True))
    assert values["spec_launched"] == 3
    assert values["spec_won"] == 1
    assert values["spec_wasted_task_s"] == pytest.approx(52.0)
    assert values["spec_run_task_s"] == pytest.approx(27.0)
    # own run time: a1 40 + a2 20 + b1 (50 s to the window's end + 10 s lost) 60 + c1 20
    assert values["spec_extra_pct"] == pytest.approx(100 * 27.0 / 140.0)
    assert values["wasted_task_s"] == pytest.approx(10.0)  # speculation loss is not in it


def test_extra_capacity_is_on_util_alloc_basis() -> None:
    """The denominator is util_alloc's allocated time (1 cpu per task here), without copies."""
    run, ni = _spec_run(), nodes([(0.0, 100.0)], cpu=1.0)
    own = own_run_task_s(run, 100.0, 0.0)
    assert own == pytest.approx(140.0)
    assert util_alloc_cpu(run, ni, 100.0, 0.0) == pytest.approx(own / 100.0)


def test_window_clips_the_tasks_own_time() -> None:
    values = _values(metrics_table("r", _spec_run(), nodes([(0.0, 60.0)]), 60.0,
                                   speculation=True))
    # b1 runs 50-60 s inside the window: 40 + 20 + (10 + 10) + 20 = 100
    assert values["spec_extra_pct"] == pytest.approx(27.0)


def test_jct_mean_over_jobs_finished_entirely() -> None:
    values = _values(metrics_table("r", _spec_run(), nodes([(0.0, 100.0)]), 100.0))
    assert values["jct_mean_s"] == pytest.approx((40.0 + 25.0) / 2)  # j2 did not finish
    unfinished = tasks([{"start_s": 0.0, "end_s": None, "outcome": "unfinished"}])
    assert _values(metrics_table("r", unfinished, nodes([(0.0, 10.0)]), 10.0))[
        "jct_mean_s"] is None


def test_null_without_speculation_zero_when_on_but_idle() -> None:
    ni = nodes([(0.0, 100.0)])
    old = tasks([{"start_s": 0.0, "end_s": 10.0}])  # a run directory before speculation
    idle = spec_tasks([{"start_s": 0.0, "end_s": 10.0}])  # the columns, no copy
    for frame, flag in ((old, None), (old, True), (idle, None), (idle, False),
                        (_spec_run(), False)):
        values = _values(metrics_table("r", frame, ni, 100.0, speculation=flag))
        assert all(values[m] is None for m in SPEC_METRICS), (frame.columns, flag)
    values = _values(metrics_table("r", idle, ni, 100.0, speculation=True))
    assert [values[m] for m in SPEC_METRICS] == [0, 0, 0, 0, 0]


def test_nothing_ran_leaves_the_share_undefined() -> None:
    waiting = spec_tasks([{"start_s": None, "outcome": "unfinished"}])
    values = _values(metrics_table("r", waiting, nodes([(0.0, 10.0)]), 10.0,
                                   speculation=True))
    assert values["spec_launched"] == 0 and values["spec_extra_pct"] is None


def test_copies_alone_turn_speculation_on() -> None:
    assert speculation_on(_spec_run())
    assert not speculation_on(spec_tasks([{"start_s": 0.0}]))
    assert not speculation_on(_spec_run(), speculation=False)
    assert not speculation_on(tasks([{"start_s": 0.0}]), speculation=True)


@pytest.mark.parametrize(("params", "rule"), [
    ({"spec": "late", "spec_cap": 0.1}, "late"), ({"spec": "hadoop"}, "hadoop"),
    ({"spec": "none"}, None), ({"spec": "None"}, None), ({"spec": None}, None),
    ({"spec_cap": 0.1}, None), ({}, None), (None, None),
])
def test_spec_rule_from_parameters(params: dict[str, Any] | None, rule: str | None) -> None:
    assert spec_rule(params) == rule


def test_jct_mean_does_not_depend_on_row_order() -> None:
    """Runs are byte-identical: the mean is the same whatever order the jobs come in."""
    ends = [1.0 + (7 * i % 1000) / 3.0 + 1e-7 * i for i in range(2000)]
    run = tasks([{"task_id": f"t{i}", "job_id": f"j{i}", "start_s": 0.0, "end_s": e}
                 for i, e in enumerate(ends)])
    ni = nodes([(0.0, 1000.0)])
    first = _values(metrics_table("r", run, ni, 1000.0))["jct_mean_s"]
    for seed in range(5):
        shuffled = run.sample(fraction=1.0, shuffle=True, seed=seed)
        assert _values(metrics_table("r", shuffled, ni, 1000.0))["jct_mean_s"] == first
