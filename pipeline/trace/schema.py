"""Canonical trace schema (contract section 2), as pyarrow schemas.

A canonical trace directory holds ``machines``, ``jobs`` and ``tasks`` tables (each either
``NAME.parquet`` as one file or a directory ``NAME.parquet/`` of ordered part files) plus
``manifest.json``.  Times are float64 seconds from the trace start; resources are in the
trace's own units, stated in the manifest.

Columns beyond the contract (allowed by it) carry what adapters know and replays may use:
``priority`` and ``sched_class`` on tasks, ``end_event``/``trace_attempts``/``trace_lost_s``
describing what the source trace recorded for the task, and ``synthetic`` (true for
zero-resource barrier tasks an adapter adds to keep large dependency fan-ins linear; replays
run them but metrics do not count them as work), and ``recorded_machine_id``/
``recorded_start_s``: where and when the trace says the task's recorded attempt ran (the
``recorded`` reference replay starts it there and then).  ``task_kind`` is ``map``/``reduce``
where the trace distinguishes MapReduce phases (SWIM, Rumen/SLS, Alibaba M/R tasks), null
otherwise; ``input_file`` names the (anonymized) input file a task reads where the trace
shares inputs between jobs (SWIM FB-2010 paths), so the ``dfs`` model places one file once.
``machine_downtime`` is an optional table of intervals during which a machine was removed
from the trace's cluster.

``task_usage`` (optional) is a task's measured usage over its run, piecewise constant: each
row says the task used ``cpu`` and ``mem`` (trace units, those of ``tasks.cpu``/``mem``) from
``start_s`` to ``end_s``.  Conventions (checked by :mod:`pipeline.trace.validate`):

- times are relative to the task's start: seconds of run time on a speed-1.0 machine from
  the start of the run the ``tasks`` row describes (its recorded attempt), so
  ``0 <= start_s < end_s <= duration_s`` (``USAGE_TOLERANCE`` relative).  A replay
  that runs the task at another speed or time stretches and shifts the profile with it;
- the segments of one task do not overlap; gaps are allowed (a replay uses the task's
  ``cpu_used``/``mem_used`` there, else its request);
- rows are ordered by their task's row position in ``tasks``, then ``start_s``, so a replay
  reads them alongside the tasks;
- ``cpu`` and ``mem`` are finite and >= 0; ``mem`` is at most the task's memory request
  (a container above its memory limit is killed, e.g. by YARN's NodeManager, so usage above
  the request cannot persist), ``cpu`` at most the largest machine's cpu (CPU is
  compressible, so usage above the request is legitimate and kept).

Adapters count what they repair or reject to get there (``outside_task_life``,
``clipped_to_task_life``, ``mem_above_request_clipped``, ...; see each adapter).
"""

from __future__ import annotations

import pyarrow as pa

FORMAT_VERSION = 1

MACHINES = pa.schema(
    [
        pa.field("machine_id", pa.string(), nullable=False),
        pa.field("cpu", pa.float64(), nullable=False),
        pa.field("mem", pa.float64(), nullable=False),
        pa.field("gpu", pa.float64(), nullable=False),
        pa.field("rack", pa.string()),
        pa.field("speed", pa.float64(), nullable=False),
        pa.field("added_s", pa.float64(), nullable=False),
        pa.field("removed_s", pa.float64()),
        pa.field("platform", pa.string()),
    ]
)

JOBS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("user", pa.string(), nullable=False),
        pa.field("queue", pa.string()),
        pa.field("submit_s", pa.float64(), nullable=False),
        pa.field("priority", pa.int32()),
        pa.field("name", pa.string()),
        pa.field("sched_class", pa.int32()),
    ]
)

# How the source trace recorded a task's last attempt (not an outcome of any replay).
END_EVENTS = ("finished", "failed", "killed", "evicted", "lost", "censored")

TASKS = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("submit_s", pa.float64(), nullable=False),
        pa.field("duration_s", pa.float64(), nullable=False),
        pa.field("cpu", pa.float64(), nullable=False),
        pa.field("mem", pa.float64(), nullable=False),
        pa.field("gpu", pa.float64(), nullable=False),
        pa.field("cpu_used", pa.float64()),
        pa.field("mem_used", pa.float64()),
        pa.field("inputs", pa.list_(pa.string())),
        pa.field("input_mb", pa.float64()),
        pa.field("depends_on", pa.list_(pa.string())),
        pa.field("priority", pa.int32()),
        pa.field("sched_class", pa.int32()),
        pa.field("end_event", pa.string()),
        pa.field("trace_attempts", pa.int32()),
        pa.field("trace_lost_s", pa.float64()),
        pa.field("synthetic", pa.bool_()),
        pa.field("recorded_machine_id", pa.string()),
        pa.field("recorded_start_s", pa.float64()),
        pa.field("task_kind", pa.string()),
        pa.field("input_file", pa.string()),
    ]
)

MACHINE_DOWNTIME = pa.schema(
    [
        pa.field("machine_id", pa.string(), nullable=False),
        pa.field("down_s", pa.float64(), nullable=False),
        pa.field("up_s", pa.float64()),
    ]
)

TASK_USAGE = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("start_s", pa.float64(), nullable=False),
        pa.field("end_s", pa.float64(), nullable=False),
        pa.field("cpu", pa.float64(), nullable=False),
        pa.field("mem", pa.float64(), nullable=False),
    ]
)
# Relative slack on the bounds end_s <= duration_s, mem <= request, cpu <= largest machine
# (times and clipped values pass through float arithmetic).
USAGE_TOLERANCE = 1e-6

# Optional columns of the policy families: kept (cast to their type, after the canonical
# columns) when an adapter writes them, never added by ``conform``, so a trace without GPUs,
# gangs or runtime estimates keeps its bytes.  Meanings:
# - ``machines.gpu_model``: the GPU model of the machine's devices (null: none or unknown);
#   a machine's ``gpu`` counts its devices (a whole number).
# - ``tasks.gpu_spec``: GPU models the task may run on (null: any).  A task's ``gpu`` below 1
#   is a share of one device (GPU sharing: the share must fit on a single device); 1 or more
#   is that many whole devices (a whole number).
# - ``tasks.gang_id``: tasks with the same gang start together or not at all (distributed
#   training instances).
# - ``tasks.requested_s``: the run time the user asked for (an HPC job's wall-time limit, the
#   estimate backfilling plans with), > 0.
EXTENSIONS: dict[str, pa.Schema] = {
    "machines": pa.schema([pa.field("gpu_model", pa.string())]),
    "tasks": pa.schema([
        pa.field("gpu_spec", pa.list_(pa.string())),
        pa.field("gang_id", pa.string()),
        pa.field("requested_s", pa.float64()),
    ]),
}

TABLES: dict[str, pa.Schema] = {
    "machines": MACHINES,
    "jobs": JOBS,
    "tasks": TASKS,
    "machine_downtime": MACHINE_DOWNTIME,
    "task_usage": TASK_USAGE,
}
REQUIRED_TABLES = ("machines", "jobs", "tasks")

# Columns the contract names; a user's own trace needs only these (others are optional).
CONTRACT_COLUMNS: dict[str, tuple[str, ...]] = {
    "machines": ("machine_id", "cpu", "mem", "gpu", "rack", "speed", "added_s", "removed_s"),
    "jobs": ("job_id", "user", "queue", "submit_s", "priority", "name"),
    "tasks": (
        "task_id", "job_id", "submit_s", "duration_s", "cpu", "mem", "gpu",
        "cpu_used", "mem_used", "inputs", "input_mb", "depends_on", "recorded_machine_id",
        "recorded_start_s",
    ),
    "machine_downtime": ("machine_id", "down_s", "up_s"),
    "task_usage": ("task_id", "start_s", "end_s", "cpu", "mem"),
}
# Contract columns a user's trace may omit (filled with their default on read).
DEFAULTS: dict[str, dict[str, object]] = {
    "machines": {"gpu": 0.0, "rack": None, "speed": 1.0, "added_s": 0.0, "removed_s": None},
    "jobs": {"queue": None, "priority": None, "name": None},
    "tasks": {"gpu": 0.0, "cpu_used": None, "mem_used": None, "inputs": None, "input_mb": None,
              "depends_on": None, "recorded_machine_id": None, "recorded_start_s": None},
    "machine_downtime": {"up_s": None},
}


def conform(table: pa.Table, name: str) -> pa.Table:
    """Return ``table`` with the full canonical columns of ``name``, in order, cast to type.

    Missing optional columns are filled with their defaults (or nulls); extra columns are
    kept after the canonical ones so user additions survive.
    """
    schema = TABLES[name]
    defaults = DEFAULTS.get(name, {})
    n = table.num_rows
    columns, fields = [], []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name).cast(field.type)
        else:
            value = defaults.get(field.name)
            col = pa.nulls(n, field.type) if value is None else pa.array([value] * n, field.type)
        columns.append(col)
        fields.append(pa.field(field.name, field.type))
    extensions = EXTENSIONS.get(name, pa.schema([]))
    for extra in table.column_names:
        if extra in extensions.names:
            kind = extensions.field(extra).type
            columns.append(table.column(extra).cast(kind))
            fields.append(pa.field(extra, kind))
        elif extra not in schema.names:
            columns.append(table.column(extra))
            fields.append(table.schema.field(extra))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))
