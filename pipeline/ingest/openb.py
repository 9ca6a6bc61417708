"""Alibaba ``cluster-trace-gpu-v2023`` ("openb", a Kubernetes GPU-sharing cluster) -> canonical.

Source: alibaba/clusterdata ``cluster-trace-gpu-v2023/README.md`` and the two CSV files (with
a header row): ``openb_node_list_all_node.csv`` (``sn, cpu_milli, memory_mib, gpu, model``)
and ``openb_pod_list_*.csv`` (``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec,
qos, pod_phase, creation_time, deletion_time, scheduled_time``; seconds).  The trace was
published with Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23.

Mapping decisions (what, why):

- machines: one per node; ``cpu`` = ``cpu_milli``/1000 cores, ``mem`` = ``memory_mib``/1024
  GiB, ``gpu`` = the number of devices, ``gpu_model`` = ``model`` (null on CPU-only nodes;
  G1/G2/G3 are the publisher's undisclosed codes, kept as names).  No racks, no removals.
- pods: each pod is a job of one task (``job_id`` = ``task_id`` = ``name``).  Users are not
  published: each pod is its own user.  ``queue`` = ``qos`` (LS, BE, Burstable, Guaranteed).
- GPU request: ``num_gpu`` = 1 with ``gpu_milli`` < 1000 is a share of one device (``gpu`` =
  ``gpu_milli``/1000, below 1); otherwise ``gpu`` = ``num_gpu`` whole devices.  A share with
  ``num_gpu`` > 1, ``gpu_milli`` > 1000 or ``gpu_milli`` without a GPU is impossible in the
  published model: rejected by reason.  ``gpu_spec`` (``|``-separated models) becomes the
  list of allowed models; a model no node has is kept (such a pod is unschedulable in a
  replay) and counted (repair ``gpu_spec_model_absent``); so is a pod asking for more GPUs
  than the largest node has (``more_gpus_than_any_node``).
- times: ``submit_s`` = ``creation_time``; a scheduled pod runs from ``scheduled_time`` to
  ``deletion_time`` (``recorded_start_s`` = ``scheduled_time``; the node is not published); a
  pod never scheduled (``Pending``, no ``scheduled_time``) asks for ``deletion_time`` -
  ``creation_time`` of run time and has ``trace_attempts`` 0.  A pod deleted at the last
  deletion time of the file (the trace's end) is ``censored``; otherwise ``end_event`` is
  ``failed`` for Failed, ``killed`` for Pending (deleted without running) and ``finished``
  for Succeeded and Running: ``pod_phase`` is the last phase before deletion, and most pods
  are long-running services whose deletion by their owner is their normal end.  A pod
  deleted before it was created or scheduled before it was
  created is rejected; one deleted the second it started gets 1 s of run time (repair
  ``zero_run_time_set_to_1s``: the format has whole seconds and a run must be > 0).
- window: 0 to the last deletion time (the published span, about 149 days).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import polars as pl

from pipeline.errors import TraceError
from pipeline.ingest.base import require_tables
from pipeline.ingest.chunks import read_whole
from pipeline.ingest.csvparts import FLOAT, INT, STR, Column, RawTable
from pipeline.ingest.limits import (
    MAX_MACHINE_CORES,
    MAX_MACHINE_GPUS,
    MAX_MACHINE_MEM_MIB,
    MAX_SPAN_S,
)
from pipeline.ingest.window import set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.schema import conform

CPU_MILLI_MAX = MAX_MACHINE_CORES * 1000.0  # (pipeline.ingest.limits: past it, rejected)
NODES = RawTable("node_list", "openb_node_list*.csv", (
    Column("sn", STR, True), Column("cpu_milli", FLOAT, True, True, CPU_MILLI_MAX),
    Column("memory_mib", FLOAT, True, True, MAX_MACHINE_MEM_MIB),
    Column("gpu", INT, True, True, MAX_MACHINE_GPUS), Column("model", STR),
), header=True)
PODS = RawTable("pod_list", "openb_pod_list*.csv", (
    Column("name", STR, True), Column("cpu_milli", FLOAT, True, True, CPU_MILLI_MAX),
    Column("memory_mib", FLOAT, True, True, MAX_MACHINE_MEM_MIB),
    Column("num_gpu", INT, True, True, MAX_MACHINE_GPUS),
    Column("gpu_milli", INT, True, True), Column("gpu_spec", STR), Column("qos", STR),
    Column("pod_phase", STR, True), Column("creation_time", FLOAT, True, True, MAX_SPAN_S),
    Column("deletion_time", FLOAT, True, True, MAX_SPAN_S),
    Column("scheduled_time", FLOAT, False, True, MAX_SPAN_S),
), header=True)

MILLI = 1000.0
END_EVENTS = {"Succeeded": "finished", "Running": "finished", "Failed": "failed",
              "Pending": "killed"}
NOTES = {
    "users": "not published: each pod is its own user and job; queue = qos",
    "gpu": "a share of one device (num_gpu 1, gpu_milli < 1000) is gpu = gpu_milli/1000; "
           "otherwise gpu = num_gpu whole devices; gpu_spec = allowed models",
    "times": "scheduled pods run scheduled_time..deletion_time; Pending pods (never scheduled) "
             "ask for deletion_time - creation_time with trace_attempts 0",
    "end_event": "censored at the last deletion time; else Succeeded and Running (deleted by "
                 "the owner) finished, Failed failed, Pending (deleted unscheduled) killed",
    "not_published": "node of each pod (recorded_machine_id), racks, users",
}


class Openb:
    """Alibaba cluster-trace-gpu-v2023 (openb): node list and pod list."""

    name: ClassVar[str] = "alibaba-gpu2023"
    summary: ClassVar[str] = "Alibaba GPU 2023 openb (1,523 nodes, 8,152 pods, GPU sharing)"
    tables: ClassVar[tuple[RawTable, ...]] = (NODES, PODS)

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read the node and pod lists under ``src``; write canonical tables into ``out``."""
        require_tables(src, self.tables, manifest)
        for table in self.tables:
            for path in table.files(src):
                _check_header(path, table)
        manifest.units = {"cpu": "cores (cpu_milli/1000)", "mem": "GiB (memory_mib/1024)",
                          "gpu": "devices (a value below 1: a share of one device)",
                          "time": "s"}
        manifest.time_origin = "the first pod's creation (the trace's own origin)"
        manifest.notes = dict(NOTES)
        machines = self._machines(src, ledger, manifest)
        write_table(out, "machines", conform(machines.to_arrow(), "machines"))
        pods = read_whole(src, PODS, ledger, manifest.sources)
        if pods.is_empty():
            raise TraceError("pod_list: no usable rows", src)
        end_s = float(pods["deletion_time"].max())
        set_window(manifest, src, 0.0, end_s, "0 to the last deletion_time (the published span)")
        tasks = self._tasks(pods, machines, end_s, ledger)
        write_table(out, "jobs", conform(_jobs(tasks).to_arrow(), "jobs"))
        write_table(out, "tasks", conform(tasks.drop("queue", "user").to_arrow(), "tasks"))

    def _machines(self, src: Path, ledger: Ledger, manifest: Manifest) -> pl.DataFrame:
        nodes = read_whole(src, NODES, ledger, manifest.sources)
        zero = (nodes["cpu_milli"] <= 0) | (nodes["memory_mib"] <= 0)
        ledger.reject("node_list", "no_capacity", int(zero.sum()))
        nodes = nodes.filter(~zero)
        repeated = nodes["sn"].is_duplicated() & ~nodes["sn"].is_first_distinct()
        ledger.reject("node_list", "repeated_node", int(repeated.sum()))
        nodes = nodes.filter(~repeated)
        ledger.use("node_list", nodes.height)
        return nodes.select(
            pl.col("sn").alias("machine_id"), (pl.col("cpu_milli") / MILLI).alias("cpu"),
            (pl.col("memory_mib") / 1024.0).alias("mem"), pl.col("gpu").cast(pl.Float64),
            pl.lit(1.0).alias("speed"), pl.lit(0.0).alias("added_s"),
            pl.when(pl.col("gpu") > 0).then(pl.col("model")).alias("gpu_model"),
        )

    def _tasks(self, pods: pl.DataFrame, machines: pl.DataFrame, end_s: float,
               ledger: Ledger) -> pl.DataFrame:
        pods = _reject(pods, ledger)
        ledger.use("pod_list", pods.height)
        known = set(machines["gpu_model"].drop_nulls().to_list())
        spec = pl.col("gpu_spec").str.split("|")
        absent = pods.select(spec.list.eval(pl.element().is_in(list(known)).not_()).list.all()
                             .fill_null(False)).to_series()
        ledger.repair("tasks", "gpu_spec_model_absent", int(absent.sum()))
        ledger.repair("tasks", "more_gpus_than_any_node",
                      int((pods["num_gpu"] > machines["gpu"].max()).sum()))
        start = pl.coalesce("scheduled_time", "creation_time")
        run = pl.col("deletion_time") - start
        ledger.repair("tasks", "zero_run_time_set_to_1s", int(pods.select((run <= 0).sum()).item()))
        ledger.repair("tasks", "unknown_pod_phase_read_as_killed",
                      int((~pods["pod_phase"].is_in(list(END_EVENTS))).sum()))
        share = (pl.col("num_gpu") == 1) & (pl.col("gpu_milli") < MILLI)
        deleted_at_end = pl.col("deletion_time") >= end_s
        return pods.sort("creation_time", "name").select(
            pl.col("name").alias("task_id"), pl.col("name").alias("job_id"),
            pl.col("creation_time").alias("submit_s"),
            pl.when(run > 0).then(run).otherwise(1.0).alias("duration_s"),
            (pl.col("cpu_milli") / MILLI).alias("cpu"),
            (pl.col("memory_mib") / 1024.0).alias("mem"),
            pl.when(share).then(pl.col("gpu_milli") / MILLI)
            .otherwise(pl.col("num_gpu").cast(pl.Float64)).alias("gpu"),
            pl.when(deleted_at_end).then(pl.lit("censored"))
            .otherwise(pl.col("pod_phase").replace_strict(END_EVENTS, default="killed"))
            .alias("end_event"),
            pl.col("scheduled_time").is_not_null().cast(pl.Int32).alias("trace_attempts"),
            pl.col("scheduled_time").alias("recorded_start_s"),
            spec.alias("gpu_spec"), pl.col("qos").alias("queue"), pl.col("name").alias("user"),
            pl.col("pod_phase"),
        )


def _reject(pods: pl.DataFrame, ledger: Ledger) -> pl.DataFrame:
    """Drop pods the published model cannot express, counted by reason (first reason wins)."""
    rules = {
        "gpu_milli_above_1000": pl.col("gpu_milli") > MILLI,
        "gpu_milli_without_gpu": (pl.col("num_gpu") == 0) & (pl.col("gpu_milli") > 0),
        "gpu_without_gpu_milli": (pl.col("num_gpu") > 0) & (pl.col("gpu_milli") == 0),
        "share_over_several_gpus": (pl.col("num_gpu") > 1) & (pl.col("gpu_milli") < MILLI),
        "deleted_before_created": pl.col("deletion_time") < pl.col("creation_time"),
        "scheduled_before_created": pl.col("scheduled_time") < pl.col("creation_time"),
        "scheduled_after_deleted": pl.col("scheduled_time") > pl.col("deletion_time"),
        "repeated_pod": pl.col("name").is_duplicated() & ~pl.col("name").is_first_distinct(),
    }
    flags = pods.select(expr.fill_null(False).alias(reason) for reason, expr in rules.items())
    bad = pl.Series([False] * pods.height)
    for reason in flags.columns:
        hit = flags[reason] & ~bad
        n = int(hit.sum())
        if n:
            line = int(pods["_line"].filter(hit)[0])
            ledger.reject("pod_list", reason, n, path="openb_pod_list", line=line,
                          field_name=reason)
            bad = bad | hit
    return pods.filter(~bad)


def _check_header(path: Path, table: RawTable) -> None:
    """A file whose header row is not the published one is a one-line error (its columns
    would be read under the wrong names)."""
    with path.open("rb") as handle:
        got = handle.readline().decode("utf-8", "replace").strip().split(",")
    expected = [c.name for c in table.columns]
    if got != expected:
        wrong = next((f"column {i + 1} is {g!r}, expected {e!r}" for i, (g, e)
                      in enumerate(zip(got, expected, strict=False)) if g != e),
                     f"{len(got)} columns, expected {len(expected)}")
        raise TraceError(f"header row is not openb's {table.name} header: {wrong}", path,
                         field="header")


def _jobs(tasks: pl.DataFrame) -> pl.DataFrame:
    return tasks.select("job_id", "user", "queue", "submit_s", pl.col("job_id").alias("name"))
