"""Opportunistic-container metrics and used utilization on hand-made task runs."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.metrics import metrics_table
from pipeline.metrics.cluster import util_used_cpu, util_used_mem
from pipeline.metrics.opportunistic import layer_on
from tests.metrics.frames import nodes, opp_tasks, tasks

OPP_METRICS = ["opp_started", "opp_killed", "opp_paused", "opp_shed", "opp_finished",
               "opp_wasted_task_s", "opp_queue_p50_s", "opp_queue_p95_s",
               "jct_guaranteed_p50_s", "jct_guaranteed_p95_s"]


def _values(table: pl.DataFrame) -> dict[str, float | None]:
    return dict(zip(table["metric"].to_list(), table["value"].to_list(), strict=True))


def _opp_run() -> pl.DataFrame:
    """Jobs g (guaranteed only, 2 tasks) and h (guaranteed only, 1 task); job o has a task
    that was killed twice and paused once as an opportunistic container, then finished as
    one, and a task that was shed from an NM queue once and ran guaranteed."""
    return opp_tasks([
        {"task_id": "g1", "job_id": "g", "start_s": 0.0, "end_s": 10.0},
        {"task_id": "g2", "job_id": "g", "submit_s": 2.0, "start_s": 2.0, "end_s": 30.0},
        {"task_id": "h1", "job_id": "h", "submit_s": 5.0, "start_s": 5.0, "end_s": 15.0},
        {"task_id": "o1", "job_id": "o", "start_s": 20.0, "end_s": 40.0, "opportunistic": True,
         "opp_starts": 3, "opp_kills": 2, "opp_pauses": 1, "opp_queue_s": 4.0,
         "opp_wasted_s": 6.0, "wasted_s": 6.0},
        {"task_id": "o2", "job_id": "o", "start_s": 1.0, "end_s": 9.0, "opp_starts": 1,
         "opp_shed": 1, "opp_queue_s": 2.0},
        {"task_id": "o3", "job_id": "o", "start_s": None, "outcome": "unfinished",
         "opp_shed": 2},
    ])


def test_opportunistic_counts_queueing_and_guaranteed_jobs() -> None:
    values = _values(metrics_table("r", _opp_run(), nodes([(0.0, 100.0)]), 100.0))
    assert values["opp_started"] == 4
    assert values["opp_killed"] == 2
    assert values["opp_paused"] == 1
    assert values["opp_shed"] == 3
    assert values["opp_finished"] == 1
    assert values["opp_wasted_task_s"] == pytest.approx(6.0)
    # NM queueing over the two tasks that started opportunistic: 2 s and 4 s
    assert values["opp_queue_p50_s"] == pytest.approx(3.0)
    assert values["opp_queue_p95_s"] == pytest.approx(2.0 + 0.95 * 2.0)
    # jobs g (30 s) and h (10 s); o is excluded (and unfinished anyway)
    assert values["jct_guaranteed_p50_s"] == pytest.approx(20.0)
    assert values["jct_guaranteed_p95_s"] == pytest.approx(10.0 + 0.95 * 20.0)


def test_guaranteed_jobs_exclude_finished_jobs_that_ran_opportunistic() -> None:
    run = opp_tasks([
        {"task_id": "a", "job_id": "quick", "start_s": 0.0, "end_s": 5.0},
        {"task_id": "b", "job_id": "mixed", "start_s": 0.0, "end_s": 50.0},
        {"task_id": "c", "job_id": "mixed", "start_s": 0.0, "end_s": 8.0, "opp_starts": 1},
    ])
    values = _values(metrics_table("r", run, nodes([(0.0, 100.0)]), 100.0))
    assert values["jct_guaranteed_p50_s"] == values["jct_guaranteed_p95_s"] == 5.0
    assert values["jct_p95_s"] == pytest.approx(5.0 + 0.95 * 45.0)


def test_null_without_the_layer_zero_when_on_but_idle() -> None:
    ni = nodes([(0.0, 100.0)])
    old = tasks([{"start_s": 0.0, "end_s": 10.0}])  # a run directory before the layer
    idle = opp_tasks([{"start_s": 0.0, "end_s": 10.0}])  # the layer's columns, all zero
    for frame, flag in ((old, None), (old, True), (idle, None), (idle, False)):
        values = _values(metrics_table("r", frame, ni, 100.0, opportunistic=flag))
        assert all(values[m] is None for m in OPP_METRICS), (frame.columns, flag)
    values = _values(metrics_table("r", idle, ni, 100.0, opportunistic=True))
    assert [values[m] for m in ("opp_started", "opp_killed", "opp_finished",
                                "opp_wasted_task_s")] == [0, 0, 0, 0]
    assert values["opp_queue_p50_s"] is None  # no task queued in an NM
    assert values["jct_guaranteed_p50_s"] == 10.0


def test_activity_alone_turns_the_layer_on() -> None:
    assert layer_on(opp_tasks([{"opp_shed": 1}]))
    assert layer_on(opp_tasks([{"opportunistic": True}]))
    assert not layer_on(opp_tasks([{"start_s": 0.0}]))
    assert not layer_on(opp_tasks([{"opp_starts": 1}]), opportunistic=False)


def test_util_used_integrates_measured_usage_when_written() -> None:
    ni = nodes([(0.0, 100.0)], cpu=2.0, mem=4.0)
    # the integral wins over the mean usage times the held time (0.5 * 50 = 25)
    run = opp_tasks([{"start_s": 0.0, "end_s": 50.0, "cpu_used": 0.5, "used_cpu_s": 60.0,
                      "used_mem_s": 100.0},
                     {"start_s": 0.0, "end_s": 50.0, "cpu_used": 0.5}])
    assert util_used_cpu(run, ni, 100.0) == pytest.approx(60.0 / 200)
    assert util_used_mem(run, ni, 100.0) == pytest.approx(100.0 / 400)
    unmeasured = opp_tasks([{"start_s": 0.0, "end_s": 50.0}])
    assert util_used_cpu(unmeasured, ni, 100.0) is None
    before = tasks([{"start_s": 0.0, "end_s": 50.0, "cpu_used": 0.5}])  # today's formula
    assert util_used_cpu(before, ni, 100.0) == pytest.approx(25.0 / 200)
