"""Speculative execution (Hadoop's, LATE's and MRv2's rules) from ``task_runs``.

A run turns speculation on with the policy parameter ``spec`` (``hadoop``, ``late``,
``mrv2``; absent or ``none``: off); the replay then writes, per task, ``spec_copies``
(speculative copies launched), ``spec_won`` (a copy finished first and gave the task's
result), ``spec_machine_id``/``spec_start_s`` (where and when the last copy ran),
``spec_run_s`` (the copies' run time: the extra capacity speculation used for the task) and
``spec_wasted_s`` (the run time of the attempts that lost: the original killed when its copy
won, a copy killed when the original won, a copy that died).

Every metric here is null for a run without speculation, never 0, so a table can tell "off"
from "on, and no copy was launched".  The rule (:func:`speculation_on`), the same as the
opportunistic layer's: the metrics are defined when the run's ``task_runs`` has the
speculation columns and either the caller says speculation was on (``speculation=True``:
the run's ``spec`` parameter is a rule) or, when the caller does not say, some task had a
copy.  Run directories written before speculation lack the columns: null.

``spec_extra_pct`` puts the copies' run time against the run time of the tasks' own
attempts, on the basis of ``util_alloc_*`` (:func:`pipeline.metrics.cluster.task_busy_s`:
each task's last attempt inside the measurement window, to its end if still running, plus
the run time its earlier attempts lost), so 10 means the copies ran for a tenth as long
again as the tasks themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from pipeline.metrics.cluster import task_busy_s
from pipeline.metrics.opportunistic import switched_on

SPEC_COLUMNS = ("spec_copies", "spec_won", "spec_machine_id", "spec_start_s", "spec_run_s",
                "spec_wasted_s")
# the ones the metrics read
METRIC_COLUMNS = ("spec_copies", "spec_won", "spec_run_s", "spec_wasted_s")
SPEC_PARAM = "spec"
OFF = "none"


def spec_rule(params: Mapping[str, Any] | None) -> str | None:
    """The speculation rule a run's parameters name (``hadoop``, ``late``, ...), None if off."""
    rule = (params or {}).get(SPEC_PARAM)
    if rule is None or str(rule).lower() == OFF:
        return None
    return str(rule)


def has_speculation_columns(task_runs: pl.DataFrame) -> bool:
    """Whether ``task_runs`` carries the speculation columns the metrics read."""
    return all(c in task_runs.columns for c in METRIC_COLUMNS)


def spec_active(task_runs: pl.DataFrame) -> int:
    """Tasks that had a speculative copy."""
    return int(task_runs.select((pl.col("spec_copies").fill_null(0) > 0).sum()).item() or 0)


def speculation_on(task_runs: pl.DataFrame, speculation: bool | None = None) -> bool:
    """Whether the run used speculative execution (see the module's rule).

    ``speculation``: what the run's parameters say (:func:`spec_rule` is not None), when known.
    """
    has = has_speculation_columns(task_runs)
    return switched_on(has, speculation,
                       spec_active(task_runs) if has and speculation is None else 0)


def spec_won(task_runs: pl.DataFrame, on: bool) -> int | None:
    """Tasks whose result came from a copy (``spec_won``); None if off."""
    if not on:
        return None
    return int(task_runs.select(pl.col("spec_won").fill_null(False).sum()).item() or 0)


def own_run_task_s(task_runs: pl.DataFrame, end_s: float, start_s: float = -math.inf
                   ) -> float:
    """Run time of the tasks' own attempts inside the window (``util_alloc_*``'s basis)."""
    return float(task_runs.select(task_busy_s(end_s, start_s).sum()).item() or 0.0)


def extra_pct(copies_s: float, own_s: float) -> float | None:
    """The copies' run time as a percent of the tasks' own; None when no task ran."""
    return 100.0 * copies_s / own_s if own_s > 0 else None
