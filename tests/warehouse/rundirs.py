"""A builder of small, self-consistent run directories (the shape the replay writes).

``write_run`` takes task placements and node intervals and derives the metrics from them,
so a run is consistent unless a test breaks it on purpose (``edit_*`` callbacks, or
``metric_overrides``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PRICE_PER_HOUR = 0.192
TRACE = "demo"


@dataclass(frozen=True)
class TaskRun:
    """One task's final record."""

    task_id: str
    job_id: str
    user: str
    submit_s: float
    start_s: float | None
    end_s: float | None
    machine_id: str | None
    outcome: str
    cpu: float = 1.0
    mem: float = 1.0
    attempts: int = 1
    locality: str | None = None
    queue: str | None = None


@dataclass(frozen=True)
class NodeInterval:
    """One period a node was provisioned."""

    machine_id: str
    up_s: float
    down_s: float
    cpu: float = 4.0
    mem: float = 8.0


Edit = Callable[[pa.Table], pa.Table]


def run_id_of(trace: str, policy: str, params: dict[str, Any], seed: int) -> str:
    """A stable id for (trace, policy, params, seed)."""
    key = json.dumps([trace, policy, params, seed], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def write_trace(root: Path, tasks: int, name: str = TRACE) -> Path:
    """A stand-in canonical trace directory: only the manifest's task count matters here."""
    trace = root / "traces" / name
    trace.mkdir(parents=True, exist_ok=True)
    (trace / "manifest.json").write_text(json.dumps({"rows": {"tasks": tasks, "jobs": 2}}))
    return trace


def write_run(
    root: Path,
    policy: str,
    tasks: list[TaskRun],
    intervals: list[NodeInterval],
    *,
    trace: str = TRACE,
    trace_path: Path | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    cluster_mode: str = "fixed",
    metric_overrides: dict[str, float] | None = None,
    edit_tasks: Edit | None = None,
    edit_intervals: Edit | None = None,
    parts: bool = False,
) -> Path:
    """Write run directory ``root/<trace>-<policy>-<seed>`` and return its path."""
    params = params or {}
    run_id = run_id_of(trace, policy, params, seed)
    run = root / "runs" / f"{trace}-{policy}-{'-'.join(map(str, params.values()))}-{seed}"
    run.mkdir(parents=True)
    meta = {
        "run_id": run_id, "trace": trace, "trace_path": str(trace_path or ""),
        "policy": policy, "params": params, "seed": seed, "wall_s": 0.25,
        "code_version": "test", "created_at": "2025-01-02T03:04:05+00:00",
        "cluster": {"mode": cluster_mode, "price_per_hour": PRICE_PER_HOUR},
    }
    (run / "run.json").write_text(json.dumps(meta))
    task_table = _with_run_id(pa.Table.from_pylist([asdict(t) for t in tasks],
                                                   schema=TASK_SCHEMA), run_id)
    node_table = _with_run_id(pa.Table.from_pylist([asdict(n) for n in intervals],
                                                   schema=NODE_SCHEMA), run_id)
    metric_values = {**metrics_of(tasks, intervals), **(metric_overrides or {})}
    metric_table = pa.table({
        "run_id": [run_id] * len(metric_values), "metric": list(metric_values),
        "value": list(metric_values.values()), "unit": [UNITS.get(m, "") for m in metric_values],
    })
    tables = {
        "task_runs": edit_tasks(task_table) if edit_tasks else task_table,
        "node_intervals": edit_intervals(node_table) if edit_intervals else node_table,
        "metrics": metric_table,
    }
    for name, table in tables.items():
        if parts:
            (run / f"{name}.parquet").mkdir()
            half = table.num_rows // 2
            pq.write_table(table.slice(0, half), run / f"{name}.parquet" / "part-00000.parquet")
            pq.write_table(table.slice(half), run / f"{name}.parquet" / "part-00001.parquet")
        else:
            pq.write_table(table, run / f"{name}.parquet")
    return run


TASK_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("job_id", pa.string()), ("user", pa.string()),
    ("submit_s", pa.float64()), ("start_s", pa.float64()), ("end_s", pa.float64()),
    ("machine_id", pa.string()), ("outcome", pa.string()), ("cpu", pa.float64()),
    ("mem", pa.float64()), ("attempts", pa.int32()), ("locality", pa.string()),
    ("queue", pa.string()),
])
NODE_SCHEMA = pa.schema([
    ("machine_id", pa.string()), ("up_s", pa.float64()), ("down_s", pa.float64()),
    ("cpu", pa.float64()), ("mem", pa.float64()),
])
UNITS = {"node_hours": "h", "cost_usd": "USD", "jct_p50_s": "s", "wait_p50_s": "s",
         "wait_p95_s": "s", "wasted_task_s": "s"}


def _with_run_id(table: pa.Table, run_id: str) -> pa.Table:
    return table.add_column(0, "run_id", pa.array([run_id] * table.num_rows, pa.string()))


def metrics_of(tasks: list[TaskRun], intervals: list[NodeInterval]) -> dict[str, float]:
    """The metrics a replay would report for these records (a subset; used_* left out)."""
    node_s = sum(n.down_s - n.up_s for n in intervals)
    cap_cpu_s = sum((n.down_s - n.up_s) * n.cpu for n in intervals)
    cap_mem_s = sum((n.down_s - n.up_s) * n.mem for n in intervals)
    ran = [t for t in tasks if t.start_s is not None and t.end_s is not None]
    waits = np.array([t.start_s - t.submit_s for t in ran]) if ran else np.zeros(1)
    per_user = {}
    for t in ran:
        per_user[t.user] = per_user.get(t.user, 0.0) + (t.end_s - t.start_s) * t.cpu
    shares = np.array(list(per_user.values())) if per_user else np.ones(1)
    return {
        "node_hours": node_s / 3600,
        "cost_usd": node_s / 3600 * PRICE_PER_HOUR,
        "util_alloc_cpu": sum((t.end_s - t.start_s) * t.cpu for t in ran) / cap_cpu_s,
        "util_alloc_mem": sum((t.end_s - t.start_s) * t.mem for t in ran) / cap_mem_s,
        "jain_fairness": float(shares.sum() ** 2 / (len(shares) * (shares**2).sum())),
        "jct_p50_s": float(np.median([t.end_s - t.submit_s for t in ran] or [0.0])),
        "wait_p50_s": float(np.percentile(waits, 50)),
        "wait_p95_s": float(np.percentile(waits, 95)),
        "tasks_finished": float(sum(t.outcome == "finished" for t in tasks)),
        "tasks_unschedulable": float(sum(t.outcome == "unschedulable" for t in tasks)),
        "preemptions": 0.0,
        "wasted_task_s": 0.0,
    }


def demo_tasks(packed: bool) -> list[TaskRun]:
    """Four tasks of two users: three run (packed onto m0 or spread), one cannot fit anywhere."""
    second = "m0" if packed else "m1"
    return [
        TaskRun("t0", "j0", "alice", 0.0, 0.0, 1800.0, "m0", "finished", cpu=2.0, mem=2.0,
                locality="node"),
        TaskRun("t1", "j0", "alice", 0.0, 10.0, 1800.0, second, "finished", cpu=2.0, mem=2.0),
        TaskRun("t2", "j1", "bob", 100.0, 1800.0 if packed else 100.0,
                3600.0 if packed else 1900.0, "m0", "finished", cpu=2.0, mem=4.0),
        TaskRun("t3", "j1", "bob", 200.0, None, None, None, "unschedulable", cpu=16.0, mem=1.0),
    ]


def demo_intervals(packed: bool) -> list[NodeInterval]:
    """Two 4-cpu nodes for the hour (spread), or the second one only for half of it (packed)."""
    return [NodeInterval("m0", 0.0, 3600.0),
            NodeInterval("m1", 0.0, 1800.0 if packed else 3600.0)]


def demo_runs(root: Path, seed: int = 0, **kwargs: Any) -> list[Path]:
    """Two consistent runs of one trace and seed: yarn-uniform (baseline) and a packing policy."""
    trace = write_trace(root, tasks=4)
    return [
        write_run(root, "yarn-uniform", demo_tasks(False), demo_intervals(False),
                  trace_path=trace, seed=seed, **kwargs),
        write_run(root, "packing", demo_tasks(True), demo_intervals(True), trace_path=trace,
                  seed=seed, params={"slack": 0.1}, cluster_mode="elastic", **kwargs),
    ]


# Opportunistic containers (runs with `opp_*` parameters) and the columns they add.
OPP_PARAMS = {"opp_by": "percent", "opp_percent": 30, "opp_overalloc_mem": 0.75,
              "opp_preempt_mem": 0.9, "opp_pause": True}
OPP_NODES = [NodeInterval("m0", 0.0, 3600.0), NodeInterval("m1", 0.0, 3600.0)]
# task -> (job, start, end, machine); c1 and d1 are opportunistic in the opp run only
BASE = {"a1": ("jA", 0.0, 100.0, "m0"), "a2": ("jA", 0.0, 200.0, "m0"),
        "b1": ("jB", 0.0, 400.0, "m1"), "c1": ("jC", 200.0, 350.0, "m0"),
        "d1": ("jD", 400.0, 500.0, "m1")}
# jA slower (300 s against 200 s), jB the same; c1 runs beside a1 and a2 beyond m0's 4 cpus
OPP = {**BASE, "a2": ("jA", 0.0, 300.0, "m0"), "c1": ("jC", 0.0, 150.0, "m0"),
       "d1": ("jD", 30.0, 130.0, "m1")}
DURATION_S = {"a1": 100.0, "a2": 200.0, "b1": 400.0, "c1": 150.0, "d1": 100.0}
# task -> (opportunistic, opp_starts, opp_kills, opp_pauses, opp_queue_s, opp_wasted_s)
OPP_COLUMNS = {"c1": (True, 2, 1, 0, 10.0, 50.0), "d1": (True, 1, 0, 1, 30.0, 0.0)}
OPP_METRICS = {"opp_started": 3.0, "opp_killed": 1.0, "opp_paused": 1.0, "opp_shed": 0.0,
               "opp_finished": 2.0, "opp_wasted_task_s": 50.0, "opp_queue_p50_s": 20.0,
               "opp_queue_p95_s": 29.0, "util_used_cpu": 0.5, "util_used_mem": 0.4}


def opp_tasks(placement: dict[str, tuple[str, float, float, str]]) -> list[TaskRun]:
    return [TaskRun(t, job, "u", 0.0, start, end, machine, "finished", cpu=2.0, mem=2.0)
            for t, (job, start, end, machine) in placement.items()]


def with_opp_columns(opp: bool) -> Edit:
    """An ``edit_tasks`` adding the columns a replay writes since opportunistic containers."""
    def edit(table: pa.Table) -> pa.Table:
        ids = table["task_id"].to_pylist()
        rows = [OPP_COLUMNS.get(t, (False, 0, 0, 0, 0.0, 0.0)) if opp
                else (False, 0, 0, 0, 0.0, 0.0) for t in ids]
        columns = {"duration_s": (pa.float64(), [DURATION_S[t] for t in ids]),
                   "opportunistic": (pa.bool_(), [r[0] for r in rows]),
                   "opp_starts": (pa.int32(), [r[1] for r in rows]),
                   "opp_kills": (pa.int32(), [r[2] for r in rows]),
                   "opp_pauses": (pa.int32(), [r[3] for r in rows]),
                   "opp_shed": (pa.int32(), [0] * len(ids)),
                   "opp_queue_s": (pa.float64(), [r[4] for r in rows]),
                   "opp_wasted_s": (pa.float64(), [r[5] for r in rows]),
                   "first_start_s": (pa.float64(), table["start_s"].to_pylist())}
        for name, (kind, values) in columns.items():
            table = table.append_column(name, pa.array(values, kind))
        return table
    return edit


def opportunistic_runs(root: Path) -> list[Path]:
    """yarn-uniform without and with opportunistic containers (``OPP_PARAMS``) on seed 0, and
    with them on seed 1 (no run without them to compare with); ``OPP_METRICS`` as metrics."""
    trace = write_trace(root, tasks=len(BASE))
    return [
        write_run(root, "yarn-uniform", opp_tasks(BASE), OPP_NODES, trace_path=trace,
                  edit_tasks=with_opp_columns(False),
                  metric_overrides={"util_used_cpu": 0.3, "util_used_mem": 0.35}),
        write_run(root, "yarn-uniform", opp_tasks(OPP), OPP_NODES, trace_path=trace,
                  params=OPP_PARAMS, edit_tasks=with_opp_columns(True),
                  metric_overrides=OPP_METRICS),
        write_run(root, "yarn-uniform", opp_tasks(OPP), OPP_NODES, trace_path=trace,
                  params=OPP_PARAMS, seed=1, edit_tasks=with_opp_columns(True),
                  metric_overrides=OPP_METRICS),
    ]
