"""The published tables of Google cluster-usage traces v3 (``clusterdata_trace_format_v3.proto``).

The GCS export (``gs://clusterdata_2019_X``, one bucket per cell) holds each table as gzipped
newline-delimited JSON parts ``TABLE-NNNNNNNNNNNN.json.gz`` at the bucket root.  A column's
name here is its JSON path (``resource_request.cpus``: a nested ``Resources`` record); the
frames read carry it with ``_`` for ``.``.  Integers may be written as strings (BigQuery's
JSON export of INT64) or numbers; both are read (:mod:`.ndjson`).

Times are microseconds since 600 s before the window; 0 is "before the window", 2^63-1
"after the window" (the v3 document, "Time and timestamps").
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from pipeline.ingest.csvparts import FLOAT, INT, STR, Column, RawTable

WINDOW_OFFSET_US = 600_000_000
TIME_BEFORE_WINDOW = 0
TIME_AFTER_WINDOW = 2**63 - 1
WINDOW_END_S = 31 * 86_400.0  # the month of May 2019 (ClusterData2019.md)

# EventType of collection and instance events (codes differ from the 2011 trace).
SUBMIT, QUEUE, ENABLE, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST = range(9)
UPDATE_PENDING, UPDATE_RUNNING = 9, 10
EVENT_TYPES = tuple(range(11))
TERMINAL = (EVICT, FAIL, FINISH, KILL, LOST)
END_EVENTS = {EVICT: "evicted", FAIL: "failed", FINISH: "finished", KILL: "killed",
              LOST: "lost"}
# MachineEvent.EventType
ADD, REMOVE, UPDATE = 1, 2, 3
# CollectionType; Scheduler
JOB, ALLOC_SET = 0, 1
SCHEDULERS = {0: "default", 1: "batch"}
# Special machine ids (Constants)
NO_MACHINE, DEDICATED_MACHINE = 0, -1

STR_LIST = pl.List(pl.String)
CONSTRAINTS = pl.List(pl.Struct({"name": pl.String}))  # only counted (not replayed)


def _part(table: str) -> str:
    return f"{table}-*.json*"


MACHINE_EVENTS = RawTable("machine_events", _part("machine_events"), (
    Column("time", INT, True, nonnegative=True), Column("machine_id", INT, True),
    Column("type", INT, True), Column("switch_id", STR),
    Column("capacity.cpus", FLOAT, nonnegative=True),
    Column("capacity.memory", FLOAT, nonnegative=True), Column("platform_id", STR),
    Column("missing_data_reason", INT),
))
_COMMON = (
    Column("time", INT, True, nonnegative=True), Column("type", INT, True),
    Column("collection_id", INT, True), Column("scheduling_class", INT),
    Column("missing_type", INT), Column("collection_type", INT), Column("priority", INT),
    Column("alloc_collection_id", INT),
)
COLLECTION_EVENTS = RawTable("collection_events", _part("collection_events"), (
    *_COMMON, Column("user", STR), Column("collection_name", STR),
    Column("collection_logical_name", STR), Column("parent_collection_id", INT),
    Column("start_after_collection_ids", STR_LIST), Column("max_per_machine", INT),
    Column("max_per_switch", INT), Column("vertical_scaling", INT), Column("scheduler", INT),
))
INSTANCE_EVENTS = RawTable("instance_events", _part("instance_events"), (
    *_COMMON, Column("instance_index", INT, True, nonnegative=True), Column("machine_id", INT),
    Column("alloc_instance_index", INT),
    Column("resource_request.cpus", FLOAT, nonnegative=True),
    Column("resource_request.memory", FLOAT, nonnegative=True),
    Column("constraint", CONSTRAINTS),
))
INSTANCE_USAGE = RawTable("instance_usage", _part("instance_usage"), (
    Column("start_time", INT, True, nonnegative=True),
    Column("end_time", INT, True, nonnegative=True),
    Column("collection_id", INT, True), Column("instance_index", INT, True),
    Column("machine_id", INT), Column("collection_type", INT),
    Column("average_usage.cpus", FLOAT), Column("average_usage.memory", FLOAT),
), required=False)

ALL_TABLES = (MACHINE_EVENTS, COLLECTION_EVENTS, INSTANCE_EVENTS, INSTANCE_USAGE)
# Published fields read by no mapping (named in manifest.notes).
UNREAD = {
    "instance_usage": "maximum_usage, random_sample_usage, assigned_memory, "
                      "page_cache_memory, cycles_per_instruction, "
                      "memory_accesses_per_instruction, sample_rate, cpu_usage_distribution, "
                      "tail_cpu_usage_distribution, alloc_collection_id, alloc_instance_index",
    "machine_attributes": "the whole table (constraints are not replayed)",
}


def seconds(time_us: pl.Expr) -> pl.Expr:
    """Trace µs -> seconds from the window start; "before the window" (0) -> 0."""
    return ((time_us - WINDOW_OFFSET_US) / 1e6).clip(lower_bound=0.0)


def inside_offset(time_us: pl.Expr) -> pl.Expr:
    """Times above 0 but inside the 600 s offset (read as before the window, counted)."""
    return (time_us > TIME_BEFORE_WINDOW) & (time_us < WINDOW_OFFSET_US)


def run_script(con: duckdb.DuckDBPyConnection, sql: str, files: list[Path]) -> None:
    """Run ``;``-separated statements; ``$files`` in one is the list of scratch files."""
    for statement in (s.strip() for s in sql.split(";")):
        if statement:
            params = {"files": [str(f) for f in files]} if "$files" in statement else None
            con.execute(statement, params)
