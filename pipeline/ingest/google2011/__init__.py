"""Google clusterdata-2011-2 adapter (trace format v2.1; ``schema.csv`` of the trace).

Tables: ``job_events`` and ``task_events`` (required), ``machine_events`` and ``task_usage``
(optional).  Parts are read one at a time; task histories are folded in compiled code
(:mod:`.taskstate`, which documents the task mapping), and emitted tasks are spilled by
submit time and job and written back in submit order bucket by bucket (:mod:`.emitted`,
:mod:`.tasks_out`), so peak memory does not grow with trace length.

Times: microseconds since 600 s before the window -> seconds from the window start
(19:00 EDT, 1 May 2011); events stamped 0 (before the window) map to 0; events stamped
2^63-1 (after the window) are not used (counted); negative times, requests or usages are
rejected rows (counted, :mod:`.tables`).  The window end used for tasks still
running is the latest timestamp seen in the job and task events read.

Jobs: ``submit_s`` from the first job SUBMIT; ``user`` (a hash) and ``name`` (the job name
hash) from job_events, else from task_events (repair ``job_from_task_events``); ``priority``
is the highest priority of the job's tasks (Google priorities are per task; 0-1 free,
9-11 production); ``sched_class`` 0-3.  Machines: :mod:`.machines`.  Usage: ``cpu_used`` and
``mem_used`` are the time-weighted means of ``task_usage`` CPU rate and canonical memory usage
over the task's 5-minute records (all incarnations of a task share them); the records also
become the canonical ``task_usage`` table, each inside its incarnation's recorded run, times
relative to its start (:mod:`.usage`, which lists what is clipped or rejected).

Units: CPU and memory are normalized so the largest machine has 1.0 (not cores or bytes).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.ingest.base import require_tables
from pipeline.ingest.csvparts import RawTable, iter_parts
from pipeline.ingest.finalize import spill_connection
from pipeline.ingest.google2011 import taskstate as ts
from pipeline.ingest.google2011 import usage as us
from pipeline.ingest.google2011.emitted import EmittedSpill
from pipeline.ingest.google2011.machines import (
    finish_machines,
    machine_events_frame,
    machines_from_events,
)
from pipeline.ingest.google2011.tables import (
    ALL_TABLES,
    JOB_EVENTS,
    MACHINE_EVENTS,
    TASK_EVENTS,
    TASK_USAGE,
    TIME_AFTER_WINDOW,
    count_inside_offset,
    seconds,
)
from pipeline.ingest.google2011.tasks_out import write_tasks
from pipeline.ingest.window import generated_window, set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest

UNITS = {
    "cpu": "normalized: 1.0 = CPU capacity of the largest machine",
    "mem": "normalized: 1.0 = memory capacity of the largest machine",
    "gpu": "none (the trace has no GPUs)",
    "time": "seconds from the window start",
}


class Google2011:
    """Google clusterdata-2011-2: job/task events (+ machine events, task usage)."""

    name: ClassVar[str] = "google2011"
    summary: ClassVar[str] = "Google cluster-usage trace clusterdata-2011-2 (gz CSV parts)"
    tables: ClassVar[tuple[RawTable, ...]] = ALL_TABLES

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Ingest the raw parts under ``src`` into canonical tables in ``out``."""
        require_tables(src, self.tables, manifest)
        manifest.units = dict(UNITS)
        manifest.time_origin = "2011-05-01T19:00:00-04:00 (trace timestamp 600 s)"
        scratch = out / "_scratch"
        for sub in ("prio", "jobs", "usage", "samples", "emitted"):
            (scratch / sub).mkdir(parents=True)
        stated = generated_window(src)
        window_end = _job_events(src, scratch / "jobs", ledger, manifest)
        spill = EmittedSpill(scratch / "spill")
        seen, window_end = _task_events(src, scratch, spill, ledger, manifest, window_end,
                                        stated[1] if stated else None)
        _task_usage(src, scratch, ledger, manifest)
        max_cpu = _machines(src, out, seen, ledger, manifest)
        with_usage = "task_usage" not in manifest.tables_absent
        _finish(scratch, spill, out, ledger, max_cpu if with_usage else None, with_usage)
        if with_usage:
            manifest.notes["task_usage"] = us.NOTE
        set_window(manifest, src, 0.0, window_end,
                   "the span of the parts read: parts are split by time, so the last event "
                   "read ends it (29 days with every part)")
        manifest.notes["tasks"] = (
            "one task per incarnation; duration of the finishing attempt, else of the last "
            "attempt that ran (end_event says how it ended); see pipeline.ingest.google2011"
        )
        shutil.rmtree(scratch)


def _job_events(src: Path, jobs_dir: Path, ledger: Ledger, manifest: Manifest) -> float:
    """Write per-part job facts; return the latest in-window time seen."""
    window_end = 0.0
    for k, (_, frame) in enumerate(iter_parts(src, JOB_EVENTS, ledger, manifest.sources)):
        bad = ~frame["event_type"].is_in(list(range(9)))
        ledger.reject("job_events", "unknown_event_type", int(bad.sum()))
        frame = frame.filter(~bad)
        ledger.use("job_events", frame.height)
        count_inside_offset(ledger, "job_events", frame["time"])
        window_end = max(window_end, _latest(frame["time"]))
        frame.select(
            "job_id", t=seconds(pl.col("time")), is_submit=pl.col("event_type") == ts.SUBMIT,
            user=pl.col("user"), sched_class=pl.col("sched_class"), name=pl.col("job_name"),
            from_job_events=pl.lit(True),
        ).write_parquet(jobs_dir / f"job-{k:05d}.parquet")
    return window_end


def _latest(times_us: pl.Series) -> float:
    """The latest time in the window, in seconds (0 if none)."""
    latest = times_us.filter(times_us < TIME_AFTER_WINDOW).max()
    return float(seconds(pl.Series([latest], dtype=pl.Int64))[0]) if latest is not None else 0.0


def _task_events(
    src: Path, scratch: Path, spill: EmittedSpill, ledger: Ledger, manifest: Manifest,
    window_end: float, censor_at: float | None = None,
) -> tuple[set[int], float]:
    """Fold every task_events part; spill emitted tasks, write job facts; return machines seen.

    Tasks still running at the end are censored at ``censor_at`` (a stated window's end),
    else at the last event read."""
    state = ts.TaskState()
    seen: set[int] = set()
    for k, (path, frame) in enumerate(iter_parts(src, TASK_EVENTS, ledger, manifest.sources)):
        after = frame["time"] >= TIME_AFTER_WINDOW
        ledger.reject("task_events", "after_window", int(after.sum()), path=str(path))
        # Parts are published in time order; a stable sort keeps same-time order as given.
        if after.any():
            frame = frame.filter(~after)
        count_inside_offset(ledger, "task_events", frame["time"])
        if not frame["time"].is_sorted():
            frame = frame.sort("time", maintain_order=True)
        window_end = max(window_end, _latest(frame["time"]))
        reasons, records = ts.fold_part(state, _arrays(frame))
        _count_reasons(ledger, reasons)
        _emit(spill, records, scratch / "prio" / f"prio-{k:05d}.parquet")
        seen.update(frame["machine_id"].drop_nulls().unique().to_list())
        _task_job_facts(frame).write_parquet(scratch / "jobs" / f"task-{k:05d}.parquet")
    _emit(spill, ts.flush(state, window_end if censor_at is None else censor_at),
          scratch / "prio" / "prio-end.parquet")
    for code, note in enumerate(ts.TASK_NOTES):
        count = int(state.notes[code])
        if code in (ts.N_NEVER, ts.N_ZERO, ts.N_NOREQ):
            ledger.drop("tasks", note, count)
        else:
            ledger.repair("tasks", note, count)
    return seen, window_end


def _task_job_facts(frame: pl.DataFrame) -> pl.DataFrame:
    """Per job of a time-ordered task_events part: its first row that names a user.

    The same facts as grouping by job (earliest time, first user and scheduling class), but
    the user strings are gathered only for those rows, not hashed for every row: in a
    time-ordered part the first such row of a job holds the job's earliest time.
    """
    user = pl.col("user")
    first = user.is_not_null() & pl.when(user.is_not_null()).then(
        pl.col("job_id")).is_first_distinct()
    return frame.filter(first).select(
        "job_id", t=seconds(pl.col("time")), user=user, sched_class=pl.col("sched_class"),
        is_submit=pl.lit(False), name=pl.lit(None, pl.String), from_job_events=pl.lit(False),
    )


def _arrays(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    """The event columns as contiguous numpy arrays (absent ints -> -1, floats -> NaN).

    Columns without nulls are handed over without a copy (polars' own arithmetic turns
    times into seconds: numpy's division rounds some of them differently).
    """
    def column(name: str, absent: float) -> np.ndarray:
        series = frame[name]
        if series.null_count():
            series = series.fill_null(absent)
        return np.ascontiguousarray(series.to_numpy())

    arrays = {"time": np.ascontiguousarray(seconds(frame["time"]).to_numpy())}  # no query plan
    for name in ("job_id", "task_index", "machine_id", "event_type", "priority", "sched_class"):
        arrays[name] = column(name, -1)
    for name in ("cpu", "mem"):
        arrays[name] = column(name, float("nan"))
    return arrays


def _count_reasons(ledger: Ledger, reasons: np.ndarray) -> None:
    counts = np.bincount(reasons, minlength=len(ts.ROW_REASONS))
    ledger.use("task_events", int(counts[0]))
    for code in range(1, len(ts.ROW_REASONS)):
        ledger.reject("task_events", ts.ROW_REASONS[code], int(counts[code]))


def _emit(spill: EmittedSpill, records: dict[str, np.ndarray], prio_path: Path) -> None:
    """Spill emitted tasks; write their jobs' highest task priority (for jobs.priority)."""
    spill.add(records)
    pl.DataFrame({"job_id": records["job_id"], "priority": records["priority"]}).group_by(
        "job_id").agg(pl.col("priority").max()).write_parquet(prio_path)


def _task_usage(src: Path, scratch: Path, ledger: Ledger, manifest: Manifest) -> None:
    """Per part, partial sums for the means and the usable windows (reduced in _finish)."""
    for k, (_, frame) in enumerate(iter_parts(src, TASK_USAGE, ledger, manifest.sources)):
        us.reduce_part(frame, k, scratch, ledger)


def _machines(
    src: Path, out: Path, seen: set[int], ledger: Ledger, manifest: Manifest
) -> float | None:
    """Write machines (and downtime); return the largest machine's cpu (None: no machines)."""
    frames = [f for _, f in iter_parts(src, MACHINE_EVENTS, ledger, manifest.sources)]
    machines = downtime = None
    if frames:
        events = machine_events_frame(frames, ledger)
        if not events.is_empty():
            machines, downtime = machines_from_events(events)
    table = finish_machines(machines, seen, ledger)
    write_table(out, "machines", table.to_arrow())
    if downtime is not None and not downtime.is_empty():
        downtime = downtime.with_columns(pl.col("machine_id").cast(pl.String))
        write_table(out, "machine_downtime", downtime.sort("machine_id", "down_s").to_arrow())
    return float(table["cpu"].max()) if table.height else None


JOBS_SQL = """
WITH facts AS (SELECT * FROM read_parquet('{jobs}/*.parquet', union_by_name=true)),
agg AS (
    SELECT job_id,
        coalesce(min(t) FILTER (from_job_events AND is_submit),
                 min(t) FILTER (from_job_events), min(t)) AS submit_s,
        coalesce(arg_min("user", t) FILTER (from_job_events AND "user" IS NOT NULL),
                 arg_min("user", t) FILTER ("user" IS NOT NULL)) AS "user",
        arg_min(name, t) FILTER (name IS NOT NULL) AS name,
        coalesce(arg_min(sched_class, t) FILTER (from_job_events AND sched_class IS NOT NULL),
                 arg_min(sched_class, t) FILTER (sched_class IS NOT NULL)) AS sched_class,
        bool_or(from_job_events) AS in_job_events
    FROM facts GROUP BY job_id
),
prio AS (SELECT job_id, max(priority) AS priority FROM read_parquet('{prio}/*.parquet')
         GROUP BY job_id)
SELECT CAST(a.job_id AS VARCHAR) AS job_id, coalesce(a."user", 'unknown') AS "user",
    CAST(NULL AS VARCHAR) AS queue, a.submit_s, CAST(p.priority AS INTEGER) AS priority,
    a.name, CAST(a.sched_class AS INTEGER) AS sched_class,
    a.in_job_events, a."user" IS NULL AS user_unknown
FROM agg a LEFT JOIN prio p USING (job_id)
ORDER BY a.job_id
"""


def _finish(scratch: Path, spill: EmittedSpill, out: Path, ledger: Ledger,
            max_cpu: float | None, with_usage: bool) -> None:
    """Reduce scratch parts into the canonical jobs, (submit-ordered) tasks and task_usage.

    Each DuckDB connection is closed before the next step, so its buffers are not held."""
    con = spill_connection(scratch)
    paths = {"jobs": scratch / "jobs", "prio": scratch / "prio"}
    jobs = pl.from_arrow(con.sql(JOBS_SQL.format(**paths)).to_arrow_table())
    con.close()
    ledger.repair("jobs", "job_from_task_events", int((~jobs["in_job_events"]).sum()))
    ledger.repair("jobs", "user_unknown", int(jobs["user_unknown"].sum()))
    write_table(out, "jobs", jobs.drop("in_job_events", "user_unknown").to_arrow())
    del jobs
    usage_sums = (lambda p: us.read_sums(scratch / "usage", p)) if with_usage else None
    ledger.repair("tasks", "resubmitted_after_end", spill.resolve(usage_sums))
    write_tasks(spill, out, scratch / "emitted" if with_usage else None)
    if with_usage:
        us.ensure_nonempty(scratch)
        con = spill_connection(scratch)
        con.execute(f"CREATE VIEW emitted AS SELECT * FROM read_parquet("
                    f"'{scratch / 'emitted'}/*.parquet', union_by_name=true)")
        us.place_samples(con, scratch / "samples", out, ledger, max_cpu)
        con.close()


__all__ = ["Google2011"]
