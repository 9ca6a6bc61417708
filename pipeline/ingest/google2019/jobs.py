"""Google 2019 ``collection_events`` -> canonical ``jobs`` and job-level ``depends_on``.

- Jobs (``collection_type`` 0): ``job_id`` = ``collection_id``; ``user``, ``priority``,
  ``sched_class`` (``scheduling_class``), ``name`` (``collection_name``) from the latest event
  giving them; ``queue`` from ``scheduler`` (``default`` or ``batch``: the Borg scheduler that
  placed the job); ``submit_s`` the first SUBMIT (not after the job's first task).  Jobs with
  no emitted task are dropped (``no_task_emitted``); tasks whose job has no collection event
  get a job of their own, ``user`` = ``job_id`` (repair ``job_without_collection_events``).
- Alloc sets (``collection_type`` 1) are resource reservations jobs run inside, not work of
  their own: their rows are rejected as ``alloc_set_not_replayed`` (counted in notes); the
  jobs inside them are replayed with their own tasks' requests, directly on machines.
- ``start_after_collection_ids`` ("run after": the job is scheduled only after those jobs
  finish) -> every task of the job depends on every task of each listed job, when that job
  is in the trace, was submitted before (so no cycle can form) and has at most
  ``DEPENDS_LIMIT`` tasks.  Other edges are counted in ``dropped["job_dependencies"]``.
- Read, not replayed (counts in notes): ``parent_collection_id`` (a child is killed with
  its parent), ``vertical_scaling``, ``max_per_machine``/``max_per_switch``,
  ``collection_logical_name``, ``alloc_collection_id``.
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

TABLE = "collection_events"
DEPENDS_LIMIT = 200  # parent tasks listed per dependency edge (bounds depends_on lists)


def write_events(frame: pl.DataFrame, file: int, path: Path, ledger: Ledger,
                 counts: dict[str, int]) -> None:
    """Count one block's unusable rows; write the rest (projected) to ``path``."""
    frame = usable_events(frame, TABLE, ledger, counts, "alloc_set_rows")
    frame.select(
        cid="collection_id", raw_time="time", t=seconds(pl.col("time")),
        file=pl.lit(file, pl.Int64), line="_line", type="type", user="user",
        name="collection_name", priority="priority", sched_class="scheduling_class",
        scheduler="scheduler", parent="parent_collection_id",
        after="start_after_collection_ids", vertical="vertical_scaling",
        spread=(pl.col("max_per_machine") > 0) | (pl.col("max_per_switch") > 0),
    ).write_parquet(path)


COLL_SQL = """
CREATE TEMP TABLE coll AS
SELECT CAST(cid AS VARCHAR) AS job_id,
       min(t) FILTER (type = 0) AS first_submit, min(t) AS first_t,
       arg_max("user", seq) FILTER ("user" IS NOT NULL) AS "user",
       arg_max(name, seq) FILTER (name IS NOT NULL) AS name,
       arg_max(priority, seq) FILTER (priority IS NOT NULL) AS priority,
       arg_max(sched_class, seq) FILTER (sched_class IS NOT NULL) AS sched_class,
       arg_max(scheduler, seq) FILTER (scheduler IS NOT NULL) AS scheduler,
       bool_or(coalesce(parent, 0) > 0) AS has_parent,
       bool_or(vertical IN (2, 3)) AS vertical,
       bool_or(coalesce(spread, false)) AS spread,
       list_distinct(flatten(list(after) FILTER (after IS NOT NULL))) AS after
FROM (SELECT *, row_number() OVER (ORDER BY raw_time, file, line) AS seq
      FROM read_parquet($files))
GROUP BY cid;
CREATE TEMP TABLE task_jobs AS
SELECT job_id, min(submit_s) AS first_task, count(*) AS n_tasks FROM tasks GROUP BY job_id;
CREATE TEMP TABLE jobs AS
SELECT tj.job_id, coalesce(c."user", tj.job_id) AS "user",
       CASE c.scheduler WHEN 0 THEN 'default' WHEN 1 THEN 'batch' END AS queue,
       least(coalesce(c.first_submit, c.first_t, tj.first_task), tj.first_task) AS submit_s,
       CAST(c.priority AS INTEGER) AS priority, c.name,
       CAST(c.sched_class AS INTEGER) AS sched_class, c.job_id IS NULL AS no_events,
       tj.n_tasks
FROM task_jobs tj LEFT JOIN coll c USING (job_id);
"""
EDGES_SQL = """
CREATE TEMP TABLE edges AS
SELECT e.child, e.parent_raw, p.job_id AS parent, p.n_tasks,
       CASE WHEN k.job_id IS NULL THEN 'child_not_in_trace'
            WHEN p.job_id IS NULL THEN 'parent_not_in_trace'
            WHEN (p.submit_s, p.job_id) >= (k.submit_s, k.job_id) THEN 'parent_not_before_child'
            WHEN p.n_tasks > {limit} THEN 'parent_too_wide'
       END AS unused
FROM (SELECT job_id AS child, unnest(after) AS parent_raw FROM coll) e
LEFT JOIN jobs k ON k.job_id = e.child
LEFT JOIN jobs p ON p.job_id = CAST(TRY_CAST(e.parent_raw AS BIGINT) AS VARCHAR);
CREATE TEMP TABLE deps AS
SELECT e.child AS job_id, list(t.task_id ORDER BY t.task_id) AS depends_on
FROM edges e JOIN tasks t ON t.job_id = e.parent
WHERE e.unused IS NULL GROUP BY e.child;
"""
NOTES_SQL = """
SELECT (SELECT count(*) FROM coll) AS collections,
       (SELECT count(*) FROM coll c ANTI JOIN jobs j USING (job_id)) AS no_task_emitted,
       (SELECT count(*) FROM jobs WHERE no_events) AS job_without_collection_events,
       (SELECT count(*) FROM edges WHERE unused IS NULL) AS dependencies_mapped,
       (SELECT count(*) FROM coll WHERE has_parent) AS with_parent,
       (SELECT count(*) FROM coll WHERE vertical) AS vertical_scaling,
       (SELECT count(*) FROM coll WHERE spread) AS spread_limits
"""


def build_jobs(con: duckdb.DuckDBPyConnection, files: list[Path], ledger: Ledger
               ) -> dict[str, int]:
    """Build tables ``jobs`` and ``deps`` in ``con`` (after ``tasks``); count what was done."""
    run_script(con, COLL_SQL, files)
    run_script(con, EDGES_SQL.format(limit=DEPENDS_LIMIT), files)
    for reason, n in con.execute("SELECT unused, count(*) FROM edges WHERE unused IS NOT NULL "
                                 "GROUP BY unused ORDER BY unused").fetchall():
        ledger.drop("job_dependencies", reason, int(n))
    cursor = con.execute(NOTES_SQL)
    names = [d[0] for d in cursor.description]
    counts = dict(zip(names, (int(v or 0) for v in cursor.fetchall()[0]), strict=True))
    ledger.drop("jobs", "no_task_emitted", counts["no_task_emitted"])
    ledger.repair("jobs", "job_without_collection_events",
                  counts["job_without_collection_events"])
    return counts
