"""Synthetic Alibaba cluster-trace-v2018 batch workload, in the trace's raw published layout.

Files (columns of the trace's ``schema.txt``; plain CSV, no header, as inside the published
``.tar.gz`` archives): ``machine_meta.csv`` (96 cores, memory 100, two failure domains, a few
status rows per machine), ``batch_task.csv`` and ``batch_instance.csv``.  Times are whole
seconds from the window start; cpu is 100 = 1 core, memory is normalized to 100.

Jobs (``j_N``) arrive as a diurnal Poisson process sized so the offered load (plan_cpu x
instance run time over 96 cores per machine) is ``load`` (Little's law).  Three in four jobs
are DAGs whose task names carry their dependencies (``M1``, ``M2_1``, ``R4_2``, ``M5_3_4``);
the rest are independent ``task_<base64>`` tasks.  A task starts when all instances of its
parents have ended; its instances (``ins_N``) run on random machines; an instance may fail
once and be retried (one row per attempt, ``seq_no`` of ``total_seq_no``); a task whose
instance fails for good is ``Failed`` and its descendants never start; work still running at
the window end is ``Running`` with end time 0 (the trace's "after the window").  Jobs are
generated in time chunks appended to the files, so memory follows the chunk, not the trace.
"""

from __future__ import annotations

import base64
import itertools
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.generate import shapes as sh

CHUNK_INSTANCES = 1_000_000  # expected instances per generation chunk (bounds memory)
PILOT_JOBS = 8000
DAG_SHARE = 0.75  # [A] jobs whose tasks are DAG-named (the rest are task_<base64>)
TASK_FAIL = 0.02  # [A] tasks with an instance failing for good
RETRY = 0.03  # [A] instances failing once, then retried
LETTERS = ("M", "R", "J")
TASK_TYPES = {1: 0.6, 2: 0.05, 3: 0.05, 4: 0.08, 5: 0.02, 6: 0.02, 7: 0.03, 8: 0.02, 9: 0.05,
              10: 0.04, 11: 0.02, 12: 0.02}  # [A] 12 types (schema.txt), type 1 most common
TYPE_TEXT = pl.Series([str(k) for k in range(13)], dtype=pl.String)
TERMINATED, FAILED, RUNNING = 0, 1, 2
STATUS_TEXT = pl.Series(["Terminated", "Failed", "Running"], dtype=pl.String)
STATUS_ROWS_PER_MACHINE_DAY = 0.45  # [S] machine_meta: 17,592 rows / 4,034 machines / 8 days


def generate_alibaba2018(out: Path, machines: int = 200, hours: float = 24.0, seed: int = 0,
                         load: float = 0.65) -> dict:
    """Write a synthetic cluster-trace-v2018 batch workload into ``out``; return a summary."""
    out = Path(out)
    window_s = hours * 3600.0
    rng, rng_meta, rng_pilot = (np.random.default_rng(s)
                                for s in np.random.SeedSequence([seed, 2018]).spawn(3))
    meta = machine_meta(rng_meta, machines, window_s)
    meta.write_csv(out / "machine_meta.csv", include_header=False)
    # Little's law with the core-seconds of a pilot sample of jobs (failures block
    # descendants, retries add work: simpler measured than derived).
    pilot = _Chunk(rng_pilot, np.zeros(PILOT_JOBS), 1, 1, machines, np.inf)
    job_rate = load * machines * sh.ALIBABA_CORES / (pilot.planned_core_s() / PILOT_JOBS)
    instances = job_rate * window_s * pilot.inst_task.size / PILOT_JOBS
    edges = np.linspace(0.0, window_s, max(1, round(instances / CHUNK_INSTANCES)) + 1)
    counts = {"batch_task": 0, "batch_instance": 0}
    busy = 0.0
    next_job = next_instance = 1
    with open(out / "batch_task.csv", "wb") as tasks_f, \
            open(out / "batch_instance.csv", "wb") as inst_f:
        for lo, hi in itertools.pairwise(edges):
            share = np.diff(sh.diurnal_cumulative(np.array([lo, hi])))[0]
            arrivals = sh.arrival_times(rng, rng.poisson(job_rate * share), lo, hi)
            chunk = _Chunk(rng, arrivals, next_job, next_instance, machines, window_s)
            task_rows, inst_rows = chunk.tables()
            task_rows.write_csv(tasks_f, include_header=False)
            inst_rows.write_csv(inst_f, include_header=False)
            counts["batch_task"] += task_rows.height
            counts["batch_instance"] += inst_rows.height
            busy += chunk.busy_core_s
            next_job += arrivals.size
            next_instance = chunk.next_instance
    return {
        "format": "alibaba2018", "machines": machines, "hours": hours, "jobs": next_job - 1,
        "offered_load": busy / (machines * sh.ALIBABA_CORES * window_s),
        "rows": {"machine_meta": meta.height, **counts},
        "files": ["machine_meta.csv", "batch_task.csv", "batch_instance.csv"],
    }


def machine_meta(rng: np.random.Generator, machines: int, window_s: float) -> pl.DataFrame:
    """machine_meta rows: a USING row at 0 per machine, then a few more status rows.

    [S] The real table: every machine 96 cores and memory 100; ~14 machines per
    failure_domain_1 value, ~21 failure_domain_2 values; ~0.2% rows without
    failure_domain_2; ~4.4 rows per machine over 8 days; a handful of IMPORT_INSTALLING.
    """
    ids = np.arange(1, machines + 1)
    fd1_labels = rng.permutation(max(1, machines // 14) * 3)[: max(1, machines // 14)] + 1
    fd1 = fd1_labels[rng.integers(0, fd1_labels.size, machines)]
    fd2 = (fd1 % 21 + 1).astype(str).astype(object)
    fd2[rng.random(machines) < 0.002] = None
    extra = rng.poisson(STATUS_ROWS_PER_MACHINE_DAY * window_s / sh.DAY_S, machines)
    who = np.concatenate([ids - 1, np.repeat(ids - 1, extra)])
    when = np.concatenate([np.zeros(machines, np.int64),
                           rng.integers(1, max(2, int(window_s)), int(extra.sum()))])
    status = np.where(rng.random(who.size) < 0.0003, "IMPORT_INSTALLING", "USING")
    status[:machines] = "USING"
    frame = pl.DataFrame({
        "machine_id": pl.Series([f"m_{k}" for k in ids])[who], "time_stamp": when,
        "failure_domain_1": fd1[who], "failure_domain_2": pl.Series(fd2[who], dtype=pl.String),
        "cpu_num": np.full(who.size, sh.ALIBABA_CORES), "mem_size": np.full(who.size, 100),
        "status": status,
    })
    return frame.sort("machine_id", "time_stamp")


class _Chunk:
    """The jobs arriving in one time chunk: their tasks, instances and rows."""

    def __init__(self, rng: np.random.Generator, arrivals: np.ndarray, first_job: int,
                 first_instance: int, machines: int, window_s: float) -> None:
        self.rng, self.window_s, self.machines = rng, window_s, machines
        n_jobs = arrivals.size
        sizes = sh.dag_sizes(rng, n_jobs)
        self.job, number = sh.expand(sizes)
        self.number = number + 1
        self.job_name = pl.Series([f"j_{first_job + k}" for k in range(n_jobs)], dtype=pl.String)
        is_dag = (rng.random(n_jobs) < DAG_SHARE)[self.job]
        first, second = sh.dag_parents(rng, sizes)
        self.parents = (first * is_dag, second * is_dag)
        self.name_series = pl.Series(_task_names(rng, self.number, self.parents, is_dag),
                                     dtype=pl.String)
        n = self.job.size
        self.task_type = np.array(list(TASK_TYPES))[sh.categorical(
            rng, n_jobs, sh.shares(TASK_TYPES))][self.job]  # values index TYPE_TEXT
        self.plan_cpu = np.array([c for c, _ in sh.ALIBABA_PLAN_CPU])[sh.categorical(
            rng, n, sh.shares([w for _, w in sh.ALIBABA_PLAN_CPU]))]
        self.mem_i = sh.categorical(rng, n, sh.shares([w for _, w in sh.ALIBABA_PLAN_MEM]))
        self.instances = sh.instance_counts(rng, n, cap=int(np.clip(8 * machines, 50, 2000)))
        self.failed = rng.random(n) < TASK_FAIL
        self._instances(first_instance)
        self._schedule(arrivals)

    def _instances(self, first: int) -> None:
        """Per instance: offset from its task's start, run time, retry, machine."""
        rng = self.rng
        self.inst_task, self.inst_k = sh.expand(self.instances)
        m = self.inst_task.size
        self.inst_id = first + np.arange(m)
        self.next_instance = first + m
        median = sh.alibaba_task_medians(rng, self.job.size)
        self.run_s = sh.instance_durations(rng, median[self.inst_task])
        spread = np.minimum(300.0, 0.5 * self.instances)[self.inst_task]
        self.offset_s = np.floor(rng.random(m) * spread)
        self.retry = rng.random(m) < RETRY
        self.first_try_s = np.where(self.retry, np.floor(rng.random(m) * self.run_s) + 1, 0.0)
        fails = np.zeros(m, bool)  # the first instance of a failed task fails for good
        fails[np.flatnonzero(self.inst_k == 0)[self.failed]] = True
        self.fails = fails
        self.inst_end_s = self.offset_s + self.first_try_s + self.run_s  # relative to task
        starts = np.cumsum(self.instances) - self.instances
        self.span_s = np.maximum.reduceat(self.inst_end_s, starts)
        self.machine = rng.integers(1, self.machines + 1, m)

    def _schedule(self, arrivals: np.ndarray) -> None:
        """Task start times: after the job's arrival and every parent's last instance."""
        n = self.job.size
        self.start_s = np.full(n, np.inf)
        self.blocked = np.zeros(n, bool)
        first_task = (np.cumsum(self.number == 1) - 1)  # job order: task 1 opens each job
        base = np.flatnonzero(self.number == 1)[first_task] - 1
        delay = np.floor(self.rng.exponential(2.0, n))
        ready = np.floor(arrivals[self.job])
        for level in range(1, int(self.number.max(initial=0)) + 1):
            rows = np.flatnonzero(self.number == level)
            at = ready[rows]
            blocked = np.zeros(rows.size, bool)
            for parent in self.parents:
                has = parent[rows] > 0
                q = base[rows] + parent[rows]
                q = np.where(has, q, rows)
                end = np.where(has, self.start_s[q] + self.span_s[q], -np.inf)
                at = np.maximum(at, np.floor(end))
                blocked |= has & (self.blocked[q] | self.failed[q])
            self.start_s[rows] = at + delay[rows]
            self.blocked[rows] = blocked

    def planned_core_s(self) -> float:
        """Core-seconds of every instance attempt that will run (no window)."""
        live = ~self.blocked[self.inst_task]
        run = self.first_try_s + self.run_s
        return float((run * self.plan_cpu[self.inst_task])[live].sum()) / 100.0

    def tables(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(batch_task rows, batch_instance rows) of the chunk."""
        w = self.window_s
        t = self.inst_task
        begin = self.start_s[t] + self.offset_s
        live = ~self.blocked[t] & (begin < w)
        first = self._attempts(live & self.retry, begin, begin + self.first_try_s, fail=True)
        second_start = begin + self.first_try_s
        end = second_start + self.run_s
        second = self._attempts(live & (second_start < w), second_start, end, fail=False)
        attempts = pl.concat([first, second]).sort("order")
        self.busy_core_s = float((attempts["busy_s"] * attempts["cpu"]).sum()) / 100.0
        running = np.zeros(self.job.size, bool)
        np.logical_or.at(running, t, live & (end >= w))
        np.logical_or.at(running, t, ~self.blocked[t] & (begin >= w))
        return self._task_rows(running), attempts.drop("order", "busy_s", "cpu")

    def _attempts(self, keep: np.ndarray, start: np.ndarray, end: np.ndarray,
                  fail: bool) -> pl.DataFrame:
        """batch_instance rows of first attempts (``fail``) or final attempts."""
        sel = np.flatnonzero(keep)
        t, w = self.inst_task[sel], self.window_s
        run = end[sel] >= w
        bad = np.ones(sel.size, bool) if fail else self.fails[sel]
        status = np.where(run, RUNNING, np.where(bad, FAILED, TERMINATED))
        total = 1 + self.retry[sel]
        cpu = self.plan_cpu[t]
        mem = np.array([float(v) for v, _ in sh.ALIBABA_PLAN_MEM])[self.mem_i[t]]
        rng = self.rng
        cpu_avg = np.round(cpu * rng.uniform(0.3, 0.9, sel.size), 2)
        mem_avg = np.round(mem * rng.uniform(0.3, 0.9, sel.size), 2)
        return pl.DataFrame({
            "instance_name": self.inst_id[sel], "task_name": self.name_series.gather(t),
            "job_name": self.job_name.gather(self.job[t]),
            "task_type": TYPE_TEXT.gather(self.task_type[t]), "status": STATUS_TEXT.gather(status),
            "start_time": start[sel].astype(np.int64),
            "end_time": np.where(run, 0, end[sel]).astype(np.int64),
            "machine_id": self.machine[sel], "seq_no": np.where(fail, 1, total),
            "total_seq_no": total,
            "cpu_avg": cpu_avg, "cpu_max": np.round(cpu_avg * rng.uniform(1.1, 2.0, sel.size), 2),
            "mem_avg": mem_avg, "mem_max": np.round(mem_avg * rng.uniform(1.0, 1.3, sel.size), 2),
            "order": self.inst_id[sel] * 2 + (0 if fail else 1),
            "busy_s": np.minimum(end[sel], w) - start[sel], "cpu": cpu,
        }).with_columns(
            instance_name=pl.lit("ins_") + pl.col("instance_name").cast(pl.String),
            machine_id=pl.lit("m_") + pl.col("machine_id").cast(pl.String),
        )

    def _task_rows(self, running: np.ndarray) -> pl.DataFrame:
        """batch_task rows of the tasks that started inside the window."""
        sel = np.flatnonzero(~self.blocked & (self.start_s < self.window_s))
        end = self.start_s[sel] + self.span_s[sel]
        status = np.where(running[sel], RUNNING, np.where(self.failed[sel], FAILED, TERMINATED))
        return pl.DataFrame({
            "task_name": self.name_series.gather(sel),
            "instance_num": self.instances[sel], "job_name": self.job_name.gather(self.job[sel]),
            "task_type": TYPE_TEXT.gather(self.task_type[sel]),
            "status": STATUS_TEXT.gather(status),
            "start_time": self.start_s[sel].astype(np.int64),
            "end_time": np.where(running[sel], 0, end).astype(np.int64),
            "plan_cpu": self.plan_cpu[sel],
            "plan_mem": pl.Series([v for v, _ in sh.ALIBABA_PLAN_MEM]).gather(self.mem_i[sel]),
        })


def _task_names(rng: np.random.Generator, number: np.ndarray,
                parents: tuple[np.ndarray, np.ndarray], is_dag: np.ndarray) -> list[str]:
    """DAG names (letter, number, ``_parent``...) or ``task_`` + base64 of a random int64."""
    letters = np.array(LETTERS)[rng.choice(len(LETTERS), size=number.size, p=[0.6, 0.3, 0.1])]
    randoms = rng.integers(-(2**63), 2**63 - 1, size=number.size, dtype=np.int64)
    names = []
    for k, p1, p2, dag, letter, r in zip(number.tolist(), parents[0].tolist(),
                                         parents[1].tolist(), is_dag.tolist(),
                                         letters.tolist(), randoms.tolist(), strict=True):
        if dag:
            names.append(f"{letter}{k}" + (f"_{p1}" if p1 else "") + (f"_{p2}" if p2 else ""))
        else:
            names.append("task_" + base64.b64encode(str(r).encode()).decode())
    return names
