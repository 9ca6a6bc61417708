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
