"""The ``load`` stage: run directories into the DuckDB warehouse, in one transaction.

Each run goes through the staging queries (``sql/staging/stg_*.sql``, rename and cast only)
and replaces any earlier copy of itself (delete then insert by ``run_id``), so loading a run
twice leaves one copy.  The views are refreshed and every data check runs on the loaded runs
before the commit: a failed check, a bad file or a crash leaves the warehouse as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.errors import TraceError, UsageError, filesystem_error
from pipeline.progress import Progress
from pipeline.warehouse.db import (
    STAGING_DIR,
    connect,
    create_schema,
    describe_error,
    refresh_views,
    run_checks,
    sql_text,
)
from pipeline.warehouse.rundir import RunDir, read_run_dir

TABLES = ("runs", "task_runs", "node_intervals", "metrics")
PARQUET_TABLES = TABLES[1:]
OPTIONAL_TABLES = ("queues", "gpu_curve")  # loaded when the run directory has them


def load(runs: Iterable[Path], db: Path, *, baseline: str | None = None,
         progress: bool = False) -> dict[str, Any]:
    """Load run directories ``runs`` into warehouse ``db`` (created if missing).

    ``baseline`` also stores the default baseline policy of the ``cost_savings`` view;
    ``progress`` shows runs loaded so far (:mod:`pipeline.progress`).  Returns counts of
    what was loaded (rows as stored: a run given twice is counted once).
    """
    run_dirs = [read_run_dir(Path(p)) for p in runs]
    if not run_dirs:
        raise UsageError("no run directories given")
    db = Path(db)
    created = not db.exists()
    try:
        with connect(db) as con:
            summary = _load_transaction(con, db, run_dirs, baseline, progress)
    except BaseException:
        if created:  # a failed first load leaves no warehouse behind, not an empty one
            remove_database(db)
        raise
    return {"db": str(db), **summary}


def _load_transaction(
    con: duckdb.DuckDBPyConnection, db: Path, run_dirs: list[RunDir], baseline: str | None,
    progress: bool = False,
) -> dict[str, Any]:
    """Load, check and commit in one transaction; anything failing rolls it all back."""
    con.execute("begin transaction")
    try:
        summary = _load_all(con, run_dirs, baseline, progress)
        _check_loaded(con, db, [r.run_id for r in run_dirs])
        con.execute("commit")
    except BaseException as exc:
        with contextlib.suppress(duckdb.Error):  # keep the original error, not this one
            con.execute("rollback")
        error = filesystem_error(exc, db) if isinstance(exc, duckdb.Error) else None
        if error is None:
            raise
        error.reason = f"load rolled back, nothing stored: {error.reason}"
        raise error from exc
    return summary


def remove_database(db: Path) -> None:
    """Remove a warehouse file and the write-ahead log DuckDB keeps beside it."""
    for path in (db, db.with_name(db.name + ".wal")):
        with contextlib.suppress(OSError):
            path.unlink()


def _load_all(
    con: duckdb.DuckDBPyConnection, run_dirs: list[RunDir], baseline: str | None,
    progress: bool = False,
) -> dict[str, Any]:
    """Everything ``load`` does inside its transaction, before the checks."""
    create_schema(con)
    existing = {r[0] for r in con.execute("select distinct run_id from runs").fetchall()}
    with Progress(len(run_dirs), "load", "runs", enabled=progress) as shown:
        for k, run in enumerate(run_dirs, start=1):
            load_run(con, run)
            shown.update(k)
    if baseline is not None:
        set_setting(con, "baseline_policy", baseline)
    views = refresh_views(con)
    run_ids = list(dict.fromkeys(r.run_id for r in run_dirs))
    # rows as stored: a run given twice (or replacing itself) is in the warehouse once
    rows = {table: con.execute(f"select count(*) from {table} where run_id in "
                               "(select unnest(?))", [run_ids]).fetchone()[0]
            for table in PARQUET_TABLES}
    return {
        "runs": len(run_ids),
        "replaced": sum(r in existing for r in run_ids),
        "rows": rows,
        "views": views,
        "run_ids": run_ids,
    }


def load_run(con: duckdb.DuckDBPyConnection, run: RunDir) -> dict[str, int]:
    """Stage one run and replace its rows in every table; rows inserted per Parquet table."""
    stage_sources(con, run)
    for table in TABLES + OPTIONAL_TABLES:
        con.execute(f"delete from {table} where run_id = ?", [run.run_id])
    counts = {}
    for table in TABLES + tuple(t for t in OPTIONAL_TABLES if t in run.files):
        where = run.path / "run.json" if table == "runs" else run.files[table][0]
        try:
            add_new_columns(con, table)
            inserted = con.execute(f"insert into {table} by name select * from stg_{table}")
            counts[table] = _count(inserted)
        except duckdb.Error as exc:
            raise TraceError(f"cannot load {table}: {describe_error(exc)}", where) from exc
    if run.timings:  # wall-clock figures: metrics of the warehouse, not of metrics.parquet
        con.executemany("insert into metrics (run_id, metric, value, unit) values (?, ?, ?, ?)",
                        [(run.run_id, k, v, "ms") for k, v in sorted(run.timings.items())])
        counts["metrics"] += len(run.timings)
    return counts


def stage_sources(con: duckdb.DuckDBPyConnection, run: RunDir) -> None:
    """Point ``src_*`` at one run's files and ``stg_*`` at the staging queries over them."""
    con.register("src_runs", pa.Table.from_pylist([run.row]))
    for table in PARQUET_TABLES:
        files = [str(f) for f in run.files[table]]
        if nan_free(files):
            # read_parquet streams into the table (with file_row_number: without it, DuckDB
            # 2.0 held some 2 GB per 5 M task rows until the commit, whatever its memory
            # limit, and so did an Arrow scan)
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            con.execute(f"create or replace temp view src_{table} as select * exclude "
                        f"(file_row_number) from read_parquet([{listed}], "
                        f"file_row_number = true)")
        else:
            # Through Arrow: DuckDB trusts Parquet min/max statistics, which leave NaN
            # out, and folds isnan() to false, so NaN values would not become NULL.
            con.register(f"src_{table}", ds.dataset(files))
    optional = [t for t in OPTIONAL_TABLES if t in run.files]
    for table in optional:
        con.register(f"src_{table}", ds.dataset([str(f) for f in run.files[table]]))
    for table in TABLES + tuple(optional):
        query = sql_text(STAGING_DIR / f"stg_{table}.sql")
        con.execute(f"create or replace temp view stg_{table} as {query}")
    for table in PARQUET_TABLES + tuple(optional):
        check_run_id(con, table, run)


def nan_free(files: list[str]) -> bool:
    """Whether no floating-point column of ``files`` holds a NaN (replays write nulls; older
    run directories may not).  Reads the float columns a row group at a time."""
    for path in files:
        parquet = pq.ParquetFile(path)
        floats = [f.name for f in parquet.schema_arrow if pa.types.is_floating(f.type)]
        for group in range(parquet.metadata.num_row_groups):
            table = parquet.read_row_group(group, columns=floats)
            if any(pc.any(pc.is_nan(col)).as_py() for col in table.columns):
                return False
    return True


def check_run_id(con: duckdb.DuckDBPyConnection, table: str, run: RunDir) -> None:
    """Raise unless every row of the staged ``table`` belongs to the run of ``run.json``."""
    try:
        other = con.execute(
            f"select run_id, count(*) from stg_{table} "
            "where run_id is distinct from ? group by run_id limit 1",
            [run.run_id],
        ).fetchone()
    except duckdb.Error as exc:
        where = run.files[table][0]
        raise TraceError(f"cannot read {table}: {describe_error(exc)}", where) from exc
    if other is not None:
        raise TraceError(
            f"{other[1]} row(s) have run_id {other[0]!r}, run.json says {run.run_id!r}",
            run.files[table][0], field="run_id",
        )


def add_new_columns(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Add the columns the staged rows bring beyond ``table``'s (kept, not dropped)."""
    have = {r[0] for r in con.execute(f"describe {table}").fetchall()}
    for name, kind, *_ in con.execute(f"describe stg_{table}").fetchall():
        if name not in have:
            con.execute(f'alter table {table} add column "{name}" {kind}')


def set_setting(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    """Store ``settings[key] = value``."""
    con.execute("delete from settings where key = ?", [key])
    con.execute("insert into settings values (?, ?)", [key, value])


def _check_loaded(con: duckdb.DuckDBPyConnection, db: Path, run_ids: list[str]) -> None:
    """Run the data checks on ``run_ids``; raise (so the load rolls back) if any returns rows.

    The checks go one run at a time: their sorts and running sums then need the memory (and
    spill space) of one run, however many runs a load brings.
    """
    failures = []
    for run_id in run_ids:
        con.execute("set variable check_run_ids = ?::varchar[]", [[run_id]])
        failures += run_checks(con)  # on error the connection is closed, variable and all
    con.execute("reset variable check_run_ids")
    if failures:
        raise TraceError(
            "load rolled back, data checks failed: " + " | ".join(str(f) for f in failures), db
        )


def _count(result: duckdb.DuckDBPyConnection) -> int:
    """The row count an INSERT reports."""
    row = result.fetchone()
    return int(row[0]) if row else 0
