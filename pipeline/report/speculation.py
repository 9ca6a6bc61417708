"""The speculation part of a trace's report: speculative execution (Hadoop's, LATE's and
MRv2's rules) against the same runs without it.

Pure functions of the ``speculation_effect`` view's rows for one trace (one row per run whose
``spec`` parameter names a rule, beside its run without speculation).  Shown only when the
trace has such runs (:func:`has_speculation`).  What was compared is said in every figure:
job completion time with and without speculation, and the copies' run time as a percent of
the tasks' own (the extra capacity speculation used).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from pipeline.report import palette
from pipeline.report.section import Glance
from pipeline.report.tables import MISSING, Format, cell, count, duration, pct, text, title

RULE_NAMES = {"hadoop": "Hadoop's rule", "late": "LATE", "mrv2": "MRv2's speculator"}
MEASURES = ["jct_mean_s", "base_jct_mean_s", "jct_mean_change_pct", "jct_p50_s",
            "base_jct_p50_s", "jct_p50_change_pct", "jct_p95_s", "base_jct_p95_s",
            "jct_p95_change_pct", "spec_launched", "spec_won", "spec_wasted_task_s",
            "spec_run_task_s", "spec_extra_pct", "node_hours", "base_node_hours"]
TABLE_COLUMNS = ["setting_no", "label", "seed", "rule", "spec_settings", "spec_launched",
                 "spec_won", "spec_wasted_task_s", "spec_extra_pct", "jct_mean_change",
                 "jct_mean_change_pct", "jct_p95_change", "jct_p95_change_pct"]
# the folded per-setting table (means over seeds)
SETTING_COLUMNS = ["setting_no", "label", "seeds", "paired_seeds", "rule", "spec_launched",
                   "spec_won", "spec_wasted_task_s", "spec_extra_pct", "jct_mean_s",
                   "jct_mean_change_pct", "jct_p95_change_pct"]
NOTE = (
    "Each row is one run with speculative execution against the same policy, cluster, seed "
    "and settings without it. A copy is a second attempt of a running task on another node; "
    "whichever attempt finishes first gives the task's result and the other is killed. "
    "Copies launched counts every copy; won counts the tasks whose copy finished first. "
    "Thrown away is the run time of the attempts that lost (the original when its copy "
    "won, the copy when the original won, copies that died), in task-hours. Extra capacity "
    "is the copies' run time as a percent of the run time of the tasks' own attempts. Job "
    "time is job completion time (first submit to last task end, jobs that finished "
    "entirely), without \u2192 with speculation; a negative change is sooner. The chart "
    "averages each setting's runs over seeds. docs/metrics.md defines every figure."
)


def has_speculation(effect: pl.DataFrame) -> bool:
    """Whether the trace has runs with speculative execution (``spec`` names a rule)."""
    return effect.height > 0


def rule_name(rule: str | None) -> str:
    """A rule as people name it (``late`` -> LATE)."""
    return RULE_NAMES.get(str(rule).lower(), str(rule)) if rule else MISSING


def varying_settings(settings: Sequence[str | None]) -> list[str]:
    """Each run's ``spec_*`` settings cut to those that differ between the runs that have
    them (the rest are the same for all, defaults mostly): "defaults" where none differ."""
    parsed = [dict(kv.split("=", 1) for kv in re.split(r",(?=spec_)", text) if "=" in kv)
              if text else {} for text in settings]
    keys = sorted(set().union(*parsed)) if parsed else []
    # (a key only some runs have belongs to their rule: it varies if those runs differ)
    vary = [k for k in keys if len({p[k] for p in parsed if k in p}) > 1]
    return [", ".join(f"{k}={p[k]}" for k in vary if k in p) or "defaults" for p in parsed]


def with_varying_settings(effect: pl.DataFrame) -> pl.DataFrame:
    """``effect`` with ``spec_settings`` cut by :func:`varying_settings`."""
    if effect.is_empty() or "spec_settings" not in effect.columns:
        return effect
    return effect.with_columns(pl.Series(
        "spec_settings", varying_settings(effect["spec_settings"].to_list()), pl.String))


def settings_table(effect: pl.DataFrame) -> pl.DataFrame:
    """One row per setting (label): ``MEASURES`` averaged over seeds (changes over the seeds
    with a run to compare with), its rule and number, in the report's label order."""
    present = [m for m in MEASURES if m in effect.columns]
    rows = effect.group_by("label", maintain_order=True).agg(
        pl.col("spec_rule").first(), pl.col("spec_settings").first(),
        pl.col("cluster_mode").first().fill_null("fixed"),
        pl.col("seed").n_unique().alias("seeds"),
        pl.col("base_run_id").is_not_null().sum().alias("paired_seeds"),
        *(pl.col(m).cast(pl.Float64).mean() for m in present))
    return palette.with_setting(palette.by_label(rows)).with_columns(
        pl.col("spec_rule").map_elements(rule_name, return_dtype=pl.String).alias("rule"),
        # the chart names each point by this number (labels are too long to print there)
        pl.int_range(1, pl.len() + 1).cast(pl.String).alias("setting_no"))


def runs_table(effect: pl.DataFrame, settings: pl.DataFrame) -> pl.DataFrame:
    """One row per run (raw figures), numbered by its setting, with the without → with
    texts of job completion time."""
    runs = effect.join(settings.select("label", "setting_no", "rule"), on="label", how="left")
    return palette.by_label(runs, "seed").with_columns(
        _change("jct_mean_s"), _change("jct_p95_s"))


def _change(column: str) -> pl.Expr:
    """``base → run`` of a duration, as text (a dash where a side is missing)."""
    return pl.struct(f"base_{column}", column).map_elements(
        lambda r: f"{cell('jct_p50_s', r[f'base_{column}'])} \u2192 "
                  f"{cell('jct_p50_s', r[column])}",
        return_dtype=pl.String).alias(column.replace("_s", "_change"))


def hours(value: object) -> str:
    """Seconds as hours, with decimals while small: 0.11, 2.5, 1,234."""
    h = float(value) / 3600  # type: ignore[arg-type]
    return "0" if h == 0 else f"{h:,.0f}" if abs(h) >= 10 else f"{h:.2g}"


def percent(value: object) -> str:
    """A percent (already x100), unsigned: 4.2%."""
    return f"{float(value):.1f}%"  # type: ignore[arg-type]


# view column -> (title with unit, format), for the columns tables.COLUMNS does not know
SPEC_COLUMNS: dict[str, tuple[str, Format]] = {
    "rule": ("Rule", text),
    "spec_settings": ("Speculation settings", text),
    "spec_launched": ("Copies launched", count),
    "spec_won": ("Won by a copy", count),
    "spec_wasted_task_s": ("Thrown away (task-h)", hours),
    "spec_extra_pct": ("Extra capacity", percent),
    "jct_mean_change": ("Job time mean, without \u2192 with", text),
    "jct_mean_change_pct": ("Mean change", pct),
    "jct_p95_change": ("Job time p95, without \u2192 with", text),
    "jct_p95_change_pct": ("p95 change", pct),
    "jct_mean_s": ("Job time mean", duration),
    "paired_seeds": ("Seeds compared", count),
}


def readable_runs(runs: pl.DataFrame, columns: Sequence[str] = TABLE_COLUMNS) -> pl.DataFrame:
    """``columns`` of ``runs`` as text under human titles (as :func:`.tables.readable`)."""
    present = [c for c in columns if c in runs.columns]
    data = {}
    for c in present:
        if c in SPEC_COLUMNS:
            name, fmt = SPEC_COLUMNS[c]
            data[name] = [MISSING if v is None else fmt(v) for v in runs[c].to_list()]
        else:
            data[title(c)] = [cell(c, v) for v in runs[c].to_list()]
    return pl.DataFrame(data, schema={k: pl.String for k in data})


def summary_line(rows: pl.DataFrame) -> str:
    """What speculation bought and cost here, in words: per rule, its best setting's change
    in mean (and p95) job completion time against the extra capacity its copies used."""
    paired = rows.filter(pl.col("jct_mean_change_pct").is_not_null())
    if paired.height == 0:
        return ("Speculative execution was replayed here, but no run of the same setting "
                "without it is there to compare with, so what it buys cannot be told; the "
                "table shows what it cost.")
    best = _best_per_rule(paired)
    clauses = [_clause(row, first=i == 0, settings=_count(paired, row))
               for i, row in enumerate(best)]
    head = "Against the same runs without speculation, " + "; ".join(clauses) + "."
    return f"{head} {_waste(best[0])}"


def glance(rows: pl.DataFrame) -> Glance | None:
    """The first page's line: the best rule's effect on job time; its waste, the caveat."""
    paired = rows.filter(pl.col("jct_mean_change_pct").is_not_null())
    if paired.height == 0:
        return None
    best = {**_best_per_rule(paired)[0], "setting_no": None}  # no table to number against
    return Glance("What does speculative execution buy?",
                  "Against the same runs without speculation, "
                  + _clause(best, first=True, settings=_count(paired, best)) + ".",
                  _waste(best))


def _best_per_rule(paired: pl.DataFrame) -> list[dict[str, Any]]:
    """Each rule's setting with the largest cut in mean job time, best rule first."""
    ranked = paired.sort(["jct_mean_change_pct", "spec_extra_pct", "label"], nulls_last=True)
    return ranked.unique("spec_rule", keep="first", maintain_order=True).to_dicts()


def _count(paired: pl.DataFrame, row: dict[str, Any]) -> int:
    return paired.filter(pl.col("spec_rule") == row["spec_rule"]).height


def _clause(row: dict[str, Any], first: bool, settings: int) -> str:
    """``LATE cut mean job time by 21.4% (p95: 24.7% shorter) using 35.3% extra
    capacity`` (shorter after the first rule)."""
    what = "mean job completion time" if first else "it"
    change = row["jct_mean_change_pct"]
    if change <= -0.05:
        moved = f"cut {what} by {-change:.1f}%"
    elif change >= 0.05:
        moved = f"lengthened {what} by {change:.1f}%"
    else:
        moved = f"left {what} unchanged"
    p95 = row.get("jct_p95_change_pct")
    tail = "" if p95 is None else (
        f" (p95: {abs(p95):.1f}% {'shorter' if p95 < 0 else 'longer'})" if abs(p95) >= 0.05
        else " (p95 unchanged)")
    extra = row.get("spec_extra_pct")
    cost = "" if extra is None else (
        f" using {extra:.1f}% extra capacity (its copies' run time over the tasks' own)"
        if first else f" using {extra:.1f}%")
    number = f": #{row['setting_no']}" if row.get("setting_no") else ""
    which = "" if settings < 2 else f" (best of {settings} settings{number})"
    return f"{rule_name(row['spec_rule'])}{which} {moved}{tail}{cost}"


def _waste(row: dict[str, Any]) -> str:
    """What the best rule's copies did: how many won, and the work thrown away."""
    launched, won = row.get("spec_launched") or 0.0, row.get("spec_won") or 0.0
    lost = row.get("spec_wasted_task_s") or 0.0
    return (f"{rule_name(row['spec_rule'])} launched {launched:,.0f} "
            f"cop{'y' if round(launched) == 1 else 'ies'}, {won:,.0f} of which finished "
            f"first, and threw away {hours(lost)} task-hours of attempts that lost"
            + (" (per run, averaged over seeds)." if (row.get("seeds") or 1) > 1 else "."))
