"""Google 2019 ``instance_events`` -> one canonical task per job instance.

Parts are read one at a time and their usable events written to scratch Parquet; the life of
each instance (collection_id, instance_index) is then folded by DuckDB window queries, which
spill to disk, so memory does not grow with the trace.

- Alloc-set instances (``collection_type`` 1) are reservations, not work: rows rejected as
  ``alloc_set_not_replayed`` (the tasks running inside an alloc are their own instances).
  Also rejected: ``unknown_event_type``, ``after_window`` (stamped 2^63-1).
- Attempts: a SCHEDULE opens one; the next EVICT/FAIL/FINISH/KILL/LOST ends it.  A SCHEDULE
  while an attempt is open is ignored (repair ``duplicate_schedule``); a terminal event with
  no open attempt ends nothing (repair ``terminal_while_pending``).
- One task per instance: ``duration_s`` is the run time of its last attempt, ``end_event``
  how that attempt ended (``censored`` if still running at the window end, repair
  ``censored_at_window_end``); earlier attempts (resubmitted after EVICT/FAIL/KILL/LOST) are
  ``trace_attempts`` and ``trace_lost_s``.  ``submit_s``: the first SUBMIT (else the first
  event, repair ``schedule_without_submit``).  ``recorded_start_s``/``recorded_machine_id``:
  the last attempt's SCHEDULE (machine 0 or -1, "some dedicated machine", give null).
- Requests (``resource_request``): the latest at or before the last attempt's SCHEDULE (else
  the first one after it, repair ``request_after_schedule``), raised to the largest
  UPDATE_RUNNING during the attempt (repair ``request_resized_took_max``: vertical scaling
  resizes running tasks; the canonical task has one request, the largest it held).  A missing
  cpus or memory inside a request reads as 0 (repair ``request_component_missing_read_as_0``).
- Dropped: ``never_scheduled``, ``no_resource_request``, ``nonpositive_duration``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from pipeline.ingest.google2019.ndjson import usable_events
from pipeline.ingest.google2019.tables import (
    run_script,
    seconds,
)
from pipeline.trace.manifest import Ledger

TABLE = "instance_events"


def write_events(frame: pl.DataFrame, file: int, path: Path, ledger: Ledger,
                 counts: dict[str, int]) -> None:
    """Count one block's unusable rows; write the rest (projected) to ``path``."""
    frame = usable_events(frame, TABLE, ledger, counts, "alloc_rows")
    counts["constraint_rows"] += int(frame.select(
        (pl.col("constraint").list.len() > 0).fill_null(False).sum()).item())
    frame.select(
        cid="collection_id", idx="instance_index", raw_time="time",
        t=seconds(pl.col("time")), file=pl.lit(file, pl.Int64), line="_line", type="type",
        machine_id="machine_id", priority="priority", sched_class="scheduling_class",
        alloc_cid="alloc_collection_id", cpu="resource_request_cpus",
        mem="resource_request_memory",
    ).write_parquet(path)


FOLD_SQL = """
CREATE TEMP TABLE ev AS
SELECT *, row_number() OVER (ORDER BY raw_time, file, line) AS seq FROM read_parquet($files);
CREATE TEMP TABLE st AS
SELECT cid, idx, seq, type, t, machine_id,
       lag(type) OVER (PARTITION BY cid, idx ORDER BY seq) AS prev_type
FROM ev WHERE type BETWEEN 3 AND 8;
CREATE TEMP TABLE att AS
SELECT cid, idx, seq AS start_seq, t AS start_s, machine_id, next_type AS end_type,
       next_t AS end_t, next_seq AS end_seq,
       row_number() OVER (PARTITION BY cid, idx ORDER BY seq DESC) AS from_last
FROM (SELECT *, lead(type) OVER w AS next_type, lead(t) OVER w AS next_t,
             lead(seq) OVER w AS next_seq
      FROM st WHERE NOT (type = 3 AND coalesce(prev_type = 3, false))
      WINDOW w AS (PARTITION BY cid, idx ORDER BY seq))
WHERE type = 3;
CREATE TEMP TABLE last AS
SELECT a.cid, a.idx, a.start_seq, a.start_s, a.machine_id, a.end_type,
       coalesce(a.end_seq, 9223372036854775807) AS end_seq,
       coalesce(a.end_t, {window_end}) AS end_s, o.attempts, o.lost_s
FROM att a JOIN (SELECT cid, idx, count(*) AS attempts,
                        coalesce(sum(end_t - start_s) FILTER (from_last > 1), 0) AS lost_s
                 FROM att GROUP BY cid, idx) o USING (cid, idx)
WHERE a.from_last = 1;
CREATE TEMP TABLE info AS
SELECT cid, idx, min(t) FILTER (type = 0) AS first_submit, min(t) AS first_t,
       arg_max(priority, seq) FILTER (priority IS NOT NULL) AS priority,
       arg_max(sched_class, seq) FILTER (sched_class IS NOT NULL) AS sched_class,
       arg_max(alloc_cid, seq) FILTER (alloc_cid IS NOT NULL) AS alloc_cid
FROM ev GROUP BY cid, idx;
CREATE TEMP TABLE req AS
SELECT l.cid, l.idx,
       arg_max({{'c': e.cpu, 'm': e.mem}}, e.seq) FILTER (e.seq <= l.start_seq) AS at_start,
       arg_min({{'c': e.cpu, 'm': e.mem}}, e.seq) AS first_req,
       max(e.cpu) FILTER (e.type = 10 AND e.seq > l.start_seq AND e.seq < l.end_seq) AS cpu_run,
       max(e.mem) FILTER (e.type = 10 AND e.seq > l.start_seq AND e.seq < l.end_seq) AS mem_run
FROM last l JOIN ev e USING (cid, idx)
WHERE e.cpu IS NOT NULL OR e.mem IS NOT NULL
GROUP BY l.cid, l.idx;
CREATE TEMP TABLE tasks AS
SELECT l.cid, l.idx, CAST(l.cid AS VARCHAR) || '-' || CAST(l.idx AS VARCHAR) AS task_id,
       CAST(l.cid AS VARCHAR) AS job_id,
       least(coalesce(i.first_submit, i.first_t), l.start_s) AS submit_s,
       l.end_s - l.start_s AS duration_s,
       coalesce(r.at_start, r.first_req) AS request,
       greatest(coalesce(coalesce(r.at_start, r.first_req).c, 0), coalesce(r.cpu_run, 0)) AS cpu,
       greatest(coalesce(coalesce(r.at_start, r.first_req).m, 0), coalesce(r.mem_run, 0)) AS mem,
       r.at_start IS NULL AND r.first_req IS NOT NULL AS late_request,
       r.cpu_run > coalesce(r.at_start, r.first_req).c
           OR r.mem_run > coalesce(r.at_start, r.first_req).m AS resized,
       CAST(i.priority AS INTEGER) AS priority, CAST(i.sched_class AS INTEGER) AS sched_class,
       CASE l.end_type WHEN 4 THEN 'evicted' WHEN 5 THEN 'failed' WHEN 6 THEN 'finished'
            WHEN 7 THEN 'killed' WHEN 8 THEN 'lost' ELSE 'censored' END AS end_event,
       CAST(l.attempts AS INTEGER) AS trace_attempts, l.lost_s AS trace_lost_s,
       CASE WHEN l.machine_id > 0 THEN CAST(l.machine_id AS VARCHAR) END AS recorded_machine_id,
       l.machine_id = -1 AS dedicated, l.start_s AS recorded_start_s, i.alloc_cid,
       i.first_submit IS NULL AS no_submit
FROM last l JOIN info i USING (cid, idx) LEFT JOIN req r USING (cid, idx);
"""
COUNTS_SQL = """
SELECT (SELECT count(*) FROM info) - (SELECT count(*) FROM last) AS never_scheduled,
       (SELECT count(*) FROM st WHERE type = 3 AND prev_type = 3) AS duplicate_schedule,
       (SELECT count(*) FROM st WHERE type > 3 AND coalesce(prev_type <> 3, true))
           AS terminal_while_pending,
       count(*) FILTER (request IS NULL) AS no_resource_request,
       count(*) FILTER (request IS NOT NULL AND duration_s <= 0) AS nonpositive_duration,
       count(*) FILTER (request IS NOT NULL AND (request.c IS NULL OR request.m IS NULL))
           AS request_component_missing_read_as_0,
       count(*) FILTER (late_request) AS request_after_schedule,
       count(*) FILTER (resized) AS request_resized_took_max,
       count(*) FILTER (end_event = 'censored') AS censored_at_window_end,
       count(*) FILTER (recorded_start_s = 0) AS started_before_window,
       count(*) FILTER (no_submit) AS schedule_without_submit,
       count(*) FILTER (dedicated) AS dedicated_machine,
       count(*) FILTER (alloc_cid > 0) AS in_alloc_set
FROM tasks
"""
DROPS = ("never_scheduled", "no_resource_request", "nonpositive_duration")


def fold_tasks(con: duckdb.DuckDBPyConnection, files: list[Path], ledger: Ledger,
               window_end_s: float) -> dict[str, int]:
    """Build table ``tasks`` in ``con`` from the scratch event files; count what was done."""
    run_script(con, FOLD_SQL.format(window_end=repr(float(window_end_s))), files)
    cursor = con.execute(COUNTS_SQL)
    names = [d[0] for d in cursor.description]
    counts = dict(zip(names, (int(v or 0) for v in cursor.fetchall()[0]), strict=True))
    for name, n in counts.items():
        if name in DROPS:
            ledger.drop("tasks", name, n)
        elif name != "in_alloc_set":
            ledger.repair("tasks", name, n)
    con.execute("DELETE FROM tasks WHERE request IS NULL OR duration_s <= 0")
    return counts
