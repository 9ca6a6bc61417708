"""One chart per concept: pure functions from one trace's polars frames to Altair charts.

Runs are told apart by ``label`` (the policy and its parameters); where a trace was
replayed with several seeds, the charts show the mean over seeds.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from pipeline.report.data import mean_over_seeds

WIDTH = 560
HEIGHT = 260
LABEL_LIMIT_PX = 420  # labels name policy and parameters; Vega's default cuts them at 180
LABEL = alt.Color("label:N", title="policy", legend=alt.Legend(labelLimit=LABEL_LIMIT_PX))


def cost_against_baseline_chart(savings: pl.DataFrame) -> alt.FacetChart:
    """Node-hours and dollars per policy, each bar labelled with its saving against baseline."""
    means = mean_over_seeds(
        savings, ["node_hours", "cost_usd", "node_hours_saved_pct", "cost_saved_pct"]
    )
    baseline = savings["baseline_policy"][0] if savings.height else "the baseline"
    long = pl.concat([
        _measure(means, "node-hours", "node_hours", "node_hours_saved_pct"),
        _measure(means, "dollars (USD)", "cost_usd", "cost_saved_pct"),
    ]).with_columns(
        # room right of the longest bar for its label (an invisible point widens the scale)
        (pl.col("amount").max().over("measure") * 1.45).alias("room")
    )
    base = alt.Chart().encode(
        y=alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=LABEL_LIMIT_PX))
    )
    x = alt.X("amount:Q", title=None, axis=alt.Axis(tickCount=4, format=",.3~r"))
    bars = base.mark_bar().encode(
        x=x,
        color=alt.Color("label:N", legend=None),
        tooltip=["label:N", "measure:N", alt.Tooltip("amount:Q", format=",.2f"),
                 alt.Tooltip("saved_pct:Q", title="saved %", format="+.1f"), "seeds:Q"],
    )
    text = base.mark_text(align="left", dx=4).encode(x=x, text="saved_text:N")
    room = base.mark_point(opacity=0).encode(x=alt.X("room:Q"))
    return (
        alt.layer(bars, text, room, data=long)
        .properties(width=WIDTH // 2 - 20, height=alt.Step(22))
        .facet(column=alt.Column("measure:N", title=None, sort=["node-hours"]))
        .resolve_scale(x="independent")
        .properties(title=f"Node-hours and dollars per policy (saving against {baseline})")
    )


def _measure(means: pl.DataFrame, measure: str, amount: str, saved_pct: str) -> pl.DataFrame:
    """One measure of ``means`` in long form: label, measure, amount, saving and its text."""
    return means.select(
        pl.col("label"),
        pl.lit(measure).alias("measure"),
        pl.col(amount).cast(pl.Float64).alias("amount"),
        pl.col(saved_pct).cast(pl.Float64).alias("saved_pct"),
        pl.col("seeds"),
    ).with_columns(
        pl.when(pl.col("saved_pct").is_null())
        .then(pl.lit(""))
        .otherwise(pl.format("{}% saved", pl.col("saved_pct").round(1)))
        .alias("saved_text")
    )


def provisioned_nodes_chart(utilization: pl.DataFrame) -> alt.Chart:
    """Nodes provisioned over time per policy (time-weighted per bucket)."""
    series = _over_time(utilization, ["nodes_provisioned"])
    return (
        alt.Chart(series)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time_h:Q", title="time (h)"),
            y=alt.Y("nodes_provisioned:Q", title="nodes provisioned"),
            color=LABEL,
            tooltip=["label:N", alt.Tooltip("time_h:Q", format=".2f"),
                     alt.Tooltip("nodes_provisioned:Q", format=".1f")],
        )
        .properties(width=WIDTH, height=HEIGHT, title="Provisioned nodes over time")
    )


def allocated_capacity_chart(utilization: pl.DataFrame) -> alt.FacetChart:
    """Allocated cpu and mem over time per policy (requests of running tasks)."""
    series = _over_time(utilization, ["cpu_allocated", "mem_allocated"]).unpivot(
        ["cpu_allocated", "mem_allocated"], index=["label", "time_h"],
        variable_name="resource", value_name="allocated",
    ).with_columns(pl.col("resource").str.replace("_allocated", ""))
    return (
        alt.Chart(series)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time_h:Q", title="time (h)"),
            y=alt.Y("allocated:Q", title="allocated (trace units)"),
            color=LABEL,
            tooltip=["label:N", "resource:N", alt.Tooltip("time_h:Q", format=".2f"),
                     alt.Tooltip("allocated:Q", format=",.1f")],
        )
        .properties(width=WIDTH, height=HEIGHT // 2)
        .facet(row=alt.Row("resource:N", title=None))
        .resolve_scale(y="independent")
        .properties(title="Allocated capacity over time")
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


def scheduler_comparison_chart(runs: pl.DataFrame) -> alt.FacetChart:
    """One small bar chart per measure, one bar per run label (mean over seeds), one cluster."""
    means = mean_over_seeds(runs, list(COMPARISON_MEASURES))
    long = (
        means.unpivot(list(COMPARISON_MEASURES), index=["policy", "label", "seeds"],
                      variable_name="measure", value_name="value")
        .drop_nulls("value")
        .with_columns(pl.col("measure").replace_strict(COMPARISON_MEASURES))
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=LABEL_LIMIT_PX)),
            x=alt.X("value:Q", title=None, axis=alt.Axis(tickCount=3, labelExpr=SMALL_OR_SI)),
            color=alt.Color("policy:N", title="policy"),
            tooltip=["label:N", "measure:N", alt.Tooltip("value:Q", format=",.3~f"),
                     "seeds:Q"],
        )
        .properties(width=170, height=alt.Step(16))
        .facet(facet=alt.Facet("measure:N", title=None,
                               sort=list(COMPARISON_MEASURES.values())), columns=3)
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


def utilization_chart(summary: pl.DataFrame) -> alt.Chart:
    """Time-weighted utilization of provisioned capacity per policy (allocated and used)."""
    means = mean_over_seeds(summary, list(UTILIZATION_MEASURES))
    long = (
        means.unpivot(
            [c for c in UTILIZATION_MEASURES if c in means.columns],
            index=["label"], variable_name="measure", value_name="utilization",
        )
        .drop_nulls("utilization")
        .with_columns(pl.col("measure").replace_strict(UTILIZATION_MEASURES))
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("measure:N", title=None, sort=list(UTILIZATION_MEASURES.values()),
                    axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("label:N"),
            y=alt.Y("utilization:Q", title="of provisioned capacity", axis=alt.Axis(format="%")),
            color=LABEL,
            tooltip=["label:N", "measure:N", alt.Tooltip("utilization:Q", format=".1%")],
        )
        .properties(width=WIDTH, height=HEIGHT, title="Utilization (time-weighted)")
    )


def fairness_wait_chart(fairness: pl.DataFrame) -> alt.Chart:
    """Jain's fairness index against the 95th percentile task wait, one point per run."""
    points = fairness.select(
        "label", "seed",
        *(pl.col(c).cast(pl.Float64) for c in ("jain_fairness", "wait_p95_s", "wait_p50_s",
                                                "jct_p95_s")),
    ).drop_nulls(["jain_fairness", "wait_p95_s"])
    return (
        alt.Chart(points)
        .mark_point(filled=True, size=90)
        .encode(
            x=alt.X("wait_p95_s:Q", title="task wait p95 (s)"),
            y=alt.Y("jain_fairness:Q", title="jain_fairness (users vs fair share)",
                    scale=alt.Scale(domain=[0, 1])),
            color=LABEL,
            tooltip=["label:N", "seed:Q", alt.Tooltip("jain_fairness:Q", format=".3f"),
                     alt.Tooltip("wait_p50_s:Q", format=",.1f"),
                     alt.Tooltip("wait_p95_s:Q", format=",.1f"),
                     alt.Tooltip("jct_p95_s:Q", format=",.1f")],
        )
        .properties(width=WIDTH, height=HEIGHT, title="Fairness against waiting")
    )
