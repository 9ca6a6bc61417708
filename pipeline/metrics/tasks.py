"""Task- and job-level metrics from ``task_runs``: completion and waiting times, outcome
counts, lost work, locality.

- Job completion time: last task end - first task submit, over jobs whose tasks all
  finished (percentiles use linear interpolation).
- Wait (queueing delay): first start - ready (ready = submit, or when the last parent
  finished), over tasks that started.
- Locality fractions: among tasks with inputs that started, the share that ran on a node
  holding an input (``node``) and the share that ran elsewhere in such a node's rack
  (``rack``; exclusive of ``node``).
- Work not done when the replay stopped (the window's end): ``backlog_tasks`` waiting in the
  queue (ready, not running), ``backlog_task_s`` the work left of every task that had not
  finished (``remaining_s``: all of a waiting task's duration, the rest of a running one's,
  on a speed-1.0 machine), ``tasks_censored`` the unfinished tasks the trace itself saw still
  running at its window's end.
- Preemptions per task: over the tasks preempted at least once (``tasks_preempted``), the
  99th percentile and the maximum count of one task.
"""

from __future__ import annotations

import polars as pl


def quantile(frame: pl.DataFrame, column: str, q: float) -> float | None:
    """The ``q`` quantile of ``column`` (linear interpolation), None for an empty frame."""
    if frame.height == 0:
        return None
    value = frame.select(pl.col(column).quantile(q, interpolation="linear")).item()
    return None if value is None else float(value)


def job_partials(task_runs: pl.DataFrame) -> pl.DataFrame:
    """Per job of some task rows: whether they all finished (``done``), their latest end,
    first submit, first start of any attempt (``first_start_s``) and first start of the
    attempts that ran to the end (``start_s``).  Partials of several batches combine
    (:func:`combine_jobs`) into the job's own, in any order."""
    rows = task_runs.with_columns(pl.col("job_id").cast(pl.String),
                                  (pl.col("outcome") == "finished").alias("done"))
    if "first_start_s" not in rows.columns:  # run directories written before it
        rows = rows.with_columns(pl.col("start_s").alias("first_start_s"))
    return combine_jobs(rows)


def combine_jobs(partials: pl.DataFrame) -> pl.DataFrame:
    """One row per job from partial rows (all / max / min: exact, in any order)."""
    return partials.group_by("job_id").agg(
        pl.col("done").all(), pl.col("end_s").max(), pl.col("submit_s").min(),
        pl.col("first_start_s").min(), pl.col("start_s").min())


# Bounded slowdown's threshold (s): runs shorter than this count as this long, so a job of a
# second that waited a minute is not a slowdown of 60 (Feitelson et al., JSSPP 1997: 10 s).
BSLD_TAU_S = 10.0


def finished_jobs(jobs: pl.DataFrame) -> pl.DataFrame:
    """Per job whose tasks all finished: ``job_id``, ``jct_s`` (last end - first submit, the
    job's response time), ``job_wait_s`` (first start - first submit) and ``bsld``, its
    bounded slowdown: max(1, response / max(run, BSLD_TAU_S)), run = last end - first start
    of the attempts that finished."""
    response = pl.col("end_s") - pl.col("submit_s")
    run = pl.max_horizontal(pl.col("end_s") - pl.col("start_s"), pl.lit(BSLD_TAU_S))
    return jobs.filter(pl.col("done")).select(
        "job_id", response.alias("jct_s"),
        (pl.col("first_start_s") - pl.col("submit_s")).alias("job_wait_s"),
        pl.max_horizontal(response / run, pl.lit(1.0)).alias("bsld"),
        "submit_s", "end_s")


def job_completion_time(task_runs: pl.DataFrame) -> pl.DataFrame:
    """Per job whose tasks all finished: ``job_id``, ``jct_s``."""
    return finished_jobs(job_partials(task_runs))


def jct_quantile_s(task_runs: pl.DataFrame, q: float) -> float | None:
    return quantile(job_completion_time(task_runs), "jct_s", q)


def task_wait(task_runs: pl.DataFrame) -> pl.DataFrame:
    """Per started task: ``wait_s`` (first start - ready)."""
    return task_runs.filter(pl.col("first_start_s").is_not_null()).select(
        (pl.col("first_start_s") - pl.col("ready_s")).alias("wait_s"))


def wait_quantile_s(task_runs: pl.DataFrame, q: float) -> float | None:
    return quantile(task_wait(task_runs), "wait_s", q)


def column_total(task_runs: pl.DataFrame, column: str) -> float:
    """The sum of a per-task count or time column (nulls count 0)."""
    return float(task_runs.select(pl.col(column).fill_null(0).sum()).item() or 0)


def outcome_count(task_runs: pl.DataFrame, outcome: str) -> int:
    """Tasks whose ``outcome`` is ``outcome``."""
    return int(task_runs.select((pl.col("outcome") == outcome).sum()).item() or 0)


def tasks_dependency_blocked(task_runs: pl.DataFrame, end_s: float) -> int:
    """Tasks submitted before the end that never became ready (a parent never finished)."""
    blocked = (pl.col("outcome") == "unfinished") & pl.col("ready_s").is_null() & (
        pl.col("submit_s") <= end_s)
    return int(task_runs.select(blocked.sum()).item() or 0)


def preemptions(task_runs: pl.DataFrame) -> int:
    return int(task_runs.select(pl.col("preemptions").sum()).item() or 0)


def evictions(task_runs: pl.DataFrame) -> int:
    return int(task_runs.select(pl.col("evictions").sum()).item() or 0)


def wasted_task_s(task_runs: pl.DataFrame) -> float:
    """Run time lost: attempts cut by preemption or eviction, plus the last run of killed tasks."""
    killed = pl.when(pl.col("outcome") == "killed").then(
        pl.col("end_s") - pl.col("start_s")).otherwise(0.0).fill_null(0.0)
    lost = pl.col("wasted_s").fill_null(0.0) + killed
    return float(task_runs.select(lost.sum()).item() or 0.0)


def with_inputs(task_runs: pl.DataFrame) -> int:
    """Started tasks with inputs (the ones with a locality level)."""
    return int(task_runs.select(pl.col("locality").is_not_null().sum()).item() or 0)


def locality_count(task_runs: pl.DataFrame, level: str) -> int:
    """Started tasks with inputs that ran at locality ``level``."""
    return int(task_runs.select((pl.col("locality") == level).sum()).item() or 0)


def fraction(part: float, whole: float) -> float | None:
    """``part / whole``, None when ``whole`` is 0."""
    return part / whole if whole > 0 else None


def locality_fraction(task_runs: pl.DataFrame, level: str) -> float | None:
    """Share of started tasks with inputs that ran at locality ``level``."""
    return fraction(locality_count(task_runs, level), with_inputs(task_runs))


def data_read_mb(task_runs: pl.DataFrame, column: str) -> float:
    """MiB read by every attempt, through a rack switch (``read_rack_mb``) or across racks
    (``read_core_mb``)."""
    if column not in task_runs.columns:
        return 0.0
    return float(task_runs.select(pl.col(column).fill_null(0.0).sum()).item() or 0.0)


def data_read_gb(task_runs: pl.DataFrame, column: str) -> float | None:
    """GiB read by every attempt of the tasks with inputs (:func:`data_read_mb`); None when
    no task has inputs or the run does not record reads."""
    if column not in task_runs.columns or not with_inputs(task_runs):
        return None
    return data_read_mb(task_runs, column) / 1024.0


_NOT_DONE = pl.col("outcome").is_in(["unfinished", "preempted"])


def backlog_tasks(task_runs: pl.DataFrame) -> int:
    """Tasks ready and waiting (not running) when the replay stopped."""
    waiting = _NOT_DONE & pl.col("start_s").is_null() & pl.col("ready_s").is_not_null() & (
        pl.col("remaining_s").is_not_null())
    return int(task_runs.select(waiting.sum()).item() or 0)


def backlog_task_s(task_runs: pl.DataFrame) -> float:
    """Work (task-seconds at speed 1.0) left undone by the tasks that had not finished."""
    left = pl.when(_NOT_DONE).then(pl.col("remaining_s").fill_null(0.0)).otherwise(0.0)
    return float(task_runs.select(left.sum()).item() or 0.0)


def tasks_censored(task_runs: pl.DataFrame) -> int:
    """Unfinished tasks that the trace records as still running at its window's end."""
    return int(task_runs.select(((pl.col("outcome") == "unfinished")
                                 & pl.col("censored")).sum()).item() or 0)


def tasks_preempted(task_runs: pl.DataFrame) -> int:
    """Tasks preempted at least once."""
    return int(task_runs.select((pl.col("preemptions") > 0).sum()).item() or 0)


def preemptions_per_task(task_runs: pl.DataFrame) -> pl.DataFrame:
    """``preemptions`` of each task preempted at least once."""
    return task_runs.filter(pl.col("preemptions") > 0).select("preemptions")
