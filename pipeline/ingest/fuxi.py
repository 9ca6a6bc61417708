"""Alibaba batch work (Fuxi's job -> task -> instance model), shared by the 2017 and 2018 traces.

Both traces publish a task table (one row per task: instance count, status, times, request
per instance) and an instance table (one row per attempt of an instance: status, times,
machine, measured usage).  Adapters rename their columns into the shapes below; this module
decides what every status and timestamp means, the same way for both years:

- status -> ``end_event``: ``Terminated`` finished, ``Failed`` failed, ``Interrupted`` /
  ``Interupted`` / ``Cancelled`` killed, ``Running`` censored (still running at the end of the
  trace window: its duration runs to the window end).  ``Waiting`` / ``Ready`` never started:
  dropped as ``never_started``; any other status is dropped as ``unknown_status``.
- times: 0 and negative timestamps mean "before the trace" (published docs), so a start <= 0
  is clamped to 0 (repair ``started_before_trace``: the part before the trace is cut).  A
  non-censored record without an end inside the trace (end <= 0 or empty: ended before the
  trace, or a failed attempt with no recorded end) is dropped as ``no_end_in_trace``; an end
  before the start is dropped as ``end_before_start``.  A zero span (timestamps are whole
  seconds) becomes ``MIN_DURATION_S`` (repair ``zero_duration``).
- requests: an empty request is dropped as ``no_resource_request``; a negative request or a
  memory above 1.0 of the largest machine (the traces' invalid 101) as
  ``invalid_resource_request``.  Measured usage outside those bounds becomes null (repair
  ``invalid_usage``).

Without an instance table each task is expanded into ``instance_num`` canonical tasks
(``JOB/TASK/k``) with the task's own times: the task's span is an upper bound on each
instance's duration.  Task rows are deduplicated per (job, task) in memory (the task table
is the small one: ~14 M rows for 2018); instances only ever stream part by part, and the
whole-table steps on them (retries, dependencies, jobs) run in DuckDB, see
:mod:`pipeline.ingest.fuxi_sql`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline.trace.manifest import Ledger

MIN_DURATION_S = 1.0  # one tick of the traces' 1 s clock
EXPAND_ROWS = 2_000_000  # canonical tasks built per expansion chunk (bounds memory)
END_EVENT_OF = {
    "Terminated": "finished",
    "Failed": "failed",
    "Interrupted": "killed",
    "Interupted": "killed",
    "Cancelled": "killed",
    "Running": "censored",
}
NEVER_STARTED = ("Waiting", "Ready")
TASK_KEYS = ("job_id", "task_name")
FLAGS = {"rep_started_before_trace": "started_before_trace", "rep_zero_duration": "zero_duration"}

# Columns of the record files every batch path writes (canonical tasks plus task_name, queue).
RECORD_SCHEMA: dict[str, pl.DataType] = {
    "task_id": pl.String(), "job_id": pl.String(), "task_name": pl.String(),
    "queue": pl.String(), "submit_s": pl.Float64(), "duration_s": pl.Float64(),
    "cpu": pl.Float64(), "mem": pl.Float64(), "gpu": pl.Float64(),
    "cpu_used": pl.Float64(), "mem_used": pl.Float64(), "end_event": pl.String(),
    "trace_attempts": pl.Int32(), "trace_lost_s": pl.Float64(),
    "depends_on": pl.List(pl.String()), "recorded_machine_id": pl.String(),
    "recorded_start_s": pl.Float64(), "task_kind": pl.String(),
}


def per_hundred(column: str) -> pl.Expr:
    """``column / 100``, correctly rounded.

    Polars divides by a scalar through its reciprocal (95 / 100 -> 0.9500000000000001, but
    exact on a one-row frame), so results would change with how a file is chunked.
    """
    return pl.col(column).map_batches(
        lambda s: pl.Series(s.name, s.to_numpy() / 100.0, nan_to_null=True),
        return_dtype=pl.Float64(),
    )


def timed(frame: pl.DataFrame, window_end_s: float) -> pl.DataFrame:
    """Add ``start_s``, ``duration_s``, ``end_event``, ``drop_reason`` and repair flags.

    ``frame`` has ``status``, ``start_raw`` and ``end_raw`` (raw trace seconds, nullable).
    """
    status, start, end = pl.col("status"), pl.col("start_raw"), pl.col("end_raw")
    event = status.replace_strict(END_EVENT_OF, default=None, return_dtype=pl.String)
    censored = event == "censored"
    start_s = pl.max_horizontal(start.fill_null(0.0), pl.lit(0.0))
    end_s = pl.when(censored).then(
        pl.max_horizontal(pl.lit(window_end_s), end.fill_null(0.0), start_s)
    ).otherwise(end)
    reason = (
        pl.when(status.is_in(NEVER_STARTED)).then(pl.lit("never_started"))
        .when(event.is_null()).then(pl.lit("unknown_status"))
        .when(~censored & (end.is_null() | (end <= 0))).then(pl.lit("no_end_in_trace"))
        .when(~censored & (end < start)).then(pl.lit("end_before_start"))
    )
    span = end_s - start_s
    return frame.with_columns(
        start_s.alias("start_s"),
        pl.when(span > 0).then(span).otherwise(pl.lit(MIN_DURATION_S)).alias("duration_s"),
        event.alias("end_event"),
        reason.alias("drop_reason"),
        (start.is_null() | (start <= 0)).alias("rep_started_before_trace"),
        (span <= 0).fill_null(False).alias("rep_zero_duration"),
    )


def request_reason(cpu: pl.Expr, mem: pl.Expr) -> pl.Expr:
    """Why a task's request per instance is unusable (null when usable)."""
    return (
        pl.when(cpu.is_null() | mem.is_null()).then(pl.lit("no_resource_request"))
        .when((cpu < 0) | (mem < 0) | (mem > 1.0)).then(pl.lit("invalid_resource_request"))
    )


def normalize_tasks(raw: pl.DataFrame, window_end_s: float) -> pl.DataFrame:
    """Task rows (``job_id, task_name, instance_num, status, start_raw, end_raw, cpu, mem,
    file, line``) with times decided and the request checked."""
    return timed(raw, window_end_s).select(
        "job_id", "task_name", "instance_num", "file", "line",
        pl.col("start_s").alias("submit_s"), "duration_s", "end_event", "drop_reason",
        request_reason(pl.col("cpu"), pl.col("mem")).alias("request_reason"),
        *FLAGS, "cpu", "mem",
    )


def normalize_attempts(raw: pl.DataFrame, window_end_s: float) -> pl.DataFrame:
    """Attempt rows (``job_id, task_name, instance, seq_no, status, start_raw, end_raw,
    cpu_used, mem_used, file, line``) with times decided and usage checked."""
    cpu, mem = pl.col("cpu_used"), pl.col("mem_used")
    bad = ((cpu < 0) | (mem < 0) | (mem > 1.0)).fill_null(False)
    return timed(raw, window_end_s).select(
        "job_id", "task_name", "instance", "seq_no", "file", "line", "start_s", "duration_s",
        "end_event", "drop_reason", *FLAGS, bad.alias("rep_invalid_usage"),
        pl.col("machine_id").cast(pl.String) if "machine_id" in raw.columns
        else pl.lit(None, pl.String).alias("machine_id"),
        pl.when(bad).then(None).otherwise(cpu).alias("cpu_used"),
        pl.when(bad).then(None).otherwise(mem).alias("mem_used"),
    )


def dedupe_tasks(
    parts: list[Path], ledger: Ledger, table: str, *, expanding: bool
) -> pl.DataFrame:
    """All normalized task parts, first row per (job, task) kept; raw rows counted.

    Later duplicates are rejected as ``duplicate_task``; when tasks are expanded (no instance
    table), rows with ``instance_num <= 0`` describe no work and are rejected too.
    """
    frame = pl.read_parquet(parts).sort("file", "line")
    unique = frame.unique(subset=list(TASK_KEYS), keep="first", maintain_order=True)
    ledger.reject(table, "duplicate_task", frame.height - unique.height)
    if expanding:
        empty = unique["instance_num"] <= 0
        ledger.reject(table, "instance_num_not_positive", int(empty.sum()))
        unique = unique.filter(~empty)
    ledger.use(table, unique.height)
    return unique


def expand_tasks(
    tasks: pl.DataFrame, out_dir: Path, ledger: Ledger, max_rows: int = EXPAND_ROWS
) -> int:
    """Write one canonical record per instance of each usable task; return records written."""
    usable = pl.col("drop_reason").is_null() & pl.col("request_reason").is_null()
    dropped = tasks.filter(~usable).with_columns(
        pl.coalesce("drop_reason", "request_reason").alias("reason")
    )
    for reason, n in dropped.group_by("reason").agg(pl.col("instance_num").sum()).rows():
        ledger.drop("tasks", reason, int(n))
    tasks = tasks.filter(usable)
    for flag, reason in FLAGS.items():
        ledger.repair("tasks", reason, int(tasks.filter(pl.col(flag))["instance_num"].sum()))
    written = 0
    for index, chunk in enumerate(_chunks(tasks, max_rows)):
        records = _expand(chunk)
        pq.write_table(records.to_arrow(), out_dir / f"expanded-{index:05d}.parquet")
        written += records.height
    if not written:  # one empty file keeps the later steps' inputs well-typed
        pq.write_table(pl.DataFrame(schema=RECORD_SCHEMA).to_arrow(),
                       out_dir / "expanded-00000.parquet")
    return written


def _chunks(tasks: pl.DataFrame, max_rows: int) -> Iterator[pl.DataFrame]:
    """Consecutive task slices whose instance counts sum to about ``max_rows`` at most."""
    bucket = (tasks["instance_num"].cum_sum() - tasks["instance_num"]) // max_rows
    for _, chunk in tasks.with_columns(bucket.alias("_bucket")).group_by(
        "_bucket", maintain_order=True
    ):
        yield chunk.drop("_bucket")


def _expand(tasks: pl.DataFrame) -> pl.DataFrame:
    exploded = tasks.with_columns(pl.int_ranges(0, pl.col("instance_num")).alias("k")).explode("k")
    return exploded.select(
        pl.concat_str("job_id", "task_name", pl.col("k").cast(pl.String), separator="/")
        .alias("task_id"),
        "job_id", "task_name", pl.lit("batch").alias("queue"), "submit_s", "duration_s",
        "cpu", "mem", pl.lit(0.0).alias("gpu"), pl.lit(None).alias("cpu_used"),
        pl.lit(None).alias("mem_used"), "end_event", pl.lit(None).alias("trace_attempts"),
        pl.lit(None).alias("trace_lost_s"), pl.lit(None).alias("depends_on"),
        # batch_task alone says when, not where: the task's start, no machine
        pl.lit(None).alias("recorded_machine_id"), pl.col("submit_s").alias("recorded_start_s"),
        task_kind(),
    ).cast(RECORD_SCHEMA)


def task_kind() -> pl.Expr:
    """``map`` for DAG task names ``M<n>...``, ``reduce`` for ``R<n>...``, else null (as
    :data:`pipeline.ingest.fuxi_sql.INSTANCE_OUT` does for instances)."""
    name = pl.col("task_name")
    return (pl.when(name.str.contains(r"^M[0-9]")).then(pl.lit("map"))
            .when(name.str.contains(r"^R[0-9]")).then(pl.lit("reduce"))
            .otherwise(pl.lit(None)).alias("task_kind"))
