"""The rules of the optional ``task_usage`` table, as one DuckDB query shared by both checkers.

:func:`usage_rows` flags every ``task_usage`` row against each rule of :data:`USAGE_RULES`
(the conventions of :mod:`pipeline.trace.schema`): the validator counts the rows failing each
rule (:mod:`pipeline.trace.validate`), and a replay opening a trace refuses the first row that
fails one (:mod:`pipeline.trace.readcheck`), so both apply the same rules.  The join with
``tasks`` runs in DuckDB, which spills beyond its memory limit: bounded memory whatever the
sizes of the two tables.

A row's position is its Parquet file (part files in name order) and its row in that file, so
an error names the file and the 1-based row; a task's position is its row in ``tasks`` read
the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipeline.trace.schema import USAGE_TOLERANCE

USAGE_COLUMNS = ("task_id", "start_s", "end_s", "cpu", "mem")


def check_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for the checkers: 1 GB of memory (spilling beyond), no filter
    pushdown, no progress bar.

    Parquet min/max statistics leave NaN out, so a filter pushed into the scan would skip a
    row group holding NaN beside finite values and the isfinite() checks would miss it.
    DuckDB draws its progress bar on stderr for queries over two seconds even when stderr is
    a log file: on a full-size trace, ingest and replay logs filled with bars.
    """
    con = duckdb.connect()
    con.execute("SET memory_limit='1GB'")
    con.execute("SET disabled_optimizers = 'filter_pushdown'")
    con.execute("SET enable_progress_bar = false")
    return con


@dataclass(frozen=True)
class UsageRule:
    """One rule: the flag column's name, the field it is about, and the reason in words."""

    flag: str
    field: str
    reason: str
    sql: str  # true on the offending rows (columns of USAGE_JOINED)


def _finite(col: str) -> str:
    return f"{col} IS NULL OR NOT isfinite({col})"


USAGE_RULES: tuple[UsageRule, ...] = (
    UsageRule("null_task", "task_id", "task_id is missing", "task_id IS NULL"),
    UsageRule("unknown_task", "task_id", "names a task that is not in tasks",
              "task_id IS NOT NULL AND t_pos IS NULL"),
    UsageRule("bad_start", "start_s",
              "start_s must be finite and >= 0 (seconds from the task's start)",
              f"{_finite('start_s')} OR start_s < 0"),
    UsageRule("bad_end", "end_s", "end_s must be finite and > start_s",
              f"{_finite('end_s')} OR NOT (end_s > start_s)"),
    UsageRule("after_task_end", "end_s",
              "end_s is after the task's duration_s (times are relative to the task's start)",
              f"end_s > t_duration * (1 + {USAGE_TOLERANCE})"),
    UsageRule("bad_cpu", "cpu", "cpu must be finite and >= 0", f"{_finite('cpu')} OR cpu < 0"),
    UsageRule("bad_mem", "mem", "mem must be finite and >= 0", f"{_finite('mem')} OR mem < 0"),
    UsageRule("mem_above_request", "mem",
              "mem is above the task's memory request (usage above it cannot persist)",
              f"mem > t_mem * (1 + {USAGE_TOLERANCE})"),
    UsageRule("cpu_above_machine", "cpu", "cpu is above the largest machine's cpu",
              f"max_cpu IS NOT NULL AND cpu > max_cpu * (1 + {USAGE_TOLERANCE})"),
    UsageRule("out_of_order", "task_id",
              "rows must be ordered by their task's row in tasks, then start_s",
              "t_pos < prev_pos OR (t_pos = prev_pos AND start_s < prev_start)"),
    UsageRule("overlap", "start_s", "overlaps the previous segment of the same task",
              "t_pos = prev_pos AND start_s >= prev_start AND start_s < prev_end"),
)

_READ = "read_parquet([{files}], union_by_name=true, filename=true, file_row_number=true)"
USAGE_JOINED = """
CREATE OR REPLACE TEMP TABLE usage_checked AS
WITH u AS (
    SELECT filename AS file, file_row_number AS file_row,
           TRY_CAST(task_id AS VARCHAR) AS task_id, TRY_CAST(start_s AS DOUBLE) AS start_s,
           TRY_CAST(end_s AS DOUBLE) AS end_s, TRY_CAST(cpu AS DOUBLE) AS cpu,
           TRY_CAST(mem AS DOUBLE) AS mem
    FROM {usage}
),
t AS (
    SELECT TRY_CAST(task_id AS VARCHAR) AS task_id,
           row_number() OVER (ORDER BY filename, file_row_number) AS t_pos,
           TRY_CAST(duration_s AS DOUBLE) AS t_duration, TRY_CAST(mem AS DOUBLE) AS t_mem
    FROM {tasks}
),
joined AS (
    SELECT u.*, t.t_pos, t.t_duration, t.t_mem, {max_cpu} AS max_cpu
    FROM u LEFT JOIN t ON t.task_id = u.task_id
),
ordered AS (
    SELECT *, row_number() OVER (ORDER BY file, file_row) AS rn,
           lag(t_pos) OVER (ORDER BY file, file_row) AS prev_pos,
           lag(start_s) OVER (ORDER BY file, file_row) AS prev_start,
           max(end_s) OVER (PARTITION BY t_pos ORDER BY file, file_row
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM joined
)
SELECT rn, file, file_row, task_id, {flags} FROM ordered
"""


def missing_columns(con: duckdb.DuckDBPyConnection, files: list[Path]) -> list[str]:
    """Contract columns of ``task_usage`` absent from its files (all are required)."""
    present = {r[0] for r in con.execute(
        f"DESCRIBE SELECT * FROM {_READ.format(files=_listing(files))}").fetchall()}
    return [c for c in USAGE_COLUMNS if c not in present]


def usage_rows(
    con: duckdb.DuckDBPyConnection, usage_files: list[Path], task_files: list[Path],
    machine_files: list[Path],
) -> str:
    """Create temp table ``usage_checked`` (one flag column per rule); return its name.

    ``rn`` is the row's 1-based position in the table, ``file``/``file_row`` (0-based) where
    it is stored.  Without machines (an elastic-cluster workload) cpu has no upper bound.
    """
    max_cpu = (f"(SELECT max(TRY_CAST(cpu AS DOUBLE)) FROM read_parquet([{_listing(machine_files)}"
               "], union_by_name=true))" if machine_files else "CAST(NULL AS DOUBLE)")
    flags = ", ".join(f"coalesce({rule.sql}, false) AS {rule.flag}" for rule in USAGE_RULES)
    con.execute(USAGE_JOINED.format(
        usage=_READ.format(files=_listing(usage_files)),
        tasks=_READ.format(files=_listing(task_files)), max_cpu=max_cpu, flags=flags,
    ))
    return "usage_checked"


def first_violation(con: duckdb.DuckDBPyConnection) -> tuple[UsageRule, str, int, str] | None:
    """The first failing row of ``usage_checked``: (rule, file, 1-based row, task_id)."""
    any_flag = " OR ".join(rule.flag for rule in USAGE_RULES)
    result = con.execute(f"SELECT * FROM usage_checked WHERE {any_flag} ORDER BY rn LIMIT 1")
    names = [d[0] for d in result.description]
    rows = result.fetchall()
    if not rows:
        return None
    row = rows[0]
    values = dict(zip(names, row, strict=True))
    rule = next(r for r in USAGE_RULES if values[r.flag])
    return rule, str(values["file"]), int(values["file_row"]) + 1, str(values["task_id"])


def _listing(files: list[Path]) -> str:
    return ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
