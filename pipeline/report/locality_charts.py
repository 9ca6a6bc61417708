"""The data-locality charts: the trade-off along a delay setting, and locality by job size
(pure functions of one trace's frames; colours from :mod:`.palette`, as every chart)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import altair as alt
import polars as pl

from pipeline.report import palette
from pipeline.report.charts import CLUSTER_ROW, SMALL_OR_SI, WIDTH

if TYPE_CHECKING:
    from pipeline.report.locality import DelaySweep

PANEL_WIDTH = 210
PANEL_HEIGHT = 180
LINE_GREY = "#9a9a9a"


def tradeoff_chart(sweep: DelaySweep, labels: Sequence[str]) -> alt.HConcatChart:
    """Three small panels along the delay setting: node-local share, p95 job time and
    fairness.  The swept settings are points on a grey line (each in its setting's colour);
    every other setting of the cluster is a dashed level across the panel."""
    points, refs = sweep.points, sweep.references
    scale, unit = _time_unit(pl.concat([points["jct_p95_s"], refs["jct_p95_s"]]))
    frames = [f.with_columns((pl.col("jct_p95_s") / scale).alias("jct_p95"))
              .select("label", "setting", "series", "x", "locality_node", "locality_rack",
                      "locality_any", "jct_p50_s", "jct_p95_s", "jct_p95", "jain_fairness",
                      "data_read_core_gb")
              for f in (points, refs)]
    shown = [*points["label"].to_list(), *refs["label"].to_list()]
    color = palette.color(labels, shown=shown)
    least = _least(frames, "jain_fairness")
    panels = [
        ("locality_node", "tasks on a node holding their data",
         alt.Scale(domain=[0, 1]), alt.Axis(format="%")),
        ("jct_p95", f"job time p95 ({unit})", alt.Scale(zero=True),
         alt.Axis(labelExpr=SMALL_OR_SI)),
        ("jain_fairness", "fairness (1 = fair)",
         alt.Scale(domain=[min(0.8, math.floor(least * 10) / 10), 1]), alt.Axis()),
    ]
    x = alt.X("x:Q", title=sweep.knob, scale=alt.Scale(zero=True), axis=alt.Axis(tickCount=5))
    return (
        alt.hconcat(*(_panel(frames, x, y, title, s, axis, color)
                      for y, title, s, axis in panels))
        .resolve_scale(color="shared")
        .properties(title=alt.TitleParams(
            f"Locality, job time and fairness along {sweep.policy} {sweep.knob} "
            f"({sweep.cluster} cluster)", subtitle="dashed: the other settings"))
    )


TOOLTIP = ["label:N", alt.Tooltip("locality_node:Q", format=".1%", title="node-local"),
           alt.Tooltip("locality_rack:Q", format=".1%", title="rack-local"),
           alt.Tooltip("locality_any:Q", format=".1%", title="off-rack"),
           alt.Tooltip("data_read_core_gb:Q", format=",.0f", title="read across racks (GiB)"),
           alt.Tooltip("jct_p50_s:Q", format=",.1f", title="job time p50 (s)"),
           alt.Tooltip("jct_p95_s:Q", format=",.1f", title="job time p95 (s)"),
           alt.Tooltip("jain_fairness:Q", format=".3f", title="fairness")]


def _panel(frames: list[pl.DataFrame], x: alt.X, measure: str, title: str, scale: alt.Scale,
           axis: alt.Axis, color: alt.Color) -> alt.LayerChart:
    points, refs = frames
    y = alt.Y(f"{measure}:Q", title=None, scale=scale, axis=axis)
    line = alt.Chart(points).mark_line(color=LINE_GREY).encode(x=x, y=y, detail="series:N")
    dots = alt.Chart(points).mark_point(filled=True, size=80, opacity=1).encode(
        x=x, y=y, color=color, tooltip=[*TOOLTIP, alt.Tooltip("x:Q", title="value")])
    levels = alt.Chart(refs).mark_rule(strokeDash=[6, 3], strokeWidth=2).encode(
        y=y, color=color, tooltip=TOOLTIP)
    return alt.layer(line, dots, levels).properties(
        width=PANEL_WIDTH, height=PANEL_HEIGHT, title=alt.TitleParams(title, fontSize=12))


def _time_unit(seconds: pl.Series) -> tuple[float, str]:
    """The unit that reads best for the largest of ``seconds``: s, min or h."""
    top = float(seconds.drop_nulls().max() or 0.0)  # type: ignore[arg-type]
    if top < 600:
        return 1.0, "s"
    return (60.0, "min") if top < 7200 else (3600.0, "h")


def _least(frames: list[pl.DataFrame], column: str) -> float:
    values = [v for f in frames for v in f[column].drop_nulls().to_list()]
    return float(min(values)) if values else 1.0


def job_size_chart(bins: pl.DataFrame, labels: Sequence[str]) -> alt.Chart | alt.FacetChart:
    """Node-local share per job-size bin (grouped bars, one per setting), clusters in panels
    when there are several."""
    order = (bins.select("bin", "bin_order").unique().sort("bin_order")["bin"].to_list())
    chart = alt.Chart(bins.with_columns(pl.col("jobs").round(0))).mark_bar().encode(
        x=alt.X("bin:N", title="job size (tasks with input data)", sort=order,
                axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("setting:N", sort=palette.settings_in_order(bins["label"])),
        y=alt.Y("locality_node:Q", title="tasks on a node holding their data",
                scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        color=palette.color(labels, shown=bins["label"].to_list()),
        tooltip=["label:N", "bin:N", alt.Tooltip("jobs:Q", format=",.0f"),
                 alt.Tooltip("tasks_with_inputs:Q", format=",.0f"),
                 alt.Tooltip("locality_node:Q", format=".1%", title="node-local"),
                 alt.Tooltip("locality_rack:Q", format=".1%", title="rack-local"),
                 alt.Tooltip("locality_any:Q", format=".1%", title="off-rack")],
    ).properties(width=WIDTH, height=200)
    if bins["cluster"].n_unique() > 1:
        return chart.facet(row=CLUSTER_ROW).properties(title="Data locality by job size")
    return chart.properties(title="Data locality by job size")
