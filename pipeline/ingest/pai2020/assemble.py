"""cluster-trace-gpu-v2020, the whole-trace steps in DuckDB: which raw rows are usable, the
canonical tasks (one per instance) and jobs.

The staged raw rows (scratch Parquet, with ``_file`` and ``_line``) are joined across tables
(instances to tasks to jobs, sensors to instances), which needs every row at once: DuckDB runs
it with a memory limit and spills to disk (:func:`pipeline.ingest.finalize.spill_connection`),
so memory stays bounded for the full trace (millions of instances).

Every staged row gets a ``reason``: NULL when used, else why it was rejected (first rule wins).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.ingest.pai2020.tables import END_EVENTS, NOT_A_MODEL, NOT_STARTED
from pipeline.trace.io import table_path
from pipeline.trace.manifest import Ledger
from pipeline.trace.schema import conform

BATCH_ROWS = 256 * 1024
_FIRST = "row_number() OVER (PARTITION BY {key} ORDER BY {order}) > 1"

JOBS = f"""CREATE OR REPLACE TABLE job AS SELECT *, CASE
    WHEN {_FIRST.format(key="job_name", order="_file, _line")} THEN 'duplicate_job'
    END AS reason FROM read_parquet($p)"""
TASKS = f"""CREATE OR REPLACE TABLE task AS SELECT t.*, CASE
    WHEN {_FIRST.format(key="t.job_name, t.task_name", order="t._file, t._line")}
      THEN 'duplicate_task'
    WHEN j.job_name IS NULL THEN 'unknown_job'
    WHEN t.inst_num = 0 THEN 'no_instances' END AS reason
    FROM read_parquet($p) t
    LEFT JOIN (SELECT job_name FROM job WHERE reason IS NULL) j ON j.job_name = t.job_name"""
# Of repeated rows of one instance, the latest start is the instance's outcome.
INSTANCES = f"""CREATE OR REPLACE TABLE inst AS SELECT i.*, CASE
    WHEN {_FIRST.format(key="i.job_name, i.task_name, i.inst_name",
                        order="i.start_time DESC NULLS LAST, i._file, i._line")}
      THEN 'duplicate_instance'
    WHEN t.job_name IS NULL THEN 'unknown_task' END AS reason
    FROM read_parquet($p) i LEFT JOIN (SELECT job_name, task_name FROM task
      WHERE reason IS NULL) t ON t.job_name = i.job_name AND t.task_name = i.task_name"""
GROUPS = f"""CREATE OR REPLACE TABLE grp AS SELECT g.*, CASE
    WHEN {_FIRST.format(key="g.inst_id", order="g._file, g._line")} THEN 'duplicate_inst_id'
    WHEN j.inst_id IS NULL THEN 'unknown_job' END AS reason
    FROM read_parquet($p) g LEFT JOIN (SELECT DISTINCT inst_id FROM job
      WHERE reason IS NULL AND inst_id IS NOT NULL) j ON j.inst_id = g.inst_id"""
SPAN = """SELECT min(t), max(t) FROM (
    SELECT unnest([start_time, end_time]) AS t FROM job WHERE reason IS NULL
    UNION ALL SELECT unnest([start_time, end_time]) FROM task WHERE reason IS NULL
    {instances})"""
SPAN_INSTANCES = "UNION ALL SELECT unnest([start_time, end_time]) FROM inst WHERE reason IS NULL"

# One record per canonical task: an instance row, or one of inst_num copies of a task row.
RECORDS_FROM_INSTANCES = """CREATE OR REPLACE TABLE rec AS
    SELECT i.job_name, i.task_name, i.inst_name AS member, i.worker_name, i.machine, i.status,
           i.start_time, i.end_time, t.inst_num, t.plan_cpu, t.plan_mem, t.plan_gpu, t.gpu_type
    FROM inst i JOIN task t ON t.job_name = i.job_name AND t.task_name = i.task_name
    WHERE i.reason IS NULL AND t.reason IS NULL"""
RECORDS_FROM_TASKS = """CREATE OR REPLACE TABLE rec AS
    SELECT job_name, task_name, CAST(unnest(range(inst_num)) AS VARCHAR) AS member,
           CAST(NULL AS VARCHAR) AS worker_name, CAST(NULL AS VARCHAR) AS machine, status,
           start_time, end_time, inst_num, plan_cpu, plan_mem, plan_gpu, gpu_type
    FROM task WHERE reason IS NULL"""
TASKS_WITHOUT_INSTANCES = """SELECT coalesce(sum(inst_num), 0) FROM task t
    WHERE reason IS NULL AND NOT EXISTS (SELECT 1 FROM inst i WHERE i.reason IS NULL
      AND i.job_name = t.job_name AND i.task_name = t.task_name)"""
_ENDED = ", ".join(f"'{s}'" for s in END_EVENTS)
_EVENT = " ".join(f"WHEN '{s}' THEN '{e}'" for s, e in END_EVENTS.items())
CLASSIFIED = f"""CREATE OR REPLACE TABLE cls AS SELECT r.*, j.start_time AS job_submit,
    j.inst_id, CASE
      WHEN r.status = '{NOT_STARTED}' OR r.start_time IS NULL THEN 'never_started'
      WHEN r.status NOT IN ({_ENDED}) THEN 'unknown_status'
      WHEN r.status <> 'Running' AND r.end_time IS NULL THEN 'no_end_time'
      WHEN r.status <> 'Running' AND r.end_time < r.start_time THEN 'end_before_start'
    END AS drop_reason,
    CASE r.status {_EVENT} END AS end_event,
    CASE WHEN r.status = 'Running' THEN $end ELSE r.end_time END AS stop_time
    FROM rec r JOIN job j ON j.job_name = r.job_name AND j.reason IS NULL"""
WORKERS = """CREATE OR REPLACE TABLE wk AS SELECT worker_name, count(*) AS n,
    bool_or(drop_reason IS NULL) AS emitted FROM cls WHERE worker_name IS NOT NULL
    GROUP BY worker_name"""
SENSORS = f"""CREATE OR REPLACE TABLE sens AS SELECT s.*, CASE
    WHEN {_FIRST.format(key="s.worker_name", order="s._file, s._line")}
      THEN 'duplicate_worker_name'
    WHEN w.worker_name IS NULL THEN 'unknown_instance'
    WHEN w.n > 1 THEN 'ambiguous_worker_name'
    WHEN NOT w.emitted THEN 'instance_not_emitted' END AS reason
    FROM read_parquet($p) s LEFT JOIN wk w ON w.worker_name = s.worker_name"""
NO_SENSORS = """CREATE OR REPLACE TABLE sens AS SELECT CAST(NULL AS VARCHAR) AS worker_name,
    CAST(NULL AS DOUBLE) AS cpu_usage, CAST(NULL AS DOUBLE) AS avg_mem,
    CAST(NULL AS VARCHAR) AS reason WHERE false"""
NO_GROUPS = """CREATE OR REPLACE TABLE grp AS SELECT CAST(NULL AS VARCHAR) AS inst_id,
    CAST(NULL AS VARCHAR) AS gpu_type_spec, CAST(NULL AS VARCHAR) AS "group",
    CAST(NULL AS VARCHAR) AS workload, CAST(NULL AS VARCHAR) AS reason WHERE false"""
_MODELS = ", ".join(f"'{m}'" for m in NOT_A_MODEL)
EMITTED = f"""CREATE OR REPLACE TABLE emit AS SELECT *,
      CASE WHEN gpu > 0 AND spec_model IS NOT NULL AND spec_model NOT IN ({_MODELS})
           THEN [spec_model] END AS gpu_spec
    FROM (SELECT c.job_name || '/' || c.task_name || '/' || c.member AS task_id,
      c.job_name AS job_id, least(c.job_submit, c.start_time) - $origin AS submit_s,
      CASE WHEN c.stop_time > c.start_time THEN c.stop_time - c.start_time ELSE 1.0 END
        AS duration_s,
      coalesce(c.plan_cpu, 0) / 100 AS cpu, coalesce(c.plan_mem, 0) AS mem,
      CASE WHEN c.plan_gpu > 100 AND c.plan_gpu % 100 <> 0 THEN ceil(c.plan_gpu / 100)
           ELSE coalesce(c.plan_gpu, 0) / 100 END AS gpu,
      s.cpu_usage / 100 AS cpu_used, s.avg_mem AS mem_used, c.end_event,
      CASE WHEN m.machine_id IS NOT NULL THEN c.machine END AS recorded_machine_id,
      c.start_time - $origin AS recorded_start_s,
      CASE WHEN c.inst_num > 1 THEN c.job_name || '/' || c.task_name END AS gang_id,
      CASE WHEN $with_groups THEN g.gpu_type_spec ELSE c.gpu_type END AS spec_model,
      c.start_time < c.job_submit AS rep_started_before_job_submit,
      c.stop_time <= c.start_time AS rep_zero_duration,
      c.plan_cpu IS NULL AS rep_missing_plan_cpu_read_as_0,
      c.plan_mem IS NULL AS rep_missing_plan_mem_read_as_0,
      c.plan_gpu IS NULL AS rep_missing_plan_gpu_read_as_0,
      c.plan_gpu > 100 AND c.plan_gpu % 100 <> 0 AS rep_gpu_rounded_up_to_whole_devices,
      c.machine IS NOT NULL AND m.machine_id IS NULL AS rep_recorded_machine_not_in_spec
    FROM cls c
    LEFT JOIN machines m ON m.machine_id = c.machine
    LEFT JOIN (SELECT * FROM sens WHERE reason IS NULL) s ON s.worker_name = c.worker_name
    LEFT JOIN (SELECT * FROM grp WHERE reason IS NULL) g ON g.inst_id = c.inst_id
    WHERE c.drop_reason IS NULL)"""
REPAIRS = (
    "started_before_job_submit", "zero_duration", "missing_plan_cpu_read_as_0",
    "missing_plan_mem_read_as_0", "missing_plan_gpu_read_as_0",
    "gpu_rounded_up_to_whole_devices", "recorded_machine_not_in_spec",
)
_ABSENT = """gpu_spec IS NOT NULL AND gpu_spec[1] NOT IN (SELECT gpu_model FROM machines
    WHERE gpu_model IS NOT NULL)"""
LATE_REPAIRS = f"""SELECT count_if(gpu > (SELECT coalesce(max(gpu), 0) FROM machines)),
    count_if({_ABSENT}) FROM emit"""
ABSENT_MODELS = f"SELECT DISTINCT gpu_spec[1] FROM emit WHERE {_ABSENT} ORDER BY 1"
TASKS_OUT = """SELECT task_id, job_id, submit_s, duration_s, cpu, mem, gpu, cpu_used, mem_used,
    end_event, recorded_machine_id, recorded_start_s, gpu_spec, gang_id
    FROM emit ORDER BY submit_s, task_id"""
JOBS_OUT = """SELECT j.job_name AS job_id, j."user", CAST(NULL AS VARCHAR) AS queue,
    e.submit_s, j.status, j.inst_id, g."group" AS group_tag, g.workload
    FROM (SELECT * FROM job WHERE reason IS NULL) j
    JOIN (SELECT job_id, min(submit_s) AS submit_s FROM emit GROUP BY job_id) e
      ON e.job_id = j.job_name
    LEFT JOIN (SELECT * FROM grp WHERE reason IS NULL) g ON g.inst_id = j.inst_id
    ORDER BY job_id"""


def account(con: duckdb.DuckDBPyConnection, view: str, table: str, files: list[str],
            ledger: Ledger) -> None:
    """Count the staged rows of ``view`` as used or rejected by reason (with an example)."""
    for reason, n, file, line in con.execute(
        f"""SELECT reason, count(*), first(_file ORDER BY _file, _line),
            first(_line ORDER BY _file, _line) FROM {view} GROUP BY reason ORDER BY reason"""
    ).fetchall():
        if reason is None:
            ledger.use(table, int(n))
        else:
            ledger.reject(table, reason, int(n), path=files[file], line=int(line),
                          field_name=reason)


def build_records(con: duckdb.DuckDBPyConnection, with_instances: bool, end_raw: float,
                  ledger: Ledger) -> None:
    """One record per canonical task, classified; count those not emitted by reason."""
    if with_instances:
        con.execute(RECORDS_FROM_INSTANCES)
        ledger.drop("tasks", "no_instance_rows", scalar(con, TASKS_WITHOUT_INSTANCES))
    else:
        con.execute(RECORDS_FROM_TASKS)
    con.execute(CLASSIFIED, {"end": end_raw})
    for reason, n in con.execute("SELECT drop_reason, count(*) FROM cls WHERE drop_reason "
                                 "IS NOT NULL GROUP BY 1 ORDER BY 1").fetchall():
        ledger.drop("tasks", reason, int(n))
    con.execute(WORKERS)


def emit(con: duckdb.DuckDBPyConnection, origin: float, with_groups: bool,
         machines: pa.Table, ledger: Ledger) -> list[str]:
    """The emitted tasks (table ``emit``), repairs counted; the absent models named."""
    con.register("machines", machines)
    con.execute(EMITTED, {"origin": origin, "with_groups": with_groups})
    flags = ", ".join(f"count_if(rep_{name})" for name in REPAIRS)
    for name, n in zip(REPAIRS, con.execute(f"SELECT {flags} FROM emit").fetchone() or (),
                       strict=True):
        ledger.repair("tasks", name, int(n or 0))  # count_if over no rows is NULL
    more, absent = con.execute(LATE_REPAIRS).fetchone() or (0, 0)
    ledger.repair("tasks", "more_gpus_than_any_node", int(more or 0))
    ledger.repair("tasks", "gpu_spec_model_absent", int(absent or 0))
    return [r[0] for r in con.execute(ABSENT_MODELS).fetchall()]


def write_outputs(con: duckdb.DuckDBPyConnection, out: Path, ledger: Ledger) -> None:
    """Write ``tasks`` (in submit order) and ``jobs``; count jobs left without tasks."""
    stream(con, TASKS_OUT, out, "tasks")
    jobs = stream(con, JOBS_OUT, out, "jobs")
    ledger.drop("jobs", "no_task_emitted",
                scalar(con, "SELECT count(*) FROM job WHERE reason IS NULL") - jobs)


def stream(con: duckdb.DuckDBPyConnection, sql: str, out: Path, name: str) -> int:
    """Write the rows of ``sql`` (in its order) as ``NAME.parquet``, conformed batch by batch.

    Not :class:`~pipeline.trace.io.PartWriter`: it keeps only the contract columns, and
    these tables carry ``gpu_spec``/``gang_id`` and the job columns named in the notes.
    """
    reader = con.sql(sql).to_arrow_reader(BATCH_ROWS)
    writer, rows = None, 0
    try:
        for batch in reader:
            table = conform(pa.Table.from_batches([batch]), name)
            if writer is None:
                writer = pq.ParquetWriter(table_path(out, name), table.schema,
                                          compression="zstd")
            writer.write_table(table)
            rows += table.num_rows
        if writer is None:
            empty = conform(pa.Table.from_batches([], schema=reader.schema), name)
            pq.write_table(empty, table_path(out, name), compression="zstd")
    finally:
        if writer is not None:
            writer.close()
    return rows


def scalar(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    """The single integer ``sql`` returns."""
    row = con.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
