"""Synthetic Google clusterdata-2011-2 trace, written in the trace's raw published layout.

Files (columns and codes of the trace's ``schema.csv``; gz CSV, no header, empty = absent):
``machine_events/part-00000-of-00001.csv.gz``, ``job_events/`` and ``task_events/`` parts
``part-NNNNN-of-MMMMM.csv.gz`` split by time (part n ends before part n+1 starts, rows sorted
by time), and with ``usage=True`` ``task_usage/`` parts of 5-minute measurement windows
(usage shaped over each run: :mod:`pipeline.generate.usage`; only the usage random stream
draws them, so every other table is byte-identical with and without usage).
Times are integer microseconds, 600 s after 0; rows stamped 0 describe the cell as the window
opened (SUBMIT rows naming the machine of tasks already running, then their SCHEDULE rows).

Workload (samplers and sources in :mod:`pipeline.generate.shapes`): jobs arrive as a diurnal
Poisson process whose rate makes the long-run offered load (requested cpu x run time, over
cpu capacity) equal ``load`` (Little's law); the jobs alive when the window opens are that
process's steady-state population, so the load is the same whatever the window length.
A task's attempts follow the trace's grammar: SUBMIT -> SCHEDULE -> FINISH | FAIL | EVICT |
LOST, with a re-SUBMIT after FAIL and EVICT; job kills end every task of the job (KILL, also
of pending tasks); tasks running at the window end have no terminal event.  Placement is
random by capacity (a replay re-places every task).

Generation walks the parts in time order: jobs arriving in a part are generated there; their
events for later parts wait in memory, so memory follows the work in flight, not the size.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from isal import igzip

from pipeline.generate import shapes as sh
from pipeline.generate import usage as gu
from pipeline.generate.burst import Burst

WINDOW_OFFSET_US = 600_000_000
USAGE_PERIOD_S = 300.0
ROWS_PER_PART = 500_000
EVENTS_PER_TASK = 4.8  # measured on our own output; only sizes the number of parts
PENDING_AT_START = 0.1  # [A] of tasks alive at the start, share still waiting for a machine
SYNTHESIZED_AT_START = 0.0025  # [S] 291 of 120,000 rows at 0 have missing info 2, no requests
DIFFERENT_MACHINES = 0.15  # [S] 570 of 3,753 jobs alive at the start
MAX_ATTEMPTS = 12
UPDATE_SHARE = 0.01  # [A] attempts with an UPDATE_RUNNING row (requests unchanged)
OUTAGES_PER_MACHINE_DAY = 0.02  # [A] machine REMOVE (then ADD after ~30 min) rate
UPDATES_PER_MACHINE_DAY = 0.005  # [A] machine UPDATE rate (capacity unchanged)
GZIP_LEVEL = 1
SUBMIT, SCHEDULE, UPDATE_RUNNING = 0, 1, 8
TASK_COLUMNS = ("time", "missing", "job", "index", "machine", "type", "user", "sched_class",
                "priority", "cpu", "mem", "disk", "dm")
JOB_COLUMNS = ("time", "missing", "job", "type", "user", "sched_class", "name", "logical")
INTERVALS = {"uid": pl.Int64, "job": pl.Int64, "index": pl.Int64, "machine": pl.Int64,
             "start": pl.Float64, "end": pl.Float64, "cpu": pl.Float64, "mem": pl.Float64,
             "cpu_frac": pl.Float64, "mem_frac": pl.Float64, "cpu_ar": pl.Float64}
ENDS = (sh.FINISH, sh.KILL, sh.LOST)


def generate_google2011(out: Path, machines: int = 200, hours: float = 24.0, seed: int = 0,
                        load: float = 0.65, usage: bool = False,
                        rows_per_part: int = ROWS_PER_PART, burst_load: float = 0.0,
                        burst_start_h: float = 13.0, burst_hours: float = 3.0,
                        burst_user: str = "") -> dict:
    """Write a synthetic clusterdata-2011-2 trace into directory ``out``; return a summary.

    ``usage`` adds ``task_usage``; ``rows_per_part`` sets about how many task_events rows
    a part holds (the public trace: ~290k over 500 parts); ``burst_*`` add a tenant's burst
    of batch work (:mod:`pipeline.generate.burst`; ``burst_load`` 0 = none).
    """
    gen = _Generator(machines, hours * 3600.0, seed, load, usage, rows_per_part,
                     Burst(burst_load, burst_start_h, burst_hours, burst_user))
    return gen.write(Path(out))


def _us(t_s: np.ndarray) -> np.ndarray:
    """Trace microseconds of window seconds (callers mask times outside the window)."""
    t = np.where(np.abs(t_s) < 1e12, t_s, 0.0)
    return WINDOW_OFFSET_US + np.rint(t * 1e6).astype(np.int64)


def _gz_csv(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_csv(buf, include_header=False)
    return igzip.compress(buf.getvalue(), GZIP_LEVEL, mtime=0)


def _nullable(values: np.ndarray) -> pl.Series:
    """An Int64 series with -1 as null (written as an empty field)."""
    series = pl.Series(values, dtype=pl.Int64)
    return series.set(series == -1, None)


def _palette(pairs: tuple[tuple[str, int], ...]) -> tuple[pl.Series, np.ndarray, np.ndarray]:
    """Printed values (plus a trailing null), their floats, and their probabilities."""
    text = [p[0] for p in pairs]
    return pl.Series([*text, None], dtype=pl.String), np.array(text, float), sh.shares(
        [p[1] for p in pairs])


@dataclass
class _Jobs:
    """A batch of jobs, one array entry per job."""

    job_id: np.ndarray
    submit_s: np.ndarray
    user: np.ndarray
    tier: np.ndarray
    priority: np.ndarray
    sched_class: np.ndarray
    requests: tuple[np.ndarray, np.ndarray, np.ndarray]  # palette indices cpu, mem, disk
    diff_machines: np.ndarray
    n_tasks: np.ndarray
    duration_s: np.ndarray
    flaky: np.ndarray
    kill_s: np.ndarray
    names: list[str]
    logical: np.ndarray
    at_start: bool = False

    def take(self, rows: np.ndarray) -> _Jobs:
        """The jobs at positions ``rows``."""
        cut = {name: value[rows] for name, value in vars(self).items()
               if isinstance(value, np.ndarray)}
        names = [self.names[k] for k in rows.tolist()] if self.names else []
        return _Jobs(**{**vars(self), **cut, "names": names,
                        "requests": tuple(a[rows] for a in self.requests)})


@dataclass
class _Pending:
    """Rows generated early that belong to later parts, per table and part."""

    rows: dict[tuple[str, int], list[pl.DataFrame]] = field(default_factory=dict)

    def put(self, table: str, frame: pl.DataFrame, part: np.ndarray) -> None:
        # gather copies; a filter may return a slice that pins the whole batch in memory
        order = np.argsort(part, kind="stable")
        keys, starts = np.unique(part[order], return_index=True)
        for p, rows in zip(keys.tolist(), np.split(order, starts[1:]), strict=True):
            self.rows.setdefault((table, p), []).append(frame.gather(rows))

    def take(self, table: str, part: int) -> list[pl.DataFrame]:
        return self.rows.pop((table, part), [])


class _Generator:
    """One trace: the cluster, the users, the arrival rate and the parts' time bounds."""

    def __init__(self, machines: int, window_s: float, seed: int, load: float,
                 usage: bool, rows_per_part: int, burst: Burst) -> None:
        # (a fifth stream for the burst leaves the first four, and traces without one, as
        # they were)
        streams = np.random.SeedSequence([seed, 2011]).spawn(5)
        self.rng, rng_cluster, self.rng_usage, rng_pilot, self.rng_burst = (
            np.random.default_rng(s) for s in streams)
        self.window_s, self.usage = window_s, usage
        self.cpu_text, self.cpu_val, self.cpu_p = _palette(sh.GOOGLE_CPU_REQUESTS)
        self.mem_text, self.mem_val, self.mem_p = _palette(sh.GOOGLE_MEM_REQUESTS)
        self.disk_text, _, self.disk_p = _palette(sh.GOOGLE_DISK_REQUESTS)
        self._cluster(rng_cluster, machines)
        self.task_pmf = sh.tasks_per_job_pmf(min(5000, max(100, machines)))  # [A] cap
        self.max_job_cpu = sh.JOB_CPU_SHARE * self.cpu.sum()
        mean_tasks, task_work = sh.mean_widths(self.task_pmf, self.cpu_val, self.cpu_p,
                                               self.max_job_cpu)
        self.next_uid, self.next_job = 0, 6_250_000_000
        # Little's law: busy cpu = arrival rate x tasks x cpu per job x run time per task.
        life_s = sh.mean_job_duration(sh.PRIORITIES_ARRIVING) * sh.run_time_factor()
        self.job_rate = load * self.cpu.sum() / (task_work * life_s)
        # The jobs alive at the start do the expected work that arrivals leave to them.
        arriving = self.job_rate * sh.diurnal_cumulative(window_s) * task_work * (
            self._window_share(rng_pilot))
        self.initial = self._alive_at_start(load * self.cpu.sum() * window_s - arriving,
                                            self.job_rate * life_s)
        self.initial_runs = self._attempts(self.initial) if self.initial.n_tasks.size else None
        tasks = self.initial.n_tasks.sum() + self.job_rate * window_s * mean_tasks
        parts = max(1, round(tasks * EVENTS_PER_TASK / max(rows_per_part, 1)))
        self.bounds = sh.diurnal_bounds(window_s, parts, USAGE_PERIOD_S)
        self.rows = {"task_events": 0, "job_events": 0, "task_usage": 0}
        self.ran_cpu_s = 0.0
        self.burst = burst
        self.burst_user = int(np.argmax(self.user_p))  # the trace's most active user
        if burst.load > 0 and burst.user:  # a tenant of its own, added to the users
            self.users = pl.concat([self.users, pl.Series([burst.user])])
            self.burst_user = len(self.users) - 1
        self.burst_rate = burst.job_rate(self.cpu.sum(), self._burst_cpu_s()) if (
            burst.load > 0) else 0.0

    # --- cluster, users -------------------------------------------------------------------

    def _cluster(self, rng: np.random.Generator, n: int) -> None:
        cls = sh.machine_classes(rng, n)
        config = np.array([c[:2] for c in sh.GOOGLE_MACHINE_CLASSES])
        self.machine_id = rng.permutation(sh.unique_ids(rng, n, 1, 6_500_000_000))
        self.cpu, self.mem = config[cls, 0], config[cls, 1]
        platforms = sh.hashed_strings(rng, 3)
        self.platform = np.array(platforms)[np.where(self.cpu >= 1.0, 2, (self.cpu > 0.25) * 1)]
        self.machine_frame = self._machine_events(rng)
        down = self.machine_frame.filter(pl.col("event_type") == 1)["machine_id"].to_numpy()
        stable = np.flatnonzero(~np.isin(self.machine_id, down))
        self.place_ids, self.place_p = self.machine_id[stable], sh.shares(self.cpu[stable])
        n_users = sh.user_count(n)
        self.users = pl.Series(sh.hashed_strings(rng, n_users))
        self.user_p = sh.zipf_weights(n_users)[rng.permutation(n_users)]
        self.logical = pl.Series(sh.hashed_strings(rng, 8 * n_users))

    def _machine_events(self, rng: np.random.Generator) -> pl.DataFrame:
        """ADD at 0 for every machine, then rare REMOVE/ADD outages and UPDATEs."""
        n, days = self.machine_id.size, self.window_s / sh.DAY_S
        n_out = min(rng.poisson(OUTAGES_PER_MACHINE_DAY * n * days), n // 2)
        hit = rng.choice(n, size=n_out, replace=False)
        down_s = rng.random(n_out) * self.window_s
        up_s = down_s + 1800.0 * np.exp(rng.standard_normal(n_out))
        n_upd = rng.poisson(UPDATES_PER_MACHINE_DAY * n * days)
        upd = rng.integers(0, n, n_upd)
        back = up_s < self.window_s
        who = np.concatenate([np.arange(n), hit, hit[back], upd])
        time = np.concatenate([np.zeros(n, np.int64), _us(down_s), _us(up_s[back]),
                               _us(rng.random(n_upd) * self.window_s)])
        kind = np.repeat([0, 1, 0, 2], [n, n_out, int(back.sum()), n_upd])
        text = {v: f"{v:.4g}" for v in np.unique(np.concatenate([self.cpu, self.mem]))}
        frame = pl.DataFrame({
            "time": time, "machine_id": self.machine_id[who], "event_type": kind,
            "platform": self.platform[who], "cpus": [text[v] for v in self.cpu[who]],
            "memory": [text[v] for v in self.mem[who]],
        })
        return frame.sort("time", "machine_id", "event_type")

    # --- jobs and load sizing -------------------------------------------------------------

    def _jobs(self, rng: np.random.Generator, submit_s: np.ndarray) -> _Jobs:
        n = submit_s.size
        prio = sh.priorities(rng, n, sh.PRIORITIES_ARRIVING)
        tier = sh.priority_tier(prio)
        duration = sh.job_durations(rng, tier)
        users = sh.categorical(rng, n, self.user_p)
        cpu = sh.categorical(rng, n, self.cpu_p)
        width = sh.capped_widths(1 + sh.categorical(rng, n, self.task_pmf), self.cpu_val[cpu],
                                 self.max_job_cpu)
        return _Jobs(
            job_id=np.zeros(n, np.int64), submit_s=submit_s, user=users, tier=tier,
            priority=prio, sched_class=sh.scheduling_classes(rng, tier),
            requests=(cpu, sh.categorical(rng, n, self.mem_p), sh.categorical(rng, n,
                                                                              self.disk_p)),
            diff_machines=(rng.random(n) < DIFFERENT_MACHINES).astype(np.int64),
            n_tasks=width, duration_s=duration,
            flaky=sh.flaky_jobs(rng, n), kill_s=submit_s + sh.job_kill_delays(rng, duration),
            names=[], logical=users * 8 + np.minimum(rng.geometric(0.4, n) - 1, 7),
        )

    def _window_share(self, rng: np.random.Generator, n: int = 200_000) -> float:
        """Mean run time inside the window of an arriving task (Monte Carlo)."""
        jobs = self._jobs(rng, sh.arrival_times(rng, n, 0.0, self.window_s))
        run = np.minimum(sh.task_durations(rng, jobs.duration_s), jobs.kill_s - jobs.submit_s)
        return float(np.minimum(run, self.window_s - jobs.submit_s).mean())

    def _alive_at_start(self, work: float, expected_jobs: float) -> _Jobs:
        """Jobs alive when the window opens, doing ``work`` cpu-seconds inside the window.

        They are the arrival process's steady-state population (length-biased, caught at a
        uniform age: :func:`pipeline.generate.shapes.alive_at_instant`) and keep the rest of
        their lives.  Their number is cut where their expected work in the window is closest
        to ``work`` (a Poisson count would let a few huge services swing the load of a small
        cluster by tens of percent).
        """
        rng = self.rng
        pool = self._jobs(rng, np.zeros(max(16 * int(expected_jobs), 20_000)))
        life = np.minimum(pool.duration_s, pool.kill_s)
        pick, age = sh.alive_at_instant(rng, life, 4 * int(expected_jobs) + 64)
        cpu = self.cpu_val[pool.requests[0][pick]]
        done = np.cumsum(pool.n_tasks[pick] * cpu * np.minimum(life[pick] - age, self.window_s))
        n = int(np.argmin(np.abs(done - work))) + 1 if work > 0 else 0
        order = np.argsort(pick[:n], kind="stable")
        jobs = pool.take(pick[:n][order])
        jobs.duration_s = jobs.duration_s - age[:n][order]
        jobs.kill_s = jobs.kill_s - age[:n][order]
        jobs.names = sh.hashed_strings(rng, n)
        jobs.job_id = sh.unique_ids(rng, n, 3_400_000, self.next_job)
        jobs.at_start = True
        return jobs

    def _burst_cpu_s(self, n: int = 20_000) -> float:
        """Mean requested cpu x run time of one burst job (Monte Carlo)."""
        jobs = self._burst_jobs(np.zeros(n))
        run = sh.task_durations(self.rng_burst, jobs.duration_s[np.repeat(
            np.arange(n), jobs.n_tasks)])
        cpu = np.repeat(self.cpu_val[jobs.requests[0]], jobs.n_tasks)
        return float((cpu * run).sum() / n)

    def _burst_jobs(self, submit_s: np.ndarray) -> _Jobs:
        """Jobs of the bursting user: the trace's shapes, each run capped at the burst."""
        jobs = self._jobs(self.rng_burst, submit_s)
        jobs.user[:] = self.burst_user
        jobs.duration_s = np.minimum(jobs.duration_s, self.burst.hours * 3600.0)
        jobs.kill_s = submit_s + sh.job_kill_delays(self.rng_burst, jobs.duration_s)
        return jobs

    def _burst_arrivals(self, part: int) -> _Jobs | None:
        """The burst's jobs submitted in part ``part`` (None outside the burst)."""
        lo, hi = self.burst.overlap(self.bounds[part], self.bounds[part + 1])
        if self.burst_rate <= 0 or hi <= lo:
            return None
        n = self.rng_burst.poisson(self.burst_rate * (hi - lo))
        jobs = self._burst_jobs(np.sort(self.rng_burst.uniform(lo, hi, n)))
        jobs.names = sh.hashed_strings(self.rng_burst, n)
        jobs.job_id = self.next_job + np.cumsum(self.rng_burst.integers(1, 700, n))
        self.next_job = int(jobs.job_id[-1]) if n else self.next_job
        return jobs

    def _arrivals(self, part: int) -> _Jobs:
        lo, hi = self.bounds[part], self.bounds[part + 1]
        share = np.diff(sh.diurnal_cumulative(np.array([lo, hi])))[0]
        n = self.rng.poisson(self.job_rate * share)
        jobs = self._jobs(self.rng, sh.arrival_times(self.rng, n, lo, hi))
        jobs.names = sh.hashed_strings(self.rng, n)
        jobs.job_id = self.next_job + np.cumsum(self.rng.integers(1, 700, n))
        self.next_job = int(jobs.job_id[-1]) if n else self.next_job
        return jobs

    # --- tasks and their attempts ---------------------------------------------------------

    def _attempts(self, jobs: _Jobs) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Per task and per attempt arrays for a batch of jobs."""
        rng, horizon = self.rng, self.window_s
        job, index = sh.expand(jobs.n_tasks)
        n = job.size
        gap = rng.uniform(1e-4, 2e-3, jobs.n_tasks.size)[job]
        tasks = {
            "job": job, "index": index, "uid": self.next_uid + np.arange(n),
            "duration": sh.task_durations(rng, jobs.duration_s[job]),
            "final": np.full(n, -1), "final_s": np.full(n, np.nan),
            "capped": np.zeros(n, bool), "first_sched": np.full(n, np.inf),
            "running0": np.zeros(n, bool), "synth": np.zeros(n, bool),
        }
        self.next_uid += n
        submit = jobs.submit_s[job] + (0.0 if jobs.at_start else index * gap)
        if jobs.at_start:
            tasks["running0"] = rng.random(n) >= PENDING_AT_START
            tasks["synth"] = rng.random(n) < SYNTHESIZED_AT_START
        tier, flaky, kill = jobs.tier[job], jobs.flaky[job], jobs.kill_s[job]
        active, parts = np.arange(n), []
        for r in range(MAX_ATTEMPTS):
            if not active.size:
                break
            att = self._attempt(rng, r, active, submit[active], tier[active], flaky[active],
                                kill[active], tasks)
            parts.append(att)
            again = np.isin(att["outcome"], (sh.FAIL, sh.EVICT)) & (att["end"] < horizon)
            submit[active[again]] = att["end"][again] + rng.uniform(0.0, 2.0, int(again.sum()))
            active = active[again]
        attempts = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        return tasks, attempts

    def _attempt(self, rng: np.random.Generator, r: int, task: np.ndarray, submit: np.ndarray,
                 tier: np.ndarray, flaky: np.ndarray, kill: np.ndarray,
                 tasks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One round of attempts for the tasks ``task``; updates their final state."""
        sched = submit + sh.schedule_waits(rng, tier)
        if r == 0:
            sched[tasks["running0"][task]] = 0.0
        outcome = sh.attempt_outcomes(rng, tier, flaky)
        d = tasks["duration"][task]
        partial = 1.0 + rng.random(task.size) * np.minimum(np.where(flaky, 600.0, d),
                                                             2 * self.window_s)
        end = sched + np.where(outcome == sh.FINISH, d, partial)
        if r == MAX_ATTEMPTS - 1:  # retries exhausted: the job's controller kills the task
            cap = np.isin(outcome, (sh.FAIL, sh.EVICT))
            outcome[cap] = sh.KILL
            tasks["capped"][task[cap]] = True
        kill = np.maximum(kill, submit)
        pending_kill, run_kill = kill < sched, (kill >= sched) & (kill < end)
        outcome[pending_kill | run_kill] = sh.KILL
        sched[pending_kill] = np.nan
        end = np.where(pending_kill | run_kill, kill, end)
        ended = np.isin(outcome, ENDS) & (end < self.window_s)
        tasks["final"][task] = np.where(ended, outcome, -1)
        tasks["final_s"][task] = end
        tasks["first_sched"][task] = np.fmin(tasks["first_sched"][task], sched)
        machine = self.place_ids[sh.categorical(rng, task.size, self.place_p)]
        update = rng.random(task.size) < UPDATE_SHARE
        upd_s = sched + rng.random(task.size) * (np.minimum(end, self.window_s) - sched)
        return {"task": task, "r": np.full(task.size, r), "submit": submit, "sched": sched,
                "end": end, "outcome": outcome, "machine": machine,
                "update_s": np.where(update, upd_s, np.nan)}

    # --- rows -----------------------------------------------------------------------------

    def _task_rows(self, jobs: _Jobs, tasks: dict, att: dict) -> pl.DataFrame:
        """task_events rows (palette and user indices; strings are filled when writing)."""
        h, t = self.window_s, att["task"]
        at0 = (att["r"] == 0) & jobs.at_start
        run0 = at0 & tasks["running0"][t]
        scheduled = np.isfinite(att["sched"])
        never = np.zeros(t.size, bool)
        specs = [  # (rows, time_s, stamped 0, event type, names the machine, ordinal)
            (att["submit"] < h, att["submit"], at0, SUBMIT, run0, 0),
            (scheduled & (att["sched"] < h), att["sched"], run0, SCHEDULE, scheduled, 1),
            (att["update_s"] < h, att["update_s"], never, UPDATE_RUNNING, scheduled, 2),
            ((att["outcome"] >= 0) & (att["end"] < h), att["end"], never, att["outcome"],
             scheduled, 3),
        ]
        frames = []
        for mask, when, zero, kind, placed, ordinal in specs:
            sel = np.flatnonzero(mask)
            ti = t[sel]
            j = tasks["job"][ti]
            time = np.where(zero[sel], 0, _us(np.nan_to_num(when[sel])))
            synth = zero[sel] & tasks["synth"][ti]
            order = att["r"][sel] * 4 + ordinal
            uid = tasks["uid"][ti]
            nulls = (len(self.cpu_text) - 1, len(self.mem_text) - 1, len(self.disk_text) - 1)
            req = [np.where(synth, null, r[j]) for r, null in zip(jobs.requests, nulls,
                                                                  strict=True)]
            frames.append(pl.DataFrame({
                "time": time, "missing": _nullable(np.where(synth, 2, -1)),
                "job": jobs.job_id[j], "index": tasks["index"][ti],
                "machine": _nullable(np.where(placed[sel], att["machine"][sel], -1)),
                "type": np.broadcast_to(kind, mask.shape)[sel].astype(np.int64),
                "user": jobs.user[j], "sched_class": jobs.sched_class[j],
                "priority": jobs.priority[j], "cpu": req[0], "mem": req[1], "disk": req[2],
                "dm": _nullable(np.where(synth, -1, jobs.diff_machines[j])),
                "tie": np.where(time == 0, order * (1 << 40) + uid, uid * 64 + order),
            }))
        return pl.concat(frames)

    def _job_rows(self, jobs: _Jobs, tasks: dict) -> pl.DataFrame:
        """job_events rows: SUBMIT, SCHEDULE at the first task placement, end with the last task."""
        n, job = jobs.n_tasks.size, tasks["job"]
        first = np.full(n, np.inf)
        np.minimum.at(first, job, np.nan_to_num(tasks["first_sched"], nan=np.inf))
        starts = np.cumsum(jobs.n_tasks) - jobs.n_tasks
        last = np.maximum.reduceat(np.where(tasks["final"] >= 0, tasks["final_s"], np.inf), starts)
        kind = np.where(tasks["final"] == sh.KILL, 1 + tasks["capped"], 0)
        worst = np.maximum.reduceat(kind, starts)
        end_type = np.array([sh.FINISH, sh.KILL, sh.FAIL])[worst]
        sub_us = np.zeros(n, np.int64) if jobs.at_start else _us(jobs.submit_s)
        first_us = np.where(first == 0.0, 0, _us(np.where(np.isfinite(first), first, 0.0)))
        h = self.window_s
        keep = [np.ones(n, bool), first < h, last < h]
        times = [sub_us, first_us, _us(np.where(last < h, last, 0.0))]
        types = [np.zeros(n, np.int64), np.ones(n, np.int64), end_type]
        rows = np.concatenate([np.flatnonzero(k) for k in keep])
        which = np.repeat([0, 1, 2], [int(k.sum()) for k in keep])
        time = np.concatenate([t[k] for t, k in zip(times, keep, strict=True)])
        return pl.DataFrame({
            "time": time, "missing": pl.repeat(None, rows.size, dtype=pl.Int64, eager=True),
            "job": jobs.job_id[rows],
            "type": np.concatenate([t[k] for t, k in zip(types, keep, strict=True)]),
            "user": jobs.user[rows], "sched_class": jobs.sched_class[rows],
            "name": pl.Series(jobs.names, dtype=pl.String).gather(rows),
            "logical": jobs.logical[rows],
            "tie": np.where(time == 0, which * (1 << 40) + jobs.job_id[rows],
                            jobs.job_id[rows] * 4 + which),
        })

    def _intervals(self, jobs: _Jobs, tasks: dict, att: dict) -> pl.DataFrame:
        """Run intervals of the attempts that ran inside the window (for usage and load)."""
        ran = np.isfinite(att["sched"]) & (att["sched"] < self.window_s)
        t = att["task"][ran]
        j = tasks["job"][t]
        return pl.DataFrame(schema=INTERVALS, data={
            "uid": tasks["uid"][t], "job": jobs.job_id[j], "index": tasks["index"][t],
            "machine": att["machine"][ran], "start": att["sched"][ran],
            "end": np.minimum(att["end"][ran], self.window_s),
            "cpu": self.cpu_val[jobs.requests[0][j]], "mem": self.mem_val[jobs.requests[1][j]],
            "cpu_frac": sh.usage_fractions(self.rng_usage, t.size),
            "mem_frac": sh.usage_fractions(self.rng_usage, t.size),
            "cpu_ar": np.full(t.size, np.nan),  # the CPU walk's state (no window yet)
        })

    def _usage_rows(self, iv: pl.DataFrame, lo: float, hi: float
                    ) -> tuple[pl.DataFrame, np.ndarray]:
        """task_usage rows of the 5-minute windows starting in ``[lo, hi)``, and each
        interval's CPU walk state after them (shapes: :mod:`pipeline.generate.usage`)."""
        start = iv["start"].to_numpy()
        row, ws, we = sh.measurement_windows(start, iv["end"].to_numpy(), lo, hi, USAGE_PERIOD_S)
        rng, n = self.rng_usage, row.size
        walk, state = gu.cpu_walk(rng, row, iv["cpu_ar"].to_numpy())
        machine = iv["machine"].to_numpy()[row]
        cpu = np.minimum(iv["cpu"].to_numpy()[row] * iv["cpu_frac"].to_numpy()[row] * walk,
                         self._machine_cpu(machine))
        mem_req = iv["mem"].to_numpy()[row]
        mem = np.minimum(mem_req * iv["mem_frac"].to_numpy()[row] * gu.mem_profile(
            rng, (ws + we) / 2 - start[row]), mem_req)
        empty = pl.repeat(None, n, dtype=pl.Float64, eager=True)
        rows = iv.select("job", "index", "machine", "uid")[row]
        return pl.DataFrame({
            "start": _us(ws), "end": _us(we), "job": rows["job"], "index": rows["index"],
            "machine": rows["machine"], "cpu_rate": _sig4(cpu), "canonical_mem": _sig4(mem),
            "assigned_mem": empty, "unmapped_page_cache": empty, "total_page_cache": empty,
            "max_mem": _sig4(np.minimum(mem * rng.uniform(1.0, 1.05, n), mem_req)),
            "disk_io_time": empty, "local_disk": empty,
            "max_cpu_rate": _sig4(np.minimum(cpu * rng.uniform(1.1, 1.8, n),
                                             self._machine_cpu(machine))),
            "max_disk_io_time": empty, "cpi": empty, "mai": empty, "sample_portion": empty,
            "aggregation_type": pl.repeat(None, n, dtype=pl.Int64, eager=True),
            "sampled_cpu": empty,
        }).with_columns(tie=rows["uid"]).sort("start", "tie").drop("tie"), state

    def _machine_cpu(self, machine_id: np.ndarray) -> np.ndarray:
        """CPU capacity of each machine id (ids of the cluster)."""
        order = np.argsort(self.machine_id)
        return self.cpu[order[np.searchsorted(self.machine_id[order], machine_id)]]

    # --- writing --------------------------------------------------------------------------

    def write(self, out: Path) -> dict:
        """Write every table into ``out`` (an existing empty directory); return the summary."""
        tables = ["machine_events", "job_events", "task_events"]
        tables += ["task_usage"] if self.usage else []
        for table in tables:
            (out / table).mkdir(parents=True, exist_ok=True)
        files = ["machine_events/part-00000-of-00001.csv.gz"]
        (out / files[0]).write_bytes(_gz_csv(self.machine_frame))
        pending, running, counts = _Pending(), pl.DataFrame(schema=INTERVALS), [0, 0]
        for p in range(len(self.bounds) - 1):
            for jobs, tasks, att in self._batches(p):
                counts = [counts[0] + jobs.n_tasks.size, counts[1] + tasks["job"].size]
                self._route(pending, jobs, tasks, att)
                ran = self._intervals(jobs, tasks, att)
                self.ran_cpu_s += _cpu_s(ran)
                if self.usage:
                    running = pl.concat([running, ran])
            files += self._write_part(out, p, pending)
            if self.usage:
                lo, hi = self.bounds[p], self.bounds[p + 1]
                rows, state = self._usage_rows(running, lo, hi)
                files.append(self._write(out, "task_usage", p, rows))
                running = running.with_columns(cpu_ar=state).filter(pl.col("end") > hi)
        return {
            "format": "google2011", "machines": int(self.machine_id.size),
            "hours": self.window_s / 3600.0, "jobs": counts[0], "tasks": counts[1],
            "users": len(self.users), "parts": len(self.bounds) - 1,
            "offered_load": float(self.ran_cpu_s / (self.cpu.sum() * self.window_s)),
            "rows": {"machine_events": self.machine_frame.height, **self.rows},
            "files": files,
        }

    def _batches(self, p: int) -> list[tuple[_Jobs, dict, dict]]:
        """The job batches first seen in part ``p``, with their tasks and attempts."""
        batches = [(self.initial, *self.initial_runs)] if p == 0 and self.initial_runs else []
        arriving = self._arrivals(p)
        if arriving.n_tasks.size:
            batches.append((arriving, *self._attempts(arriving)))
        burst = self._burst_arrivals(p)
        if burst is not None and burst.n_tasks.size:
            batches.append((burst, *self._attempts(burst)))
        return batches

    def _route(self, pending: _Pending, jobs: _Jobs, tasks: dict, att: dict) -> None:
        """Queue a batch's task and job events under the parts their times fall in."""
        cuts = _us(self.bounds[1:-1])
        for table, rows in (("task_events", self._task_rows(jobs, tasks, att)),
                            ("job_events", self._job_rows(jobs, tasks))):
            pending.put(table, rows, np.searchsorted(cuts, rows["time"].to_numpy(), side="right"))

    def _write_part(self, out: Path, p: int, pending: _Pending) -> list[str]:
        """Sort, print and write part ``p`` of task_events and job_events."""
        written = []
        for table, columns in (("task_events", TASK_COLUMNS), ("job_events", JOB_COLUMNS)):
            frames = pending.take(table, p)
            frame = pl.concat(frames).sort("time", "tie") if frames else pl.DataFrame(
                {c: [] for c in columns})
            if frames:
                texts = {"user": self.users, "cpu": self.cpu_text, "mem": self.mem_text,
                         "disk": self.disk_text, "logical": self.logical}
                frame = frame.with_columns(
                    texts[c].gather(frame[c]).alias(c) for c in texts if c in frame.columns)
            written.append(self._write(out, table, p, frame.select(columns)))
        return written

    def _write(self, out: Path, table: str, p: int, frame: pl.DataFrame) -> str:
        name = f"{table}/part-{p:05d}-of-{len(self.bounds) - 1:05d}.csv.gz"
        (out / name).write_bytes(_gz_csv(frame))
        self.rows[table] += frame.height
        return name


def _cpu_s(intervals: pl.DataFrame) -> float:
    """Requested cpu x run time of run intervals."""
    return float(((intervals["end"] - intervals["start"]) * intervals["cpu"]).sum())


def _sig4(values: np.ndarray) -> np.ndarray:
    """Round to 4 significant digits, as the trace prints its normalized values."""
    safe = np.where(values > 0, values, 1.0)
    scale = 10.0 ** (3 - np.floor(np.log10(safe)))
    return np.where(values > 0, np.round(values * scale) / scale, 0.0)
