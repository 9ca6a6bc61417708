"""``metrics_table``: every per-run metric as rows ``(run_id, metric, value, unit)``.

Metrics are computed downstream of the core, once, from ``task_runs`` and
``node_intervals`` (never inside the simulation); each comes from a pure function named after
what it returns.  ``value`` is null when a metric is undefined for the run (no measured
usage, no task with inputs, no finished job).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from pipeline.metrics import cluster as c
from pipeline.metrics import tasks as t
from pipeline.metrics.fairness import FairnessIndices, fairness_indices


@dataclass
class RunFrames:
    """A run's two tables and end time, with intermediate frames computed once."""

    task_runs: pl.DataFrame
    node_intervals: pl.DataFrame
    end_s: float

    @cached_property
    def jobs(self) -> pl.DataFrame:
        return t.job_completion_time(self.task_runs)

    @cached_property
    def waits(self) -> pl.DataFrame:
        return t.task_wait(self.task_runs)

    @cached_property
    def fairness(self) -> FairnessIndices:
        return fairness_indices(self.task_runs, self.node_intervals, self.end_s)


Metric = Callable[[RunFrames], float | int | None]


def _q(frame: str, column: str, q: float) -> Metric:
    return lambda r: t.quantile(getattr(r, frame), column, q)


# name -> (unit, function of the run's frames)
METRICS: dict[str, tuple[str, Metric]] = {
    "node_hours": ("h", lambda r: c.node_hours(r.node_intervals)),
    "cost_usd": ("USD", lambda r: c.cost_usd(r.node_intervals)),
    "util_alloc_cpu": ("fraction", lambda r: c.util_alloc_cpu(r.task_runs, r.node_intervals,
                                                              r.end_s)),
    "util_alloc_mem": ("fraction", lambda r: c.util_alloc_mem(r.task_runs, r.node_intervals,
                                                              r.end_s)),
    "util_used_cpu": ("fraction", lambda r: c.util_used_cpu(r.task_runs, r.node_intervals,
                                                            r.end_s)),
    "util_used_mem": ("fraction", lambda r: c.util_used_mem(r.task_runs, r.node_intervals,
                                                            r.end_s)),
    "jain_fairness": ("index", lambda r: r.fairness.jain_fairness),
    "jain_equal_share": ("index", lambda r: r.fairness.jain_equal_share),
    "locality_node": ("fraction", lambda r: t.locality_fraction(r.task_runs, "node")),
    "locality_rack": ("fraction", lambda r: t.locality_fraction(r.task_runs, "rack")),
    "jct_p50_s": ("s", _q("jobs", "jct_s", 0.50)),
    "jct_p95_s": ("s", _q("jobs", "jct_s", 0.95)),
    "jct_p99_s": ("s", _q("jobs", "jct_s", 0.99)),
    "wait_p50_s": ("s", _q("waits", "wait_s", 0.50)),
    "wait_p95_s": ("s", _q("waits", "wait_s", 0.95)),
    "tasks_finished": ("count", lambda r: t.outcome_count(r.task_runs, "finished")),
    "tasks_unschedulable": ("count", lambda r: t.outcome_count(r.task_runs, "unschedulable")),
    "tasks_unfinished": ("count", lambda r: t.outcome_count(r.task_runs, "unfinished")),
    "tasks_killed": ("count", lambda r: t.outcome_count(r.task_runs, "killed")),
    "tasks_dependency_blocked": ("count",
                                 lambda r: t.tasks_dependency_blocked(r.task_runs, r.end_s)),
    "preemptions": ("count", lambda r: t.preemptions(r.task_runs)),
    "evictions": ("count", lambda r: t.evictions(r.task_runs)),
    "wasted_task_s": ("s", lambda r: t.wasted_task_s(r.task_runs)),
}

METRICS_SCHEMA = {"run_id": pl.String, "metric": pl.String, "value": pl.Float64,
                  "unit": pl.String}


def metrics_table(run_id: str, task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                  end_s: float) -> pl.DataFrame:
    """All metrics of one run, one row each, in a fixed order."""
    frames = RunFrames(task_runs, node_intervals, end_s)
    rows = []
    for name, (unit, fn) in METRICS.items():
        value = fn(frames)
        rows.append((run_id, name, None if value is None else float(value), unit))
    return pl.DataFrame(rows, schema=METRICS_SCHEMA, orient="row")
