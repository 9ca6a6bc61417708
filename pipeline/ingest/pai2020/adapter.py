"""The ``alibaba-gpu2020`` adapter: stage the raw tables, assemble in DuckDB, write canonical.

Mapping decisions: :mod:`pipeline.ingest.pai2020` (package docstring) and ``NOTES``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.errors import TraceError
from pipeline.ingest.base import require_tables
from pipeline.ingest.chunks import CHUNK_BYTES, iter_table, read_whole
from pipeline.ingest.csvparts import STR, RawTable
from pipeline.ingest.finalize import spill_connection
from pipeline.ingest.pai2020 import assemble as sql
from pipeline.ingest.pai2020.tables import (
    GROUP_TAG,
    INSTANCE,
    JOB,
    MACHINE_SPEC,
    NOTES,
    SENSOR,
    TASK,
)
from pipeline.ingest.window import set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.schema import conform

UNITS = {
    "cpu": "cores (plan_cpu/100; cap_cpu)",
    "mem": "GB as published (plan_mem, cap_mem, avg_mem)",
    "gpu": "devices (plan_gpu/100; below 1: a share of one device; cap_gpu)",
    "time": "s",
}
WINDOW_SOURCE = "the earliest to the latest start_time/end_time read (jobs, tasks, instances)"


class Pai2020:
    """Alibaba PAI cluster-trace-gpu-v2020: machine spec, jobs, tasks, and optional instances,
    sensors and group tags."""

    name: ClassVar[str] = "alibaba-gpu2020"
    summary: ClassVar[str] = ("Alibaba PAI GPU 2020 (1,897 machines, 6,742 GPUs, two months "
                              "of ML jobs, gangs and GPU sharing)")
    tables: ClassVar[tuple[RawTable, ...]] = (MACHINE_SPEC, JOB, TASK, INSTANCE, SENSOR,
                                              GROUP_TAG)

    def __init__(self, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.chunk_bytes = chunk_bytes

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read the raw tables under ``src``; write canonical tables into ``out``."""
        require_extracted(src, self.tables)
        require_tables(src, self.tables, manifest)
        manifest.units, manifest.notes = dict(UNITS), dict(NOTES)
        machines = self._machines(src, ledger, manifest)
        write_table(out, "machines", machines)
        scratch = out / "_scratch"
        scratch.mkdir()
        con = spill_connection(scratch)
        try:
            self._assemble(src, out, ledger, manifest, scratch, con, machines)
        finally:
            con.close()
        shutil.rmtree(scratch)

    def _assemble(
        self, src: Path, out: Path, ledger: Ledger, manifest: Manifest, scratch: Path,
        con: duckdb.DuckDBPyConnection, machines: pa.Table,
    ) -> None:
        """Usable rows table by table, the window, then records, usage and the outputs."""
        present = {t.name for t in self.tables} - set(manifest.tables_absent)
        with_instances, with_groups = INSTANCE.name in present, GROUP_TAG.name in present
        self._load(src, JOB, sql.JOBS, "job", ledger, manifest, scratch, con)
        self._load(src, TASK, sql.TASKS, "task", ledger, manifest, scratch, con)
        if with_instances:
            self._load(src, INSTANCE, sql.INSTANCES, "inst", ledger, manifest, scratch, con)
        if with_groups:
            self._load(src, GROUP_TAG, sql.GROUPS, "grp", ledger, manifest, scratch, con)
        else:
            con.execute(sql.NO_GROUPS)
        origin, end_raw = self._window(src, manifest, con, with_instances)
        sql.build_records(con, with_instances, end_raw, ledger)
        if SENSOR.name in present and with_instances:
            self._load(src, SENSOR, sql.SENSORS, "sens", ledger, manifest, scratch, con)
        else:
            con.execute(sql.NO_SENSORS)
            if SENSOR.name in present:
                manifest.notes["pai_sensor_table"] = (
                    "not read: it joins on worker_name of pai_instance_table, which is absent")
        absent = sql.emit(con, origin, with_groups, machines, ledger)
        if absent:
            manifest.notes["gpu_spec_model_absent"] = "models no machine has: " + ", ".join(
                absent)
        manifest.notes["tasks"] = (
            "one per pai_instance_table row (JOB/TASK/inst_name; of repeated rows of one "
            "instance the latest start is kept, the others rejected as duplicate_instance)"
            if with_instances else "no pai_instance_table: each pai_task_table row expanded "
            "into inst_num tasks JOB/TASK/k over the task's start..end (no machines recorded)")
        sql.write_outputs(con, out, ledger)

    def _load(
        self, src: Path, table: RawTable, query: str, view: str, ledger: Ledger,
        manifest: Manifest, scratch: Path, con: duckdb.DuckDBPyConnection,
    ) -> None:
        """Stage ``table`` block by block to scratch Parquet, mark its rows, account them."""
        folder = scratch / table.name
        folder.mkdir()
        files = [str(p.relative_to(src)) for p in table.files(src)]
        for k, (index, frame) in enumerate(iter_table(src, table, ledger, manifest.sources,
                                                      self.chunk_bytes)):
            frame = frame.with_columns(pl.lit(index, pl.Int64).alias("_file"))
            require_mandatory(frame, table, files, ledger).write_parquet(
                folder / f"part-{k:05d}.parquet")
        con.execute(query, {"p": str(folder / "*.parquet")})
        sql.account(con, view, table.name, files, ledger)

    def _window(self, src: Path, manifest: Manifest, con: duckdb.DuckDBPyConnection,
                with_instances: bool) -> tuple[float, float]:
        """Set the time origin and window; return the origin and the window end, raw clock."""
        first, last = con.execute(sql.SPAN.format(
            instances=sql.SPAN_INSTANCES if with_instances else "")).fetchone() or (None, None)
        origin = float(first) if first is not None else 0.0
        span = max(float(last) - origin, 1.0) if last is not None else 1.0
        manifest.time_origin = (
            f"the earliest time read: {origin:.1f} s on the published clock (shifted by the "
            "publisher by an undisclosed constant; as Unix time in UTC+8 it keeps the time "
            "of day and the day of week, not the date)")
        end_s = set_window(manifest, src, 0.0, span, WINDOW_SOURCE)[1]
        return origin, origin + end_s

    def _machines(self, src: Path, ledger: Ledger, manifest: Manifest) -> pa.Table:
        rows = read_whole(src, MACHINE_SPEC, ledger, manifest.sources, self.chunk_bytes)
        files = [str(p.relative_to(src)) for p in MACHINE_SPEC.files(src)]
        return machine_table(require_mandatory(rows, MACHINE_SPEC, files, ledger), ledger, files)


def machine_table(rows: pl.DataFrame, ledger: Ledger, files: list[str]) -> pa.Table:
    """One machine per usable ``pai_machine_spec`` row (first of repeated ids), conformed."""
    rules = {
        "duplicate_machine": ~pl.col("machine").is_first_distinct(),
        "no_capacity": (pl.col("cap_cpu") <= 0) | (pl.col("cap_mem") <= 0),
        "fractional_gpu_count": pl.col("cap_gpu") != pl.col("cap_gpu").floor(),
    }
    rows = reject_rules(rows, rules, MACHINE_SPEC.name, files, ledger)
    ledger.use(MACHINE_SPEC.name, rows.height)
    model = pl.col("gpu_type")
    machines = rows.select(
        pl.col("machine").alias("machine_id"), pl.col("cap_cpu").alias("cpu"),
        pl.col("cap_mem").alias("mem"), pl.col("cap_gpu").alias("gpu"),
        pl.lit(None, pl.String).alias("rack"), pl.lit(1.0).alias("speed"),
        pl.lit(0.0).alias("added_s"), pl.lit(None, pl.Float64).alias("removed_s"),
        pl.when((pl.col("cap_gpu") > 0) & model.is_not_null() & (model != "CPU"))
        .then(model).otherwise(None).cast(pl.String).alias("gpu_model"),
    )
    return conform(machines.to_arrow(), "machines")


def reject_rules(frame: pl.DataFrame, rules: dict[str, pl.Expr], table: str,
                 files: list[str], ledger: Ledger) -> pl.DataFrame:
    """``frame`` without the rows a rule flags, counted by reason (the first rule wins)."""
    flags = frame.select(expr.fill_null(False).alias(reason) for reason, expr in rules.items())
    bad = pl.Series("bad", [False] * frame.height, pl.Boolean)
    for reason in flags.columns:
        hit = flags[reason] & ~bad
        if hit.any():
            first = frame.filter(hit).row(0, named=True)
            ledger.reject(table, reason, int(hit.sum()), path=files[first["_file"]],
                          line=first["_line"], field_name=reason)
            bad = bad | hit
    return frame.filter(~bad)


def require_mandatory(frame: pl.DataFrame, table: RawTable, files: list[str],
                      ledger: Ledger) -> pl.DataFrame:
    """``frame`` without rows whose mandatory text field is empty (``missing_value:FIELD``).

    csvparts checks these on its fast path only; a block that needed the line-by-line parse
    (any unparsable number in it) lets empty text fields through.
    """
    rules = {f"missing_value:{c.name}": pl.col(c.name).is_null()
             for c in table.columns if c.mandatory and c.dtype == STR}
    return reject_rules(frame, rules, table.name, files, ledger)


def require_extracted(src: Path, tables: tuple[RawTable, ...]) -> None:
    """Name a required table that is still packed in its published ``TABLE.tar.gz``."""
    for table in tables:
        archive = Path(src) / f"{table.name}.tar.gz"
        if table.required and not table.files(src) and archive.is_file():
            raise TraceError(f"required table '{table.name}' is still packed: extract it "
                             f"first (tar -xzf {archive.name})", archive)

