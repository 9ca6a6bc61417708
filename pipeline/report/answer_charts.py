"""The charts that answer the report's question: what each setting saves against the status
quo, and what it does to job times and waits (pure functions of one trace's frames)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from pipeline.report import palette
from pipeline.report.charts import CLUSTER_ROW

WIDTH = 520


# a bar's verdict -> its opacity
VERDICTS = {"within tolerance": 1.0, "slows the work": 0.35, "reference, not a choice": 0.6}


def savings_chart(settings: pl.DataFrame, labels: Sequence[str]) -> alt.FacetChart:
    """Per setting, the share of the status quo's cost it saves (negative = costs more),
    one panel per cluster, each bar labelled with dollars saved per day; bars of settings
    that slow the work beyond the tolerance are faded.  A cluster whose settings all cost
    the same (the fixed cluster: the same machines) has nothing to show and is left out.
    The panels are the clusters the labels name (``[CA m5.xlarge]``), so two Kubernetes
    clusters of one kind do not draw their settings on the same row."""
    rows = palette.with_setting(settings).select(
        "label", "setting",
        pl.coalesce(palette.label_cluster(), pl.col("cluster_mode"), pl.lit("fixed"))
        .alias("cluster"),
        pl.col("cost_saved_pct").cast(pl.Float64), pl.col("saved_usd_per_day"),
        pl.col("qualifies"),
    ).with_columns(
        pl.when(pl.col("cost_saved_pct").abs() < 0.05).then(pl.lit("0 (same machines)"))
        .otherwise(pl.format("{}%  ${}/day", pl.col("cost_saved_pct").round(1),
                             pl.col("saved_usd_per_day").round(0).cast(pl.Int64)))
        .alias("text"),
        pl.when(pl.col("qualifies").is_null()).then(pl.lit("reference, not a choice"))
        .when(pl.col("qualifies")).then(pl.lit("within tolerance"))
        .otherwise(pl.lit("slows the work")).alias("verdict"),
    )
    differs = rows.group_by("cluster").agg(
        (pl.col("cost_saved_pct").abs() >= 0.05).any().alias("shows"))
    shown = differs.filter(pl.col("shows"))["cluster"]
    if len(shown):
        rows = rows.filter(pl.col("cluster").is_in(shown.implode()))
    shown_verdicts = set(rows["verdict"].to_list())  # the legend lists only those drawn
    y = alt.Y("setting:N", title=None, sort="-x", axis=alt.Axis(labelLimit=420))
    x = alt.X("cost_saved_pct:Q", title="saved against the status quo (% of its cost)",
              scale=alt.Scale(domainMin=min(0.0, float(rows["cost_saved_pct"].min() or 0))),
              axis=alt.Axis(tickCount=5))
    bars = alt.Chart().mark_bar().encode(
        x=x, y=y, color=palette.color(labels, legend=None),
        opacity=alt.Opacity("verdict:N", scale=alt.Scale(
            domain=[v for v in VERDICTS if v in shown_verdicts],
            range=[VERDICTS[v] for v in VERDICTS if v in shown_verdicts]),
            legend=alt.Legend(title=None, orient="bottom")),
        tooltip=["label:N", alt.Tooltip("cost_saved_pct:Q", format=".1f", title="saved %"),
                 alt.Tooltip("saved_usd_per_day:Q", format="$,.0f", title="saved per day"),
                 "verdict:N"])
    text = alt.Chart().mark_text(align="left", dx=4, fontSize=11).encode(
        x=alt.X("cost_saved_pct:Q"), y=y, text="text:N")
    return (
        alt.layer(bars, text, data=rows)
        .properties(width=WIDTH, height=alt.Step(20))
        .facet(row=CLUSTER_ROW)
        .resolve_scale(y="independent")
        .properties(title="What each setting saves against the status quo")
    )


DIFFERENCES = {"jct_p95_s": "job completion p95", "wait_p95_s": "task wait p95"}


def differences_chart(settings: pl.DataFrame, labels: Sequence[str]) -> alt.Chart:
    """When every setting pays for the same machines: per setting, its p95 job completion and
    p95 task wait (hours), one panel each, so what differs is what is drawn (no savings
    panel: there are none).  Settings beyond the tolerance are faded, as in the savings
    chart."""
    rows = palette.with_setting(settings).with_columns(
        pl.when(pl.col("qualifies").is_null()).then(pl.lit("reference, not a choice"))
        .when(pl.col("qualifies")).then(pl.lit("within tolerance"))
        .otherwise(pl.lit("slows the work")).alias("verdict"))
    long = pl.concat([
        rows.select("label", "setting", "verdict",
                    (pl.col(column).cast(pl.Float64) / 3600).alias("hours"),
                    pl.lit(title).alias("measure"))
        for column, title in DIFFERENCES.items()])
    order = rows.sort("jct_p95_s", nulls_last=True)["setting"].to_list()
    verdicts = [v for v in VERDICTS if v in set(long["verdict"].to_list())]
    return (
        alt.Chart(long).mark_bar().encode(
            x=alt.X("hours:Q", title="hours"),
            y=alt.Y("setting:N", title=None, sort=order, axis=alt.Axis(labelLimit=420)),
            color=palette.color(labels, legend=None),
            opacity=alt.Opacity("verdict:N", scale=alt.Scale(
                domain=verdicts, range=[VERDICTS[v] for v in verdicts]),
                legend=alt.Legend(title=None, orient="bottom")),
            tooltip=["label:N", "measure:N", alt.Tooltip("hours:Q", format=",.2f"),
                     "verdict:N"])
        .properties(width=260, height=alt.Step(18))
        .facet(column=alt.Column("measure:N", title=None, sort=list(DIFFERENCES.values())))
        .resolve_scale(x="independent")
        .properties(title="The same machines for every setting: what differs is the work")
    )


def distribution_chart(distributions: pl.DataFrame, runs: pl.DataFrame,
                       labels: Sequence[str], baseline: str = "") -> alt.FacetChart:
    """CDFs of job completion and task wait per setting (log time axis): the whole
    distribution, not just two percentiles.  One row of panels per cluster and group of at
    most :data:`palette.PANEL_SIZE` settings (:func:`palette.panels`), the status quo
    (``baseline``) dashed in each, so no panel draws more than six lines."""
    curves = (
        distributions.join(runs.select("run_id", "label", "cluster_mode"), on="run_id")
        .pipe(palette.with_setting)
        .group_by(["setting", "cluster_mode", "measure", "fraction"])
        .agg(pl.col("value_s").cast(pl.Float64).mean())
        .with_columns(pl.col("cluster_mode").fill_null("fixed").alias("cluster"),
                      # a log axis has no 0: show instant starts at a millisecond
                      pl.col("value_s").clip(lower_bound=1e-3))
        .sort(["setting", "cluster", "measure", "fraction"])
    )
    curves, order = palette.in_panels(curves, baseline)
    return (
        alt.Chart(curves)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("value_s:Q", title="seconds (log scale)",
                    scale=alt.Scale(type="log"), axis=alt.Axis(format="~s")),
            y=alt.Y("fraction:Q", title="fraction at or below", axis=alt.Axis(format="%")),
            color=palette.color(labels),
            strokeDash=palette.STATUS_QUO_DASH,
            tooltip=["setting:N", "cluster:N", "measure:N",
                     alt.Tooltip("fraction:Q", format=".1%"),
                     alt.Tooltip("value_s:Q", format=",.1f", title="seconds")],
        )
        .properties(width=300, height=150)
        .facet(row=palette.panel_row(order), column=alt.Column("measure:N", title=None))
        .properties(title="Job completion and task wait, whole distributions"
                    + (f" ({baseline} dashed in every panel)" if baseline else ""))
    )


def queue_wait_chart(waits: pl.DataFrame, labels: Sequence[str]) -> alt.FacetChart:
    """Per leaf queue, the p95 task wait under each queue-based setting."""
    rows = palette.with_setting(waits).with_columns(
        pl.col("cluster_mode").fill_null("fixed").alias("cluster"),
        pl.col("queue").str.replace(r"^root\.", "").alias("queue"),
        pl.col("wait_p95_s").cast(pl.Float64))
    return (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            y=alt.Y("queue:N", title=None),
            yOffset=alt.YOffset("setting:N"),
            x=alt.X("wait_p95_s:Q", title="task wait p95 (s)"),
            color=palette.color(labels, shown=rows["label"].to_list()),
            tooltip=["setting:N", "queue:N", "cluster:N",
                     alt.Tooltip("wait_p50_s:Q", format=",.1f"),
                     alt.Tooltip("wait_p95_s:Q", format=",.1f"),
                     alt.Tooltip("tasks:Q", format=",")],
        )
        .properties(width=WIDTH, height=alt.Step(10))
        .facet(row=CLUSTER_ROW)
        .properties(title="How long each queue's tasks waited")
    )
