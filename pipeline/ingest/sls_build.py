"""Assembling the SLS/Rumen records into canonical rows: accounting, nodes, dependencies.

:class:`TraceBuilder` takes one decoded job object at a time (from :mod:`.sls`), counts it and
each of its tasks in the ledger (used, or rejected by reason), places its tasks on the
:class:`Topology`, adds the map -> reduce dependencies and buffers the task rows into
unsorted Parquet parts whose times are still the source's milliseconds: the origin (the
earliest Rumen time) is known only once every file is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.ingest.fuxi_sql import BARRIER_DURATION_S, DIRECT_LIMIT
from pipeline.ingest.sls_records import MAP, REDUCE, Host, JobRecord, Rejected, TaskRecord
from pipeline.trace.manifest import Ledger

PART_ROWS = 200_000
BARRIER = "maps-done"
TASK_LISTS = ("job.tasks", "mapTasks", "reduceTasks", "otherTasks")
UNSORTED = pa.schema([
    ("task_id", pa.string()), ("job_id", pa.string()), ("clock", pa.string()),
    ("submit_ms", pa.float64()), ("duration_s", pa.float64()), ("cpu", pa.float64()),
    ("mem", pa.float64()), ("cpu_used", pa.float64()), ("mem_used", pa.float64()),
    ("inputs", pa.list_(pa.string())), ("input_mb", pa.float64()),
    ("depends_on", pa.list_(pa.string())), ("end_event", pa.string()),
    ("trace_attempts", pa.int32()), ("trace_lost_s", pa.float64()), ("synthetic", pa.bool_()),
    ("recorded_machine_id", pa.string()), ("start_ms", pa.float64()), ("task_kind", pa.string()),
    ("seq", pa.int64()),
])
JobParser = Callable[[dict[str, Any]], JobRecord]
TaskParser = Callable[[JobRecord, int, str | None, Any], list[TaskRecord]]


class Topology:
    """The cluster's nodes: those of the topology files when given, else every host named."""

    def __init__(self) -> None:
        self.racks: dict[str, str | None] = {}
        self.given = False
        self.conflicts: set[str] = set()

    def add(self, host: Host) -> None:
        """Add a node (the first rack it is named under is kept; later ones are counted)."""
        if self.racks.setdefault(host.name, host.rack) != host.rack:
            self.conflicts.add(host.name)

    def __contains__(self, host: Host) -> bool:
        return host.name in self.racks

    def machines(self, vcores: float, memory_mb: float) -> pa.Table:
        """One machine per node, all of the SLS node size, present the whole trace."""
        names = sorted(self.racks)
        n = len(names)
        return pa.table({
            "machine_id": names, "cpu": [vcores] * n, "mem": [memory_mb] * n, "gpu": [0.0] * n,
            "rack": [self.racks[name] for name in names], "speed": [1.0] * n,
            "added_s": [0.0] * n, "removed_s": pa.nulls(n, pa.float64()),
        })


class TraceBuilder:
    """Counts, places and buffers the jobs and tasks of every job file, in file order."""

    def __init__(self, topology: Topology, ledger: Ledger, unsorted: Path) -> None:
        self.topology, self.ledger, self.unsorted = topology, ledger, unsorted
        self.jobs: list[dict[str, Any]] = []
        self.job_ids: set[str] = set()
        self.bounds: dict[str, list[float]] = {}  # clock -> [earliest ms, latest end ms]
        self.rows: list[dict[str, Any]] = []
        self.parts = 0
        self.emitted = 0  # task rows so far: ``seq`` keeps the first of a duplicated task_id
        self.barriers = 0
        self.reduces_overlapping_maps = 0
        unsorted.mkdir(parents=True)

    def add(self, obj: dict[str, Any], tables: tuple[str, str], parse_job: JobParser,
            parse_tasks: TaskParser, where: tuple[str, int]) -> None:
        """Count one job object and its tasks; buffer the tasks that are usable."""
        jobs_table, tasks_table = tables
        self.ledger.read(jobs_table, 1)
        try:
            job = parse_job(obj)
            if job.job_id in self.job_ids:
                raise Rejected("duplicate", "job_id")
        except Rejected as bad:
            self._reject(jobs_table, bad, where)
            n = sum(len(obj[k]) for k in TASK_LISTS if isinstance(obj.get(k), list))
            self.ledger.read(tasks_table, n)
            self.ledger.reject(tasks_table, "job_rejected", n)
            return
        self.ledger.use(jobs_table, 1)
        self.job_ids.add(job.job_id)
        records = self._tasks(job, tasks_table, parse_tasks, where)
        if not records:
            self.ledger.drop("jobs", "no_usable_tasks")
            return
        for reason in job.repairs:
            self.ledger.repair("jobs", reason)
        for record in records:
            self._place(record)
        records += self._dependencies(job, records)
        self._emit(job, records)

    def _reject(self, table: str, bad: Rejected, where: tuple[str, int]) -> None:
        self.ledger.reject(table, bad.reason, path=where[0], line=where[1],
                           field_name=bad.field_name)

    def _tasks(self, job: JobRecord, table: str, parse: TaskParser,
               where: tuple[str, int]) -> list[TaskRecord]:
        records: list[TaskRecord] = []
        seen: set[str] = set()
        for index, (kind, raw) in enumerate(job.tasks):
            self.ledger.read(table, 1)
            try:
                got = parse(job, index, kind, raw)
                if any(r.task_id in seen for r in got):
                    raise Rejected("duplicate", "task_id")
            except Rejected as bad:
                self._reject(table, bad, where)
                continue
            self.ledger.use(table, 1)
            seen.update(r.task_id for r in got)
            records += got
        return records

    def _place(self, record: TaskRecord) -> None:
        """Name the task's nodes in the topology, or drop (counted) those it lacks."""
        topology = self.topology
        if not topology.given:
            for host in [*record.other_hosts, *([record.host] if record.host else []),
                         *(record.inputs or [])]:
                topology.add(host)
        else:
            if record.host is not None and record.host not in topology:
                record.host = None
                record.repairs.append("recorded_host_not_in_topology")
            if record.inputs:
                kept = [h for h in record.inputs if h in topology]
                if len(kept) < len(record.inputs):
                    record.repairs.append("preferred_host_not_in_topology")
                record.inputs = kept or None
        for reason in record.repairs:
            self.ledger.repair("tasks", reason)

    def _dependencies(self, job: JobRecord, records: list[TaskRecord]) -> list[TaskRecord]:
        """Reduces wait for every map of their job (through one barrier when maps are many);
        returns the barrier task added, if any."""
        maps = [r for r in records if r.kind == MAP]
        reduces = [r for r in records if r.kind == REDUCE]
        if not (job.mapreduce and maps and reduces):
            return []
        parents, added = [m.task_id for m in maps], []
        if len(parents) > DIRECT_LIMIT:
            barrier = TaskRecord(f"{job.job_id}/{BARRIER}", None,
                                 min(m.submit_ms for m in maps), BARRIER_DURATION_S * 1000.0,
                                 0.0, 0.0, None, None, attempts=0, depends_on=parents,
                                 synthetic=True)
            parents, added = [barrier.task_id], [barrier]
            self.barriers += 1
        maps_done = max((m.start_ms or m.submit_ms) + m.duration_ms for m in maps)
        for reduce in reduces:
            reduce.depends_on = parents
            if reduce.start_ms is not None and reduce.start_ms < maps_done:
                self.reduces_overlapping_maps += 1
        return added

    def _emit(self, job: JobRecord, records: list[TaskRecord]) -> None:
        bounds = self.bounds.setdefault(job.clock, [job.submit_ms, job.submit_ms])
        bounds[0] = min(bounds[0], job.submit_ms, *(r.submit_ms for r in records))
        ends = [(r.start_ms if r.start_ms is not None else r.submit_ms) + r.duration_ms
                for r in records]
        bounds[1] = max(bounds[1], job.end_ms or 0.0, *ends)
        self.jobs.append({"job_id": job.job_id, "user": job.user, "queue": job.queue,
                          "name": job.name, "submit_ms": job.submit_ms, "clock": job.clock})
        self.rows += [{**_row(job, r), "seq": self.emitted + k} for k, r in enumerate(records)]
        self.emitted += len(records)
        if len(self.rows) >= PART_ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the buffered task rows as the next unsorted part."""
        if self.rows:
            table = pa.Table.from_pylist(self.rows, schema=UNSORTED)
            pq.write_table(table, self.unsorted / f"part-{self.parts:05d}.parquet")
            self.parts += 1
            self.rows = []


def _row(job: JobRecord, r: TaskRecord) -> dict[str, Any]:
    """The unsorted row of a task (times in the job's source milliseconds)."""
    return {
        "task_id": r.task_id, "job_id": job.job_id, "clock": job.clock,
        "submit_ms": r.submit_ms, "duration_s": r.duration_ms / 1000.0, "cpu": r.cpu,
        "mem": r.mem, "cpu_used": r.cpu_used, "mem_used": r.mem_used,
        "inputs": [h.name for h in r.inputs] if r.inputs else None, "input_mb": r.input_mb,
        "depends_on": r.depends_on, "end_event": r.end_event, "trace_attempts": r.attempts,
        "trace_lost_s": r.lost_ms / 1000.0, "synthetic": r.synthetic,
        "recorded_machine_id": r.host.name if r.host else None, "start_ms": r.start_ms,
        "task_kind": r.kind,
    }
