"""Validate any canonical trace directory (ours or a user's) against contract section 2.

Checks run as SQL in DuckDB over the Parquet files, so they work in bounded memory on traces
of any size.  Each failed check becomes a :class:`Problem` naming the table, the check, how
many rows fail and one example; nothing is raised, so a user sees every problem at once.
The optional ``task_usage`` table is checked against its rules in
:mod:`pipeline.trace.usagecheck` (shared with the replay's quick check).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from pipeline.trace.cycles import find_cycles
from pipeline.trace.io import has_table, part_files
from pipeline.trace.manifest import Manifest
from pipeline.trace.schema import CONTRACT_COLUMNS, DEFAULTS, REQUIRED_TABLES, TABLES
from pipeline.trace.usagecheck import USAGE_RULES, check_connection, usage_rows


@dataclass
class Problem:
    """One failed check: where, what, how many rows, and an example."""

    table: str
    check: str
    rows: int = 0
    example: str = ""

    def __str__(self) -> str:
        count = f" ({self.rows} rows)" if self.rows else ""
        example = f"; e.g. {self.example}" if self.example else ""
        return f"{self.table}: {self.check}{count}{example}"


@dataclass
class Report:
    """The outcome of validating one directory."""

    path: Path
    problems: list[Problem] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def first(self) -> str:
        return str(self.problems[0]) if self.problems else "ok"


# (table, description, SQL WHERE clause selecting the offending rows, example column)
ROW_CHECKS: list[tuple[str, str, str, str]] = [
    ("machines", "machine_id is null", "machine_id IS NULL", "machine_id"),
    # DuckDB orders NaN above every number (NaN > 0 holds), hence the isfinite() tests.
    ("machines", "cpu must be > 0", "NOT (cpu > 0) OR cpu IS NULL OR NOT isfinite(cpu)",
     "machine_id"),
    ("machines", "mem must be > 0", "NOT (mem > 0) OR mem IS NULL OR NOT isfinite(mem)",
     "machine_id"),
    ("machines", "gpu must be >= 0",
     "NOT (coalesce(gpu, 0) >= 0) OR NOT isfinite(coalesce(gpu, 0))", "machine_id"),
    ("machines", "speed must be > 0",
     "NOT (coalesce(speed, 1) > 0) OR NOT isfinite(coalesce(speed, 1))", "machine_id"),
    ("machines", "added_s must be finite", "NOT isfinite(coalesce(added_s, 0))", "machine_id"),
    ("machines", "removed_s before added_s", "removed_s < coalesce(added_s, 0)", "machine_id"),
    ("jobs", "job_id is null", "job_id IS NULL", "job_id"),
    ("jobs", "user is null", "\"user\" IS NULL", "job_id"),
    ("jobs", "submit_s must be finite and >= 0",
     "submit_s IS NULL OR NOT isfinite(submit_s) OR submit_s < 0", "job_id"),
    ("tasks", "task_id is null", "task_id IS NULL", "task_id"),
    ("tasks", "job_id is null", "job_id IS NULL", "task_id"),
    ("tasks", "submit_s must be finite and >= 0",
     "submit_s IS NULL OR NOT isfinite(submit_s) OR submit_s < 0", "task_id"),
    ("tasks", "duration_s must be finite and > 0",
     "duration_s IS NULL OR NOT isfinite(duration_s) OR duration_s <= 0", "task_id"),
    ("tasks", "cpu must be finite and >= 0", "cpu IS NULL OR NOT isfinite(cpu) OR cpu < 0",
     "task_id"),
    ("tasks", "mem must be finite and >= 0", "mem IS NULL OR NOT isfinite(mem) OR mem < 0",
     "task_id"),
    ("tasks", "gpu must be >= 0",
     "NOT (coalesce(gpu, 0) >= 0) OR NOT isfinite(coalesce(gpu, 0))", "task_id"),
    ("tasks", "cpu_used must be >= 0", "cpu_used < 0 OR isinf(cpu_used)", "task_id"),
    ("tasks", "input_mb must be >= 0 and finite",
     "input_mb < 0 OR isinf(input_mb) OR isnan(input_mb)", "task_id"),
    ("tasks", "mem_used must be >= 0", "mem_used < 0 OR isinf(mem_used)", "task_id"),
    ("tasks", "task depends on itself", "list_contains(depends_on, task_id)", "task_id"),
    # GPUs are devices: a machine has a whole number; a task asks for a share of one device
    # (below 1) or whole devices.
    ("machines", "gpu must be a whole number of devices", "gpu <> floor(gpu)", "machine_id"),
    ("tasks", "gpu of 1 or more must be a whole number of devices (a share is below 1)",
     "gpu > 1 AND gpu <> floor(gpu)", "task_id"),
]

# Checks on the family columns of schema.EXTENSIONS, run when the column is present.
EXTENSION_CHECKS: list[tuple[str, str, str, str, str]] = [
    ("tasks", "requested_s", "requested_s must be finite and > 0",
     "requested_s IS NOT NULL AND (NOT isfinite(requested_s) OR requested_s <= 0)", "task_id"),
    ("tasks", "gpu_spec", "gpu_spec given on a task that asks for no GPU",
     "len(gpu_spec) > 0 AND NOT (coalesce(gpu, 0) > 0)", "task_id"),
]


def validate(directory: Path) -> Report:
    """Check ``directory`` against the canonical format; return every problem found."""
    directory = Path(directory)
    report = Report(directory)
    if not directory.is_dir():
        report.problems.append(Problem("trace", f"not a directory: {directory}"))
        return report
    con = check_connection()
    present = _register_tables(con, directory, report)
    if set(REQUIRED_TABLES) <= present:
        _row_checks(con, report, present)
        _key_checks(con, report, present)
        if "task_usage" in present:
            _usage_checks(con, report, directory)
    _manifest_checks(directory, report)
    con.close()
    return report


def count_rows(directory: Path) -> dict[str, int]:
    """Row counts of every canonical table present (from Parquet metadata; no data read)."""
    counts = {}
    for name in TABLES:
        if has_table(directory, name):
            counts[name] = sum(pq.ParquetFile(f).metadata.num_rows
                               for f in part_files(directory, name))
    return counts


def _register_tables(con: duckdb.DuckDBPyConnection, directory: Path, report: Report) -> set:
    present = set()
    for name in TABLES:
        if not has_table(directory, name):
            if name in REQUIRED_TABLES:
                report.problems.append(Problem(name, f"missing {name}.parquet"))
            continue
        files = ", ".join(_sql_string(str(f)) for f in part_files(directory, name))
        try:
            con.execute(
                f"CREATE VIEW raw_{name} AS "
                f"SELECT * FROM read_parquet([{files}], union_by_name=true)"
            )
            columns = {r[0]: r[1] for r in con.execute(f"DESCRIBE raw_{name}").fetchall()}
        except duckdb.Error as exc:
            report.problems.append(Problem(name, f"unreadable Parquet: {exc}".splitlines()[0]))
            continue
        if _column_checks(con, name, columns, report):
            present.add(name)
            report.rows[name] = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
    return present


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _column_checks(
    con: duckdb.DuckDBPyConnection, name: str, columns: dict[str, str], report: Report
) -> bool:
    """Create view ``name`` with every contract column (defaults filled); False if impossible."""
    exprs, ok = [], True
    for col in CONTRACT_COLUMNS[name]:
        arrow_type = TABLES[name].field(col).type
        sql_type = _SQL_TYPES[str(arrow_type)]
        if col in columns:
            exprs.append(f'TRY_CAST("{col}" AS {sql_type}) AS "{col}"')
            bad = con.execute(
                f'SELECT count(*) FROM raw_{name} WHERE "{col}" IS NOT NULL '
                f'AND TRY_CAST("{col}" AS {sql_type}) IS NULL'
            ).fetchone()[0]
            if bad:
                report.problems.append(Problem(name, f"column {col} is not {arrow_type}", bad))
                ok = False
        elif col in DEFAULTS.get(name, {}):
            default = DEFAULTS[name][col]
            literal = "NULL" if default is None else repr(default)
            exprs.append(f'CAST({literal} AS {sql_type}) AS "{col}"')
        else:
            report.problems.append(Problem(name, f"missing required column {col}"))
            ok = False
    if ok:
        con.execute(f"CREATE VIEW {name} AS SELECT {', '.join(exprs)} FROM raw_{name}")
    return ok


_SQL_TYPES = {
    "string": "VARCHAR", "double": "DOUBLE", "int32": "INTEGER",
    "list<item: string>": "VARCHAR[]",
}


def _row_checks(con: duckdb.DuckDBPyConnection, report: Report, present: set) -> None:
    """Every row check, one scan per table (problems in the order the checks are listed)."""
    scans: dict[str, list[tuple[str, str, str, str]]] = {}
    for table, check, where, key in ROW_CHECKS:
        if table in present:
            scans.setdefault(table, []).append((table, check, where, key))
    for table, column, check, where, key in EXTENSION_CHECKS:
        if table in present and column in _columns(con, f"raw_{table}"):
            scans.setdefault(f"raw_{table}", []).append((table, check, where, key))
    for view, checks in scans.items():
        _scan_checks(con, report, view, checks)


def _scan_checks(con: duckdb.DuckDBPyConnection, report: Report, view: str,
                 checks: list[tuple[str, str, str, str]]) -> None:
    """Count the rows of ``view`` failing each check, with an example key, in one pass.

    The same counts as a query per check (``FILTER`` keeps the rows a ``WHERE`` would: those
    where the clause is true, not null), for one read of the table instead of one per check.
    """
    aggregates = ", ".join(
        f"count_if({where}), CAST(any_value({key}) FILTER (WHERE {where}) AS VARCHAR)"
        for _, _, where, key in checks)
    found = con.execute(f"SELECT {aggregates} FROM {view}").fetchone()
    for k, (table, check, _, _) in enumerate(checks):
        n, example = found[2 * k], found[2 * k + 1]
        if n:
            report.problems.append(Problem(table, check, n, example or ""))


def _columns(con: duckdb.DuckDBPyConnection, view: str) -> set[str]:
    return {r[0] for r in con.execute(f"DESCRIBE {view}").fetchall()}


def _key_checks(con: duckdb.DuckDBPyConnection, report: Report, present: set) -> None:
    for table, key in (("machines", "machine_id"), ("jobs", "job_id"), ("tasks", "task_id")):
        _count_problem(con, report, table, f"duplicate {key}",
                       f"SELECT {key} FROM {table} GROUP BY {key} HAVING count(*) > 1")
    _count_problem(con, report, "tasks", "job_id not in jobs",
                   "SELECT t.job_id FROM tasks t ANTI JOIN jobs j USING (job_id)")
    _count_problem(con, report, "tasks", "inputs name unknown machines",
                   "SELECT i AS machine_id FROM (SELECT unnest(inputs) AS i FROM tasks) "
                   "ANTI JOIN machines m ON m.machine_id = i")
    dependent = con.execute(
        "SELECT count(*) FROM tasks WHERE len(depends_on) > 0").fetchone()[0]
    if dependent:  # without dependencies the join below would only read every task id
        _count_problem(con, report, "tasks", "depends_on names unknown tasks",
                       "SELECT d FROM (SELECT unnest(depends_on) AS d FROM tasks) "
                       "ANTI JOIN tasks t ON t.task_id = d")
    _count_problem(con, report, "tasks", "not sorted by submit_s (the replay streams tasks)",
                   "SELECT task_id FROM (SELECT task_id, submit_s, lag(submit_s) OVER () AS prev "
                   "FROM tasks) WHERE submit_s < prev")
    if dependent:
        _cycle_check(con, report)
    if "machine_downtime" in present:
        _count_problem(con, report, "machine_downtime", "machine_id not in machines",
                       "SELECT d.machine_id FROM machine_downtime d ANTI JOIN machines m "
                       "USING (machine_id)")
        _count_problem(con, report, "machine_downtime", "up_s before down_s",
                       "SELECT machine_id FROM machine_downtime WHERE up_s < down_s")


def _usage_checks(con: duckdb.DuckDBPyConnection, report: Report, directory: Path) -> None:
    """Every rule of :mod:`pipeline.trace.usagecheck`: rows failing it, and the first one."""
    files = {name: part_files(directory, name) if has_table(directory, name) else []
             for name in ("task_usage", "tasks", "machines")}
    table = usage_rows(con, files["task_usage"], files["tasks"], files["machines"])
    for rule in USAGE_RULES:
        n, example = con.execute(
            f"SELECT count(*), arg_min('row ' || rn || ', task_id ' || coalesce(task_id, 'null'),"
            f" rn) FROM {table} WHERE {rule.flag}").fetchall()[0]
        if n:
            report.problems.append(Problem("task_usage", f"{rule.field}: {rule.reason}", n,
                                           example or ""))


# Dependency edges coded as integers (sorted ids, so the example is deterministic).
DEPENDENCY_EDGES = """
CREATE TEMP TABLE dep_edges AS
    SELECT task_id AS child, unnest(depends_on) AS parent FROM tasks WHERE len(depends_on) > 0;
CREATE TEMP TABLE dep_nodes AS
    SELECT id, row_number() OVER (ORDER BY id) - 1 AS k
    FROM (SELECT child AS id FROM dep_edges UNION SELECT parent FROM dep_edges WHERE parent
          IS NOT NULL);
"""
CODED_EDGES = """SELECT p.k AS parent, c.k AS child FROM dep_edges e
    JOIN dep_nodes p ON p.id = e.parent JOIN dep_nodes c ON c.id = e.child
    WHERE e.parent <> e.child"""


def _cycle_check(con: duckdb.DuckDBPyConnection, report: Report) -> None:
    """Tasks in (or waiting on) a dependency cycle; self-dependencies are reported apart."""
    con.execute(DEPENDENCY_EDGES)
    n = con.execute("SELECT count(*) FROM dep_nodes").fetchone()[0]
    edges = con.execute(CODED_EDGES).fetchnumpy()
    found = find_cycles(n, edges["parent"], edges["child"])
    if found is not None:
        names = dict(con.execute("SELECT k, id FROM dep_nodes WHERE k IN (SELECT unnest(?))",
                                 [sorted(set(found.cycle))]).fetchall())
        loop = " -> ".join(str(names[k]) for k in found.cycle[:12])
        more = " -> ..." if len(found.cycle) > 12 else ""
        report.problems.append(Problem("tasks", "dependency cycle: tasks that can never start",
                                       found.stuck, loop + more))


def _count_problem(
    con: duckdb.DuckDBPyConnection, report: Report, table: str, check: str, query: str
) -> None:
    n, example = con.execute(
        f"SELECT count(*), CAST(any_value(x) AS VARCHAR) FROM ({query}) x"
    ).fetchone()
    if n:
        report.problems.append(Problem(table, check, n, example or ""))


def _manifest_checks(directory: Path, report: Report) -> None:
    try:
        manifest = Manifest.read(directory)
    except FileNotFoundError:
        report.problems.append(Problem("manifest", "manifest.json missing"))
        return
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        report.problems.append(Problem("manifest", f"manifest.json unreadable: {exc}"))
        return
    for name, rows in report.rows.items():
        if manifest.rows.get(name) != rows:
            report.problems.append(Problem(
                "manifest", f"rows[{name}] = {manifest.rows.get(name)} but the table has {rows}"
            ))
    for table, n_in in manifest.input_rows.items():
        used = manifest.rows_used.get(table, 0)
        rejected = sum(manifest.rows_rejected.get(table, {}).values())
        if used + rejected != n_in:
            report.problems.append(Problem(
                "manifest", f"{table}: {n_in} input rows but {used} used + {rejected} rejected"
            ))
