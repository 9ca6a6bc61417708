"""The HPC section of a trace's report (traces read from Standard Workload Format logs):
batch policies compared on the figures the HPC scheduling literature uses, wait and
bounded slowdown, overall and by job size (a backfilling policy should help small jobs
without starving large ones)."""

from __future__ import annotations

import altair as alt
import polars as pl

from pipeline.report import palette
from pipeline.report.charts import WIDTH
from pipeline.report.data import ReportData
from pipeline.report.section import Section
from pipeline.report.tables import duration, readable

HEIGHT = 260
SIZE_COLUMNS = ["label", "size_class", "jobs", "wait_mean_s", "wait_max_s", "bsld_mean"]
RUN_COLUMNS = ["label", "job_wait_mean_s", "bsld_mean", "bsld_p95", "makespan_s",
               "util_alloc_cpu", "tasks_finished"]
NOTE = (
    "Each job of the log is one task on one pool of the machine's processors. Wait: from "
    "submission to start. Bounded slowdown: max(1, response / max(run, 10 s)), response = "
    "wait + run (Feitelson et al., JSSPP 1997). Size classes by processors asked for. Runs "
    "that stop at the log's window leave late jobs out; compare HPC policies with --drain "
    "(every job to the end).")


def hpc_sections(data: ReportData, labels: list[str]) -> list[Section]:
    """The HPC section, when the trace's runs replay an SWF log."""
    if data.hpc.height == 0:
        return []
    by_size = palette.by_label(data.hpc, "size_order")
    runs = palette.by_label(data.summary.filter(pl.col("bsld_mean").is_not_null()))
    return [Section("hpc", "HPC batch jobs: wait and slowdown by job size",
                    slowdown_chart(data.hpc, labels), readable(runs, RUN_COLUMNS), NOTE,
                    lead=lead(runs), raw=runs.select(["run_id", *RUN_COLUMNS]),
                    details=(("By job size", readable(by_size, SIZE_COLUMNS), by_size),))]


def slowdown_chart(rows: pl.DataFrame, labels: list[str]) -> alt.Chart:
    """Mean bounded slowdown per job size class, one bar per setting."""
    data = palette.with_setting(rows)
    order = data.sort("size_order")["size_class"].unique(maintain_order=True).to_list()
    # bars rise from 1, the least bounded slowdown (a log scale has no zero)
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("size_class:N", sort=order, title="job size (processors)",
                axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("setting:N"),
        y=alt.Y("bsld_mean:Q", title="mean bounded slowdown (log scale; 1: not slowed)",
                scale=alt.Scale(type="log", domainMin=1)),
        y2=alt.datum(1),
        color=palette.color(labels, shown=rows["label"].to_list()),
        tooltip=["setting:N", "size_class:N", alt.Tooltip("jobs:Q", format=","),
                 alt.Tooltip("bsld_mean:Q", format=".2f", title="mean bounded slowdown"),
                 alt.Tooltip("wait_mean_s:Q", format=",.0f", title="mean wait (s)")],
    ).properties(width=WIDTH, height=HEIGHT, title=alt.TitleParams(
        "Bounded slowdown by job size", subtitle="mean over the jobs of each size class"))


def lead(runs: pl.DataFrame) -> str:
    """One sentence: the setting with the lowest mean bounded slowdown against the highest."""
    if runs.height == 0:
        return "No job finished: nothing to compare."
    ranked = runs.sort("bsld_mean", "label")
    best, worst = ranked.row(0, named=True), ranked.row(-1, named=True)
    if best["label"] == worst["label"]:
        return (f"{best['label']}: mean bounded slowdown {best['bsld_mean']:,.1f}, mean wait "
                f"{duration(best['job_wait_mean_s'])}.")
    return (f"{best['label']} gives a mean bounded slowdown of {best['bsld_mean']:,.1f} "
            f"against {worst['bsld_mean']:,.1f} for {worst['label']}, and a mean wait of "
            f"{duration(best['job_wait_mean_s'])} against "
            f"{duration(worst['job_wait_mean_s'])}.")
