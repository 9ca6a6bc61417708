"""Replay a trace in the FGD paper's workload-inflation experiment into a run directory.

The run directory has the tables every run has, read as this experiment means them (time is
not modelled):

- ``task_runs.parquet``: one row per arriving pod, in arrival order (``arrival``); a copy
  appended by inflation is ``TASK#k`` (k-th copy in this run, ``copy_of`` = TASK).  A placed
  pod is ``unfinished`` (pods never leave) on its node, with ``gpu_devices`` the device
  indices it holds; a pod no node could host is ``unschedulable`` (dropped, not retried).
  ``submit_s``/``start_s``/``end_s`` are null.
- ``node_intervals.parquet``: the nodes replayed on, with capacities; ``up_s`` = ``down_s``
  = 0 (no time passes, so node-hours and cost are 0, not a measure of anything).
- ``gpu_curve.parquet``: the cluster after every pod, averaged per whole percent of arrived
  workload (``arrived_pct``, rounded to the nearest percent as the authors' analysis
  scripts round it): GPU allocation ratio, fragmentation
  in GPUs and as a ratio of idle GPU, and the pods in that percent.
- ``metrics.parquet``: ``util_alloc_gpu`` and ``gpu_fragmentation`` (ratio) when the
  arrived workload first reaches 100 % of GPU capacity (the trace's own demand, inflated),
  the same at the end (``*_end``), ``gpu_unallocated_first_fail`` (GPUs idle when the
  first pod fails: what fragmentation and CPU shortage strand), ``gpu_arrived_first_fail``,
  ``tasks_placed``, ``tasks_unschedulable``, ``gpu_tasks_unschedulable``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.errors import UsageError
from pipeline.policies import policy_class
from pipeline.policies.base import resolve_params as resolve_own
from pipeline.policies.gpu.devices import MILLI, GpuNodes, whole_milli
from pipeline.policies.gpu.scorers import make_scorer
from pipeline.policies.gpu.typical import typical_pods
from pipeline.replay import output as out
from pipeline.replay.gpu_loop import Arrivals, Workload, run_inflation
from pipeline.replay.source import TraceInput
from pipeline.replay.version import code_version
from pipeline.trace.io import atomic_dir, read_table

GPU_CURVE = "gpu_curve.parquet"
MIB_PER_GIB = 1024.0
UNKNOWN_MODEL = "unknown"


def replay_inflation(trace_dir: Path, policy: str, params: Mapping[str, Any] | None,
                     seed: int, out_dir: Path, trace_name: str | None,
                     identity: Any) -> tuple[str, dict[str, Any], dict[str, float | None]]:
    """Run the experiment for ``policy``; returns (run_id, run.json, metrics by name).

    ``identity(digest, resolved)``: the run's 64-hex identity (the stage's, so run ids mean
    the same everywhere).
    """
    started = time.perf_counter()
    cls = policy_class(policy)
    resolved = resolve_own(cls, params)
    trace = TraceInput(Path(trace_dir))
    digest = trace.digest()
    full_id = identity(digest, resolved)
    run_id = full_id[:16]
    rng = np.random.default_rng(np.random.SeedSequence(int(full_id, 16)))
    machines = pl.from_arrow(trace.machines)
    if resolved["gpu_nodes_only"]:
        machines = machines.filter(pl.col("gpu") > 0)
    nodes = _nodes(machines)
    if nodes.gpu_capacity <= 0:
        raise UsageError(f"trace {trace.dir} has no GPU machines: the inflation experiment "
                         "replays GPU requests on GPU nodes")
    tasks = pl.from_arrow(read_table(trace.dir, "tasks"))
    workload = _workload(tasks, nodes.models)
    typical = typical_pods(workload.cpu, workload.num_gpu, workload.gpu_milli,
                           _model_masks(workload, len(nodes.models)), resolved["coverage"],
                           model_names=nodes.models)
    scorer = (make_scorer(cls.scorer, typical=typical) if cls.scorer == "fgd"
              else make_scorer(cls.scorer))
    result = run_inflation(nodes, workload, typical, scorer, rng, resolved["target"],
                           resolved["shuffle"])
    with atomic_dir(Path(out_dir)) as tmp:
        jobs = pl.from_arrow(trace.jobs).select("job_id", "user", "queue")
        out.write_table(_task_runs(result, tasks, jobs, machines, run_id), tmp / out.TASK_RUNS)
        out.write_table(_nodes_table(machines, run_id), tmp / out.NODE_INTERVALS)
        curve = gpu_curve(result, run_id)
        out.write_table(curve.to_arrow(), tmp / GPU_CURVE)
        metrics = inflation_metrics(result, nodes.gpu_capacity,
                                    workload.gpu_request()[result.pod])
        out.write_table(_metrics_table(metrics, run_id), tmp / out.METRICS)
        window = trace.window()
        run = {
            "run_id": run_id, "trace": trace_name or trace.dir.name, "trace_digest": digest,
            "trace_validated": trace.validated, "trace_facts": trace.facts(),
            "window": asdict(window), "measured": {"from_s": 0.0, "to_s": 0.0,
                                                   "drained": True},
            "policy": policy, "params": resolved,
            "settings": cls(**resolved).effective_settings(set(params or {})),
            "seed": int(seed), "cluster": {"kind": "fixed", "nodes": machines.height,
                                           "gpu_nodes_only": resolved["gpu_nodes_only"]},
            "mode": "inflation",
            "summary": {"pods": len(result.pod), "copies": int(result.copy.sum()),
                        "placed": int((result.node >= 0).sum()),
                        "dropped": int((result.node < 0).sum()),
                        "typical_pods": len(typical.weight)},
        }
        provenance = {"trace_path": str(trace.dir.resolve()),
                      "wall_s": round(time.perf_counter() - started, 3),
                      "code_version": code_version(),
                      "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
        out.write_json(run, tmp / out.RUN_JSON)
        out.write_json(provenance, tmp / out.PROVENANCE_JSON)
    return run_id, {**run, **provenance}, metrics


def _nodes(machines: pl.DataFrame) -> GpuNodes:
    gpus = machines["gpu"].to_numpy()
    models = (machines["gpu_model"].to_list() if "gpu_model" in machines.columns
              else [None] * machines.height)
    # a GPU machine whose model the trace does not name: "unknown" (a pod that names the
    # models it accepts never goes there)
    names = [(m or UNKNOWN_MODEL) if g > 0 else None for m, g in zip(models, gpus, strict=True)]
    return GpuNodes.build(machines["cpu"].to_numpy() * MILLI,
                          machines["mem"].to_numpy() * MIB_PER_GIB,
                          gpus.astype(np.int64), names)


def _workload(tasks: pl.DataFrame, models: tuple[str, ...]) -> Workload:
    """Pods from canonical tasks: ``gpu`` below 1 is a share of one device, else whole ones."""
    gpu = tasks["gpu"].to_numpy()
    share = (gpu > 0) & (gpu < 1)
    num = np.where(share, 1, np.floor(gpu)).astype(np.int64)
    milli = np.where(share, np.rint(gpu * MILLI), np.where(gpu >= 1, MILLI, 0)).astype(np.int64)
    code = {name: i for i, name in enumerate(models)}
    specs = (tasks["gpu_spec"].to_list() if "gpu_spec" in tasks.columns
             else [None] * tasks.height)
    allowed = [None if not s else frozenset(code[m] for m in s if m in code) for s in specs]
    return Workload(whole_milli(tasks["cpu"].to_numpy() * MILLI),
                    tasks["mem"].to_numpy() * MIB_PER_GIB,
                    num, milli, allowed)


def _model_masks(workload: Workload, n_models: int) -> np.ndarray:
    masks = np.ones((workload.n, n_models), dtype=bool)
    for i, allowed in enumerate(workload.models):
        if allowed is not None:
            masks[i] = False
            masks[i, list(allowed)] = True
    return masks


def _task_runs(result: Arrivals, tasks: pl.DataFrame, jobs: pl.DataFrame,
               machines: pl.DataFrame, run_id: str) -> pa.Table:
    m = len(result.pod)
    ids = tasks["task_id"].gather(result.pod).to_list()
    copy_no = np.zeros(m, dtype=np.int64)
    copy_no[result.copy] = np.arange(1, int(result.copy.sum()) + 1)
    task_id = [f"{t}#{k}" if k else t for t, k in zip(ids, copy_no, strict=True)]
    placed = result.node >= 0
    machine_ids = machines["machine_id"].to_list()
    devices = [[d for d in range(64) if mask >> d & 1] if ok else None
               for mask, ok in zip(result.devices.tolist(), placed, strict=True)]
    frame = pl.DataFrame({
        "run_id": [run_id] * m, "task_id": task_id,
        "job_id": tasks["job_id"].gather(result.pod).to_list(),
        "machine_id": [machine_ids[n] if n >= 0 else None for n in result.node.tolist()],
        "outcome": ["unfinished" if ok else "unschedulable" for ok in placed.tolist()],
        "attempts": placed.astype(np.int32),
        "cpu": tasks["cpu"].to_numpy()[result.pod], "mem": tasks["mem"].to_numpy()[result.pod],
        "gpu": tasks["gpu"].to_numpy()[result.pod],
        "gpu_devices": devices, "arrival": np.arange(m, dtype=np.int64),
        "copy_of": [t if c else None for t, c in zip(ids, result.copy.tolist(), strict=True)],
    }, schema_overrides={"copy_of": pl.String, "machine_id": pl.String})
    frame = frame.join(jobs, on="job_id", how="left", maintain_order="left")
    null = pl.lit(None, pl.Float64)
    return frame.select(
        "run_id", "task_id", "job_id", "user", "queue", "machine_id",
        null.alias("submit_s"), null.alias("start_s"), null.alias("end_s"), "outcome",
        "attempts", pl.lit(None, pl.String).alias("locality"), "cpu", "mem", "gpu",
        pl.col("gpu_devices").cast(pl.List(pl.Int32)), "arrival", "copy_of",
    ).to_arrow()


def _nodes_table(machines: pl.DataFrame, run_id: str) -> pa.Table:
    n = machines.height
    return pa.table({
        "run_id": pa.array([run_id] * n, pa.string()),
        "machine_id": machines["machine_id"].to_arrow(),
        "up_s": np.zeros(n), "down_s": np.zeros(n), "ready_s": np.zeros(n),
        "cpu": machines["cpu"].to_numpy(), "mem": machines["mem"].to_numpy(),
        "gpu": machines["gpu"].to_numpy(), "price_per_hour": np.zeros(n),
        "billing_s": np.ones(n), "instance_type": pa.nulls(n, pa.string()),
    }, schema=out.NODE_SCHEMA)


def gpu_curve(result: Arrivals, run_id: str) -> pl.DataFrame:
    """The cluster after each pod, averaged per whole percent of arrived workload."""
    return pl.DataFrame({
        # the nearest whole percent, halves to even, as the authors' analysis rounds it
        # (experiments/analysis/merge_alloc_discrete.py: round(arrived / total / 10, 0))
        "arrived_pct": np.rint(result.arrived * 100).astype(np.int32),
        "alloc_ratio": result.allocated, "frag_gpu": result.frag_milli / MILLI,
        "frag_ratio": result.frag_ratio, "dropped": result.node < 0,
    }).group_by("arrived_pct", maintain_order=True).agg(
        pl.col("alloc_ratio", "frag_gpu", "frag_ratio").mean(), pl.len().alias("pods"),
        pl.col("dropped").sum().cast(pl.Int64).alias("dropped"),
    ).sort("arrived_pct").select(pl.lit(run_id).alias("run_id"), pl.all())


def inflation_metrics(result: Arrivals, capacity_milli: float,
                      request_milli: np.ndarray) -> dict[str, float | None]:
    """The run's metrics (see the module docstring); ``request_milli``: each arrival's GPU."""
    reached = np.flatnonzero(result.arrived >= 1.0 - 1e-12)
    at = int(reached[0]) if len(reached) else len(result.pod) - 1
    fail = result.first_fail
    dropped = result.node < 0
    gpu_pod = request_milli > 0
    capacity_gpu = capacity_milli / MILLI
    return {
        "util_alloc_gpu": float(result.allocated[at]),
        "gpu_fragmentation": float(result.frag_ratio[at]),
        "gpu_frag_gpus": float(result.frag_milli[at] / MILLI),
        "util_alloc_gpu_end": float(result.allocated[-1]),
        "gpu_fragmentation_end": float(result.frag_ratio[-1]),
        "gpu_unallocated_first_fail": (None if fail < 0 else
                                       float(capacity_gpu * (1 - result.allocated[fail]))),
        "gpu_arrived_first_fail": None if fail < 0 else float(result.arrived[fail]),
        "tasks_placed": float((~dropped).sum()),
        "tasks_unschedulable": float(dropped.sum()),
        "gpu_tasks_unschedulable": float((dropped & gpu_pod).sum()),
        "gpu_pods_arrived": float(gpu_pod.sum()),
        "node_hours": 0.0,  # no time passes: the nodes are there, not provisioned over time
    }


UNITS = {"util_alloc_gpu": "fraction", "gpu_fragmentation": "fraction",
         "gpu_frag_gpus": "gpus", "util_alloc_gpu_end": "fraction",
         "gpu_fragmentation_end": "fraction", "gpu_unallocated_first_fail": "gpus",
         "gpu_arrived_first_fail": "fraction", "tasks_placed": "count",
         "tasks_unschedulable": "count", "gpu_tasks_unschedulable": "count",
         "gpu_pods_arrived": "count", "node_hours": "h"}


def _metrics_table(metrics: Mapping[str, float | None], run_id: str) -> pa.Table:
    names = list(metrics)
    return pa.table({"run_id": [run_id] * len(names), "metric": names,
                     "value": pa.array([metrics[k] for k in names], pa.float64()),
                     "unit": [UNITS[k] for k in names]})
