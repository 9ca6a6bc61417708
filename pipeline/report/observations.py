"""What the replays of a trace show, in sentences computed from the data (no canned text).

Per cluster: how far apart the settings' waits are, which schedulers preempted and what it
cost, which queues spent time below their guarantee while asking for more, and the work
left undone at the window's end.  Empty when there is nothing to say (one run, no
contention).
"""

from __future__ import annotations

import polars as pl

from pipeline.report.headline import reference_policies
from pipeline.report.tables import count, duration

BELOW = 0.95  # short: holding less than 95% of the smaller of guarantee and demand


def observations(summary: pl.DataFrame, shares: pl.DataFrame,
                 comparison: pl.DataFrame | None = None) -> list[str]:
    """Sentences on what the runs of one trace show, fixed cluster first.

    ``comparison`` (scheduler_comparison) gives the work lost to preemption alone; the
    summary's ``wasted_task_s`` also counts evictions by machine failures."""
    if comparison is not None and "preemption_wasted_task_s" in comparison.columns:
        summary = summary.join(comparison.select("run_id", "preemption_wasted_task_s"),
                               on="run_id", how="left")
    lines: list[str] = []
    for cluster in sorted(summary["cluster_mode"].fill_null("fixed").unique().to_list(),
                          key=lambda c: (c != "fixed", c)):
        runs = summary.filter(pl.col("cluster_mode").fill_null("fixed") == cluster)
        lines += _waits(runs, cluster) + _preemptions(runs, cluster)
        lines += _queues(runs, shares, cluster) + _backlog(runs, cluster)
    return lines


def _waits(runs: pl.DataFrame, cluster: str) -> list[str]:
    """The spread of p95 waits among the settings (a reference such as recorded is not one:
    the headline states it)."""
    if "policy" in runs.columns:
        runs = runs.filter(~pl.col("policy").is_in(sorted(reference_policies())))
    waits = runs.drop_nulls("wait_p95_s").sort("wait_p95_s", "label")
    if waits.height < 2:
        return []
    low, high = waits.row(0, named=True), waits.row(-1, named=True)
    if high["wait_p95_s"] - low["wait_p95_s"] < 1.0:
        return [f"On the {cluster} cluster every setting starts 95% of tasks within "
                f"{duration(high['wait_p95_s'])}: their waits hardly differ."]
    return [f"On the {cluster} cluster, p95 task waits range from "
            f"{duration(low['wait_p95_s'])} ({low['label']}) to "
            f"{duration(high['wait_p95_s'])} ({high['label']})."]


def _preemptions(runs: pl.DataFrame, cluster: str) -> list[str]:
    preempting = runs.filter(pl.col("preemptions").fill_null(0) > 0).sort("label")
    out = []
    for row in preempting.iter_rows(named=True):
        lost = row.get("preemption_wasted_task_s")
        most = row.get("preemptions_per_task_max")
        losing = ("" if lost is None
                  else f", losing {lost / 3600:,.1f} task-hours of work they had done")
        times = ("none more than once" if (most or 0) <= 1
                 else f"at most {count(most)} times one task")
        out.append(f"{row['label']} preempted {count(row['preemptions'])} containers of "
                   f"{count(row.get('tasks_preempted') or 0)} tasks ({times}){losing} on the "
                   f"{cluster} cluster.")
    return out


def _queues(runs: pl.DataFrame, shares: pl.DataFrame, cluster: str) -> list[str]:
    """Leaves that spent time below their guarantee while asking for more."""
    if shares.height == 0 or "demand_dominant_share" not in shares.columns:
        return []
    ids = runs["run_id"].implode()
    starved = (
        shares.filter(pl.col("run_id").is_in(ids))
        .with_columns(
            (pl.col("dominant_share") < BELOW * pl.min_horizontal(
                "guaranteed_share", "demand_dominant_share"))
            .fill_null(False).alias("short"))
        .group_by(["label", "queue"])
        .agg(pl.col("short").mean().alias("share_of_time"))
        .filter(pl.col("share_of_time") > 0.01)
        .sort(["share_of_time", "label", "queue"], descending=[True, False, False])
    )
    return [f"Under {r['label']}, queue {r['queue'].removeprefix('root.')} held less than its "
            f"guarantee (or, when it asked for less, less than it asked for) "
            f"{100 * r['share_of_time']:.0f}% of the time ({cluster} cluster)."
            for r in starved.head(4).iter_rows(named=True)]


def _backlog(runs: pl.DataFrame, cluster: str) -> list[str]:
    """The run that left the most tasks waiting, and its work left; "the most work" only when
    it is (work left counts running tasks too, so a run with no task waiting can leave more)."""
    left = runs.filter(pl.col("backlog_tasks").fill_null(0) > 0).sort(
        ["backlog_tasks", "backlog_task_s", "label"], nulls_last=False)
    if left.height == 0:
        return []
    worst = left.row(-1, named=True)
    hours = (worst["backlog_task_s"] or 0) / 3600
    most = runs.sort(["backlog_task_s", "label"], nulls_last=False).row(-1, named=True)
    text = (f"At the window's end {worst['label']} left {count(worst['backlog_tasks'])} tasks "
            f"waiting ({hours:,.0f} task-hours of work left, running tasks included")
    if (most["backlog_task_s"] or 0) <= (worst["backlog_task_s"] or 0):
        return [f"{text}, the most on the {cluster} cluster)."]
    return [f"{text}; the most work left on the {cluster} cluster: {most['label']}, "
            f"{(most['backlog_task_s'] or 0) / 3600:,.0f} task-hours)."]
