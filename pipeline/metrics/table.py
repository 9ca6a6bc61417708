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
from functools import cached_property, partial
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.metrics import cluster as c
from pipeline.metrics import opportunistic as o
from pipeline.metrics import speculation as s
from pipeline.metrics import tasks as t
from pipeline.metrics.fairness import FairnessIndices, fairness_indices
from pipeline.metrics.scan import Kept, ScanResult, TaskScan, Total

# the task_runs columns the metrics read (the layers' only when the run has the layer)
TASK_COLUMNS = ["job_id", "submit_s", "ready_s", "first_start_s", "start_s", "end_s",
                "outcome", "locality", "cpu", "mem", "cpu_used", "mem_used", "preemptions",
                "evictions", "wasted_s", "remaining_s", "censored", "read_rack_mb",
                "read_core_mb", "used_cpu_s", "used_mem_s"]
OUTCOME_COUNTS = ("finished", "unschedulable", "unfinished", "killed")
LOCALITY_LEVELS = ("node", "rack", "any")


@dataclass
class RunFrames:
    """A run's two tables and its measurement window, with what the metrics need gathered
    once: one batched pass over ``task_runs`` (:mod:`.scan`) for the totals, the values
    quantiles need and the job partials, and the fairness indices.

    ``task_runs``: the run's ``task_runs.parquet`` (read in batches: memory does not grow
    with the run's length) or a DataFrame.  ``[start_s, end_s]`` is the measurement window:
    the trace's observation window, or the whole run when it drained past it.
    ``opportunistic``: whether the run's parameters turned opportunistic containers on (any
    ``opp_*`` key), None when not known (then the task records tell:
    :func:`pipeline.metrics.opportunistic.layer_on`).  ``speculation``: the same for
    speculative execution (the ``spec`` parameter names a rule;
    :func:`pipeline.metrics.speculation.speculation_on`).
    """

    task_runs: pl.DataFrame | Path
    node_intervals: pl.DataFrame
    end_s: float
    start_s: float = 0.0
    opportunistic: bool | None = None
    speculation: bool | None = None

    @cached_property
    def scan(self) -> TaskScan:
        return TaskScan(self.task_runs)

    @cached_property
    def has_opp(self) -> bool:
        return all(col in self.scan.columns for col in o.OPP_COLUMNS) and (
            self.opportunistic is not False)

    @cached_property
    def has_spec(self) -> bool:
        return all(col in self.scan.columns for col in s.METRIC_COLUMNS) and (
            self.speculation is not False)

    @cached_property
    def gathered(self) -> ScanResult:
        """The one pass over ``task_runs``."""
        end, start = self.end_s, self.start_s
        totals: dict[str, Total] = {
            **{f"outcome_{name}": partial(t.outcome_count, outcome=name)
               for name in OUTCOME_COUNTS},
            "dependency_blocked": partial(t.tasks_dependency_blocked, end_s=end),
            "backlog_tasks": t.backlog_tasks, "backlog_task_s": t.backlog_task_s,
            "tasks_censored": t.tasks_censored, "preemptions": t.preemptions,
            "tasks_preempted": t.tasks_preempted, "evictions": t.evictions,
            "wasted_task_s": t.wasted_task_s, "with_inputs": t.with_inputs,
            **{f"locality_{level}": partial(t.locality_count, level=level)
               for level in LOCALITY_LEVELS},
            **{col: partial(t.data_read_mb, column=col)
               for col in ("read_rack_mb", "read_core_mb")},
            **{f"alloc_{r}": partial(c.allocated, resource=r, end_s=end, start_s=start)
               for r in ("cpu", "mem")},
            **{f"used_{r}": partial(c.used_work, resource=r, end_s=end, start_s=start)
               for r in ("cpu", "mem")},
        }
        kept: dict[str, Kept] = {
            "wait_s": lambda b: t.task_wait(b)["wait_s"],
            "preemptions": lambda b: t.preemptions_per_task(b)["preemptions"]}
        columns = list(TASK_COLUMNS)
        if self.has_opp:
            columns += o.OPP_COLUMNS
            totals.update({"opp_active": o.opp_active,
                           "opp_finished": partial(o.opp_finished, on=True),
                           **{col: partial(t.column_total, column=col)
                              for col in ("opp_starts", "opp_kills", "opp_pauses",
                                          "opp_shed", "opp_wasted_s")}})
            kept["opp_queue_s"] = lambda b: o.opp_queue_times(b)["opp_queue_s"]
        if self.has_spec:
            columns += s.METRIC_COLUMNS
            totals.update({"spec_active": s.spec_active,
                           "spec_won": partial(s.spec_won, on=True),
                           "own_run_s": partial(s.own_run_task_s, end_s=end, start_s=start),
                           **{col: partial(t.column_total, column=col)
                              for col in ("spec_copies", "spec_run_s", "spec_wasted_s")}})
        return self.scan.run(columns, totals, kept, o.touched() if self.has_opp else None)

    def total(self, name: str) -> float:
        return float(np.sum(self.gathered.totals[name]))

    def kept(self, name: str) -> pl.DataFrame:
        """Kept values as a one-column frame (for :func:`pipeline.metrics.tasks.quantile`)."""
        return pl.DataFrame({name: self.gathered.kept.get(name, np.zeros(0))},
                            schema={name: pl.Float64})

    @cached_property
    def jobs(self) -> pl.DataFrame:
        """Per job whose tasks all finished: ``job_id``, ``jct_s``."""
        return t.finished_jobs(self.gathered.jobs)

    @cached_property
    def opp_on(self) -> bool:
        return o.switched_on(self.has_opp, self.opportunistic,
                             int(self.total("opp_active")) if self.has_opp else 0)

    @cached_property
    def spec_on(self) -> bool:
        return o.switched_on(self.has_spec, self.speculation,
                             int(self.total("spec_active")) if self.has_spec else 0)

    def used(self, resource: str) -> float | None:
        """``util_used_<resource>`` (None when no task's usage is known)."""
        total = self.gathered.totals[f"used_{resource}"]
        if total.ndim == 0:  # no task_runs rows at all (the sum never took its shape)
            return None
        used, known = total
        provisioned = c.provisioned(self.node_intervals, resource, self.start_s, self.end_s)
        return t.fraction(used, provisioned) if known else None

    def alloc(self, resource: str) -> float | None:
        provisioned = c.provisioned(self.node_intervals, resource, self.start_s, self.end_s)
        return t.fraction(self.total(f"alloc_{resource}"), provisioned)

    def data_read_gb(self, column: str) -> float | None:
        if column not in self.scan.columns or not self.total("with_inputs"):
            return None
        return self.total(column) / 1024.0

    @cached_property
    def fairness(self) -> FairnessIndices:
        return fairness_indices(self.scan.lazy(), self.node_intervals, self.end_s)


def _cluster(fn: Callable[..., float | None]) -> Metric:
    """A cluster metric of the node intervals over the measurement window."""
    return lambda r: fn(r.node_intervals, r.start_s, r.end_s)


Metric = Callable[[RunFrames], float | int | None]


def _q(column: str, q: float, on: str | None = None) -> Metric:
    """A quantile of kept values (``on``: a layer's flag, None without the layer)."""
    return lambda r: (t.quantile(r.kept(column), column, q)
                      if on is None or getattr(r, on) else None)


def _jct_q(q: float) -> Metric:
    return lambda r: t.quantile(r.jobs, "jct_s", q)


def _job_mean(column: str) -> Metric:
    """The mean of a per-job figure over finished jobs; None without any.  Values are summed
    in sorted order: the job partials come from group-bys, whose row order varies, and a
    float sum in another order can differ in its last bits (runs must be byte-identical)."""
    def metric(r: RunFrames) -> float | None:
        value = r.jobs.select(pl.col(column).sort().mean()).item() if r.jobs.height else None
        return None if value is None else float(value)
    return metric


def _makespan(r: RunFrames) -> float | None:
    """From the first finished job's submit to the last finished job's end."""
    if not r.jobs.height:
        return None
    return float(r.jobs["end_s"].max() - r.jobs["submit_s"].min())


def _count(name: str) -> Metric:
    return lambda r: r.total(name)


def _layer(name: str, on: str) -> Metric:
    """A total of a layer's per-task column (``on``: ``opp_on`` or ``spec_on``); None
    without the layer."""
    return lambda r: r.total(name) if getattr(r, on) else None


def _guaranteed_q(q: float) -> Metric:
    """Job completion time over the jobs that ran guaranteed only; None without the layer."""
    def metric(r: RunFrames) -> float | None:
        if not r.opp_on:
            return None
        return t.quantile(o.without(r.jobs, r.gathered.touched), "jct_s", q)
    return metric


# name -> (unit, function of the run's frames)
METRICS: dict[str, tuple[str, Metric]] = {
    "node_hours": ("h", _cluster(c.node_hours)),
    "cost_usd": ("USD", _cluster(c.cost_usd)),
    "util_alloc_cpu": ("fraction", lambda r: r.alloc("cpu")),
    "util_alloc_mem": ("fraction", lambda r: r.alloc("mem")),
    "util_used_cpu": ("fraction", lambda r: r.used("cpu")),
    "util_used_mem": ("fraction", lambda r: r.used("mem")),
    "jain_fairness": ("index", lambda r: r.fairness.jain_fairness),
    "jain_equal_share": ("index", lambda r: r.fairness.jain_equal_share),
    **{f"locality_{level}": ("fraction", lambda r, level=level: t.fraction(
        r.total(f"locality_{level}"), r.total("with_inputs"))) for level in LOCALITY_LEVELS},
    "data_read_rack_gb": ("GiB", lambda r: r.data_read_gb("read_rack_mb")),
    "data_read_core_gb": ("GiB", lambda r: r.data_read_gb("read_core_mb")),
    "jct_mean_s": ("s", _job_mean("jct_s")),
    "jct_p50_s": ("s", _jct_q(0.50)),
    "jct_p95_s": ("s", _jct_q(0.95)),
    "jct_p99_s": ("s", _jct_q(0.99)),
    "wait_p50_s": ("s", _q("wait_s", 0.50)),
    "wait_p95_s": ("s", _q("wait_s", 0.95)),
    # HPC's figures of merit, per finished job (pipeline.metrics.tasks.finished_jobs)
    "job_wait_mean_s": ("s", _job_mean("job_wait_s")),
    "bsld_mean": ("ratio", _job_mean("bsld")),
    "bsld_p95": ("ratio", lambda r: t.quantile(r.jobs, "bsld", 0.95)),
    "makespan_s": ("s", _makespan),
    **{f"tasks_{name}": ("count", _count(f"outcome_{name}")) for name in OUTCOME_COUNTS},
    "tasks_dependency_blocked": ("count", _count("dependency_blocked")),
    "backlog_tasks": ("count", _count("backlog_tasks")),
    "backlog_task_s": ("s", _count("backlog_task_s")),
    "tasks_censored": ("count", _count("tasks_censored")),
    "preemptions": ("count", _count("preemptions")),
    "tasks_preempted": ("count", _count("tasks_preempted")),
    "preemptions_per_task_p99": ("count", _q("preemptions", 0.99)),
    "preemptions_per_task_max": ("count", _q("preemptions", 1.0)),
    "evictions": ("count", _count("evictions")),
    "wasted_task_s": ("s", _count("wasted_task_s")),
    "opp_started": ("count", _layer("opp_starts", "opp_on")),
    "opp_killed": ("count", _layer("opp_kills", "opp_on")),
    "opp_paused": ("count", _layer("opp_pauses", "opp_on")),
    "opp_shed": ("count", _layer("opp_shed", "opp_on")),
    "opp_finished": ("count", _layer("opp_finished", "opp_on")),
    "opp_wasted_task_s": ("s", _layer("opp_wasted_s", "opp_on")),
    "opp_queue_p50_s": ("s", _q("opp_queue_s", 0.50, "opp_on")),
    "opp_queue_p95_s": ("s", _q("opp_queue_s", 0.95, "opp_on")),
    "jct_guaranteed_p50_s": ("s", _guaranteed_q(0.50)),
    "jct_guaranteed_p95_s": ("s", _guaranteed_q(0.95)),
    "spec_launched": ("count", _layer("spec_copies", "spec_on")),
    "spec_won": ("count", _layer("spec_won", "spec_on")),
    "spec_wasted_task_s": ("s", _layer("spec_wasted_s", "spec_on")),
    "spec_run_task_s": ("s", _layer("spec_run_s", "spec_on")),
    "spec_extra_pct": ("%", lambda r: s.extra_pct(r.total("spec_run_s"), r.total("own_run_s"))
                       if r.spec_on else None),
}

METRICS_SCHEMA = {"run_id": pl.String, "metric": pl.String, "value": pl.Float64,
                  "unit": pl.String}


def metrics_table(run_id: str, task_runs: pl.DataFrame | Path, node_intervals: pl.DataFrame,
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
