"""The DuckDB warehouse file: opening it with clear errors, its schema, views and checks.

Every query lives in ``sql/`` (see its layout in :mod:`pipeline.warehouse`); this module only
finds the files and runs them.
"""

from __future__ import annotations

import contextlib
import graphlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipeline.errors import TraceError
from pipeline.trace.outdir import make_parents

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
SCHEMA_FILE = SQL_DIR / "schema.sql"
STAGING_DIR = SQL_DIR / "staging"
REPORTS_DIR = SQL_DIR / "reports"
CHECKS_DIR = SQL_DIR / "checks"
CHECK_ROWS_SHOWN = 5
# DuckDB's memory limit (its own default is 80% of RAM): loads, checks and reports on traces
# of tens of millions of tasks spill to ``<warehouse>.tmp`` beyond it instead of growing.
MEMORY_ENV = "TRACEREPLAY_DB_MEMORY"
DEFAULT_MEMORY = "2GB"
DUCKDB_MAGIC = b"DUCK"


@contextlib.contextmanager
def connect(db: Path, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open warehouse ``db`` (a read-only one must exist); locked or corrupt files -> TraceError."""
    db = Path(db)
    if read_only and not db.is_file():
        raise TraceError("no such warehouse (create it with `tracereplay load`)", db)
    check_warehouse_file(db)
    if not read_only:
        make_parents(db)
    try:
        con = duckdb.connect(str(db), read_only=read_only, config={
            "memory_limit": os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY})
    except duckdb.Error as exc:
        raise TraceError(f"cannot open the warehouse: {describe_error(exc)}", db) from exc
    try:
        con.execute("set enable_progress_bar = false")  # keep stdout for the verbs' output
        yield con
    finally:
        con.close()


def check_warehouse_file(db: Path) -> None:
    """Refuse an existing ``db`` that is not a DuckDB database file.

    DuckDB opens an existing file it recognizes by extension (``.json``, ``.csv``,
    ``.parquet``) as an in-memory database over that file: a load would then report success
    and store nothing.  A DuckDB file carries ``DUCK`` at byte 8 (its header's magic).
    """
    if db.exists() and not db.is_file():
        raise TraceError("is not a file (a warehouse is one DuckDB file)", db)
    if not db.is_file() or db.stat().st_size == 0:
        return
    try:
        with db.open("rb") as fh:
            head = fh.read(12)
    except OSError as exc:
        raise TraceError(f"cannot read the warehouse ({exc.strerror})", db) from None
    if head[8:12] != DUCKDB_MAGIC:
        raise TraceError("cannot open the warehouse: not a DuckDB file, refusing to use it "
                         "(give a new path or an existing .duckdb warehouse)", db)


def describe_error(exc: duckdb.Error) -> str:
    """The first line of a DuckDB error, with a hint for the usual causes."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if re.search(r"\block\b", text, re.IGNORECASE):  # (a lock, not "failed to pin block")
        return f"{text} (another process has it open; close it and retry)"
    if "out of memory" in text.lower():
        return f"{text} (set {MEMORY_ENV} above {DEFAULT_MEMORY}, e.g. 4GB, to give it more)"
    if "not a valid duckdb database" in text.lower():
        return f"{text} (not a DuckDB file, or a corrupt one)"
    return text


def sql_text(path: Path) -> str:
    """The text of a query file, without a trailing semicolon (so it can go into a view)."""
    return path.read_text().strip().rstrip(";").strip()


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables, settings and ``check_scope`` view where missing (``sql/schema.sql``)."""
    con.execute(SCHEMA_FILE.read_text())


def report_files() -> list[Path]:
    """The report queries, one view each (``sql/reports/*.sql``)."""
    return sorted(REPORTS_DIR.glob("*.sql"))


def check_files() -> list[Path]:
    """The data checks, queries that must return no rows (``sql/checks/*.sql``)."""
    return sorted(CHECKS_DIR.glob("*.sql"))


def refresh_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    """(Re)create one view per report query, dependencies first; returns the view names.

    A view depends on the report queries whose names its text mentions (inside a
    transaction a failed statement aborts it, so the order is worked out, not tried).
    """
    texts = {path.stem: (path, sql_text(path)) for path in report_files()}
    graph = {
        name: {other for other in texts
               if other != name and re.search(rf"\b{re.escape(other)}\b", text)}
        for name, (_, text) in texts.items()
    }
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise TraceError(f"report queries depend on each other in a cycle: {exc.args[1]}",
                         REPORTS_DIR) from exc
    for name in order:
        path, text = texts[name]
        try:
            con.execute(f'create or replace view "{name}" as {text}')
        except duckdb.Error as exc:
            raise TraceError(f"cannot create view: {describe_error(exc)}", path) from exc
    return order


@dataclass(frozen=True)
class CheckFailure:
    """A data check that returned rows."""

    name: str
    columns: list[str]
    rows: list[tuple]
    count: int

    def __str__(self) -> str:
        shown = "; ".join(
            ", ".join(f"{c}={v}" for c, v in zip(self.columns, row, strict=True))
            for row in self.rows
        )
        more = f" (+{self.count - len(self.rows)} more)" if self.count > len(self.rows) else ""
        return f"check {self.name} failed on {self.count} row(s): {shown}{more}"


def run_checks(con: duckdb.DuckDBPyConnection) -> list[CheckFailure]:
    """Run every ``sql/checks`` query; the ones that returned rows (at most a few rows each)."""
    failures = []
    for path in check_files():
        query = sql_text(path)
        try:
            result = con.execute(
                f"select *, count(*) over () as check_rows from ({query}) "
                f"limit {CHECK_ROWS_SHOWN}"
            )
            columns = [d[0] for d in result.description][:-1]
            rows = result.fetchall()
        except duckdb.Error as exc:
            raise TraceError(f"check failed to run: {describe_error(exc)}", path) from exc
        if rows:
            count = int(rows[0][-1])
            failures.append(CheckFailure(path.stem, columns, [r[:-1] for r in rows], count))
    return failures
