"""Google 2019 ``instance_usage`` -> per-task mean usage and the canonical ``task_usage``.

Each raw row is a measurement window (normally 300 s) of one instance: ``start_time`` and
``end_time`` (trace µs) and ``average_usage`` {``cpus``, ``memory``} (NCU and normalized
memory, the units of the requests).  Parts are written to scratch one at a time; the join
with the tasks runs in DuckDB (spills beyond its memory limit).

A window belongs to the task of its (collection_id, instance_index) when it overlapped the
task's recorded run ``[recorded_start_s, recorded_start_s + duration_s]``; its times become
seconds from ``recorded_start_s``.  ``cpu_used``/``mem_used`` are the time-weighted means of
the windows used.  Counted:

- rejected rows: ``alloc_set_not_replayed`` (usage of an alloc instance: the sum of the
  tasks inside it, which have their own rows), ``missing_usage`` (no average cpus or
  memory), ``negative_usage``, ``nonpositive_interval`` (end <= start, or after the window),
  ``unknown_task`` (no emitted task), ``outside_task_life`` (an earlier attempt, say),
  ``overlapping_sample`` (starts before an earlier window of the task ends);
- repairs (``repaired["task_usage"]``): ``clipped_to_task_life``, ``mem_above_request_clipped``
  (a task above its memory limit is killed, so such usage cannot persist),
  ``cpu_above_machine_clipped`` (cpu above the request is legitimate and kept).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from pipeline.ingest.google2019.ndjson import reject_rows
from pipeline.ingest.google2019.tables import (
    ALLOC_SET,
    TIME_AFTER_WINDOW,
    run_script,
    seconds,
)
from pipeline.trace.manifest import Ledger

TABLE = "instance_usage"


def write_samples(frame: pl.DataFrame, file: int, path: Path, ledger: Ledger) -> None:
    """Count one block's unusable rows; write the rest to ``path``."""
    cpu, mem = pl.col("average_usage_cpus"), pl.col("average_usage_memory")
    start, end = seconds(pl.col("start_time")), seconds(pl.col("end_time"))
    frame = reject_rows(frame, TABLE, ledger, [
        ("alloc_set_not_replayed", pl.col("collection_type") == ALLOC_SET),
        ("missing_usage", cpu.is_null() | mem.is_null()),
        ("negative_usage", (cpu < 0) | (mem < 0)),
        ("nonpositive_interval", (end <= start) | (pl.col("end_time") == TIME_AFTER_WINDOW)),
    ], use=False)
    frame.select(
        cid="collection_id", idx="instance_index", s=start, e=end, cpu=cpu, mem=mem,
        file=pl.lit(file, pl.Int64), line="_line",
    ).write_parquet(path)


SEGMENTS_SQL = """
CREATE TEMP TABLE us AS
SELECT u.*, t.task_id, t.submit_s AS task_submit, t.recorded_start_s AS r0,
       t.duration_s AS d, t.mem AS mem_req,
       u.s < t.recorded_start_s + t.duration_s AND u.e > t.recorded_start_s AS inside
FROM read_parquet($files) u LEFT JOIN tasks t USING (cid, idx);
CREATE TEMP TABLE seg AS
SELECT *, start_s < coalesce(max(end_s) OVER (
              PARTITION BY task_id ORDER BY start_s, end_s, file, line
              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS overlapped
FROM (SELECT task_id, task_submit, file, line,
             greatest(s - r0, 0.0) AS start_s, least(e - r0, d) AS end_s,
             s < r0 OR e - r0 > d AS clipped,
             least(cpu, {max_cpu}) AS cpu, cpu > {max_cpu} AS cpu_clipped,
             least(mem, mem_req) AS mem, mem > mem_req AS mem_clipped
      FROM us WHERE inside);
CREATE TEMP TABLE means AS
SELECT task_id, sum(cpu * (end_s - start_s)) / sum(end_s - start_s) AS cpu_used,
       sum(mem * (end_s - start_s)) / sum(end_s - start_s) AS mem_used
FROM seg WHERE NOT overlapped GROUP BY task_id;
"""
COUNTS_SQL = """
SELECT (SELECT count(*) FROM us WHERE task_id IS NULL) AS unknown_task,
       (SELECT count(*) FROM us WHERE task_id IS NOT NULL AND NOT inside) AS outside_task_life,
       count(*) FILTER (overlapped) AS overlapping_sample,
       count(*) FILTER (NOT overlapped) AS used,
       count(*) FILTER (NOT overlapped AND clipped) AS clipped_to_task_life,
       count(*) FILTER (NOT overlapped AND cpu_clipped) AS cpu_above_machine_clipped,
       count(*) FILTER (NOT overlapped AND mem_clipped) AS mem_above_request_clipped
FROM seg
"""
OUT_SQL = """
SELECT task_id, start_s, end_s, cpu, mem FROM seg WHERE NOT overlapped
ORDER BY task_submit, task_id, start_s
"""
REJECTS = ("unknown_task", "outside_task_life", "overlapping_sample")


def place_samples(con: duckdb.DuckDBPyConnection, files: list[Path], ledger: Ledger,
                  max_cpu: float) -> None:
    """Build tables ``seg`` (task_usage rows) and ``means`` in ``con`` (after ``tasks``)."""
    run_script(con, SEGMENTS_SQL.format(max_cpu=repr(float(max_cpu))), files)
    cursor = con.execute(COUNTS_SQL)
    names = [d[0] for d in cursor.description]
    for name, n in zip(names, cursor.fetchall()[0], strict=True):
        if name in REJECTS:
            ledger.reject(TABLE, name, int(n or 0))
        elif name == "used":
            ledger.use(TABLE, int(n or 0))
        else:
            ledger.repair("task_usage", name, int(n or 0))
