"""Opportunistic containers and over-allocation (YARN-2877 / YARN-1011) from ``task_runs``.

A run turns the layer on with ``opp_*`` policy parameters; the replay then writes, per task,
``opportunistic`` (its last run was an opportunistic container), ``opp_starts``,
``opp_kills``, ``opp_pauses``, ``opp_shed`` (counts), ``opp_queue_s`` (seconds waited in NM
queues) and ``opp_wasted_s`` (run time lost to opportunistic kills).

Every metric here is null for a run without the layer, never 0, so a table can tell "off"
from "on, and nothing happened".  The rule (:func:`layer_on`): the metrics are defined when
the run's ``task_runs`` has the opportunistic columns and either the caller says the layer
was on (``opportunistic=True``: the run has an ``opp_*`` parameter) or, when the caller does
not say, some task shows opportunistic activity (a start, a shed or an opportunistic last
run).  Run directories written before the layer lack the columns: null.
"""

from __future__ import annotations

import polars as pl

OPP_COLUMNS = ("opportunistic", "opp_starts", "opp_kills", "opp_pauses", "opp_shed",
               "opp_queue_s", "opp_wasted_s")


def has_opportunistic_columns(task_runs: pl.DataFrame) -> bool:
    """Whether ``task_runs`` carries the opportunistic columns (replays since the layer)."""
    return all(c in task_runs.columns for c in OPP_COLUMNS)


def switched_on(has_columns: bool, said: bool | None, active: int) -> bool:
    """The rule of a layer's metrics (this module's; speculation's too): defined when the
    run's records have the layer's columns and the run's parameters ``said`` it was on or,
    when they do not say, some task was ``active`` in it."""
    return has_columns and said is not False and (bool(said) or active > 0)


def opp_active(task_runs: pl.DataFrame) -> int:
    """Tasks that show opportunistic activity (a start, a shed or an opportunistic last run)."""
    active = (pl.col("opp_starts").fill_null(0) > 0) | (pl.col("opp_shed").fill_null(0) > 0) | (
        pl.col("opportunistic").fill_null(False))
    return int(task_runs.select(active.sum()).item() or 0)


def layer_on(task_runs: pl.DataFrame, opportunistic: bool | None = None) -> bool:
    """Whether the run used the opportunistic layer (see the module's rule).

    ``opportunistic``: what the run's parameters say (any ``opp_*`` key), when known.
    """
    has = has_opportunistic_columns(task_runs)
    return switched_on(has, opportunistic,
                       opp_active(task_runs) if has and opportunistic is None else 0)


def touched() -> pl.Expr:
    """Tasks that ever started an opportunistic container (their jobs are not guaranteed)."""
    return (pl.col("opp_starts").fill_null(0) > 0) | pl.col("opportunistic").fill_null(False)


def opp_finished(task_runs: pl.DataFrame, on: bool) -> int | None:
    """Tasks that finished on an opportunistic container (their last run), None if off."""
    if not on:
        return None
    done = (pl.col("outcome") == "finished") & pl.col("opportunistic").fill_null(False)
    return int(task_runs.select(done.sum()).item() or 0)


def opp_queue_times(task_runs: pl.DataFrame) -> pl.DataFrame:
    """``opp_queue_s`` of each task that started an opportunistic container."""
    return task_runs.filter(pl.col("opp_starts").fill_null(0) > 0).select(
        pl.col("opp_queue_s").fill_null(0.0))


def without(jobs: pl.DataFrame, touched_jobs: pl.DataFrame) -> pl.DataFrame:
    """``jobs`` but the ones in ``touched_jobs`` (``job_id``)."""
    return jobs.join(touched_jobs, on="job_id", how="anti")
