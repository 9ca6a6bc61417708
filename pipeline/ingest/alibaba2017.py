"""Alibaba ``cluster-trace-v2017`` (ClusterData201708) -> canonical trace.

Source: alibaba/clusterdata ``cluster-trace-v2017/schema.csv`` and ``trace_201708.md``.
Times are seconds from the trace start; 0 and negative values mean "before the trace".

Mapping decisions (what, why):

- machines: one per ``server_event`` machine with an ``add`` row; ``cpu`` = number of CPUs
  (cores, not normalized in 2017), ``mem`` = normalized memory (largest machine = 1.0),
  ``added_s`` = first add (a negative time is read as 0, counted as the ``server_event``
  repair ``negative_time_read_as_0``).  An add without capacity is dropped
  (``no_capacity``).  ``softerror`` / ``harderror`` rows ("no new work should be placed")
  open a ``machine_downtime`` interval that the machine's next ``add`` closes; errors inside an
  open interval merge into it.  The published file has no such later add, so intervals stay
  open (``up_s`` null; repair ``no_recovery_event``).
- jobs: one per ``batch_task`` job id with an emitted task; users are not published, so each
  job is its own user (fair-share policies then share between jobs); queue ``batch``.
- tasks: one per ``batch_instance`` row when that table is present (``JOB/TASK/FILE-LINE``:
  2017 instances have no id, so retries cannot be linked and each attempt row is its own
  task), with real cpu/mem averages as ``cpu_used``/``mem_used``; otherwise each
  ``batch_task`` row becomes ``instance_num`` tasks (``JOB/TASK/k``) spanning the task's
  create..end times, an upper bound on each instance's duration.  ``plan_cpu`` is in percent of
  a core (50 = half a core) -> cores; ``plan_mem`` is normalized like machines.  Statuses and
  timestamps are decided in :mod:`pipeline.ingest.fuxi`; ``Running`` work is censored at
  ``WINDOW_END_S`` (batch data spans about 24 h).  No dependencies are published in 2017.
- not read: ``server_usage``, ``container_event``, ``container_usage`` (usage series and
  online containers; named in ``manifest.notes``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import polars as pl

from pipeline.ingest import fuxi, fuxi_sql
from pipeline.ingest.base import require_tables
from pipeline.ingest.chunks import CHUNK_BYTES, iter_table, read_whole
from pipeline.ingest.csvparts import FLOAT, INT, STR, Column, RawTable
from pipeline.ingest.finalize import write_sorted
from pipeline.ingest.window import set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest

WINDOW_END_S = 86_400.0
ERROR_EVENTS = ("softerror", "harderror")

SERVER_EVENT = RawTable("server_event", "server_event*.csv*", (
    Column("timestamp", INT, True), Column("machine_id", INT, True),
    Column("event_type", STR, True), Column("event_detail", STR), Column("cpus", INT),
    Column("mem", FLOAT), Column("disk", FLOAT),
))
BATCH_TASK = RawTable("batch_task", "batch_task*.csv*", (
    Column("create_time", INT, True), Column("end_time", INT), Column("job_id", INT, True),
    Column("task_id", INT, True), Column("instance_num", INT, True),
    Column("status", STR, True), Column("plan_cpu", FLOAT), Column("plan_mem", FLOAT),
))
BATCH_INSTANCE = RawTable("batch_instance", "batch_instance*.csv*", (
    Column("start_time", INT, True), Column("end_time", INT), Column("job_id", INT, True),
    Column("task_id", INT, True), Column("machine_id", INT), Column("status", STR, True),
    Column("seq_no", INT), Column("total_seq_no", INT), Column("cpu_max", FLOAT),
    Column("cpu_avg", FLOAT), Column("mem_max", FLOAT), Column("mem_avg", FLOAT),
), required=False)

NOTES = {
    "users": "not published: each job is its own user (user = job_id), queue 'batch'",
    "window_end_s": f"{WINDOW_END_S:.0f}: Running work is censored there (batch spans ~24 h)",
    "depends_on": "none: the 2017 trace publishes no task dependencies",
    "machine_downtime": "softerror/harderror rows open an interval; the machine's next add "
                        "closes it (none published: up_s null)",
    "not_read": "server_usage, container_event, container_usage (usage series and online "
                "containers, not needed for batch tasks)",
}
TASKS_FROM_INSTANCES = (
    "one per batch_instance row, id JOB/TASK/FILE-LINE (2017 instances have no id, so each "
    "attempt row is its own task); requests from batch_task, usage from real cpu/mem avg"
)
TASKS_FROM_TASKS = (
    "no batch_instance: each batch_task row expanded into instance_num tasks JOB/TASK/k with "
    "the task's create..end span (an upper bound on each instance's duration)"
)


class Alibaba2017:
    """Alibaba cluster-trace-v2017: server_event, batch_task, optional batch_instance."""

    name: ClassVar[str] = "alibaba2017"
    summary: ClassVar[str] = "Alibaba cluster-trace-v2017 (1.3k machines, 24 h, batch jobs)"
    tables: ClassVar[tuple[RawTable, ...]] = (SERVER_EVENT, BATCH_TASK, BATCH_INSTANCE)

    def __init__(self, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.chunk_bytes = chunk_bytes

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read the raw tables under ``src``; write canonical tables into ``out``."""
        require_tables(src, self.tables, manifest)
        with_instances = "batch_instance" not in manifest.tables_absent
        manifest.units = {"cpu": "cores (plan_cpu/100)", "gpu": "none", "time": "s",
                          "mem": "normalized: 1.0 = largest machine"}
        manifest.time_origin = ("start of the ClusterData201708 batch window (absolute date "
                                "not published); 0 and negative raw times = before the trace")
        manifest.notes = {**NOTES, "tasks": TASKS_FROM_INSTANCES if with_instances
                          else TASKS_FROM_TASKS}
        self.window_end_s = set_window(manifest, src, 0.0, WINDOW_END_S,
                                       "the published batch window (about 24 h)")[1]
        scratch, unsorted = out / "_scratch", out / "_unsorted_tasks"
        unsorted.mkdir(parents=True)
        self._machines(src, out, ledger, manifest)
        tasks = self._tasks(src, ledger, manifest, scratch, expanding=not with_instances)
        con = fuxi_sql.connect(scratch)
        try:
            if with_instances:
                attempts = self._attempts(src, ledger, manifest, scratch)
                fuxi_sql.assemble_instances(con, attempts, scratch / "tasks.parquet",
                                            unsorted / "batch.parquet", ledger, "batch_instance")
            else:
                fuxi.expand_tasks(tasks, unsorted, ledger)
            fuxi_sql.write_jobs(con, unsorted, out, ledger, tasks["job_id"].n_unique())
        finally:
            con.close()
        write_sorted(unsorted, out, "tasks", order_by="submit_s, task_id")
        shutil.rmtree(unsorted)
        shutil.rmtree(scratch)

    def _machines(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        events = read_whole(src, SERVER_EVENT, ledger, manifest.sources, self.chunk_bytes)
        known = events["event_type"].is_in(["add", *ERROR_EVENTS])
        ledger.reject("server_event", "unknown_event_type", int((~known).sum()))
        events = events.filter(known).with_columns(
            pl.col("machine_id").cast(pl.String),
            pl.max_horizontal(pl.col("timestamp"), 0).cast(pl.Float64).alias("t"),
        )
        added = events.filter(pl.col("event_type") == "add")["machine_id"].implode()
        orphan = events["machine_id"].is_in(added).not_()
        ledger.reject("server_event", "error_for_machine_never_added", int(orphan.sum()))
        ledger.use("server_event", int((~orphan).sum()))
        events = events.filter(~orphan)
        # Documented: negative times are before the trace; read as 0, and counted.
        ledger.repair("server_event", "negative_time_read_as_0",
                      int((events["timestamp"] < 0).sum()))
        machines = machine_table(events, ledger)
        write_table(out, "machines", machines.to_arrow())
        downtime = downtime_table(events, machines, ledger)
        write_table(out, "machine_downtime", downtime.to_arrow())

    def _tasks(
        self, src: Path, ledger: Ledger, manifest: Manifest, scratch: Path, *, expanding: bool
    ) -> pl.DataFrame:
        parts = []
        (scratch / "tasks").mkdir(parents=True)
        for k, (file, frame) in enumerate(iter_table(src, BATCH_TASK, ledger, manifest.sources,
                                                     self.chunk_bytes)):
            raw = frame.select(
                pl.col("job_id").cast(pl.String), pl.col("task_id").cast(pl.String)
                .alias("task_name"), "instance_num", "status",
                pl.col("create_time").cast(pl.Float64).alias("start_raw"),
                pl.col("end_time").cast(pl.Float64).alias("end_raw"),
                fuxi.per_hundred("plan_cpu").alias("cpu"), pl.col("plan_mem").alias("mem"),
                pl.lit(file, pl.Int64).alias("file"), pl.col("_line").alias("line"),
            )
            parts.append(scratch / "tasks" / f"part-{k:05d}.parquet")
            fuxi.normalize_tasks(raw, self.window_end_s).write_parquet(parts[-1])
        tasks = fuxi.dedupe_tasks(parts, ledger, "batch_task", expanding=expanding)
        tasks.write_parquet(scratch / "tasks.parquet")
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
                pl.col("job_id").cast(pl.String), pl.col("task_id").cast(pl.String)
                .alias("task_name"),
                pl.format("{}-{}", pl.lit(file), pl.col("_line")).alias("instance"), "seq_no",
                "status", pl.col("start_time").cast(pl.Float64).alias("start_raw"),
                pl.col("end_time").cast(pl.Float64).alias("end_raw"),
                pl.col("cpu_avg").alias("cpu_used"), pl.col("mem_avg").alias("mem_used"),
                pl.lit(file, pl.Int64).alias("file"), pl.col("_line").alias("line"),
                pl.col("machine_id").cast(pl.String),
            )
            parts.append(scratch / "attempts" / f"part-{k:05d}.parquet")
            fuxi.normalize_attempts(raw, self.window_end_s).write_parquet(parts[-1])
        return parts


def machine_table(events: pl.DataFrame, ledger: Ledger) -> pl.DataFrame:
    """One machine per machine_id with an add row: first add's capacity and time."""
    adds = events.filter(pl.col("event_type") == "add").sort("t", "_file", "_line").unique(
        "machine_id", keep="first", maintain_order=True
    )
    usable = (pl.col("cpus") > 0) & (pl.col("mem") > 0)
    ledger.drop("machines", "no_capacity", adds.filter(~usable.fill_null(False)).height)
    return adds.filter(usable.fill_null(False)).select(
        "machine_id", pl.col("cpus").cast(pl.Float64).alias("cpu"), "mem",
        pl.lit(0.0).alias("gpu"), pl.lit(None, pl.String).alias("rack"),
        pl.lit(1.0).alias("speed"), pl.col("t").alias("added_s"),
        pl.lit(None, pl.Float64).alias("removed_s"),
    ).sort("machine_id")


def downtime_table(events: pl.DataFrame, machines: pl.DataFrame, ledger: Ledger) -> pl.DataFrame:
    """Error intervals per machine: from an error to the machine's next add (or open)."""
    errors = events.filter(pl.col("event_type").is_in(ERROR_EVENTS))
    known = errors["machine_id"].is_in(machines["machine_id"].implode())
    ledger.drop("machine_downtime", "machine_dropped", int((~known).sum()))
    errors = errors.filter(known)
    adds = events.filter(pl.col("event_type") == "add").select(
        "machine_id", "t", pl.col("t").alias("up_s")
    )
    spans = errors.select("machine_id", "t").sort("t").join_asof(
        adds.sort("t"), on="t", by="machine_id", strategy="forward",
        allow_exact_matches=False, check_sortedness=False,
    )
    downtime = spans.group_by("machine_id", "up_s").agg(pl.col("t").min().alias("down_s"))
    ledger.repair("machine_downtime", "no_recovery_event", int(downtime["up_s"].is_null().sum()))
    return downtime.select("machine_id", "down_s", "up_s").sort("machine_id", "down_s")
