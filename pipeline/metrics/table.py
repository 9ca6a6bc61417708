"""``metrics_table``: every per-run metric as rows ``(run_id, metric, value, unit)``.

Metrics are computed downstream of the core, once, from ``task_runs`` and
``node_intervals`` (never inside the simulation); each comes from a pure function named after
what it returns.  ``value`` is null when a metric is undefined for the run (no measured
usage, no task with inputs, no finished job, a run without opportunistic containers for
the ``opp_*`` and ``jct_guaranteed_*`` metrics: :mod:`pipeline.metrics.opportunistic`, or a
run without speculative execution for the ``spec_*`` metrics:
:mod:`pipeline.metrics.speculation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from pipeline.metrics import cluster as c
from pipeline.metrics import opportunistic as o
from pipeline.metrics import speculation as s
from pipeline.metrics import tasks as t
from pipeline.metrics.fairness import FairnessIndices, fairness_indices


@dataclass
class RunFrames:
    """A run's two tables and its measurement window, with intermediate frames computed once.

    ``[start_s, end_s]`` is the measurement window: the trace's observation window, or the
    whole run when it drained past it.  ``opportunistic``: whether the run's parameters
    turned opportunistic containers on (any ``opp_*`` key), None when not known (then the
    task records tell: :func:`pipeline.metrics.opportunistic.layer_on`).  ``speculation``:
    the same for speculative execution (the ``spec`` parameter names a rule;
    :func:`pipeline.metrics.speculation.speculation_on`).
    """

    task_runs: pl.DataFrame
    node_intervals: pl.DataFrame
    end_s: float
    start_s: float = 0.0
    opportunistic: bool | None = None
    speculation: bool | None = None

    @cached_property
    def jobs(self) -> pl.DataFrame:
        return t.job_completion_time(self.task_runs)

    @cached_property
    def waits(self) -> pl.DataFrame:
        return t.task_wait(self.task_runs)

    @cached_property
    def preempted(self) -> pl.DataFrame:
        return t.preemptions_per_task(self.task_runs)

    @cached_property
    def opp_on(self) -> bool:
        return o.layer_on(self.task_runs, self.opportunistic)

    @cached_property
    def spec_on(self) -> bool:
        return s.speculation_on(self.task_runs, self.speculation)

    @cached_property
    def fairness(self) -> FairnessIndices:
        return fairness_indices(self.task_runs, self.node_intervals, self.end_s)


def _cluster(fn: Callable[..., float | None], *args: str) -> Metric:
    """A cluster metric of the node intervals (and tasks) over the measurement window."""
    def metric(r: RunFrames) -> float | None:
        if args:
            return fn(r.task_runs, r.node_intervals, *args, r.end_s, r.start_s)
        return fn(r.node_intervals, r.start_s, r.end_s)
    return metric


Metric = Callable[[RunFrames], float | int | None]


def _q(frame: str, column: str, q: float) -> Metric:
    return lambda r: t.quantile(getattr(r, frame), column, q)


def _mean(frame: str, column: str) -> Metric:
    """The mean of ``column`` of an intermediate frame; None when it is empty.  Values are
    summed in sorted order: the frames come from group-bys, whose row order varies, and a
    float sum in another order can differ in its last bits (runs must be byte-identical)."""
    def metric(r: RunFrames) -> float | None:
        rows = getattr(r, frame)
        value = rows.select(pl.col(column).sort().mean()).item() if rows.height else None
        return None if value is None else float(value)
    return metric


def _opp(column: str) -> Metric:
    """The run's total of a per-task opportunistic column; None without the layer."""
    return lambda r: o.opp_count(r.task_runs, column, r.opp_on)


# name -> (unit, function of the run's frames)
METRICS: dict[str, tuple[str, Metric]] = {
    "node_hours": ("h", _cluster(c.node_hours)),
    "cost_usd": ("USD", _cluster(c.cost_usd)),
    "util_alloc_cpu": ("fraction", _cluster(c.util_alloc, "cpu")),
    "util_alloc_mem": ("fraction", _cluster(c.util_alloc, "mem")),
    "util_used_cpu": ("fraction", _cluster(c.util_used, "cpu")),
    "util_used_mem": ("fraction", _cluster(c.util_used, "mem")),
    "jain_fairness": ("index", lambda r: r.fairness.jain_fairness),
    "jain_equal_share": ("index", lambda r: r.fairness.jain_equal_share),
    "locality_node": ("fraction", lambda r: t.locality_fraction(r.task_runs, "node")),
    "locality_rack": ("fraction", lambda r: t.locality_fraction(r.task_runs, "rack")),
    "locality_any": ("fraction", lambda r: t.locality_fraction(r.task_runs, "any")),
    "data_read_rack_gb": ("GiB", lambda r: t.data_read_gb(r.task_runs, "read_rack_mb")),
    "data_read_core_gb": ("GiB", lambda r: t.data_read_gb(r.task_runs, "read_core_mb")),
    "jct_mean_s": ("s", _mean("jobs", "jct_s")),
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
    "backlog_tasks": ("count", lambda r: t.backlog_tasks(r.task_runs)),
    "backlog_task_s": ("s", lambda r: t.backlog_task_s(r.task_runs)),
    "tasks_censored": ("count", lambda r: t.tasks_censored(r.task_runs)),
    "preemptions": ("count", lambda r: t.preemptions(r.task_runs)),
    "tasks_preempted": ("count", lambda r: t.tasks_preempted(r.task_runs)),
    "preemptions_per_task_p99": ("count", _q("preempted", "preemptions", 0.99)),
    "preemptions_per_task_max": ("count", lambda r: t.quantile(r.preempted, "preemptions",
                                                               1.0)),
    "evictions": ("count", lambda r: t.evictions(r.task_runs)),
    "wasted_task_s": ("s", lambda r: t.wasted_task_s(r.task_runs)),
    "opp_started": ("count", _opp("opp_starts")),
    "opp_killed": ("count", _opp("opp_kills")),
    "opp_paused": ("count", _opp("opp_pauses")),
    "opp_shed": ("count", _opp("opp_shed")),
    "opp_finished": ("count", lambda r: o.opp_finished(r.task_runs, r.opp_on)),
    "opp_wasted_task_s": ("s", _opp("opp_wasted_s")),
    "opp_queue_p50_s": ("s", lambda r: o.opp_queue_quantile_s(r.task_runs, 0.50, r.opp_on)),
    "opp_queue_p95_s": ("s", lambda r: o.opp_queue_quantile_s(r.task_runs, 0.95, r.opp_on)),
    "jct_guaranteed_p50_s": ("s", lambda r: o.jct_guaranteed_quantile_s(
        r.task_runs, r.jobs, 0.50, r.opp_on)),
    "jct_guaranteed_p95_s": ("s", lambda r: o.jct_guaranteed_quantile_s(
        r.task_runs, r.jobs, 0.95, r.opp_on)),
    "spec_launched": ("count", lambda r: s.spec_launched(r.task_runs, r.spec_on)),
    "spec_won": ("count", lambda r: s.spec_won(r.task_runs, r.spec_on)),
    "spec_wasted_task_s": ("s", lambda r: s.spec_wasted_task_s(r.task_runs, r.spec_on)),
    "spec_run_task_s": ("s", lambda r: s.spec_run_task_s(r.task_runs, r.spec_on)),
    "spec_extra_pct": ("%", lambda r: s.spec_extra_pct(r.task_runs, r.spec_on, r.end_s,
                                                       r.start_s)),
}

METRICS_SCHEMA = {"run_id": pl.String, "metric": pl.String, "value": pl.Float64,
                  "unit": pl.String}


def metrics_table(run_id: str, task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                  end_s: float, start_s: float = 0.0, *,
                  opportunistic: bool | None = None,
                  speculation: bool | None = None) -> pl.DataFrame:
    """All metrics of one run over its measurement window, one row each, in a fixed order.

    ``opportunistic``: whether the run has ``opp_*`` parameters (pass it when known, so a run
    with the layer on where nothing ran opportunistic gets 0s rather than nulls).
    ``speculation``: whether the run's ``spec`` parameter names a rule
    (:func:`pipeline.metrics.speculation.spec_rule`), likewise.
    """
    frames = RunFrames(task_runs, node_intervals, end_s, start_s, opportunistic, speculation)
    rows = []
    for name, (unit, fn) in METRICS.items():
        value = fn(frames)
        rows.append((run_id, name, None if value is None else float(value), unit))
    return pl.DataFrame(rows, schema=METRICS_SCHEMA, orient="row")
