"""Canonical workloads written directly (no raw format, no adapter): small hand-made traces
for tests and a large synthetic one for the benchmark.

``synthetic_workload`` draws a cluster of two machine shapes and a Poisson stream of jobs
whose tasks have lognormal durations (median 120 s, capped at 20 min) and small cpu/memory
requests, with the arrival rate
set so the offered load is about ``load`` of the cluster's cpu and memory (the larger of
the two) -- 70% by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.trace.io import PartWriter, write_table
from pipeline.trace.manifest import Manifest
from pipeline.trace.schema import JOBS, MACHINES, TASKS, conform

UNITS = {"cpu": "cores", "mem": "GiB", "gpu": "devices", "time": "seconds"}


def _table(rows: Sequence[dict[str, Any]] | pa.Table, schema: pa.Schema,
           name: str) -> pa.Table:
    if isinstance(rows, pa.Table):
        return conform(rows, name)
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema if any(f.name in r
                                                                          for r in rows)}
    return conform(pa.table({k: pa.array(v, schema.field(k).type) for k, v in cols.items()},
                            ) if cols else schema.empty_table(), name)


def write_trace(directory: Path, machines: Sequence[dict[str, Any]] | pa.Table,
                tasks: Sequence[dict[str, Any]] | pa.Table,
                jobs: Sequence[dict[str, Any]] | pa.Table | None = None,
                units: dict[str, str] | None = None, part_rows: int = 4_000_000,
                window_end_s: float | None = None) -> Path:
    """Write a canonical trace directory; jobs default to one per distinct ``job_id``.

    Rows are dicts of canonical columns (missing optional columns get defaults).  Tasks are
    sorted by ``submit_s`` (stable) and written as a part directory, as ingest does.
    ``window_end_s``: the observation window's end stated in the manifest (from 0); without
    it the manifest states none and replays take the tasks' own span.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    task_table = _table(tasks, TASKS, "tasks")
    task_table = task_table.take(pa.array(np.argsort(
        task_table["submit_s"].to_numpy(), kind="stable")))
    if jobs is None:
        seen = dict.fromkeys(task_table["job_id"].to_pylist())
        jobs = [{"job_id": j, "user": "u0", "submit_s": 0.0} for j in seen]
    write_table(directory, "machines", _table(machines, MACHINES, "machines"))
    write_table(directory, "jobs", _table(jobs, JOBS, "jobs"))
    writer = PartWriter(directory, "tasks", part_rows=part_rows)
    writer.write(task_table)
    writer.close()
    manifest = Manifest(source_format="synthetic", units=dict(units or UNITS),
                        time_origin="0 = workload start", created_by="pipeline.bench")
    if window_end_s is not None:
        manifest.window_start_s, manifest.window_end_s = 0.0, float(window_end_s)
        manifest.window_source = "stated when the workload was written"
    manifest.rows = {"machines": len(machines), "jobs": len(jobs), "tasks": len(task_table)}
    manifest.write(directory)
    return directory


def _ids(prefix: str, values: np.ndarray) -> pl.Series:
    """String ids ``prefix + str(value)``, vectorized."""
    frame = pl.DataFrame({"v": values})
    return frame.select(pl.concat_str(pl.lit(prefix), pl.col("v").cast(pl.String))).to_series()


def synthetic_workload(directory: Path, machines: int = 12_500, tasks: int = 1_000_000,
                       seed: int = 0, load: float = 0.7, users: int = 50) -> Path:
    """Write a synthetic canonical trace of ``machines`` nodes and ``tasks`` tasks."""
    rng = np.random.default_rng(seed)
    big = rng.random(machines) < 0.3
    m_cpu = np.where(big, 32.0, 16.0)
    m_mem = np.where(big, 128.0, 64.0)
    cpu = rng.choice([0.5, 1.0, 2.0, 4.0], size=tasks, p=[0.3, 0.4, 0.2, 0.1])
    mem = cpu * rng.choice([2.0, 4.0], size=tasks)
    duration = np.clip(rng.lognormal(np.log(120.0), 0.8, size=tasks), 1.0, 1200.0).round(1)
    demand = max(np.sum(cpu * duration) / m_cpu.sum(), np.sum(mem * duration) / m_mem.sum())
    span = demand / load  # seconds over which the tasks must arrive for this load
    job_of = np.sort(rng.integers(0, max(tasks // 40, 1), size=tasks))
    n_jobs = int(job_of.max()) + 1
    job_submit = np.sort(rng.random(n_jobs)) * span
    submit = (job_submit[job_of] + rng.exponential(5.0, size=tasks)).round(3)
    order = np.argsort(submit, kind="stable")
    task_frame = pl.DataFrame({
        "task_id": _ids("t", np.arange(tasks)), "job_id": _ids("j", job_of[order]),
        "submit_s": submit[order], "duration_s": duration[order], "cpu": cpu[order],
        "mem": mem[order], "gpu": np.zeros(tasks),
        "cpu_used": (cpu * rng.uniform(0.3, 0.9, size=tasks))[order],
        "mem_used": (mem * rng.uniform(0.4, 0.9, size=tasks))[order],
    })
    machine_frame = pl.DataFrame({
        "machine_id": _ids("m", np.arange(machines)),
        "cpu": m_cpu, "mem": m_mem, "gpu": np.zeros(machines),
        "rack": _ids("r", np.arange(machines) // 40),
        "speed": np.ones(machines), "added_s": np.zeros(machines),
    })
    job_frame = pl.DataFrame({
        "job_id": _ids("j", np.arange(n_jobs)),
        "user": _ids("u", rng.integers(0, users, size=n_jobs)),
        "queue": _ids("q", rng.integers(0, 4, size=n_jobs)),
        "submit_s": job_submit,
    })
    return write_trace(directory, machine_frame.to_arrow(), task_frame.to_arrow(),
                       job_frame.to_arrow(), part_rows=1 << 20)
