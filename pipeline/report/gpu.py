"""The GPU section of a trace's report: placement policies in the workload-inflation
experiment of Weng et al. (USENIX ATC'23), compared the way the paper compares them.

The chart has the shape of the paper's: GPU allocation ratio against the arrived workload
(GPU requested so far over capacity), one line per policy, averaged over seeds.  The table
gives what a capacity planner reads off it: how much of the GPUs each policy has allocated
when the trace's own demand (100 %) has arrived, how much idle GPU is fragmented then, and
how many GPUs are still unallocated when the first pod no longer fits.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from pipeline.report import palette
from pipeline.report.charts import WIDTH
from pipeline.report.data import ReportData
from pipeline.report.section import Glance, Section
from pipeline.report.tables import readable

HEIGHT = 300
COLUMNS = ["label", "seeds", "util_alloc_gpu", "gpu_fragmentation",
           "gpu_unallocated_first_fail", "gpu_arrived_first_fail", "util_alloc_gpu_end",
           "gpu_tasks_unschedulable"]
NOTE = (
    "The workload-inflation experiment of Weng et al. (USENIX ATC'23): only the GPU nodes; "
    "the trace's pods in an order drawn by the seed, then copies of random trace pods until "
    "GPU requests reach the target (130 % of GPU capacity by default); pods never leave and a "
    "pod no node can host is dropped, not retried. Fragmentation is the idle GPU that the "
    "trace's typical pods (the most popular request kinds covering 95 % of pods) cannot use, "
    "weighted by their popularity. Time is not modelled: these runs have no cost or job "
    "times, and the report's other sections leave them out.")

GLANCE_CAVEAT = ("A placement experiment (the FGD paper's): pods never leave and time is not "
                 "modelled, so it ranks packing, not cost or job times.")


def gpu_sections(data: ReportData) -> list[Section]:
    """The GPU section, when the trace has runs of the inflation experiment."""
    summary, curve = data.gpu_summary, data.gpu_curve
    if summary.height == 0:
        return []
    labels = summary["label"].to_list()
    ordered = palette.by_label(summary)
    return [Section("gpu", "GPU placement: allocation as the workload grows",
                    allocation_chart(curve, labels), readable(ordered, COLUMNS), NOTE,
                    lead=lead(summary), raw=ordered,
                    glance=Glance("Which GPU placement packs the cluster fullest?",
                                  lead(summary), GLANCE_CAVEAT))]


def allocation_chart(curve: pl.DataFrame, labels: list[str]) -> alt.LayerChart:
    """GPU allocation ratio (%) against arrived workload (%), one line per setting."""
    data = palette.with_setting(curve).with_columns(
        (pl.col("alloc_ratio") * 100).alias("allocated_pct"),
        (pl.col("frag_ratio") * 100).alias("fragmented_pct"))
    x = alt.X("arrived_pct:Q", title="arrived workload (% of GPU capacity)",
              scale=alt.Scale(nice=True))
    y = alt.Y("allocated_pct:Q", title="GPU allocated (% of capacity)",
              scale=alt.Scale(domain=[0, 100]))
    lines = alt.Chart(data).mark_line(strokeWidth=2).encode(
        x=x, y=y, color=palette.color(labels, shown=labels),
        tooltip=["setting:N", "arrived_pct:Q",
                 alt.Tooltip("allocated_pct:Q", format=".1f", title="GPU allocated (%)"),
                 alt.Tooltip("fragmented_pct:Q", format=".1f",
                             title="fragmented (% of idle GPU)"),
                 alt.Tooltip("seeds:Q", title="seeds")])
    ideal = alt.Chart(pl.DataFrame({"arrived_pct": [0, 100, 130], "allocated_pct":
                                    [0.0, 100.0, 100.0]})).mark_line(
        color="#888", strokeDash=[4, 3]).encode(x="arrived_pct:Q", y="allocated_pct:Q")
    return alt.layer(ideal, lines).properties(
        width=WIDTH, height=HEIGHT, title=alt.TitleParams(
            "GPU allocation against arrived workload",
            subtitle="mean over seeds; the dashed line is every requested GPU allocated"))


def lead(summary: pl.DataFrame) -> str:
    """One sentence: the policy leaving fewest GPUs unallocated when the first pod fails,
    against the next best and the worst."""
    known = summary.filter(pl.col("gpu_unallocated_first_fail").is_not_null())
    if known.height == 0:
        return "Every pod found a node in every run: the target never strained the cluster."
    ranked = known.sort("gpu_unallocated_first_fail", "label")
    best = ranked.row(0, named=True)
    text = (f"When the first pod fails to fit, {best['label']} leaves "
            f"{best['gpu_unallocated_first_fail']:,.0f} GPUs unallocated")
    if ranked.height > 1:
        others = [ranked.row(1, named=True)] + ([ranked.row(-1, named=True)]
                                                if ranked.height > 2 else [])
        text += ", " + " and ".join(
            f"{_fewer(best, row)} than {row['label']} ({row['gpu_unallocated_first_fail']:,.0f})"
            for row in others)
    return (f"{text}; with the trace's own demand arrived (100 %) it has allocated "
            f"{best['util_alloc_gpu']:.1%} of the GPUs.")


def _fewer(best: dict, other: dict) -> str:
    theirs = other["gpu_unallocated_first_fail"]
    share = 1 - best["gpu_unallocated_first_fail"] / theirs if theirs else 0.0
    return f"{share:.0%} fewer"
