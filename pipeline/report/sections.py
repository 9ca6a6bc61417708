"""The sections of a trace's report: a title, a chart and/or a table each (pure functions)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import altair as alt
import polars as pl

from pipeline.report import charts
from pipeline.report.data import ReportData


@dataclass(frozen=True)
class Section:
    """One part of a trace's report; ``key`` names its chart file."""

    key: str
    title: str
    chart: alt.TopLevelMixin | None
    table: pl.DataFrame
    note: str = ""


def trace_sections(data: ReportData) -> list[Section]:
    """The sections for one trace (``data`` already restricted to it)."""
    return [
        Section("cost", "Node-hours and dollars against the baseline",
                charts.cost_against_baseline_chart(data.savings), cost_table(data.savings),
                baseline_note(data.savings, data.baseline)),
        *comparison_sections(data),
        Section("provisioned-nodes", "Provisioned nodes over time",
                charts.provisioned_nodes_chart(data.utilization),
                provisioned_table(data.utilization)),
        Section("allocated-capacity", "Allocated capacity over time",
                charts.allocated_capacity_chart(data.utilization),
                allocated_table(data.utilization)),
        Section("utilization", "Utilization", charts.utilization_chart(data.summary),
                utilization_table(data.summary)),
        Section("fairness-wait", "Fairness against waiting",
                charts.fairness_wait_chart(data.fairness), fairness_table(data.fairness),
                FAIRNESS_NOTE),
        Section("unschedulable", "Work not done", None, unschedulable_table(data.unschedulable),
                "A cheaper policy that leaves work undone is not a saving."),
        Section("parameters", "Runs and their parameters", None, parameters_table(data.summary)),
    ]


FAIRNESS_NOTE = (
    "jain_fairness is Jain's index across users of what each user held over its fair share: "
    "its DRF (max-min) share of the capacity given what every user asked for, time-weighted. "
    "1 means every user got its fair share (all it asked for, when everything fits); it falls "
    "when a user is held back while a fair division would serve it. jain_equal_share compares "
    "users' dominant shares with an equal share whatever they asked for, so it also falls "
    "when users simply ask for different amounts: it describes the workload's skew as much "
    "as the scheduler. Both are plotted and tabled against task queueing delay; "
    "docs/metrics.md defines every figure."
)
COMPARISON_NOTE = (
    "Every run on this cluster, side by side. Job completion and task wait percentiles are "
    "in seconds; jain_fairness is across users against each user's fair share given what "
    "it asked for (1 = nobody held back beyond a fair division). Wasted task time counts "
    "work lost to preemptions and to failed machines; preempted work counts preemptions "
    "only. For queue-based schedulers, the share of guarantee is each leaf queue's mean "
    "dominant share over its guaranteed share (lowest and highest of the leaves that ran "
    "work; above 1 = borrowing idle capacity); jain_queues is Jain's index across leaves of "
    "the part of its guarantee each got, up to what it asked for (1 = every leaf got its "
    "guarantee or all it asked for; borrowing idle capacity does not lower it)."
)
QUEUE_NOTE = (
    "Each leaf queue's share of the provisioned cluster over time (line; the larger of its "
    "cpu and memory shares, what dominant-resource queues are guaranteed) against its "
    "guaranteed share (dashed). Share of guarantee above 1 is borrowed idle capacity; "
    "mem_share is memory alone. Preempted work is run time lost to preemptions; job start "
    "wait includes waiting for AM room. jain_users_usage is how evenly a leaf's users used "
    "it over the run (not demand-aware: users asking for different amounts lower it); "
    "jain_queues is the run's demand-aware index across leaves."
)


def comparison_sections(data: ReportData) -> list[Section]:
    """Per cluster: every run side by side, then queue shares for the queue-based runs."""
    sections = []
    for cluster in data.clusters():
        runs = data.comparison.filter(pl.col("cluster") == cluster)
        key = section_key(cluster)
        sections.append(Section(
            f"schedulers-{key}", f"Schedulers compared on the {cluster} cluster",
            charts.scheduler_comparison_chart(runs), comparison_table(runs), COMPARISON_NOTE))
        queue_runs = runs.filter(pl.col("has_queues"))
        if queue_runs.height and data.has_queues:
            ids = queue_runs["run_id"].implode()
            sections.append(Section(
                f"queue-shares-{key}",
                f"Queue shares against guarantees, and preemption cost ({cluster} cluster)",
                charts.queue_share_chart(data.queue_shares.filter(pl.col("run_id").is_in(ids))),
                queue_table(data.queue_summary, queue_runs), QUEUE_NOTE))
    return sections


def section_key(text: str) -> str:
    """``text`` as a section key (HTML id and chart file name part)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "cluster"


def comparison_table(runs: pl.DataFrame) -> pl.DataFrame:
    """Per run on one cluster: cost, utilization, times, fairness, preemption and queues."""
    return runs.select(
        "label", "seed", "node_hours", "cost_usd", "util_alloc_cpu", "util_alloc_mem",
        "jct_p50_s", "jct_p95_s", "wait_p50_s", "wait_p95_s", "jain_fairness", "preemptions",
        "wasted_task_s", "preemption_wasted_task_s", "min_share_of_guarantee",
        "max_share_of_guarantee", "jain_queues",
    )


def queue_table(queue_summary: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Per queue-based run and leaf: share against guarantee, preemptions, waits, fairness."""
    return (
        queue_summary.join(runs.select("run_id", "label", "seed"), on="run_id")
        .select("label", "seed", "queue", "guaranteed_share", "mean_dominant_share",
                "peak_dominant_share", "dominant_share_of_guarantee", "mean_mem_share",
                "tasks", "preemptions", "preemption_wasted_task_s", "wasted_task_s",
                "job_start_wait_mean_s", "jain_users_usage", "jain_queues")
        .sort(["label", "seed", "queue"])
    )


def cost_table(savings: pl.DataFrame) -> pl.DataFrame:
    """Per run: node-hours and dollars, and what each saves against the baseline run."""
    return savings.select(
        "label", "seed", "node_hours", "node_hours_saved", "node_hours_saved_pct",
        "node_hours_saved_vs_fixed_pct", "cost_usd", "cost_saved_usd", "cost_saved_pct",
        "cost_saved_vs_fixed_usd", "baseline_run_id",
    )


def baseline_note(savings: pl.DataFrame, baseline: str) -> str:
    """Which baseline the savings are against, and the seeds without a baseline run."""
    missing = savings.filter(pl.col("baseline_run_id").is_null())["seed"].unique().sort()
    note = (f"Savings are against {baseline} on the same trace, cluster and seed (positive = "
            "cheaper), measured over the trace's window. On the fixed cluster every policy "
            "pays for the same machines over the window, so its savings are zero by "
            "construction: compare job times, waits, fairness and backlog there. An elastic "
            f"run's saving against the fixed cluster (its {baseline} run) is in the "
            "'vs fixed' columns. The fixed cluster replays the trace's machine failures "
            "(evictions); elastic nodes never fail.")
    if len(missing):
        seeds = ", ".join(str(s) for s in missing.to_list())
        note += f" No {baseline} run for seed(s) {seeds}: their savings are blank."
    return note


def provisioned_table(utilization: pl.DataFrame) -> pl.DataFrame:
    """Per run: mean and peak provisioned nodes and cpu/mem over the time grid."""
    return _over_grid(utilization, ["nodes_provisioned", "cpu_provisioned", "mem_provisioned"])


def allocated_table(utilization: pl.DataFrame) -> pl.DataFrame:
    """Per run: mean and peak allocated cpu/mem over the time grid."""
    return _over_grid(utilization, ["cpu_allocated", "mem_allocated"])


def _over_grid(utilization: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Per run (label, seed): the mean and peak of each of ``columns`` over time buckets."""
    return (
        utilization.group_by(["label", "seed"])
        .agg([
            *(pl.col(c).mean().alias(f"{c}_mean") for c in columns),
            *(pl.col(c).max().alias(f"{c}_peak") for c in columns),
        ])
        .sort(["label", "seed"])
    )


def utilization_table(summary: pl.DataFrame) -> pl.DataFrame:
    """Per run: time-weighted allocated and used utilization."""
    return summary.select(
        "label", "seed", "util_alloc_cpu", "util_alloc_mem", "util_used_cpu", "util_used_mem"
    )


def fairness_table(fairness: pl.DataFrame) -> pl.DataFrame:
    """Per run: both fairness indices, waiting and job completion times."""
    return fairness.select(
        "label", "seed", "jain_fairness", "jain_equal_share", "wait_p50_s", "wait_p95_s",
        "jct_p50_s", "jct_p95_s", "jct_p99_s",
    )


def unschedulable_table(unschedulable: pl.DataFrame) -> pl.DataFrame:
    """Per run: tasks by final outcome, unschedulable requests and wasted run time."""
    return unschedulable.select(
        "label", "seed", "tasks", "tasks_finished", "tasks_unschedulable", "tasks_unfinished",
        "tasks_killed", "unschedulable_cpu", "unschedulable_mem", "wasted_task_s",
    )


def parameters_table(summary: pl.DataFrame) -> pl.DataFrame:
    """Per run: what was replayed and how (where, when and how fast it ran is provenance,
    kept in the warehouse's ``runs`` table, so the same results give the same report)."""
    return summary.select(
        "run_id", "policy", pl.col("params_text").alias("params"), "seed", "cluster_mode",
    )
