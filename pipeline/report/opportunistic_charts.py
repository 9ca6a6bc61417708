"""The over-subscription chart: CPU use gained against work lost, one point per setting of
the opportunistic layer (colours from :mod:`.palette`, as every chart)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from pipeline.report import palette
from pipeline.report.charts import WIDTH

HEIGHT = 280
TOOLTIP = ["setting_no:N", "label:N", "opp_settings:N",
           alt.Tooltip("util_used_cpu_gain_pts:Q", format="+.1f", title="CPU used gain (pts)"),
           alt.Tooltip("util_used_mem_gain_pts:Q", format="+.1f", title="memory used gain (pts)"),
           alt.Tooltip("opp_wasted_share:Q", format=".1%", title="work lost"),
           alt.Tooltip("opp_killed:Q", format=",.0f", title="opportunistic killed"),
           alt.Tooltip("guaranteed_slowdown_mean:Q", format=".2f",
                       title="guaranteed slowdown (mean)")]


def gain_loss_chart(rows: pl.DataFrame, labels: Sequence[str]) -> alt.LayerChart:
    """x: CPU used-utilization gain in points, y: work lost as a share of all task work; one
    labelled point per setting (settings without a run to compare with are left out)."""
    points = rows.filter(pl.col("util_used_cpu_gain_pts").is_not_null()).select(
        "setting_no", "label", "setting", "opp_settings", "util_used_cpu_gain_pts",
        "util_used_mem_gain_pts", pl.col("opp_wasted_share").fill_null(0.0), "opp_killed",
        "guaranteed_slowdown_mean", pl.format("#{}", "setting_no").alias("short"))
    x_lo, x_hi = _domain(points["util_used_cpu_gain_pts"])
    y_hi = _domain(points["opp_wasted_share"])[1] if points["opp_wasted_share"].max() else 0.01
    x = alt.X("util_used_cpu_gain_pts:Q", title="CPU used: gain (percentage points)",
              scale=alt.Scale(domain=[x_lo, x_hi], nice=True))
    y = alt.Y("opp_wasted_share:Q", title="work lost to opportunistic kills",
              scale=alt.Scale(domain=[0, y_hi], nice=True), axis=alt.Axis(format="%"))
    dots = alt.Chart(points).mark_point(filled=True, size=90, opacity=1).encode(
        # no legend: the labels are long and alike; each point's number leads to the table
        x=x, y=y, color=palette.color(labels, legend=None),
        tooltip=TOOLTIP)
    # names point into the plot: rightwards from points on its left half, else leftwards
    middle = (x_lo + x_hi) / 2
    names = [alt.Chart(points.filter(side)).mark_text(
        align=align, dx=dx, dy=-10, fontSize=11).encode(x=x, y=y, text="short:N")
        for side, align, dx in ((pl.col("util_used_cpu_gain_pts") <= middle, "left", 4),
                                (pl.col("util_used_cpu_gain_pts") > middle, "right", -4))]
    return alt.layer(dots, *names).properties(
        width=WIDTH, height=HEIGHT, title=alt.TitleParams(
            "Utilization gained against work lost",
            subtitle="one point per opportunistic setting, numbered as in the table below; "
                     "right and low is better"))


def _domain(values: pl.Series) -> tuple[float, float]:
    """An axis range holding 0 and every value, with room above the largest for its name."""
    known = [float(v) for v in values.drop_nulls().to_list()]
    low, high = min([0.0, *known]), max([0.0, *known])
    if high <= low:
        return low, low + 1.0
    return low, high + 0.2 * (high - low)
