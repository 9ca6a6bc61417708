"""The over-subscription part of a trace's report: opportunistic containers and
over-allocation (YARN-2877 / YARN-1011) against the same runs without them.

Pure functions of the ``opportunistic_effect`` view's rows for one trace (one row per run
with ``opp_*`` parameters, beside its run without them).  Shown only when the trace has such
runs (:func:`has_opportunistic`).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.report import palette
from pipeline.report.section import Glance
from pipeline.report.tables import readable, share

MEASURES = ["util_used_cpu", "base_util_used_cpu", "util_used_cpu_gain_pts", "util_used_mem",
            "base_util_used_mem", "util_used_mem_gain_pts", "util_alloc_cpu",
            "base_util_alloc_cpu", "opp_started", "opp_killed", "opp_paused", "opp_shed",
            "opp_finished", "opp_wasted_task_s", "task_work_s", "opp_wasted_share",
            "guaranteed_slowdown_mean", "guaranteed_slowdown_p95", "opp_queue_p50_s",
            "opp_queue_p95_s", "node_hours", "base_node_hours"]
TABLE_COLUMNS = ["setting_no", "label", "opp_settings", "util_used_cpu_change",
                 "util_used_cpu_gain_pts", "util_used_mem_change", "opp_started", "opp_killed",
                 "opp_paused",
                 "opp_wasted_task_s", "opp_wasted_share", "guaranteed_slowdown_mean",
                 "guaranteed_slowdown_p95", "opp_queue_p50_s", "opp_queue_p95_s"]
NOTE = (
    "Each row is one setting of the opportunistic layer against the same policy, cluster and "
    "seed without it (means over seeds). Used is the CPU (memory) the tasks actually used, "
    "as a share of what was provisioned, before \u2192 after; the gain is in percentage "
    "points. Containers started, killed and paused are opportunistic ones: they run in "
    "room that guaranteed containers were allocated but did not use, and are killed (or "
    "paused) when those need it back. Work lost is the run time those kills threw away, in "
    "task-hours and as a share of all task work. Guaranteed slowdown compares, job by job, "
    "the jobs that never ran an opportunistic container with their completion time without "
    "the layer (1.00\u00d7 = untouched). NM queue wait is how long opportunistic containers "
    "waited in node queues before starting. docs/metrics.md defines every figure."
)


def has_opportunistic(effect: pl.DataFrame) -> bool:
    """Whether the trace has runs with opportunistic containers (``opp_*`` parameters)."""
    return effect.height > 0


def settings_table(effect: pl.DataFrame) -> pl.DataFrame:
    """One row per setting: ``MEASURES`` averaged over seeds, the opp settings, and the
    before → after texts; in the report's label order."""
    present = [m for m in MEASURES if m in effect.columns]
    rows = effect.group_by("label", maintain_order=True).agg(
        pl.col("opp_settings").first(),
        pl.col("cluster_mode").first().fill_null("fixed"),
        pl.col("seed").n_unique().alias("seeds"),
        (pl.col("base_run_id").is_not_null().all()).alias("paired"),
        *(pl.col(m).cast(pl.Float64).mean() for m in present))
    return palette.with_setting(palette.by_label(rows)).with_columns(
        _change("util_used_cpu"), _change("util_used_mem"),
        # the chart names each point by this number (labels are too long to print there)
        pl.int_range(1, pl.len() + 1).cast(pl.String).alias("setting_no"))


def _change(column: str) -> pl.Expr:
    """``base → run`` of a share, as text (a dash where a side is missing)."""
    return pl.struct(f"base_{column}", column).map_elements(
        lambda r: f"{_share(r[f'base_{column}'])} \u2192 {_share(r[column])}",
        return_dtype=pl.String).alias(f"{column}_change")


def _share(value: object) -> str:
    return "\u2013" if value is None else share(value)


def table(rows: pl.DataFrame) -> pl.DataFrame:
    """The section's main table (readable).  The label names the settings that differ
    between the runs; every ``opp_*`` value (defaults included) is in the CSV table and in
    the warehouse's ``opportunistic_effect``, not repeated on every row here."""
    return readable(rows, [c for c in TABLE_COLUMNS if c != "opp_settings"])


def payer_paragraph(rows: pl.DataFrame) -> str:
    """What turning the layer on buys and costs here, in words for whoever pays for the
    cluster: the setting that gained most CPU use, against what it lost."""
    best = _best(rows)
    if best is None:
        return ("Opportunistic containers were replayed here, but no run of the same setting "
                "without them (or no measured usage) is there to compare with, so what they "
                "buy cannot be told; the table shows what they cost.")
    return " ".join(s for s in (_buys(best), _costs(best), _bill(best)) if s)


def glance(rows: pl.DataFrame) -> Glance | None:
    """The first page's line: what the best setting buys, and what it costs as the caveat."""
    best = _best(rows)
    if best is None:
        return None
    best = {**best, "setting_no": None}  # no table on the first page to number against
    return Glance("What do opportunistic containers buy?", _buys(best),
                  " ".join(s for s in (_costs(best), _bill(best)) if s))


def _best(rows: pl.DataFrame) -> dict[str, Any] | None:
    """The setting that gained most CPU use (least work lost on ties), if any is paired."""
    paired = rows.filter(pl.col("util_used_cpu_gain_pts").is_not_null())
    if paired.height == 0:
        return None
    return paired.sort(["util_used_cpu_gain_pts", "opp_wasted_share", "label"],
                       descending=[True, False, False], nulls_last=True).row(0, named=True)


def _buys(row: dict[str, Any]) -> str:
    gain = row["util_used_cpu_gain_pts"]
    if gain <= 0.05:
        return (f"Running extra work in allocated-but-idle room did not raise the CPU your "
                f"machines actually use ({_share(row['base_util_used_cpu'])} \u2192 "
                f"{_share(row['util_used_cpu'])} under {_name(row)}).")
    return (f"Running extra work in room that was allocated but idle raised the CPU your "
            f"machines actually use from {_share(row['base_util_used_cpu'])} to "
            f"{_share(row['util_used_cpu'])} ({gain:+.1f} points, best setting: "
            f"{_name(row)}).")


def _name(row: dict[str, Any]) -> str:
    """A setting as the text names it: its number in the table and its label."""
    label = palette.setting(row["label"])
    return f"#{row['setting_no']} {label}" if row.get("setting_no") else label


def _costs(row: dict[str, Any]) -> str:
    lost_s = row.get("opp_wasted_task_s") or 0.0
    lost = (("no work was lost to killed containers" if lost_s == 0 else
             f"{lost_s / 3600:,.0f} task-hours of run time were killed and had to be redone")
            + ("" if row.get("opp_wasted_share") is None
               else f" ({share(row['opp_wasted_share'])} of all task work)"))
    slow = row.get("guaranteed_slowdown_mean")
    if slow is None:
        return f"The price: {lost}."
    p95 = row.get("guaranteed_slowdown_p95")
    tail = "" if p95 is None else f"; {p95:.2f}\u00d7 at the 95th percentile"
    if slow < 0.995:
        jobs = (f"jobs that stayed guaranteed finished sooner, in {slow:.2f}\u00d7 their time "
                f"without the layer on average{tail} (the opportunistic work no longer holds "
                "guaranteed room)")
    elif slow > 1.005:
        jobs = (f"jobs that stayed guaranteed took {slow:.2f}\u00d7 as long on "
                f"average{tail}")
    else:
        jobs = f"jobs that stayed guaranteed were not slowed ({slow:.2f}\u00d7{tail})"
    return f"The price: {lost}; {jobs}."


def _bill(row: dict[str, Any]) -> str:
    """Whether the cluster bill moved (it does not on a fixed cluster)."""
    before, after = row.get("base_node_hours"), row.get("node_hours")
    if before is None or after is None:
        return ""
    if abs(after - before) < 0.005 * max(before, 1e-9):
        return ("The bill is the same machines for the same time: the gain is more work done "
                "per machine, not fewer machines.")
    return (f"Node-hours went from {before:,.0f} to {after:,.0f}: "
            f"{'less' if after < before else 'more'} to pay for the same trace.")

