"""Canonical Google 2011 ``tasks`` from the spilled emitted records, written in submit order.

Buckets come sorted from :class:`~.emitted.EmittedSpill`; each becomes canonical columns
(task ids ``JOB-INDEX`` with ``.N`` for incarnations above 0, end events by name, recorded
machine ids as strings) and is written in batches of ``BATCH_ROWS`` rows, one Parquet row group
each, so the file layout does not depend on where buckets end.  For ``task_usage`` the
emitted tasks (with their incarnations) are also written as scratch Parquet, the table the
usage placement joins against.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

from pipeline.ingest.google2011.emitted import EmittedSpill
from pipeline.ingest.google2011.taskstate import END_NAMES
from pipeline.trace.io import PartWriter

BATCH_ROWS = 122_880  # rows per row group (what the earlier DuckDB writer produced)
PART_ROWS = 4_000_000  # rows per part file of tasks.parquet/


class _Batcher:
    """Feeds a :class:`PartWriter` in slices of exactly ``BATCH_ROWS`` rows (the last: fewer)."""

    def __init__(self, writer: PartWriter) -> None:
        self.writer = writer
        self.pending: list[pa.Table] = []
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.rows += table.num_rows
        if self.rows >= BATCH_ROWS:
            self._flush(final=False)

    def close(self) -> None:
        self._flush(final=True)
        self.writer.close()

    def _flush(self, final: bool) -> None:
        if not self.pending:
            return
        table = pa.concat_tables(self.pending)
        start = 0
        while table.num_rows - start >= BATCH_ROWS or (final and start < table.num_rows):
            take = min(BATCH_ROWS, table.num_rows - start)
            self.writer.write(table.slice(start, take).combine_chunks())
            start += take
        rest = table.slice(start)
        self.pending, self.rows = [rest], rest.num_rows


def write_tasks(spill: EmittedSpill, out: Path, emitted_dir: Path | None = None) -> int:
    """Write table ``tasks`` of ``out`` from ``spill``; return its rows.

    ``emitted_dir``: also write the emitted tasks there (for ``task_usage``)."""
    writer = PartWriter(out, "tasks", part_rows=PART_ROWS)
    batcher = _Batcher(writer)
    for k, bucket in enumerate(spill.buckets()):
        batcher.add(_canonical(bucket))
        if emitted_dir is not None:
            bucket.select(
                "job_id", "task_index", "incarnation", "submit_s", "recorded_start_s",
                "duration_s", "mem",
            ).write_parquet(emitted_dir / f"emitted-{k:06d}.parquet")
    batcher.close()
    return writer.rows


def _canonical(frame: pl.DataFrame) -> pa.Table:
    """One sorted bucket as canonical task columns.

    The job id is turned into text once (for ``job_id`` and ``task_id``), and the ``.N``
    suffix is only built for a bucket holding an incarnation above 0.
    """
    task = pl.concat_str(pl.col("job"), pl.lit("-"), pl.col("task_index").cast(pl.String))
    if (frame["incarnation"] > 0).any():
        task = pl.concat_str(task, pl.when(pl.col("incarnation") > 0).then(
            pl.lit(".") + pl.col("incarnation").cast(pl.String)).otherwise(pl.lit("")))
    return frame.lazy().with_columns(job=pl.col("job_id").cast(pl.String)).select(
        task_id=task, job_id="job",
        submit_s="submit_s", duration_s="duration_s", cpu="cpu", mem="mem", gpu=pl.lit(0.0),
        cpu_used=pl.col("cpu_used").fill_nan(None), mem_used=pl.col("mem_used").fill_nan(None),
        priority=pl.col("priority").cast(pl.Int32),
        sched_class=pl.col("sched_class").cast(pl.Int32),
        end_event=pl.col("end_code").replace_strict(
            list(range(len(END_NAMES))), list(END_NAMES), return_dtype=pl.String),
        trace_attempts=pl.col("trace_attempts").cast(pl.Int32), trace_lost_s="trace_lost_s",
        recorded_machine_id=pl.when(pl.col("recorded_machine") >= 0).then(
            pl.col("recorded_machine").cast(pl.String)),
        recorded_start_s="recorded_start_s",
    ).collect().to_arrow()
