"""Ordering and writing the canonical tables once an adapter has emitted its records.

Adapters emit tasks when their history closes, which is not submit order.  The replay streams
tasks in submit order, so the emitted parts are sorted here by DuckDB, which spills to disk
beyond a memory limit: the sort stays within bounded memory for the full public traces.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline.trace.io import PartWriter

SORT_MEMORY_LIMIT = "1GB"


def spill_connection(scratch: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection limited to ``SORT_MEMORY_LIMIT`` that spills under ``scratch``."""
    spill = Path(scratch) / "_spill"
    spill.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"SET memory_limit='{SORT_MEMORY_LIMIT}'")
    con.execute(f"SET temp_directory='{spill}'")
    con.execute("SET preserve_insertion_order=true")
    con.execute("SET threads=2")
    con.execute("SET enable_progress_bar=false")
    return con


def write_query(
    con: duckdb.DuckDBPyConnection, sql: str, out: Path, name: str, part_rows: int = 4_000_000,
) -> int:
    """Stream the rows of ``sql`` (in its order) into table ``name`` of ``out`` as parts."""
    writer = PartWriter(out, name, part_rows=part_rows)
    for batch in con.sql(sql).to_arrow_reader(256 * 1024):
        writer.write(pa.Table.from_batches([batch]))
    writer.close()
    return writer.rows


def write_sorted(
    unsorted_dir: Path, out: Path, name: str, order_by: str, part_rows: int = 4_000_000,
) -> int:
    """Sort the Parquet files in ``unsorted_dir`` by ``order_by`` into table ``name`` of ``out``.

    Returns the number of rows written.  ``order_by`` must be a total order (end it with the
    table's unique key) so the output is identical from run to run.
    """
    files = sorted(Path(unsorted_dir).glob("*.parquet"))
    if not files:
        writer = PartWriter(out, name, part_rows=part_rows)
        writer.close()
        return 0
    con = spill_connection(unsorted_dir)
    listing = ", ".join(f"'{f}'" for f in files)
    sql = f"SELECT * FROM read_parquet([{listing}], union_by_name=true) ORDER BY {order_by}"
    rows = write_query(con, sql, out, name, part_rows)
    con.close()
    return rows
