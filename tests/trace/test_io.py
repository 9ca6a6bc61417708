"""Canonical table writers: which columns get Parquet dictionary pages, and that data survive."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.trace.io import PartWriter, read_table, write_table


def _tasks(n: int) -> pa.Table:
    return pa.Table.from_pylist([
        {"task_id": f"t{i}", "job_id": f"j{i % 3}", "submit_s": i * 0.5, "duration_s": 1.0 + i,
         "cpu": 0.25, "mem": 0.125, "inputs": [f"m{i % 2}"], "priority": i % 4,
         "end_event": "finished", "recorded_machine_id": f"m{i % 2}"} for i in range(n)])


def _encodings(path: Path) -> dict[str, set[str]]:
    group = pq.ParquetFile(path).metadata.row_group(0)
    return {group.column(k).path_in_schema: set(group.column(k).encodings)
            for k in range(group.num_columns)}


def test_dictionary_pages_only_where_values_repeat(tmp_path: Path) -> None:
    written = write_table(tmp_path, "tasks", _tasks(50))
    writer = PartWriter(tmp_path / "parts", "tasks")
    writer.write(_tasks(50))
    writer.close()
    for path in (written, *sorted((tmp_path / "parts" / "tasks.parquet").iterdir())):
        encodings = _encodings(path)
        for column in ("job_id", "inputs.list.element", "priority", "end_event",
                       "recorded_machine_id"):
            assert "RLE_DICTIONARY" in encodings[column], (path, column)
        for column in ("task_id", "submit_s", "duration_s", "cpu", "mem"):
            assert "RLE_DICTIONARY" not in encodings[column], (path, column)


def test_tables_read_back_as_written(tmp_path: Path) -> None:
    table = _tasks(50)
    write_table(tmp_path, "tasks", table)
    back = read_table(tmp_path, "tasks")
    for column in table.column_names:
        assert back.column(column).to_pylist() == table.column(column).to_pylist(), column
