"""The report's first answer: which setting is cheapest without hurting the work, and what it
saves (pure functions over one trace's frames).

The reference is the *status quo*: the baseline policy on the fixed cluster (the trace's own
machines, which cost the same under every policy over the window).  A setting *qualifies*
when, on average over seeds,

- its p95 job completion time is at most ``tolerance`` above the reference's, and
- the work it leaves undone at the window's end (``backlog_task_s``) is at most
  ``tolerance`` above the reference's, plus 0.1% of the work the trace offered (so a
  reference that finished everything does not fail every other setting on a few seconds).

A *reference* policy (``recorded``: the trace's own placements, which knows the future) is
shown beside the settings but never chosen: its ``qualifies`` is null, and the headline adds
how the real cluster did as a point of comparison.

The headline names the cheapest qualifying setting and its saving in node-hours, dollars
and percent, per window and per day and 30-day month at the stated price; when nothing is
cheaper than the reference it says so, and names the cheapest setting overall with the
slowdown that disqualified it.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.report.data import mean_over_seeds
from pipeline.report.tables import duration

DAY_S = 86_400.0
MONTH_DAYS = 30.0
UNDONE_FLOOR = 0.001  # of the offered work: slack for a reference that left nothing undone
MEASURES = ["node_hours", "cost_usd", "jct_p50_s", "jct_p95_s", "wait_p50_s", "wait_p95_s",
            "jain_fairness", "backlog_task_s", "backlog_tasks", "tasks_unfinished",
            "offered_task_s", "price_per_hour", "makespan_s"]
# What a trace's runs can answer: savings (some setting on an elastic cluster), or, when every
# setting pays for the trace's own machines, only what differs in the work: over the window
# (FIXED) or until every task ended (DRAINED: a shorter run frees the machines sooner).
SAVINGS, FIXED, DRAINED = "savings", "fixed", "drained"


@dataclass(frozen=True)
class Headline:
    """The answer for one trace: the sentence, the chosen row and every setting's row."""

    sentence: str
    reference: dict[str, object] | None
    choice: dict[str, object] | None
    settings: pl.DataFrame  # one row per setting: measures, savings, qualifies
    mode: str = SAVINGS  # SAVINGS, FIXED or DRAINED (see MEASURES)


def settings_frame(summary: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
    """One row per setting (policy, parameters and cluster; mean over seeds)."""
    runs = summary.join(peaks.select("run_id", "offered_task_s"), on="run_id", how="left")
    if "price_per_hour" not in runs.columns:
        runs = runs.with_columns(pl.lit(None, pl.Float64).alias("price_per_hour"))
    means = mean_over_seeds(runs, MEASURES)
    firsts = runs.group_by("label", maintain_order=True).agg(
        pl.col("cluster_mode").first(), pl.col("policy").first(),
        *([pl.col("drained").fill_null(False).any()] if "drained" in runs.columns else []))
    return means.join(firsts, on="label", how="left").with_columns(
        pl.col("policy").is_in(sorted(reference_policies())).alias("reference"))


def reference_policies() -> set[str]:
    """The registered policies that are references, not choices (``recorded``)."""
    from pipeline.policies import POLICIES  # the registry, only when a report is made

    return {name for name, cls in POLICIES.items() if cls.reference}


def headline(summary: pl.DataFrame, peaks: pl.DataFrame, baseline: str, window_s: float,
             tolerance: float) -> Headline:
    """The headline for one trace (see the module docstring)."""
    rows = settings_frame(summary, peaks)
    fixed = rows.filter((pl.col("policy") == baseline)
                        & (pl.col("cluster_mode").fill_null("fixed") == "fixed"))
    if fixed.height == 0:
        return Headline(f"No {baseline} run on the fixed cluster: nothing to compare "
                        "the settings with.", None, None, rows.with_columns(
                            pl.lit(None, pl.Boolean).alias("qualifies")))
    ref = fixed.sort("label").row(0, named=True)
    rows = _with_savings(rows, ref, window_s, tolerance)
    choices = rows.filter(~pl.col("reference"))
    mode = answer_mode(choices)
    qualifying = choices.filter(pl.col("qualifies")).sort(["cost_usd", "label"])
    choice = qualifying.row(0, named=True) if qualifying.height else None
    cheapest = choices.sort(["cost_usd", "label"]).row(0, named=True)
    if mode == SAVINGS:
        sentence = _sentence(ref, choice, cheapest, baseline, window_s, tolerance)
    else:
        choice = None  # nothing to choose on cost: the same machines, the same bill
        sentence = _same_bill(ref, choices, baseline, window_s, mode)
    recorded = rows.filter(pl.col("reference")).sort("label")
    if recorded.height:
        sentence += " " + _as_recorded(recorded.row(0, named=True), ref, baseline)
    return Headline(sentence, ref, choice, rows, mode)


def answer_mode(choices: pl.DataFrame) -> str:
    """What the settings can answer (:data:`SAVINGS`, :data:`FIXED`, :data:`DRAINED`)."""
    clusters = choices["cluster_mode"].fill_null("fixed")
    if (clusters != "fixed").any():
        return SAVINGS
    drained = "drained" in choices.columns and bool(choices["drained"].fill_null(False).any())
    return DRAINED if drained else FIXED


def _same_bill(ref: dict[str, object], choices: pl.DataFrame, baseline: str,
               window_s: float, mode: str) -> str:
    """Every setting pays for the trace's own machines: say so, and what differs instead."""
    if mode == DRAINED:
        head = ("Every setting ran on the trace's own machines until its last task ended, so "
                "none saves money: the machines are the same whatever the schedule. What "
                "differs is how soon the same work is done")
        ends = makespan_fact(choices, ref, baseline)
        if ends is not None:
            head += f": {ends[1]}"
    else:
        head = (f"Every setting here runs on the trace's own machines, so each pays the same "
                f"{usd(ref['cost_usd'])} ({_num(ref['node_hours'])} node-hours) over the "
                f"{_span(window_s)} window: with no elastic cluster replayed, none can save "
                "(add one to the sweep to ask that). What differs is the work")
    facts = work_facts(choices, ref, baseline, mode == DRAINED)
    better = [text for beats, text in facts if beats]
    same = [text for beats, text in facts if not beats]
    if same:
        listed = same[0] if len(same) == 1 else ", ".join(same[:-1]) + " or " + same[-1]
        better.append(f"no setting beats {baseline} by 1% or more on {listed}")
    if not better:
        return head + "."
    return head + ("; " if mode == DRAINED else ": ") + "; ".join(better) + "."


def work_facts(choices: pl.DataFrame, ref: dict[str, object], baseline: str,
               drained: bool) -> list[tuple[bool, str]]:
    """What differs in the work when every setting has the same machines (:func:`fact`):
    p95 job completion, p95 wait and, over a window (not ``drained``), the work left."""
    return [f for f in (
        fact(choices, ref, baseline, "jct_p95_s", "finishes jobs fastest", "p95 job completion"),
        fact(choices, ref, baseline, "wait_p95_s", "starts tasks soonest", "p95 wait"),
        None if drained else fact(
            choices, ref, baseline, "backlog_task_s", "leaves the least work undone", "work left",
            hours=True),
    ) if f]


def makespan_fact(choices: pl.DataFrame, ref: dict[str, object],
                  baseline: str) -> tuple[bool, str] | None:
    """The setting whose last task ends first, against the status quo: ``(whether it is
    another setting than the status quo, "<setting> ends the last task X after the start
    against Y for <baseline>, so the machines are free Z sooner")``; None without makespans."""
    best = best_by(choices, "makespan_s") if "makespan_s" in choices.columns else None
    if best is None or ref.get("makespan_s") is None:
        return None
    return best["label"] != ref["label"], (
        f"{setting_text(best)} ends the last task {time_text(best['makespan_s'])} after the "
        f"start against {time_text(ref['makespan_s'])} for {baseline}{freed(best, ref)}")


def best_by(choices: pl.DataFrame, column: str) -> dict[str, object] | None:
    known = choices.filter(pl.col(column).is_not_null()).sort([column, "label"])
    return known.row(0, named=True) if known.height else None


def fact(choices: pl.DataFrame, ref: dict[str, object], baseline: str, column: str,
          best_is: str, measure: str, hours: bool = False) -> tuple[bool, str] | None:
    """The best setting by ``column`` against the status quo: ``(True, "<setting>
    finishes jobs fastest (p95 job completion X against Y for <baseline>)")``, or ``(False, "p95 job
    completion (Y)")`` when none does better by 1% or more."""
    best = best_by(choices, column)
    if best is None or ref.get(column) is None:
        return None
    def shown(value: float) -> str:
        return f"{_num(value / 3600)} task-hours" if hours else time_text(value)
    ref_value, value = float(ref[column] or 0), float(best[column] or 0)  # type: ignore[arg-type]
    if best["label"] == ref["label"] or value >= ref_value * 0.99:
        return False, f"{measure} ({shown(ref_value)})"
    return True, (f"{setting_text(best)} {best_is} ({measure} {shown(value)} against "
                  f"{shown(ref_value)} for {baseline})")


def setting_text(row: dict[str, object]) -> str:
    """A setting's label without its cluster (every one here is on the fixed cluster)."""
    return str(row["label"]).removesuffix(" [fixed]")


def freed(best: dict[str, object], ref: dict[str, object]) -> str:
    """How much sooner the machines are free, in their own hours (not dollars: whether that
    time is worth money depends on what else would run on it)."""
    sooner = float(ref["makespan_s"]) - float(best["makespan_s"])  # type: ignore[arg-type]
    if sooner <= 0:
        return ""
    share = 100 * sooner / float(ref["makespan_s"])  # type: ignore[arg-type]
    return f", so the machines are free {time_text(sooner)} ({share:.1f}%) sooner"


def _as_recorded(row: dict[str, object], ref: dict[str, object], baseline: str) -> str:
    """The reference in words: how the real cluster did, next to the status quo."""
    return (f"For reference, the real cluster as the trace records it ({row['label']}: each "
            f"task where and when it ran) started tasks within {time_text(row['wait_p95_s'])} "
            f"at p95 with p95 job completion {time_text(row['jct_p95_s'])}; {baseline} on the "
            f"same machines: {time_text(ref['wait_p95_s'])} and {time_text(ref['jct_p95_s'])}.")


def _with_savings(rows: pl.DataFrame, ref: dict[str, object], window_s: float,
                  tolerance: float) -> pl.DataFrame:
    """Savings against the reference, per window and per day, and whether each qualifies."""
    days = max(window_s, 1.0) / DAY_S
    ref_jct, ref_undone = ref["jct_p95_s"], ref["backlog_task_s"] or 0.0
    offered = ref["offered_task_s"] or 0.0
    undone_cap = ref_undone * (1 + tolerance) + UNDONE_FLOOR * offered
    jct_ok = (pl.lit(True) if ref_jct is None
              else pl.col("jct_p95_s") <= float(ref_jct) * (1 + tolerance))
    return rows.with_columns(
        (pl.lit(ref["node_hours"]) - pl.col("node_hours")).alias("node_hours_saved"),
        (pl.lit(ref["cost_usd"]) - pl.col("cost_usd")).alias("cost_saved_usd"),
        (100 * (1 - pl.col("cost_usd") / pl.lit(ref["cost_usd"]))).alias("cost_saved_pct"),
        ((pl.lit(ref["cost_usd"]) - pl.col("cost_usd")) / days).alias("saved_usd_per_day"),
        (100 * (pl.col("jct_p95_s") / pl.lit(ref_jct) - 1)).alias("jct_p95_change_pct"),
        pl.when(pl.col("reference")).then(None).otherwise(
            jct_ok.fill_null(False)
            & (pl.col("backlog_task_s").fill_null(0.0) <= undone_cap)).alias("qualifies"),
    )


def _sentence(ref: dict[str, object], choice: dict[str, object] | None,
              cheapest: dict[str, object], baseline: str, window_s: float,
              tolerance: float) -> str:
    tol = f"{100 * tolerance:.0f}%"
    price = ref.get("price_per_hour")
    at = f" at ${float(price):.3g} per node-hour" if price else ""
    status_quo = (f"{baseline} on the trace's fixed cluster, which costs "
                  f"{usd(ref['cost_usd'])} ({_num(ref['node_hours'])} node-hours) "
                  f"{_measured(ref, window_s)}{at}")
    if choice is None or choice["label"] == ref["label"] or choice["cost_saved_usd"] <= 0:
        why = ""
        if cheapest["label"] != ref["label"] and cheapest["cost_saved_usd"] > 0:
            why = (f" The cheapest setting overall, {setting_name(cheapest)}, would save "
                   f"{cheapest['cost_saved_pct']:.1f}% but "
                   f"{penalty(cheapest, tolerance)}.")
        return (f"No setting is cheaper than the status quo without slowing the work: "
                f"{status_quo}, and nothing that saves money keeps p95 job completion within "
                f"{tol} of it and its backlog at the window's end no larger.{why}")
    per_day = choice["saved_usd_per_day"]
    return (
        f"{setting_name(choice)} saves {choice['cost_saved_pct']:.1f}% against {status_quo}: "
        f"{_num(choice['node_hours_saved'])} node-hours and {usd(choice['cost_saved_usd'])} "
        f"saved, {usd(per_day)} per day, {usd(per_day * MONTH_DAYS)} per 30-day month of "
        f"this workload, with p95 job completion {change_text(choice['jct_p95_change_pct'])} "
        f"(within {tol}), and tasks waiting {time_text(choice['wait_p95_s'])} at p95 instead "
        f"of {time_text(ref['wait_p95_s'])}."
    )


def setting_name(row: dict[str, object]) -> str:
    """A setting in words: ``container-packing high_memory_threshold=0.8 on the elastic
    cluster``."""
    label = str(row["label"])
    mode = row.get("cluster_mode") or "fixed"
    suffix = f" [{mode}]"
    if label.endswith(suffix):
        label = label[: -len(suffix)]
    return f"{label} on the {mode} cluster"


def penalty(row: dict[str, object], tolerance: float) -> str:
    change = row.get("jct_p95_change_pct")
    if change is not None and change > 100 * tolerance:
        return f"its p95 job completion is {change_text(change)}"
    return (f"it leaves {_num((row['backlog_task_s'] or 0) / 3600)} task-hours of work "
            "undone at the window's end")


def time_text(seconds: object) -> str:
    return "n/a" if seconds is None else duration(seconds)


def change_text(pct: object) -> str:
    if pct is None:
        return "unchanged"
    return f"{pct:+.1f}%" if abs(float(pct)) >= 0.05 else "unchanged"


def _measured(ref: dict[str, object], window_s: float) -> str:
    """Over what the status quo's cost is counted: the trace's window, or, for a run that
    went on until every task ended (drained), that whole run."""
    if ref.get("drained"):
        return (f"to finish every task (the runs went on past the {_span(window_s)} window "
                "until every task ended)")
    return f"over the {_span(window_s)} window"


def _span(window_s: float) -> str:
    hours = window_s / 3600
    return f"{hours / 24:.3g}-day" if hours >= 48 else f"{hours:.3g} h"


def usd(value: object) -> str:
    v = float(value or 0.0)
    return f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.2f}"


def _num(value: object) -> str:
    if value is None:
        return "n/a"
    v = float(value)
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"
