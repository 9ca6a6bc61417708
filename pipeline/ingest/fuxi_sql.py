"""Alibaba batch work, the whole-trace steps: instances, DAG dependencies and jobs, in DuckDB.

These steps need every row of a table at once (all attempts of an instance, all instances of
a parent task), so they run in DuckDB on the scratch Parquet files with a memory limit and a
spill directory: bounded memory for the full traces.

Instances (:func:`assemble_instances`): exact duplicate attempts (same job, task, instance and
``seq_no``) are rejected raw rows (``duplicate_instance``).  The attempts of one instance merge
into one canonical task: its last usable attempt (highest ``seq_no``) gives times, status and
usage; ``trace_attempts`` counts the attempt rows and ``trace_lost_s`` sums the durations of the
other usable attempts.  Requests per instance come from the task table; an instance whose task
is absent is dropped (``task_not_in_batch_task``).  ``submit_s`` is the task's start (2018) or
create (2017) time; the instance start when that is earlier (repair
``instance_started_before_task``) or when the task's time is 0 or negative, i.e. before the
trace or unknown (repair ``submit_from_instance_start``, counted when the instance started
inside the trace).

Where and when the trace ran each instance (``recorded_machine_id``, ``recorded_start_s``):
the machine and start of the attempt that gives its times (for the ``recorded`` replay).

Dependencies (:func:`add_dependencies`): every instance of a child task must wait for all
instances of its parent tasks (trace_2018.md 2.3), which is instances x instances edges (1000 x
1000 is a million).  A parent task with at most ``direct_limit`` emitted instances is listed
instance by instance; a larger one gets one synthetic *barrier* task ``JOB/TASK/barrier`` (no
cpu, no memory, ``BARRIER_DURATION_S``, ``synthetic`` true) that depends on all its instances,
and children depend on the barrier: edges grow as instances + instances, not their product.
A parent task with no emitted instance is skipped (repair ``parent_task_not_emitted``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger

MEMORY_LIMIT = "1GB"
DIRECT_LIMIT = 16
BARRIER_DURATION_S = 1e-3
BARRIER = "barrier"
INSTANCE_REPAIRS = (
    "started_before_trace", "zero_duration", "invalid_usage", "instance_started_before_task",
    "submit_from_instance_start",
)
CANONICAL = (
    "task_id, job_id, task_name, queue, submit_s, duration_s, cpu, mem, gpu, cpu_used, "
    "mem_used, end_event, trace_attempts, trace_lost_s, depends_on, recorded_machine_id, "
    "recorded_start_s, task_kind"
)


def connect(scratch: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB database file in ``scratch`` with bounded memory and a spill directory."""
    scratch.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(scratch / "fuxi.duckdb"))
    con.execute(f"SET memory_limit='{MEMORY_LIMIT}'")
    con.execute(f"SET temp_directory='{scratch / '_spill'}'")
    con.execute("SET preserve_insertion_order=false")
    con.execute("SET threads=2")
    con.execute("SET enable_progress_bar=false")
    return con


# -- instances: one query per table, named after what it holds --------------------------------
ATTEMPTS = "CREATE OR REPLACE TABLE att AS SELECT * FROM read_parquet($f)"
UNIQUE_ATTEMPTS = """CREATE OR REPLACE TABLE att1 AS SELECT * FROM att QUALIFY row_number()
    OVER (PARTITION BY job_id, task_name, instance, seq_no ORDER BY file, line) = 1"""
INSTANCES = """CREATE OR REPLACE TABLE inst AS
    SELECT * EXCLUDE (rn, usable_s),
           usable_s - CASE WHEN drop_reason IS NULL THEN duration_s ELSE 0 END AS trace_lost_s
    FROM (SELECT *, row_number() OVER (w ORDER BY drop_reason IS NULL DESC,
                 seq_no DESC NULLS LAST, file DESC, line DESC) AS rn,
             count(*) OVER w AS trace_attempts,
             sum(CASE WHEN drop_reason IS NULL THEN duration_s ELSE 0 END) OVER w AS usable_s
          FROM att1 WINDOW w AS (PARTITION BY job_id, task_name, instance))
    WHERE rn = 1"""
INSTANCE_RECORDS = """CREATE OR REPLACE TABLE rec AS
    SELECT i.*, t.cpu, t.mem,
           CASE WHEN t.rep_started_before_trace THEN 'unknown'
                WHEN t.submit_s > i.start_s THEN 'later' ELSE 'ok' END AS task_submit,
           CASE WHEN t.rep_started_before_trace OR t.submit_s > i.start_s
                THEN i.start_s ELSE t.submit_s END AS submit_s,
           coalesce(i.drop_reason, CASE WHEN t.job_id IS NULL THEN 'task_not_in_batch_task' END,
                    t.request_reason) AS reason
    FROM inst i LEFT JOIN read_parquet($t) t USING (job_id, task_name)"""
INSTANCE_DROPS = "SELECT reason, count(*) FROM rec WHERE reason IS NOT NULL GROUP BY reason"
INSTANCE_REPAIR_COUNTS = """SELECT count_if(rep_started_before_trace),
    count_if(rep_zero_duration), count_if(rep_invalid_usage), count_if(task_submit = 'later'),
    count_if(task_submit = 'unknown' AND start_s > 0) FROM rec WHERE reason IS NULL"""
INSTANCE_OUT = """COPY (SELECT job_id || '/' || task_name || '/' || instance AS task_id,
    job_id, task_name, 'batch' AS queue, submit_s, duration_s, cpu, mem, 0.0 AS gpu, cpu_used,
    mem_used, end_event, CAST(trace_attempts AS INTEGER) AS trace_attempts, trace_lost_s,
    CAST(NULL AS VARCHAR[]) AS depends_on,
    CAST(machine_id AS VARCHAR) AS recorded_machine_id, start_s AS recorded_start_s,
    CASE WHEN regexp_matches(task_name, '^M[0-9]') THEN 'map'
         WHEN regexp_matches(task_name, '^R[0-9]') THEN 'reduce' END AS task_kind
    FROM rec WHERE reason IS NULL ORDER BY task_id) TO '{out}' (FORMAT parquet)"""

# -- dependencies -----------------------------------------------------------------------------
RECORDS = "CREATE OR REPLACE TABLE r AS SELECT * FROM read_parquet($f, union_by_name=true)"
PARENT_TASKS = """CREATE OR REPLACE TABLE ptask AS SELECT job_id, task_name, count(*) AS n,
    min(submit_s) AS submit_s FROM r GROUP BY job_id, task_name"""
TASK_EDGES = """CREATE OR REPLACE TABLE e AS SELECT e.job_id, e.task_name, e.parent_name, p.n
    FROM read_parquet($e) e SEMI JOIN ptask c USING (job_id, task_name)
    LEFT JOIN ptask p ON p.job_id = e.job_id AND p.task_name = e.parent_name"""
PARENTS_NOT_EMITTED = """SELECT 'parent_task_not_emitted', count(*) FROM r
    SEMI JOIN (SELECT job_id, task_name FROM e WHERE n IS NULL) USING (job_id, task_name)"""
DEPENDENCY_LISTS = """CREATE OR REPLACE TABLE deps AS
    SELECT job_id, task_name, list(dep ORDER BY dep) AS depends_on FROM (
      SELECT e.job_id, e.task_name, p.task_id AS dep FROM e JOIN r p
        ON p.job_id = e.job_id AND p.task_name = e.parent_name WHERE e.n <= {limit}
      UNION ALL
      SELECT job_id, task_name, job_id || '/' || parent_name || '/{barrier}' FROM e
        WHERE e.n > {limit})
    GROUP BY job_id, task_name"""
BARRIERS = """CREATE OR REPLACE TABLE barrier AS
    SELECT p.job_id || '/' || p.task_name || '/{barrier}' AS task_id, p.job_id, p.task_name,
           'batch' AS queue, any_value(t.submit_s) AS submit_s, {duration} AS duration_s,
           0.0 AS cpu, 0.0 AS mem, 0.0 AS gpu, CAST(NULL AS DOUBLE) AS cpu_used,
           CAST(NULL AS DOUBLE) AS mem_used, 'finished' AS end_event,
           CAST(0 AS INTEGER) AS trace_attempts, CAST(NULL AS DOUBLE) AS trace_lost_s,
           list(p.task_id ORDER BY p.task_id) AS depends_on,
           CAST(NULL AS VARCHAR) AS recorded_machine_id, CAST(NULL AS DOUBLE) AS recorded_start_s,
           CAST(NULL AS VARCHAR) AS task_kind, true AS synthetic
    FROM r p JOIN ptask t USING (job_id, task_name)
    SEMI JOIN (SELECT DISTINCT job_id, parent_name AS task_name FROM e WHERE n > {limit})
      USING (job_id, task_name)
    GROUP BY p.job_id, p.task_name"""
DEPENDENT_OUT = """COPY (
    SELECT {columns}, false AS synthetic FROM r LEFT JOIN deps d USING (job_id, task_name)
    UNION ALL SELECT {barrier_columns}, synthetic FROM barrier ORDER BY task_id
    ) TO '{out}' (FORMAT parquet)"""


def assemble_instances(
    con: duckdb.DuckDBPyConnection, attempts: list[Path], tasks: Path, out_file: Path,
    ledger: Ledger, table: str,
) -> None:
    """Merge attempts into instances, join their tasks, write usable records to ``out_file``."""
    con.execute(ATTEMPTS, {"f": [str(p) for p in attempts]})
    con.execute(UNIQUE_ATTEMPTS)
    total, kept = (_scalar(con, f"SELECT count(*) FROM {t}") for t in ("att", "att1"))
    ledger.reject(table, "duplicate_instance", total - kept)
    ledger.use(table, kept)
    con.execute(INSTANCES)
    con.execute(INSTANCE_RECORDS, {"t": str(tasks)})
    _count(con, ledger, "drop", INSTANCE_DROPS)
    repairs = con.execute(INSTANCE_REPAIR_COUNTS).fetchall()[0]
    for reason, n in zip(INSTANCE_REPAIRS, repairs, strict=True):
        ledger.repair("tasks", reason, int(n or 0))
    con.execute(INSTANCE_OUT.format(out=out_file))


def add_dependencies(
    con: duckdb.DuckDBPyConnection, records: list[Path], edges: Path, out_file: Path,
    ledger: Ledger, direct_limit: int = DIRECT_LIMIT,
) -> int:
    """Write ``records`` with ``depends_on`` filled from the task ``edges``, plus barriers.

    Returns the number of barrier tasks added.
    """
    limit = int(direct_limit)
    con.execute(RECORDS, {"f": [str(p) for p in records]})
    con.execute(PARENT_TASKS)
    con.execute(TASK_EDGES, {"e": str(edges)})
    _count(con, ledger, "repair", PARENTS_NOT_EMITTED)
    con.execute(DEPENDENCY_LISTS.format(limit=limit, barrier=BARRIER))
    con.execute(BARRIERS.format(limit=limit, barrier=BARRIER, duration=BARRIER_DURATION_S))
    con.execute(DEPENDENT_OUT.format(
        columns=CANONICAL.replace("depends_on", "d.depends_on"), barrier_columns=CANONICAL,
        out=out_file,
    ))
    return _scalar(con, "SELECT count(*) FROM barrier")


def write_jobs(
    con: duckdb.DuckDBPyConnection, unsorted: Path, out: Path, ledger: Ledger,
    batch_jobs_seen: int,
) -> None:
    """Write ``jobs`` (one per job_id of the emitted tasks); count batch jobs left empty.

    The traces publish no users: each job is its own user, so fair-share policies share
    between jobs (a single user would reduce them all to FIFO).
    """
    table: pa.Table = con.sql(
        """SELECT job_id, job_id AS "user", min(queue) AS queue, min(submit_s) AS submit_s
        FROM read_parquet($f, union_by_name=true) GROUP BY job_id ORDER BY job_id""",
        params={"f": str(unsorted / "*.parquet")},
    ).to_arrow_table()
    batch = pc.sum(pc.equal(table.column("queue"), "batch")).as_py() or 0
    ledger.drop("jobs", "no_task_emitted", batch_jobs_seen - batch)
    write_table(out, "jobs", table)


def _count(con: duckdb.DuckDBPyConnection, ledger: Ledger, kind: str, query: str) -> None:
    for reason, n in con.execute(query).fetchall():
        getattr(ledger, kind)("tasks", reason, int(n))


def _scalar(con: duckdb.DuckDBPyConnection, query: str) -> int:
    return int(con.execute(query).fetchall()[0][0])
