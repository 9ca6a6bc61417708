"""The published tables of Google clusterdata-2011-2 (from the trace's ``schema.csv``).

Timestamps and resource requests or usages are never negative in the published trace: a row
with one below zero is rejected (``negative_value:FIELD``; ``negative_usage`` for the usage
fields ``cpu_rate`` and ``canonical_mem``, checked in :mod:`.usage`), not clamped.
"""

from __future__ import annotations

import polars as pl

from pipeline.ingest.csvparts import FLOAT, INT, STR, Column, RawTable
from pipeline.trace.manifest import Ledger

# Trace timestamps are microseconds; the window opens at 600 s (19:00 EDT, 1 May 2011).
WINDOW_OFFSET_US = 600_000_000
TIME_BEFORE_WINDOW = 0
TIME_AFTER_WINDOW = 2**63 - 1

JOB_EVENTS = RawTable("job_events", "job_events/part-*.csv*", (
    Column("time", INT, True, nonnegative=True), Column("missing_info", INT),
    Column("job_id", INT, True),
    Column("event_type", INT, True), Column("user", STR), Column("sched_class", INT),
    Column("job_name", STR), Column("logical_job_name", STR),
))

TASK_EVENTS = RawTable("task_events", "task_events/part-*.csv*", (
    Column("time", INT, True, nonnegative=True), Column("missing_info", INT),
    Column("job_id", INT, True),
    Column("task_index", INT, True), Column("machine_id", INT), Column("event_type", INT, True),
    Column("user", STR), Column("sched_class", INT), Column("priority", INT, True),
    Column("cpu", FLOAT, nonnegative=True), Column("mem", FLOAT, nonnegative=True),
    Column("disk", FLOAT), Column("different_machines", INT),
))

MACHINE_EVENTS = RawTable("machine_events", "machine_events/part-*.csv*", (
    Column("time", INT, True, nonnegative=True), Column("machine_id", INT, True),
    Column("event_type", INT, True),
    Column("platform", STR), Column("cpu", FLOAT), Column("mem", FLOAT),
), required=False)

TASK_USAGE = RawTable("task_usage", "task_usage/part-*.csv*", (
    Column("start", INT, True, nonnegative=True), Column("end", INT, True, nonnegative=True),
    Column("job_id", INT, True), Column("task_index", INT, True),
    Column("machine_id", INT, True), Column("cpu_rate", FLOAT),
    Column("canonical_mem", FLOAT), Column("assigned_mem", FLOAT),
    Column("unmapped_page_cache", FLOAT), Column("total_page_cache", FLOAT),
    Column("max_mem", FLOAT), Column("disk_io_time", FLOAT), Column("local_disk", FLOAT),
    Column("max_cpu_rate", FLOAT), Column("max_disk_io_time", FLOAT), Column("cpi", FLOAT),
    Column("mai", FLOAT), Column("sample_portion", FLOAT), Column("aggregation_type", INT),
    Column("sampled_cpu", FLOAT),
), required=False)

ALL_TABLES = (JOB_EVENTS, TASK_EVENTS, MACHINE_EVENTS, TASK_USAGE)


def count_inside_offset(ledger: Ledger, table: str, time_us: pl.Series) -> None:
    """Count raw times above 0 but inside the 600 s offset: read as before the window (0 s).

    The schema reserves 0 for "before the window"; other times below the offset do not occur
    in the published trace, and are repaired (counted), not clamped silently.
    """
    inside = int(((time_us > TIME_BEFORE_WINDOW) & (time_us < WINDOW_OFFSET_US)).sum())
    ledger.repair(table, "time_inside_offset_read_as_before_window", inside)


def seconds(time_us: object) -> object:
    """Polars/numpy expression: trace µs -> seconds from the window start, before-window -> 0.

    Works on anything supporting arithmetic and ``clip`` (polars Expr or Series).
    """
    return ((time_us - WINDOW_OFFSET_US) / 1e6).clip(lower_bound=0.0)  # type: ignore[operator,union-attr]
