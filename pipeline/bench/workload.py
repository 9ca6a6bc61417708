"""Canonical workloads written directly (no raw format, no adapter): small hand-made traces
for tests and a large synthetic one for the benchmark.

``synthetic_workload`` draws a cluster of two machine shapes and a Poisson stream of jobs
whose tasks have lognormal durations (median 120 s, capped at 20 min) and small cpu/memory
requests, with the arrival rate
set so the offered load is about ``load`` of the cluster's cpu and memory (the larger of
the two) -- 70% by default.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.trace.io import PartWriter, write_table
from pipeline.trace.manifest import Manifest
from pipeline.trace.schema import EXTENSIONS, JOBS, MACHINES, TASKS, conform

UNITS = {"cpu": "cores", "mem": "GiB", "gpu": "devices", "time": "seconds"}


def _table(rows: Sequence[dict[str, Any]] | pa.Table, schema: pa.Schema,
           name: str) -> pa.Table:
    if isinstance(rows, pa.Table):
        return conform(rows, name)
    fields = list(schema) + list(EXTENSIONS.get(name, pa.schema([])))  # family columns too
    cols = {f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in fields
            if any(f.name in r for r in rows)}
    return conform(pa.table(cols) if cols else schema.empty_table(), name)


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
    task_table = _table(tasks, TASKS, "tasks")
    task_table = task_table.take(pa.array(np.argsort(
        task_table["submit_s"].to_numpy(), kind="stable")))
    if jobs is None:
        seen = dict.fromkeys(task_table["job_id"].to_pylist())
        jobs = [{"job_id": j, "user": "u0", "submit_s": 0.0} for j in seen]
    return write_trace_parts(directory, machines, [task_table], jobs, units, part_rows,
                             window_end_s)


def write_trace_parts(directory: Path, machines: Sequence[dict[str, Any]] | pa.Table,
                      tasks: Iterable[pa.Table], jobs: Sequence[dict[str, Any]] | pa.Table,
                      units: dict[str, str] | None = None, part_rows: int = 4_000_000,
                      window_end_s: float | None = None) -> Path:
    """:func:`write_trace` for tasks that come as tables already in submit order, written
    as they come (memory: one table at a time)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_table(directory, "machines", _table(machines, MACHINES, "machines"))
    write_table(directory, "jobs", _table(jobs, JOBS, "jobs"))
    writer = PartWriter(directory, "tasks", part_rows=part_rows)
    for table in tasks:
        writer.write(_table(table, TASKS, "tasks"))
    writer.close()
    manifest = Manifest(source_format="synthetic", units=dict(units or UNITS),
                        time_origin="0 = workload start", created_by="pipeline.bench")
    if window_end_s is not None:
        manifest.window_start_s, manifest.window_end_s = 0.0, float(window_end_s)
        manifest.window_source = "stated when the workload was written"
    manifest.rows = {"machines": len(machines), "jobs": len(jobs), "tasks": writer.rows}
    manifest.write(directory)
    return directory


def _ids(prefix: str, values: np.ndarray) -> pl.Series:
    """String ids ``prefix + str(value)``, vectorized."""
    frame = pl.DataFrame({"v": values})
    return frame.select(pl.concat_str(pl.lit(prefix), pl.col("v").cast(pl.String))).to_series()


# GPU requests of the ``gpu`` workload (shaped on Alibaba's openb pods, GPU tasks only):
# shares of one device and whole devices, with their weights
GPU_REQUESTS = (0.25, 0.5, 0.75, 1.0, 2.0, 4.0)
GPU_WEIGHTS = (0.12, 0.16, 0.12, 0.52, 0.05, 0.03)
GPU_TASK_SHARE = 0.3  # of tasks
GPU_MACHINE_SHARE = 0.4  # of machines, each with GPU_PER_MACHINE devices
GPU_PER_MACHINE = 8


def synthetic_workload(directory: Path, machines: int = 12_500, tasks: int = 1_000_000,
                       seed: int = 0, load: float = 0.7, users: int = 50,
                       chunk_tasks: int = 1 << 20, gpu: bool = False) -> Path:
    """Write a synthetic canonical trace of ``machines`` nodes and ``tasks`` tasks.

    Tasks are drawn and written a chunk of jobs at a time (about ``chunk_tasks`` tasks, each
    chunk from its own seeded generator), so writing 40 M tasks takes the memory of one
    chunk: a first pass over the chunks sums the work to set the arrival span, a second
    draws them again and writes them in submit order (tasks of a chunk that arrive after
    the next chunk's first job wait for it, then the two are sorted together).

    ``gpu``: a share of the machines get 8 GPU devices and a share of the tasks ask for a
    share of one device or whole devices (``GPU_REQUESTS``), drawn from generators of their
    own, so the CPU-only workload of the same seed is unchanged.
    """
    rng = np.random.default_rng(seed)
    big = rng.random(machines) < 0.3
    m_cpu = np.where(big, 32.0, 16.0)
    m_mem = np.where(big, 128.0, 64.0)
    n_jobs = max(tasks // 40, 1)
    per_job = rng.multinomial(tasks, np.full(n_jobs, 1.0 / n_jobs))
    job_user = rng.integers(0, users, size=n_jobs)
    job_queue = rng.integers(0, 4, size=n_jobs)
    unit_submit = np.sort(rng.random(n_jobs))
    ends = np.searchsorted(np.cumsum(per_job), np.arange(chunk_tasks, tasks, chunk_tasks),
                           side="left")
    bounds = np.unique(np.r_[0, ends + 1, n_jobs].clip(0, n_jobs))
    first_task = np.r_[0, np.cumsum(per_job)]
    chunks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
    work = np.zeros(2)
    for c, (j0, j1) in enumerate(chunks):
        cpu, mem, duration = _task_shapes(np.random.default_rng([seed, c]),
                                          int(first_task[j1] - first_task[j0]))
        work += (np.sum(cpu * duration), np.sum(mem * duration))
    span = max(work[0] / m_cpu.sum(), work[1] / m_mem.sum()) / load
    job_submit = unit_submit * span

    def task_tables() -> Iterator[pa.Table]:
        carry: pl.DataFrame | None = None
        for c, (j0, j1) in enumerate(chunks):
            crng = np.random.default_rng([seed, c])
            n = int(first_task[j1] - first_task[j0])
            cpu, mem, duration = _task_shapes(crng, n)
            job = np.repeat(np.arange(j0, j1), per_job[j0:j1])
            frame = pl.DataFrame({
                "task_id": _ids("t", np.arange(first_task[j0], first_task[j1])),
                "job_id": _ids("j", job),
                "submit_s": (job_submit[job] + crng.exponential(5.0, size=n)).round(3),
                "duration_s": duration, "cpu": cpu, "mem": mem,
                "gpu": _gpu_requests(np.random.default_rng([seed, c, 7]), n) if gpu
                else np.zeros(n),
                "cpu_used": cpu * crng.uniform(0.3, 0.9, size=n),
                "mem_used": mem * crng.uniform(0.4, 0.9, size=n),
            })
            if carry is not None:
                frame = pl.concat([carry, frame])
            frame = frame.sort("submit_s", maintain_order=True)
            later = job_submit[j1] if j1 < n_jobs else np.inf
            cut = int(np.searchsorted(frame["submit_s"].to_numpy(), later, side="left"))
            carry = frame.slice(cut)
            yield frame.slice(0, cut).to_arrow()
        if carry is not None and carry.height:
            yield carry.to_arrow()

    machine_frame = pl.DataFrame({
        "machine_id": _ids("m", np.arange(machines)),
        "cpu": m_cpu, "mem": m_mem,
        "gpu": (np.where(np.random.default_rng([seed, 7]).random(machines) < GPU_MACHINE_SHARE,
                         float(GPU_PER_MACHINE), 0.0) if gpu else np.zeros(machines)),
        "rack": _ids("r", np.arange(machines) // 40),
        "speed": np.ones(machines), "added_s": np.zeros(machines),
    })
    job_frame = pl.DataFrame({
        "job_id": _ids("j", np.arange(n_jobs)), "user": _ids("u", job_user),
        "queue": _ids("q", job_queue), "submit_s": job_submit,
    })
    return write_trace_parts(directory, machine_frame.to_arrow(), task_tables(),
                             job_frame.to_arrow(), part_rows=1 << 20)


def _task_shapes(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """``n`` tasks' cpu, memory and duration (lognormal, median 120 s, 1 s to 20 min)."""
    cpu = rng.choice([0.5, 1.0, 2.0, 4.0], size=n, p=[0.3, 0.4, 0.2, 0.1])
    mem = cpu * rng.choice([2.0, 4.0], size=n)
    duration = np.clip(rng.lognormal(np.log(120.0), 0.8, size=n), 1.0, 1200.0).round(1)
    return cpu, mem, duration


def _gpu_requests(rng: np.random.Generator, n: int) -> np.ndarray:
    """GPU requests of ``n`` tasks: ``GPU_TASK_SHARE`` of them ask for one of GPU_REQUESTS."""
    weights = np.asarray(GPU_WEIGHTS) / sum(GPU_WEIGHTS)
    asks = rng.choice(np.asarray(GPU_REQUESTS), size=n, p=weights)
    return np.where(rng.random(n) < GPU_TASK_SHARE, asks, 0.0)
