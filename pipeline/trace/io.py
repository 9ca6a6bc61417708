"""Reading and writing canonical tables, and atomic output directories.

A table is stored as ``NAME.parquet`` (one file) or as a directory ``NAME.parquet/`` of part
files whose name order is the row order (ingest writes tasks sorted by ``submit_s`` this way,
so a replay can stream them).  Readers accept both forms, so users may bring either.
Output directories are written whole or not at all by :func:`atomic_dir` (see
:mod:`pipeline.trace.outdir`, re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import TraceError
from pipeline.trace.outdir import atomic_dir, replace_dir
from pipeline.trace.schema import EXTENSIONS, TABLES, conform

__all__ = [
    "PartWriter", "atomic_dir", "has_table", "iter_batches", "part_files", "read_table",
    "replace_dir", "scan", "table_path", "write_table",
]

ROW_GROUP_ROWS = 256 * 1024


def table_path(directory: Path, name: str) -> Path:
    """Where table ``name`` lives in a canonical trace directory."""
    return Path(directory) / f"{name}.parquet"


def part_files(directory: Path, name: str) -> list[Path]:
    """The Parquet files of table ``name`` in row order (one file, or the parts of a dir)."""
    path = table_path(directory, name)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".parquet")
    if path.is_file():
        return [path]
    raise TraceError(f"table '{name}' is missing", path)


def has_table(directory: Path, name: str) -> bool:
    """Whether ``directory`` holds table ``name`` in either form."""
    return table_path(directory, name).exists()


def read_table(directory: Path, name: str) -> pa.Table:
    """Read a whole table, conformed to the canonical schema (small tables only)."""
    files = part_files(directory, name)
    tables = [_read_file(f) for f in files]
    table = pa.concat_tables(tables, promote_options="permissive") if tables else None
    if table is None:
        table = TABLES[name].empty_table()
    return conform(table, name)


def scan(directory: Path, name: str) -> pl.LazyFrame:
    """A polars lazy scan of table ``name`` over all its parts, in row order."""
    return pl.scan_parquet([str(f) for f in part_files(directory, name)])


def iter_batches(directory: Path, name: str, batch_rows: int = 65536) -> Iterator[pa.Table]:
    """Stream table ``name`` in row order as conformed tables of at most ``batch_rows`` rows."""
    for f in part_files(directory, name):
        try:
            reader = pq.ParquetFile(f)
            for batch in reader.iter_batches(batch_size=batch_rows):
                yield conform(pa.Table.from_batches([batch]), name)
        except (OSError, pa.ArrowInvalid) as exc:
            raise TraceError(f"unreadable Parquet ({exc})", f) from exc


def write_table(directory: Path, name: str, table: pa.Table) -> Path:
    """Write ``table`` (conformed) as the single file ``NAME.parquet``."""
    path = table_path(directory, name)
    pq.write_table(conform(table, name), path, row_group_size=ROW_GROUP_ROWS, compression="zstd")
    return path


class PartWriter:
    """Writes a table as ordered part files ``NAME.parquet/part-NNNNN.parquet``.

    Appends go to the current part until it holds ``part_rows`` rows, so memory stays
    bounded by one row group whatever the table's size.
    """

    def __init__(self, directory: Path, name: str, part_rows: int = 4_000_000) -> None:
        self.name = name
        self.root = table_path(directory, name)
        self.root.mkdir(parents=True, exist_ok=True)
        self.part_rows = part_rows
        self.rows = 0
        self._part = 0
        self._in_part = 0
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    def write(self, table: pa.Table) -> None:
        """Append rows (conformed to the canonical schema, with the family columns of
        ``EXTENSIONS`` the first rows bring: later rows without one get nulls)."""
        table = conform(table, self.name)
        if self._schema is None:
            self._schema = _part_schema(self.name, table.column_names)
        table = pa.table([table.column(f.name) if f.name in table.column_names
                          else pa.nulls(table.num_rows, f.type) for f in self._schema],
                         schema=self._schema)
        offset = 0
        while offset < table.num_rows:
            if self._writer is None or self._in_part >= self.part_rows:
                self._open_next()
            take = min(table.num_rows - offset, self.part_rows - self._in_part)
            assert self._writer is not None
            self._writer.write_table(table.slice(offset, take), row_group_size=ROW_GROUP_ROWS)
            offset += take
            self._in_part += take
            self.rows += take

    def _open_next(self) -> None:
        if self._writer is not None:
            self._writer.close()
        path = self.root / f"part-{self._part:05d}.parquet"
        if self._schema is None:
            self._schema = TABLES[self.name]
        self._writer = pq.ParquetWriter(path, self._schema, compression="zstd")
        self._part += 1
        self._in_part = 0

    def close(self) -> None:
        """Finish the last part (an empty table still gets one empty part file)."""
        if self._writer is None:
            self._open_next()
        assert self._writer is not None
        self._writer.close()


def _part_schema(name: str, columns: list[str]) -> pa.Schema:
    """The canonical schema of ``name`` plus the family columns among ``columns``."""
    extensions = EXTENSIONS.get(name, pa.schema([]))
    return pa.schema(list(TABLES[name]) + [f for f in extensions if f.name in columns])


def _read_file(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise TraceError(f"unreadable Parquet ({exc})", path) from exc
