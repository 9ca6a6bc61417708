"""Metric functions on tiny hand-made run tables (values worked out by hand)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import synthetic_workload
from pipeline.metrics import METRICS, metrics_table, scan
from pipeline.metrics.cluster import cost_usd, node_hours, util_alloc_cpu, util_used_cpu
from pipeline.metrics.tasks import (
    jct_quantile_s,
    locality_fraction,
    tasks_dependency_blocked,
    wait_quantile_s,
    wasted_task_s,
)
from pipeline.replay import replay
from tests.metrics.frames import nodes, tasks


def test_node_hours_and_billing() -> None:
    ni = nodes([(0.0, 5400.0), (100.0, 100.5)])
    assert node_hours(ni) == pytest.approx((5400 + 0.5) / 3600)
    assert cost_usd(ni) == pytest.approx((5400 + 1) / 3600)  # per second, rounded up
    hourly = nodes([(0.0, 5400.0), (100.0, 100.5)], billing_s=3600.0)
    assert cost_usd(hourly) == pytest.approx(3.0)  # 2 started hours + 1


def test_utilization_counts_running_and_lost_work() -> None:
    ni = nodes([(0.0, 100.0)], cpu=2.0)
    tr = tasks([{"start_s": 0.0, "end_s": 50.0, "cpu_used": 0.5},
                {"start_s": 60.0, "end_s": None, "outcome": "unfinished", "wasted_s": 10.0}])
    assert util_alloc_cpu(tr, ni, 100.0) == pytest.approx((50 + 40 + 10) / 200)
    assert util_used_cpu(tr, ni, 100.0) == pytest.approx(0.5 * 50 / 200)
    assert util_used_cpu(tasks([{"start_s": 0.0, "end_s": 1.0}]), ni, 100.0) is None


def test_times_counts_and_locality() -> None:
    tr = tasks([
        {"job_id": "j1", "submit_s": 0.0, "ready_s": 0.0, "start_s": 2.0, "end_s": 10.0,
         "locality": "node"},
        {"job_id": "j1", "submit_s": 1.0, "ready_s": 1.0, "start_s": 1.0, "end_s": 20.0,
         "locality": "rack"},
        {"job_id": "j2", "submit_s": 0.0, "ready_s": 0.0, "start_s": 0.0, "end_s": 4.0,
         "outcome": "killed", "wasted_s": 3.0},
        {"job_id": "j3", "submit_s": 5.0, "ready_s": None, "outcome": "unfinished"},
    ])
    assert jct_quantile_s(tr, 0.5) == pytest.approx(20.0)  # only j1 finished entirely
    assert wait_quantile_s(tr, 0.5) == pytest.approx(0.0)
    assert wait_quantile_s(tr, 0.95) == pytest.approx(1.8)
    assert wasted_task_s(tr) == pytest.approx(7.0)
    assert tasks_dependency_blocked(tr, 100.0) == 1
    assert locality_fraction(tr, "node") == pytest.approx(0.5)
    assert locality_fraction(tasks([{"start_s": 0.0}]), "node") is None


def test_metrics_table_lists_every_metric_once() -> None:
    tr = tasks([{"start_s": 0.0, "end_s": 10.0}])
    table = metrics_table("r1", tr, nodes([(0.0, 10.0)]), 10.0)
    assert table.columns == ["run_id", "metric", "value", "unit"]
    assert table["metric"].to_list() == list(METRICS)
    contract = {"node_hours", "cost_usd", "util_alloc_cpu", "util_alloc_mem", "util_used_cpu",
                "util_used_mem", "jain_fairness", "locality_node", "locality_rack",
                "jct_p50_s", "jct_p95_s", "jct_p99_s", "wait_p50_s", "wait_p95_s",
                "tasks_finished", "tasks_unschedulable", "preemptions", "wasted_task_s"}
    assert contract <= set(METRICS)


def test_metrics_of_the_file_in_batches_match_the_whole_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read in batches of 7 rows (counts exact, sums to the last bits) or whole, a run's
    metrics agree, and reading the same file twice gives the same bytes."""
    trace = synthetic_workload(tmp_path / "w", machines=20, tasks=2_000, seed=2)
    run = replay(trace, "fair-scheduler", None, 0, tmp_path / "run",
                 cluster_options={"slow_fraction": 0.2})
    path = run.out_dir / "task_runs.parquet"
    nodes_ = pl.read_parquet(run.out_dir / "node_intervals.parquet")
    end = run.run["measured"]["to_s"]
    whole = metrics_table("r", pl.read_parquet(path), nodes_, end)
    monkeypatch.setattr(scan, "BATCH_ROWS", 7)
    batched = metrics_table("r", path, nodes_, end)
    assert batched.equals(metrics_table("r", path, nodes_, end))
    for (name, a), b in zip(whole.select("metric", "value").iter_rows(),
                            batched["value"], strict=True):
        assert (a is None) == (b is None), name
        if a is not None:
            assert b == pytest.approx(a, rel=1e-12, abs=1e-12), name
