"""Google cluster-usage traces v3 (``clusterdata-2019``, 8 Borg cells, May 2019) -> canonical.

Sources: ``clusterdata_trace_format_v3.proto`` and the "Google cluster-usage traces v3"
document (2020-04-01).  One cell is ingested at a time: the GCS export of a cell (bucket
``clusterdata_2019_X``) holds each table as gzipped newline-delimited JSON parts
``TABLE-NNNNNNNNNNNN.json.gz`` (:mod:`.tables`, read by :mod:`.ndjson`).  Required:
``machine_events``, ``collection_events``, ``instance_events``; optional ``instance_usage``.
``machine_attributes`` is not read (constraints are not replayed).

Times: microseconds since 600 s before the window -> seconds from the window start (1 May
2019 00:00 PDT); 0 ("before the window") -> 0; events stamped 2^63-1 ("after the window")
are rejected rows (``after_window``); times inside the offset read as 0 (counted).  The
window is the published month, 31 days, unless ``generated.json`` states another
(:mod:`pipeline.ingest.window`); tasks still running at its end are censored there.

Units: CPU in NCUs and memory normalized, both so that 1.0 is the largest machine of all
v3 traces (the document's "Resource units"); requests, usage and capacities share them.

Mapping (each module lists its repairs, drops and rejects):

- machines (:mod:`.machines`): ``machine_events`` ADD/REMOVE/UPDATE -> capacity (largest),
  ``rack`` = ``switch_id``, ``platform`` = ``platform_id``, ``added_s``/``removed_s`` and
  ``machine_downtime``.  A task's ``recorded_machine_id`` not among them is nulled (repair
  ``recorded_machine_not_in_machines``; dedicated machines are not published).
- tasks (:mod:`.instances`): one per job instance (collection_id, instance_index), task id
  ``COLLECTION-INDEX``; last attempt's run time; end events as in the 2011 adapter;
  alloc-set instances are not replayed.
- jobs (:mod:`.jobs`): job collections; alloc sets are not replayed; ``start_after_
  collection_ids`` -> ``depends_on`` where simple.
- usage (:mod:`.usage`): ``average_usage`` windows -> ``task_usage`` and the means
  ``cpu_used``/``mem_used``.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import duckdb
import polars as pl

from pipeline.ingest.base import require_tables
from pipeline.ingest.csvparts import BLOCK_BYTES, RawTable
from pipeline.ingest.finalize import spill_connection, write_query
from pipeline.ingest.google2019 import instances, jobs, usage
from pipeline.ingest.google2019.machines import machine_rows, machine_tables
from pipeline.ingest.google2019.ndjson import iter_json_parts
from pipeline.ingest.google2019.tables import (
    ALL_TABLES,
    COLLECTION_EVENTS,
    INSTANCE_EVENTS,
    INSTANCE_USAGE,
    MACHINE_EVENTS,
    UNREAD,
    WINDOW_END_S,
)
from pipeline.ingest.window import set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest

UNITS = {
    "cpu": "normalized NCU: 1.0 = CPU capacity of the largest machine of the v3 traces",
    "mem": "normalized: 1.0 = memory capacity of the largest machine of the v3 traces",
    "gpu": "none (the trace has no GPUs)",
    "time": "seconds from the window start",
}
TASKS_SQL = """
SELECT t.task_id, t.job_id, t.submit_s, t.duration_s, t.cpu, t.mem, 0.0 AS gpu,
       m.cpu_used, m.mem_used, d.depends_on, t.priority, t.sched_class, t.end_event,
       t.trace_attempts, t.trace_lost_s,
       CASE WHEN k.machine_id IS NOT NULL THEN t.recorded_machine_id END AS recorded_machine_id,
       t.recorded_start_s
FROM tasks t LEFT JOIN deps d USING (job_id) LEFT JOIN {means} m USING (task_id)
LEFT JOIN machine_ids k ON k.machine_id = t.recorded_machine_id
ORDER BY t.submit_s, t.task_id
"""
JOBS_SQL = """
SELECT job_id, "user", queue, submit_s, priority, name, sched_class FROM jobs
ORDER BY submit_s, job_id
"""
Writer = Callable[[pl.DataFrame, int, Path, Ledger], None]


class Google2019:
    """Google cluster-usage traces v3 (one cell): machine, collection and instance events
    (+ instance usage)."""

    name: ClassVar[str] = "google2019"
    summary: ClassVar[str] = "Google cluster-usage traces v3, clusterdata-2019 (one cell, NDJSON)"
    tables: ClassVar[tuple[RawTable, ...]] = ALL_TABLES

    def __init__(self, block_bytes: int = BLOCK_BYTES) -> None:
        self.block_bytes = block_bytes

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Ingest one cell's raw parts under ``src`` into canonical tables in ``out``."""
        require_tables(src, self.tables, manifest)
        manifest.units = dict(UNITS)
        manifest.time_origin = "2019-05-01T00:00:00-07:00 (trace timestamp 600 s)"
        window_end = set_window(manifest, src, 0.0, WINDOW_END_S,
                                "the published window (31 days, May 2019)")[1]
        scratch = out / "_scratch"
        scratch.mkdir()
        machines = self._machines(src, out, ledger, manifest)
        counts: Counter[str] = Counter()
        events = self._spill(src, INSTANCE_EVENTS, scratch, ledger, manifest,
                             lambda f, k, p, led: instances.write_events(f, k, p, led, counts))
        collections = self._spill(src, COLLECTION_EVENTS, scratch, ledger, manifest,
                                  lambda f, k, p, led: jobs.write_events(f, k, p, led, counts))
        with_usage = "instance_usage" not in manifest.tables_absent
        samples = (self._spill(src, INSTANCE_USAGE, scratch, ledger, manifest,
                               usage.write_samples) if with_usage else [])
        con = spill_connection(scratch)
        try:
            counts.update(instances.fold_tasks(con, events, ledger, window_end))
            counts.update(jobs.build_jobs(con, collections, ledger))
            if with_usage:
                usage.place_samples(con, samples, ledger,
                                    float(machines["cpu"].max() or 1.0))  # type: ignore[arg-type]
            _write(con, out, ledger, machines.select("machine_id"), with_usage)
        finally:
            con.close()
        shutil.rmtree(scratch)
        manifest.notes.update(notes(counts, with_usage))

    def _machines(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest
                  ) -> pl.DataFrame:
        """Write machines (and machine_downtime); return the machines."""
        frames = [frame.with_columns(_file=pl.lit(k, pl.Int64)) for k, frame in
                  iter_json_parts(src, MACHINE_EVENTS, ledger, manifest.sources,
                                  self.block_bytes)]
        machines, downtime = machine_tables(machine_rows(frames, ledger), ledger)
        write_table(out, "machines", machines.to_arrow())
        if downtime.height:
            write_table(out, "machine_downtime", downtime.to_arrow())
        return machines

    def _spill(self, src: Path, table: RawTable, scratch: Path, ledger: Ledger,
               manifest: Manifest, write: Writer) -> list[Path]:
        """Every block of ``table``, checked and projected by ``write``, as scratch files."""
        (scratch / table.name).mkdir()
        files = []
        for k, (file, frame) in enumerate(iter_json_parts(src, table, ledger, manifest.sources,
                                                          self.block_bytes)):
            files.append(scratch / table.name / f"part-{k:06d}.parquet")
            write(frame, file, files[-1], ledger)
        return files

def _write(con: duckdb.DuckDBPyConnection, out: Path, ledger: Ledger,
           machine_ids: pl.DataFrame, with_usage: bool) -> None:
    """Write jobs, tasks (submit order) and task_usage from the DuckDB tables."""
    con.register("machine_ids", machine_ids.to_arrow())
    unknown = con.execute(
        "SELECT count(*) FROM tasks t ANTI JOIN machine_ids k ON k.machine_id = "
        "t.recorded_machine_id WHERE t.recorded_machine_id IS NOT NULL").fetchall()[0][0]
    ledger.repair("tasks", "recorded_machine_not_in_machines", int(unknown))
    write_query(con, JOBS_SQL, out, "jobs")
    means = "means" if with_usage else (
        "(SELECT NULL::VARCHAR AS task_id, NULL::DOUBLE AS cpu_used, "
        "NULL::DOUBLE AS mem_used WHERE false)")
    write_query(con, TASKS_SQL.format(means=means), out, "tasks")
    if with_usage:
        write_query(con, usage.OUT_SQL, out, "task_usage")


def notes(counts: Counter[str], with_usage: bool) -> dict[str, str]:
    """What manifest.notes says of the mapping, with this trace's counts."""
    result = {
        "cell": "one cell per ingest: the parts of one bucket clusterdata_2019_X",
        "tasks": "one per job instance (collection_id, instance_index), id COLLECTION-INDEX; "
                 "duration of the last attempt (SCHEDULE to EVICT/FAIL/FINISH/KILL/LOST, "
                 "censored at the window end); earlier attempts in trace_attempts and "
                 "trace_lost_s; see pipeline.ingest.google2019.instances",
        "requests": "resource_request at the last attempt's SCHEDULE, raised to the largest "
                    "UPDATE_RUNNING during it (vertical scaling)",
        "alloc_sets": f"not replayed ({counts['alloc_set_rows']} collection_events rows, "
                      f"{counts['alloc_rows']} instance_events rows): an alloc set reserves "
                      "resources that its jobs' tasks then use, and those tasks are replayed "
                      "with their own requests; replaying the reservation too would count "
                      f"them twice. {counts['in_alloc_set']} tasks ran inside an alloc set",
        "depends_on": f"start_after_collection_ids: {counts['dependencies_mapped']} job "
                      "edges mapped (every task of the job waits for every task of the job "
                      f"it runs after, when that job is in the trace, earlier, and has at "
                      f"most {jobs.DEPENDS_LIMIT} tasks); others counted in "
                      "dropped.job_dependencies",
        "queue": "scheduler: 'default' (SCHEDULER_DEFAULT) or 'batch' (SCHEDULER_BATCH)",
        "not_replayed": f"parent_collection_id ({counts['with_parent']} collections with a "
                        f"parent), vertical_scaling ({counts['vertical_scaling']} collections "
                        f"scaled), max_per_machine/max_per_switch ({counts['spread_limits']} "
                        f"collections), constraint ({counts['constraint_rows']} instance "
                        "event rows with constraints), collection_logical_name, "
                        "missing_type, alloc_instance_index",
        "not_read": "; ".join(f"{t}: {f}" for t, f in UNREAD.items()),
        "priority": "v3 scale: free < 100, mid-SLO 100-119, production 120-200, "
                    "monitoring > 200",
    }
    if with_usage:
        result["task_usage"] = ("average_usage windows inside the recorded run, seconds "
                                "from its start; cpu_used/mem_used their time-weighted "
                                "means; see pipeline.ingest.google2019.usage")
    return result
