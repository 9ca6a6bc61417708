"""Alibaba ``cluster-trace-v2018`` -> canonical trace.

Source: alibaba/clusterdata ``cluster-trace-v2018/schema.txt`` and ``trace_2018.md``.  Times
are seconds from the start of the 8-day window; cpu fields are "100 = 1 core"; memory fields
are normalized to [0, 100] with -1 / 101 marking invalid values.

Mapping decisions (what, why):

- machines (``machine_meta``, several rows per machine): ``added_s`` = first ``USING`` row
  (a negative time is read as 0: repair ``negative_time_read_as_0``), capacity from that
  row: ``cpu`` = ``cpu_num`` cores, ``mem`` = ``mem_size``/100 (1.0 = largest machine),
  ``rack`` = ``failure_domain_1`` (``failure_domain_2`` is a coarser domain, not kept).  A
  machine never ``USING`` (only ``IMPORT_INSTALLING``) is dropped (``never_in_service``); one
  without capacity as ``no_capacity``.  No removals are published.
- batch jobs: job = ``job_name``; users are not published, so each job is its own user
  (fair-share policies then share between jobs); queue ``batch``.
- batch tasks: one per instance of ``batch_instance`` (``JOB/TASK/INSTANCE``; retries of an
  instance merge into one task, see :mod:`pipeline.ingest.fuxi_sql`), requests from
  ``batch_task`` (``plan_cpu``/100 cores, ``plan_mem``/100), ``cpu_avg``/100 and ``mem_avg``/100
  as ``cpu_used``/``mem_used``.  Without ``batch_instance`` each task expands into
  ``instance_num`` tasks (``JOB/TASK/k``) over the task's start..end span (an upper bound).
  Statuses and timestamps: :mod:`pipeline.ingest.fuxi`; ``Running`` work is censored at
  ``WINDOW_END_S`` (8 days).
- ``task_kind``: ``map`` for task names ``M<n>...``, ``reduce`` for ``R<n>...`` (the DAG
  names' M/R prefixes); join (``J``) and other tasks are one phase (null).  Speculation rules
  compare a task with its job's tasks of the same kind.
- ``depends_on``: the task-name DAG (:mod:`pipeline.ingest.dag`; repairs counted under
  ``repaired["batch_task"]``) applied to instances, with barrier tasks above
  ``direct_limit`` parent instances (:mod:`pipeline.ingest.fuxi_sql`).
- online containers (``container_meta``, optional): one long-running task per container
  (``task_id`` = ``container_id``) from its first to its last row, job = ``app_du``, queue
  ``online``, ``cpu_request``/100 cores and ``mem_size``/100 (largest over its rows), end_event
  ``censored`` (services do not finish; the trace only shows them in that span).  A container
  with a single row (no span) runs to the window end (repair ``single_row_run_to_window_end``).
- usage: batch tasks carry ``cpu_avg``/``mem_avg`` of ``batch_instance`` as ``cpu_used``/
  ``mem_used`` (the mean: the trace has no series per instance, only avg and max, so batch
  tasks get no ``task_usage`` rows); ``container_usage`` (optional, read with
  ``container_meta``) becomes the ``task_usage`` of the container tasks
  (:mod:`pipeline.ingest.container_usage`).
- not read: ``machine_usage`` (per machine, not per task), named in ``manifest.notes``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import duckdb
import polars as pl
import pyarrow.parquet as pq

from pipeline.ingest import container_usage as cu
from pipeline.ingest import fuxi, fuxi_sql
from pipeline.ingest.base import require_tables
from pipeline.ingest.chunks import CHUNK_BYTES, iter_table, read_whole
from pipeline.ingest.csvparts import FLOAT, INT, STR, Column, RawTable
from pipeline.ingest.dag import resolve_dag
from pipeline.ingest.finalize import write_sorted
from pipeline.ingest.window import set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.schema import conform

WINDOW_END_S = 8 * 86_400.0

MACHINE_META = RawTable("machine_meta", "machine_meta*.csv*", (
    Column("machine_id", STR, True), Column("time_stamp", INT, True),
    Column("failure_domain_1", INT), Column("failure_domain_2", STR), Column("cpu_num", INT),
    Column("mem_size", FLOAT), Column("status", STR, True),
))
BATCH_TASK = RawTable("batch_task", "batch_task*.csv*", (
    Column("task_name", STR, True), Column("instance_num", INT, True),
    Column("job_name", STR, True), Column("task_type", STR), Column("status", STR, True),
    Column("start_time", INT), Column("end_time", INT), Column("plan_cpu", FLOAT),
    Column("plan_mem", FLOAT),
))
BATCH_INSTANCE = RawTable("batch_instance", "batch_instance*.csv*", (
    Column("instance_name", STR, True), Column("task_name", STR, True),
    Column("job_name", STR, True), Column("task_type", STR), Column("status", STR, True),
    Column("start_time", INT), Column("end_time", INT), Column("machine_id", STR),
    Column("seq_no", INT), Column("total_seq_no", INT), Column("cpu_avg", FLOAT),
    Column("cpu_max", FLOAT), Column("mem_avg", FLOAT), Column("mem_max", FLOAT),
), required=False)
CONTAINER_META = RawTable("container_meta", "container_meta*.csv*", (
    Column("container_id", STR, True), Column("machine_id", STR),
    Column("time_stamp", INT, True), Column("app_du", STR, True), Column("status", STR),
    Column("cpu_request", FLOAT), Column("cpu_limit", FLOAT), Column("mem_size", FLOAT),
), required=False)

NOTES = {
    "users": "not published: each job is its own user (user = job_id); queue 'batch' for "
             "batch jobs, 'online' for container app_du groups",
    "window_end_s": f"{WINDOW_END_S:.0f}: Running work is censored there (8-day window)",
    "not_read": "machine_usage (per machine, not per task)",
    "usage": "batch tasks: cpu_used/mem_used = cpu_avg/mem_avg of batch_instance (no series, "
             "so no task_usage rows); containers: task_usage from container_usage "
             "(percent of the container's request x its request; a sample holds until the "
             "next one), see pipeline.ingest.container_usage",
    "machines": "added at the first USING row of machine_meta; rack = failure_domain_1",
    "containers": "one task per container_id from its first to last container_meta row "
                  "(single row: to the window end), job = app_du, end_event censored",
}


class Alibaba2018:
    """Alibaba cluster-trace-v2018: machine_meta, batch_task, optional batch_instance,
    container_meta and container_usage."""

    name: ClassVar[str] = "alibaba2018"
    summary: ClassVar[str] = "Alibaba cluster-trace-v2018 (4k machines, 8 days, batch DAGs)"
    tables: ClassVar[tuple[RawTable, ...]] = (
        MACHINE_META, BATCH_TASK, BATCH_INSTANCE, CONTAINER_META, cu.CONTAINER_USAGE,
    )

    def __init__(
        self, chunk_bytes: int = CHUNK_BYTES, direct_limit: int = fuxi_sql.DIRECT_LIMIT
    ) -> None:
        self.chunk_bytes = chunk_bytes
        self.direct_limit = direct_limit

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read the raw tables under ``src``; write canonical tables into ``out``."""
        require_tables(src, self.tables, manifest)
        with_instances = "batch_instance" not in manifest.tables_absent
        self._describe(manifest, with_instances, src)
        scratch, unsorted = out / "_scratch", out / "_unsorted_tasks"
        scratch.mkdir()
        unsorted.mkdir()
        machines = self._machines(src, ledger, manifest)
        write_table(out, "machines", machines.to_arrow())
        tasks = self._tasks(src, ledger, manifest, scratch, expanding=not with_instances)
        con = fuxi_sql.connect(scratch)
        try:
            self._batch(src, ledger, manifest, scratch, unsorted, con, tasks)
            if "container_meta" not in manifest.tables_absent:
                self._containers(src, ledger, manifest, unsorted)
                if "container_usage" not in manifest.tables_absent:
                    self._container_usage(src, ledger, manifest, scratch, unsorted, out, con,
                                          machines["cpu"].max())
            elif "container_usage" not in manifest.tables_absent:
                manifest.notes["container_usage"] = "not read: its tasks come from container_meta"
            fuxi_sql.write_jobs(con, unsorted, out, ledger, tasks["job_id"].n_unique())
        finally:
            con.close()
        write_sorted(unsorted, out, "tasks", order_by="submit_s, task_id")
        shutil.rmtree(unsorted)
        shutil.rmtree(scratch)

    def _batch(
        self, src: Path, ledger: Ledger, manifest: Manifest, scratch: Path, unsorted: Path,
        con: duckdb.DuckDBPyConnection, tasks: pl.DataFrame,
    ) -> None:
        """Batch records (from instances, else expanded tasks), then their dependencies."""
        records = scratch / "records"
        records.mkdir()
        if "batch_instance" in manifest.tables_absent:
            fuxi.expand_tasks(tasks, records, ledger)
        else:
            attempts = self._attempts(src, ledger, manifest, scratch)
            fuxi_sql.assemble_instances(con, attempts, scratch / "tasks.parquet",
                                        records / "instances.parquet", ledger, "batch_instance")
        barriers = fuxi_sql.add_dependencies(
            con, sorted(records.glob("*.parquet")), scratch / "edges.parquet",
            unsorted / "batch.parquet", ledger, self.direct_limit,
        )
        manifest.notes["barrier_tasks"] = str(barriers)

    def _describe(self, manifest: Manifest, with_instances: bool, src: Path) -> None:
        manifest.units = {"cpu": "cores (plan_cpu/100)", "gpu": "none", "time": "s",
                          "mem": "normalized: 1.0 = largest machine (mem_size/100)"}
        manifest.time_origin = ("start of the 8-day cluster-trace-v2018 window (absolute date "
                                "not published)")
        self.window_end_s = set_window(manifest, src, 0.0, WINDOW_END_S,
                                       "the published window (8 days)")[1]
        tasks = ("one per batch_instance instance (JOB/TASK/INSTANCE), retries merged"
                 if with_instances else "no batch_instance: each batch_task row expanded into "
                 "instance_num tasks JOB/TASK/k over the task's span (an upper bound)")
        manifest.notes = {
            **NOTES, "tasks": tasks,
            "depends_on": f"task-name DAG; parents with <= {self.direct_limit} instances listed "
                          "per instance, larger ones through a synthetic JOB/TASK/barrier task "
                          "(cpu 0, mem 0, trace_attempts 0) depending on all their instances",
        }

    def _whole(
        self, src: Path, table: RawTable, ledger: Ledger, manifest: Manifest
    ) -> pl.DataFrame:
        return read_whole(src, table, ledger, manifest.sources, self.chunk_bytes)

    def _machines(self, src: Path, ledger: Ledger, manifest: Manifest) -> pl.DataFrame:
        rows = self._whole(src, MACHINE_META, ledger, manifest)
        ledger.use("machine_meta", rows.height)
        ledger.repair("machine_meta", "negative_time_read_as_0",
                      int((rows["time_stamp"] < 0).sum()))
        return machine_table(rows, ledger)

    def _tasks(
        self, src: Path, ledger: Ledger, manifest: Manifest, scratch: Path, *, expanding: bool
    ) -> pl.DataFrame:
        parts = []
        (scratch / "tasks").mkdir(parents=True)
        for k, (file, frame) in enumerate(iter_table(src, BATCH_TASK, ledger, manifest.sources,
                                                     self.chunk_bytes)):
            raw = frame.select(
                pl.col("job_name").alias("job_id"), "task_name", "instance_num", "status",
                pl.col("start_time").cast(pl.Float64).alias("start_raw"),
                pl.col("end_time").cast(pl.Float64).alias("end_raw"),
                fuxi.per_hundred("plan_cpu").alias("cpu"), fuxi.per_hundred("plan_mem")
                .alias("mem"), pl.lit(file, pl.Int64).alias("file"), pl.col("_line").alias("line"),
            )
            parts.append(scratch / "tasks" / f"part-{k:05d}.parquet")
            fuxi.normalize_tasks(raw, self.window_end_s).write_parquet(parts[-1])
        tasks = fuxi.dedupe_tasks(parts, ledger, "batch_task", expanding=expanding)
        tasks.write_parquet(scratch / "tasks.parquet")
        dag = resolve_dag(tasks.select("job_id", "task_name"))
        dag.edges.write_parquet(scratch / "edges.parquet")
        for reason, n in dag.repairs.items():
            ledger.repair("batch_task", reason, n)
        return tasks

    def _attempts(
        self, src: Path, ledger: Ledger, manifest: Manifest, scratch: Path
    ) -> list[Path]:
        parts = []
        (scratch / "attempts").mkdir(parents=True)
        for k, (file, frame) in enumerate(iter_table(
            src, BATCH_INSTANCE, ledger, manifest.sources, self.chunk_bytes
        )):
            raw = frame.select(
                pl.col("job_name").alias("job_id"), "task_name",
                pl.col("instance_name").alias("instance"), "seq_no", "status",
                pl.col("start_time").cast(pl.Float64).alias("start_raw"),
                pl.col("end_time").cast(pl.Float64).alias("end_raw"),
                fuxi.per_hundred("cpu_avg").alias("cpu_used"),
                fuxi.per_hundred("mem_avg").alias("mem_used"),
                pl.lit(file, pl.Int64).alias("file"), pl.col("_line").alias("line"),
                pl.col("machine_id").cast(pl.String),
            )
            parts.append(scratch / "attempts" / f"part-{k:05d}.parquet")
            fuxi.normalize_attempts(raw, self.window_end_s).write_parquet(parts[-1])
        return parts

    def _containers(
        self, src: Path, ledger: Ledger, manifest: Manifest, unsorted: Path
    ) -> None:
        rows = self._whole(src, CONTAINER_META, ledger, manifest)
        ledger.use("container_meta", rows.height)
        tasks = container_tasks(rows, ledger, self.window_end_s)
        pq.write_table(conform(tasks.to_arrow(), "tasks").append_column(
            "queue", tasks["queue"].to_arrow()), unsorted / "containers.parquet")


    def _container_usage(
        self, src: Path, ledger: Ledger, manifest: Manifest, scratch: Path, unsorted: Path,
        out: Path, con: duckdb.DuckDBPyConnection, max_cpu: float | None,
    ) -> None:
        """Container samples, block by block to scratch, then task_usage (in DuckDB)."""
        (scratch / "cusage").mkdir()
        files = []
        for k, (file, frame) in enumerate(iter_table(src, cu.CONTAINER_USAGE, ledger,
                                                     manifest.sources, self.chunk_bytes)):
            files.append(scratch / "cusage" / f"part-{k:05d}.parquet")
            cu.write_samples(frame, file, files[-1], ledger)
        cu.write_task_usage(con, files, unsorted / "containers.parquet", out, ledger,
                            None if max_cpu is None else float(max_cpu))


def machine_table(rows: pl.DataFrame, ledger: Ledger) -> pl.DataFrame:
    """One machine per machine_id that is ever ``USING``: its first such row."""
    rows = rows.sort("machine_id", "time_stamp", "_file", "_line")
    using = rows.filter(pl.col("status") == "USING").unique(
        "machine_id", keep="first", maintain_order=True
    )
    ids = rows["machine_id"].n_unique()
    ledger.drop("machines", "never_in_service", ids - using.height)
    usable = ((pl.col("cpu_num") > 0) & (pl.col("mem_size") > 0)
              & (pl.col("mem_size") <= 100)).fill_null(False)
    ledger.drop("machines", "no_capacity", using.filter(~usable).height)
    return using.filter(usable).select(
        "machine_id", pl.col("cpu_num").cast(pl.Float64).alias("cpu"),
        fuxi.per_hundred("mem_size").alias("mem"), pl.lit(0.0).alias("gpu"),
        pl.col("failure_domain_1").cast(pl.String).alias("rack"), pl.lit(1.0).alias("speed"),
        pl.max_horizontal(pl.col("time_stamp"), 0).cast(pl.Float64).alias("added_s"),
        pl.lit(None, pl.Float64).alias("removed_s"),
    )


def container_tasks(rows: pl.DataFrame, ledger: Ledger,
                    window_end_s: float = WINDOW_END_S) -> pl.DataFrame:
    """One long-running task per container, from its first to its last row."""
    cpu, mem = pl.col("cpu_request"), pl.col("mem_size")
    valid_cpu = pl.when(cpu >= 0).then(cpu)
    valid_mem = pl.when((mem >= 0) & (mem <= 100)).then(mem)
    per = rows.sort("container_id", "time_stamp", "_file", "_line").group_by(
        "container_id", maintain_order=True
    ).agg(
        pl.col("app_du").first(), pl.col("time_stamp").min().alias("first"),
        pl.col("machine_id").drop_nulls().first().alias("machine_id"),
        pl.col("time_stamp").max().alias("last"), valid_cpu.max().alias("cpu"),
        valid_mem.max().alias("mem"),
        (valid_cpu.drop_nulls().n_unique() + valid_mem.drop_nulls().n_unique() > 2)
        .alias("resized"),
    )
    per = per.with_columns(fuxi.per_hundred("cpu"), fuxi.per_hundred("mem"))
    bad = per["cpu"].is_null() | per["mem"].is_null()
    ledger.drop("tasks", "invalid_resource_request", int(bad.sum()))
    per = per.filter(~bad)
    submit = pl.max_horizontal(pl.col("first"), 0).cast(pl.Float64)
    single = pl.col("last") <= submit
    end = pl.when(single).then(pl.max_horizontal(pl.lit(window_end_s), submit + 1.0)).otherwise(
        pl.col("last"))
    ledger.repair("tasks", "started_before_trace", int((per["first"] <= 0).sum()))
    ledger.repair("tasks", "single_row_run_to_window_end", int(per.select(single.sum()).item()))
    ledger.repair("tasks", "container_resized_took_max", int(per["resized"].sum()))
    return per.select(
        pl.col("container_id").alias("task_id"), pl.col("app_du").alias("job_id"),
        submit.alias("submit_s"), (end - submit).cast(pl.Float64).alias("duration_s"),
        "cpu", "mem", pl.lit(0.0).alias("gpu"), pl.lit("censored").alias("end_event"),
        pl.lit("online").alias("queue"),
        pl.col("machine_id").cast(pl.String).alias("recorded_machine_id"),
        submit.alias("recorded_start_s"),
    ).sort("task_id")

