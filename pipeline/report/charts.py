"""One chart per concept: pure functions from one trace's polars frames to Altair charts.

Runs are told apart by their setting (policy and parameters; one colour each, the same in
every chart: :mod:`.palette`) and their cluster (fixed and elastic in separate panels);
where a trace was replayed with several seeds, the charts show the mean over seeds.
``labels`` is every run label of the trace, so each chart uses the same colours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import polars as pl

from pipeline.report import palette
from pipeline.report.data import mean_over_seeds

WIDTH = 560
HEIGHT = 260
LABEL_LIMIT_PX = 420  # labels name policy and parameters; Vega's default cuts them at 180
CLUSTER_ROW = alt.Row("cluster:N", title=None, sort=["fixed", "elastic"],
                      header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top",
                                        labelFontWeight="bold"))


def provisioned_nodes_chart(utilization: pl.DataFrame, labels: Sequence[str]) -> alt.Chart:
    """Nodes provisioned over time per setting (time-weighted per bucket); settings whose
    lines are identical (the fixed cluster under every policy) are drawn as one line."""
    series = _with_cluster(_over_time(utilization, ["nodes_provisioned"]))
    lines = _merge_identical(series, "nodes_provisioned")
    names = lines["line"].unique().sort().to_list()
    known = palette.scale(labels)
    merged = [n for n in names if n.endswith("(identical)")]
    hues = [palette.GREYS[merged.index(n) % len(palette.GREYS)] if n in merged
            else _hue(known, n) for n in names]
    return (
        alt.Chart(lines)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time_h:Q", title="time (h)"),
            y=alt.Y("nodes_provisioned:Q", title="nodes provisioned"),
            color=alt.Color("line:N", scale=alt.Scale(domain=names, range=hues),
                            legend=alt.Legend(labelLimit=LABEL_LIMIT_PX, title=None)),
            tooltip=["line:N", alt.Tooltip("time_h:Q", format=".2f"),
                     alt.Tooltip("nodes_provisioned:Q", format=".1f")],
        )
        .properties(width=WIDTH, height=HEIGHT, title="Provisioned nodes over time")
    )


def _hue(scale: alt.Scale, name: str) -> str:
    """The setting's colour (a line standing for several settings is drawn in a grey)."""
    domain, hues = list(scale.domain), list(scale.range)
    key = palette.setting(name)
    return hues[domain.index(key)] if key in domain else palette.GREYS[0]


def _with_cluster(series: pl.DataFrame) -> pl.DataFrame:
    return series.with_columns(
        pl.col("label").str.extract(r" \[([^\]]+)\]$").fill_null("fixed").alias("cluster"))


def _merge_identical(series: pl.DataFrame, value: str) -> pl.DataFrame:
    """One line per group of labels with identical series: the label, or 'N settings'."""
    shapes = series.group_by("label").agg(pl.col(value).round(6).hash().sum().alias("shape"),
                                          pl.col("cluster").first())
    groups = shapes.group_by(["cluster", "shape"]).agg(pl.col("label").sort())
    naming = groups.with_columns(
        pl.when(pl.col("label").list.len() == 1).then(pl.col("label").list.first())
        .otherwise(pl.format("{} cluster: all {} settings (identical)", pl.col("cluster"),
                             pl.col("label").list.len())).alias("line"),
        pl.col("label").list.first().alias("keep")).select("keep", "line")
    return series.join(naming, left_on="label", right_on="keep").sort(["line", "time_h"])


def allocated_capacity_chart(utilization: pl.DataFrame, labels: Sequence[str],
                             baseline: str = "") -> alt.FacetChart:
    """Allocated cpu and mem over time per setting, one column per resource and one row per
    cluster and group of at most :data:`palette.PANEL_SIZE` settings, the status quo
    (``baseline``) dashed in each (:func:`palette.in_panels`)."""
    series = _with_cluster(_over_time(utilization, ["cpu_allocated", "mem_allocated"])).unpivot(
        ["cpu_allocated", "mem_allocated"], index=["label", "cluster", "time_h"],
        variable_name="resource", value_name="allocated",
    ).with_columns(pl.col("resource").str.replace("_allocated", "")).pipe(palette.with_setting)
    series, order = palette.in_panels(series, baseline)
    return (
        alt.Chart(series)
        .mark_line(interpolate="step-after", strokeWidth=1.2)
        .encode(
            x=alt.X("time_h:Q", title="time (h)"),
            y=alt.Y("allocated:Q", title="allocated (trace units)"),
            color=palette.color(labels),
            strokeDash=palette.STATUS_QUO_DASH,
            tooltip=["label:N", "resource:N", alt.Tooltip("time_h:Q", format=".2f"),
                     alt.Tooltip("allocated:Q", format=",.1f")],
        )
        .properties(width=WIDTH // 2, height=HEIGHT // 2)
        .facet(row=palette.panel_row(order), column=alt.Column("resource:N", title=None))
        .resolve_scale(y="independent")
        .properties(title="Allocated capacity over time"
                    + (f" ({baseline} dashed in every panel)" if baseline else ""))
    )


# Axis labels for measures from fractions to thousands on one shared encoding: plain decimals
# below 1 (a Jain index), SI prefixes above (12k node-hours), never "300m".
SMALL_OR_SI = ("abs(datum.value) < 1 ? format(datum.value, '.2~f') "
               ": format(datum.value, '~s')")

COMPARISON_MEASURES = {
    "node_hours": "node-hours",
    "jct_p95_s": "job completion p95 (s)",
    "wait_p95_s": "task wait p95 (s)",
    "jain_fairness": "Jain's fairness (users vs fair share)",
    "preemptions": "preemptions",
    "preemption_wasted_task_s": "work lost to preemption (task-s)",
}


def scheduler_comparison_chart(runs: pl.DataFrame, labels: Sequence[str]) -> alt.FacetChart:
    """One small bar chart per measure, one bar per setting (mean over seeds), one cluster;
    measures with nothing to show (no preemptions anywhere) are left out."""
    means = palette.with_setting(mean_over_seeds(runs, list(COMPARISON_MEASURES)))
    long = (
        means.unpivot([m for m in COMPARISON_MEASURES if m in means.columns],
                      index=["policy", "label", "setting", "seeds"],
                      variable_name="measure", value_name="value")
        .drop_nulls("value")
        .filter((pl.col("value") != 0).any().over("measure"))
        .with_columns(pl.col("measure").replace_strict(COMPARISON_MEASURES))
    )
    shown = [m for m in COMPARISON_MEASURES.values() if m in set(long["measure"].to_list())]
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("setting:N", title=None, sort=palette.settings_in_order(means["label"]),
                    axis=alt.Axis(labelLimit=LABEL_LIMIT_PX)),
            x=alt.X("value:Q", title=None, axis=alt.Axis(tickCount=3, labelExpr=SMALL_OR_SI)),
            color=palette.color(labels, legend=None),
            tooltip=["label:N", "measure:N", alt.Tooltip("value:Q", format=",.3~f"),
                     "seeds:Q"],
        )
        .properties(width=170, height=alt.Step(16))
        .facet(facet=alt.Facet("measure:N", title=None, sort=shown), columns=3)
        .resolve_scale(x="independent")
        .properties(title="Schedulers compared (lower is better, but for fairness)")
    )


def queue_share_chart(shares: pl.DataFrame) -> alt.FacetChart:
    """Each leaf queue's dominant share over time (mean over seeds) against its guarantee.

    The dominant share is the larger of the queue's cpu and memory shares of the
    provisioned cluster, what dominant-resource queues are guaranteed.
    """
    series = (
        shares.drop_nulls("dominant_share")  # buckets with nothing provisioned
        .group_by(["label", "queue", "bucket_start_s"])
        .agg(*(pl.col(c).cast(pl.Float64).mean()
               for c in ("dominant_share", "cpu_share", "mem_share")),
             pl.col("guaranteed_share").cast(pl.Float64).first())
        .with_columns((pl.col("bucket_start_s") / 3600).alias("time_h"))
        .sort(["label", "queue", "time_h"])
    )
    x = alt.X("time_h:Q", title="time (h)")
    color = alt.Color("queue:N", title="queue")
    lines = alt.Chart().mark_line(interpolate="step-after").encode(
        x=x, y=alt.Y("dominant_share:Q", title="share of the cluster (dominant)",
                     axis=alt.Axis(format="%")),
        color=color,
        tooltip=["label:N", "queue:N", alt.Tooltip("time_h:Q", format=".2f"),
                 alt.Tooltip("dominant_share:Q", format=".1%"),
                 alt.Tooltip("cpu_share:Q", format=".1%"),
                 alt.Tooltip("mem_share:Q", format=".1%"),
                 alt.Tooltip("guaranteed_share:Q", format=".1%")])
    guarantees = alt.Chart().mark_line(strokeDash=[4, 3]).encode(
        x=x, y="guaranteed_share:Q", color=color)
    return (
        alt.layer(lines, guarantees, data=series)
        .properties(width=WIDTH, height=HEIGHT // 2)
        .facet(row=alt.Row("label:N", title=None,
                           header=alt.Header(labelAngle=0, labelAlign="left",
                                             labelOrient="top", labelFontWeight="bold")))
        .properties(title="Queue shares over time against guarantees")
    )


def _over_time(utilization: pl.DataFrame, values: list[str]) -> pl.DataFrame:
    """Per label and bucket, the mean of ``values`` over seeds, with time in hours."""
    return (
        utilization.group_by(["label", "bucket_start_s"])
        .agg([pl.col(v).cast(pl.Float64).mean() for v in values])
        .with_columns((pl.col("bucket_start_s") / 3600).alias("time_h"))
        .sort(["label", "time_h"])
        .select(["label", "time_h", *values])
    )


UTILIZATION_MEASURES = {
    "util_alloc_cpu": "allocated cpu",
    "util_alloc_mem": "allocated mem",
    "util_used_cpu": "used cpu",
    "util_used_mem": "used mem",
}


def utilization_chart(summary: pl.DataFrame, labels: Sequence[str]) -> alt.Chart:
    """Time-weighted utilization of provisioned capacity per setting (allocated, and used
    where the trace measured usage), one panel per cluster."""
    means = _with_cluster(mean_over_seeds(summary, list(UTILIZATION_MEASURES)))
    long = (
        means.unpivot(
            [c for c in UTILIZATION_MEASURES if c in means.columns],
            index=["label", "cluster"], variable_name="measure", value_name="utilization",
        )
        .drop_nulls("utilization")
        .with_columns(pl.col("measure").replace_strict(UTILIZATION_MEASURES))
        .pipe(palette.with_setting)
    )
    shown = [m for m in UTILIZATION_MEASURES.values() if m in set(long["measure"].to_list())]
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("measure:N", title=None, sort=shown, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("setting:N"),
            y=alt.Y("utilization:Q", title="of provisioned capacity", axis=alt.Axis(format="%")),
            color=palette.color(labels),
            tooltip=["label:N", "measure:N", alt.Tooltip("utilization:Q", format=".1%")],
        )
        .properties(width=WIDTH // 2, height=HEIGHT // 2)
        .facet(column=alt.Column("cluster:N", title=None, sort=["fixed", "elastic"]))
        .properties(title="Utilization (time-weighted)")
    )


def fairness_wait_chart(fairness: pl.DataFrame, labels: Sequence[str]) -> alt.Chart:
    """Fairness against the 95th percentile task wait (minutes, from 0), one point per run
    (shape: cluster).  The fairness axis starts at 0.8 or lower, one tenth below the least
    fair run: it shows the runs apart without magnifying a 0.99 into a gap."""
    points = _with_cluster(fairness.select(
        "label", "seed",
        *(pl.col(c).cast(pl.Float64) for c in ("jain_fairness", "wait_p95_s", "wait_p50_s",
                                                "jct_p95_s")),
    ).drop_nulls(["jain_fairness", "wait_p95_s"])).pipe(palette.with_setting).with_columns(
        (pl.col("wait_p95_s") / 60).alias("wait_p95_min"))
    least = float(points["jain_fairness"].min()) if points.height else 1.0
    floor = min(0.8, math.floor(least * 10) / 10)
    return (
        alt.Chart(points)
        .mark_point(filled=True, size=90)
        .encode(
            x=alt.X("wait_p95_min:Q", title="task wait p95 (minutes)",
                    scale=alt.Scale(zero=True)),
            y=alt.Y("jain_fairness:Q", title="fairness (1 = every user got its fair share)",
                    scale=alt.Scale(domain=[floor, 1])),
            color=palette.color(labels),
            shape=alt.Shape("cluster:N", title="cluster"),
            tooltip=["label:N", "seed:Q", alt.Tooltip("jain_fairness:Q", format=".3f"),
                     alt.Tooltip("wait_p50_s:Q", format=",.1f"),
                     alt.Tooltip("wait_p95_s:Q", format=",.1f"),
                     alt.Tooltip("jct_p95_s:Q", format=",.1f")],
        )
        .properties(width=WIDTH, height=HEIGHT, title="Fairness against waiting")
    )
