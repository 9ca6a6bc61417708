"""Alibaba 2018 ``container_usage`` -> canonical ``task_usage`` of the online container tasks.

``container_usage`` (schema.txt): container_id, machine_id, time_stamp (s), cpu_util_percent,
mem_util_percent, cpi, mem_gps, mpki, net_in, net_out, disk_io_percent; one row per sample.
The tasks are those :func:`pipeline.ingest.alibaba2018.container_tasks` makes from
``container_meta`` (one long-running task per container).

Mapping decisions (what, why):

- units: ``cpu_util_percent`` is a percentage of the *container's requested CPU*, not of the
  machine's (the trace's maintainers, alibaba/clusterdata issue #62: the containers of one
  machine sum to more than the machine's own percentage); ``mem_util_percent`` is read the
  same way, of the container's memory size.  So ``cpu`` = percent/100 x the task's ``cpu``
  (cores: ``cpu_request``/100) and ``mem`` = percent/100 x the task's ``mem`` (1.0 = largest
  machine: ``mem_size``/100), the units of the tasks' requests.  A container resized during
  the trace has its largest request (as the task does).
- times: a sample holds from its ``time_stamp`` until the container's next sample, but for
  at most ``HOLD_PERIODS`` sampling periods (the container's median gap between samples,
  else ``SAMPLE_PERIOD_S``): a longer gap is missing data, where a replay uses the task's
  mean usage; the last sample holds for one period or until the task's end.  Times become
  seconds from the task's start (``recorded_start_s``, its first container_meta row).
- counted (``rows_rejected["container_usage"]``): ``negative_usage``, ``missing_usage``
  (either percentage empty), ``unknown_task`` (container not among the tasks),
  ``outside_task_life`` (the sample's span misses the task's run), ``overlapping_sample``
  (a second sample of a container at the same time: the earlier row in the file is kept);
  repairs (``repaired["task_usage"]``): ``clipped_to_task_life``,
  ``mem_above_request_clipped`` (above the request: a container above its memory limit is
  killed, so it cannot persist), ``cpu_above_machine_clipped`` (above the largest machine;
  above the request is legitimate, CPU being compressible, and kept).

The samples stream through scratch Parquet files; the per-container steps run in DuckDB (the
adapter's connection: memory limit and spill), so memory does not grow with the table (28 GB
compressed in the full trace).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from pipeline.ingest.csvparts import FLOAT, STR, Column, RawTable
from pipeline.ingest.finalize import write_query
from pipeline.ingest.fuxi import per_hundred
from pipeline.trace.manifest import Ledger

TABLE = "container_usage"
CONTAINER_USAGE = RawTable(TABLE, "container_usage*.csv*", (
    Column("container_id", STR, True), Column("machine_id", STR),
    Column("time_stamp", FLOAT, True), Column("cpu_util_percent", FLOAT),
    Column("mem_util_percent", FLOAT), Column("cpi", FLOAT), Column("mem_gps", FLOAT),
    Column("mpki", FLOAT), Column("net_in", FLOAT), Column("net_out", FLOAT),
    Column("disk_io_percent", FLOAT),
), required=False)
SAMPLE_PERIOD_S = 10.0  # [S] the smallest step between samples of machine_usage (10 s clock)
HOLD_PERIODS = 3  # [A] a sample stands for at most three sampling periods (a longer gap: no data)


def write_samples(frame: pl.DataFrame, file: int, path: Path, ledger: Ledger) -> None:
    """Count the unusable samples of one block; write the rest to ``path``."""
    cpu, mem = pl.col("cpu_util_percent"), pl.col("mem_util_percent")
    negative = ((cpu < 0) | (mem < 0)).fill_null(False)
    missing = cpu.is_null() | mem.is_null()
    counts = frame.select(negative.sum().alias("neg"), (missing & ~negative).sum().alias("mis"))
    ledger.reject(TABLE, "negative_usage", int(counts["neg"][0]))
    ledger.reject(TABLE, "missing_usage", int(counts["mis"][0]))
    frame.filter(~negative & ~missing).select(
        pl.col("container_id").alias("task_id"), pl.col("time_stamp").alias("t"),
        per_hundred("cpu_util_percent").alias("cpu_share"),
        per_hundred("mem_util_percent").alias("mem_share"),
        pl.lit(file, pl.Int64).alias("file"), pl.col("_line").alias("line"),
    ).write_parquet(path)


# Samples (repeats of a container's time flagged) -> spans (until the next sample; the last:
# one period) -> task-relative segments.
SAMPLES_SQL = """
CREATE OR REPLACE TEMP TABLE cu_samples AS
SELECT *, row_number() OVER (PARTITION BY task_id, t ORDER BY file, line) > 1 AS duplicate
FROM read_parquet($samples)
"""
SPANS_SQL = """
CREATE OR REPLACE TEMP TABLE cu_spans AS
SELECT *, least(coalesce(next_t, t + coalesce(period, {period})),
                t + {hold} * coalesce(period, {period})) AS t_end
FROM (SELECT *, median(next_t - t) OVER (PARTITION BY task_id) AS period
      FROM (SELECT *, lead(t) OVER (PARTITION BY task_id ORDER BY t) AS next_t
            FROM cu_samples WHERE NOT duplicate))
"""
SEGMENTS_SQL = """
CREATE OR REPLACE TEMP TABLE cu_segments AS
SELECT s.task_id, s.file, s.line, t.submit_s AS task_submit,
       s.t < t.recorded_start_s + t.duration_s AND s.t_end > t.recorded_start_s AS inside,
       greatest(s.t - t.recorded_start_s, 0.0) AS start_s,
       least(s.t_end - t.recorded_start_s, t.duration_s) AS end_s,
       s.t < t.recorded_start_s OR s.t_end - t.recorded_start_s > t.duration_s AS clipped,
       least(s.cpu_share * t.cpu, {max_cpu}) AS cpu, s.cpu_share * t.cpu > {max_cpu}
           AS cpu_clipped,
       least(s.mem_share, 1.0) * t.mem AS mem, s.mem_share > 1.0 AS mem_clipped
FROM cu_spans s JOIN read_parquet($tasks) t USING (task_id)
"""
COUNTS_SQL = """
SELECT (SELECT count(*) FROM cu_spans) - count(*) AS unknown,
       (SELECT count(*) FILTER (duplicate) FROM cu_samples) AS duplicate,
       count(*) FILTER (NOT inside) AS outside,
       count(*) FILTER (inside) AS used,
       count(*) FILTER (inside AND clipped) AS clipped,
       count(*) FILTER (inside AND cpu_clipped) AS cpu_clipped,
       count(*) FILTER (inside AND mem_clipped) AS mem_clipped
FROM cu_segments
"""
# The tasks table is ordered by (submit_s, task_id) (the adapter's write_sorted).
OUT_SQL = """
SELECT task_id, start_s, end_s, cpu, mem FROM cu_segments
WHERE inside ORDER BY task_submit, task_id, start_s
"""


def write_task_usage(
    con: duckdb.DuckDBPyConnection, samples: list[Path], tasks: Path, out: Path,
    ledger: Ledger, max_cpu: float | None,
) -> int:
    """Write canonical ``task_usage`` from the sample files; count every sample's fate."""
    cap = "'infinity'::DOUBLE" if max_cpu is None else repr(float(max_cpu))
    con.execute(SAMPLES_SQL, {"samples": [str(p) for p in samples]})
    con.execute(SPANS_SQL.format(period=SAMPLE_PERIOD_S, hold=HOLD_PERIODS))
    con.execute(SEGMENTS_SQL.format(max_cpu=cap), {"tasks": str(tasks)})
    unknown, duplicate, outside, used, clipped, cpu_clipped, mem_clipped = con.execute(
        COUNTS_SQL).fetchall()[0]
    ledger.reject(TABLE, "unknown_task", int(unknown))
    ledger.reject(TABLE, "overlapping_sample", int(duplicate))
    ledger.reject(TABLE, "outside_task_life", int(outside))
    ledger.use(TABLE, int(used))
    for reason, n in (("clipped_to_task_life", clipped),
                      ("cpu_above_machine_clipped", cpu_clipped),
                      ("mem_above_request_clipped", mem_clipped)):
        ledger.repair("task_usage", reason, int(n))
    return write_query(con, OUT_SQL, out, "task_usage")
