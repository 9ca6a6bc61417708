"""The speculation chart: job completion time against the extra capacity speculative copies
used, one point per setting and measure (mean, p95), colours from :mod:`.palette` as every
chart."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from pipeline.report import palette
from pipeline.report.charts import WIDTH

HEIGHT = 280
MEASURE_NAMES = {"jct_mean_change_pct": "mean job time", "jct_p95_change_pct": "p95 job time"}
TOOLTIP = ["setting_no:N", "label:N", "rule:N", "measure:N",
           alt.Tooltip("change_pct:Q", format="+.1f", title="change vs no speculation (%)"),
           alt.Tooltip("spec_extra_pct:Q", format=".1f", title="extra capacity (%)"),
           alt.Tooltip("spec_launched:Q", format=",.0f", title="copies launched"),
           alt.Tooltip("spec_won:Q", format=",.0f", title="won by a copy")]


def points(rows: pl.DataFrame) -> pl.DataFrame:
    """Two points per setting with a run to compare with: its mean and p95 job time change
    (%), at the extra capacity its copies used (%)."""
    paired = rows.filter(pl.col("jct_mean_change_pct").is_not_null())
    return pl.concat([
        paired.select(
            "setting_no", "label", "setting", "rule", "spec_launched", "spec_won",
            pl.col("spec_extra_pct").fill_null(0.0),
            pl.col(column).alias("change_pct"), pl.lit(name).alias("measure"),
            pl.format("#{}", "setting_no").alias("short"))
        for column, name in MEASURE_NAMES.items()
    ]).filter(pl.col("change_pct").is_not_null())


def tradeoff_chart(rows: pl.DataFrame, labels: Sequence[str]) -> alt.LayerChart:
    """x: extra capacity used (% of the tasks' own run time), y: change in job completion time
    against no speculation (%), one numbered point per setting and measure."""
    data = points(rows)
    x_hi = _high(data["spec_extra_pct"])
    y_lo, y_hi = _span(data["change_pct"])
    x = alt.X("spec_extra_pct:Q", title="extra capacity used (% of the tasks' own run time)",
              scale=alt.Scale(domain=[0, x_hi], nice=True))
    y = alt.Y("change_pct:Q", title="job completion time vs no speculation (%)",
              scale=alt.Scale(domain=[y_lo, y_hi], nice=True))
    dots = alt.Chart(data).mark_point(filled=True, size=90, opacity=1).encode(
        x=x, y=y, color=palette.color(labels, legend=None),
        shape=alt.Shape("measure:N", title="measure",
                        scale=alt.Scale(domain=list(MEASURE_NAMES.values()),
                                        range=["circle", "triangle-down"])),
        tooltip=TOOLTIP)
    names = alt.Chart(data.filter(pl.col("measure") == MEASURE_NAMES["jct_mean_change_pct"])
                      ).mark_text(align="left", dx=6, dy=-8, fontSize=11).encode(
        x=x, y=y, text="short:N")
    zero = alt.Chart(pl.DataFrame({"zero": [0.0]})).mark_rule(
        color="#888", strokeDash=[4, 3]).encode(y="zero:Q")
    return alt.layer(zero, dots, names).properties(
        width=WIDTH, height=HEIGHT, title=alt.TitleParams(
            "Job time against extra capacity",
            subtitle="one point per speculation setting and measure, numbered as in the table "
                     "below; below the dashed line is faster, left is cheaper"))


def _high(values: pl.Series) -> float:
    """An axis end above every value (and 0), with room for the names."""
    known = [float(v) for v in values.drop_nulls().to_list()]
    high = max([0.0, *known])
    return 1.0 if high <= 0 else 1.2 * high


def _span(values: pl.Series) -> tuple[float, float]:
    """An axis range holding 0 and every value, with a margin on both sides."""
    known = [float(v) for v in values.drop_nulls().to_list()]
    low, high = min([0.0, *known]), max([0.0, *known])
    if high <= low:
        return low - 1.0, high + 1.0
    margin = 0.15 * (high - low)
    return low - margin, high + margin
