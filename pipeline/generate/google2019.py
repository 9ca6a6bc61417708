"""Synthetic Google cluster-usage traces v3 (one cell), in the raw published layout.

Files (the GCS export of a cell, ``gs://clusterdata_2019_X``): ``machine_events``,
``collection_events``, ``instance_events`` and ``instance_usage`` as gzipped
newline-delimited JSON parts ``TABLE-NNNNNNNNNNNN.json.gz``, fields named as in
``clusterdata_trace_format_v3.proto`` (``resource_request``/``capacity``/``average_usage``
nested ``{cpus, memory}``), INT64 values written as strings as BigQuery exports them, times in
µs since 600 s before the window.

Shapes reused from :mod:`pipeline.generate.shapes` (the 2011 trace's machine classes,
requests, durations and outcomes; [A] the v3 traces are normalized the same way).  [A] v3
specifics: priorities on the v3 scale (free < 100, mid-SLO 100-119, production 120-200,
monitoring > 200, the v3 document); one job in five placed by the batch scheduler; a few alloc
sets (instances running through the window from before it) with some jobs inside them; one
job in twenty runs after an earlier job (``start_after_collection_ids``).  Jobs arrive as a
diurnal Poisson process sized so the offered load (cpu request x run time over the cluster's
cpu) is ``load``; a task may be evicted once and resubmitted; work still running at the window
end has no terminal event.  Usage: 300 s windows of each run (:mod:`pipeline.generate.usage`).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.generate import shapes as sh
from pipeline.generate import usage as gu

OFFSET_US = 600_000_000
PART_ROWS = 200_000  # rows per published part (the real parts are ~1 GB compressed)
PILOT_JOBS = 4000
# [A] v3 priorities (value -> weight) and the 2011 tier each behaves like.
PRIORITIES = {0: 0.35, 25: 0.1, 100: 0.2, 103: 0.1, 114: 0.05, 119: 0.05, 200: 0.1, 360: 0.05}
EVICT_SHARE, KILL_SHARE, FAIL_SHARE = 0.04, 0.1, 0.03
BATCH_SHARE, AFTER_SHARE, ALLOC_JOB_SHARE = 0.2, 0.05, 0.05
USAGE_PERIOD_S = 300.0


def generate_google2019(out: Path, machines: int = 200, hours: float = 24.0, seed: int = 0,
                        load: float = 0.65) -> dict:
    """Write one synthetic v3 cell into ``out``; return a summary."""
    out = Path(out)
    window_s = hours * 3600.0
    rng_m, rng_j, rng_p, rng_u = (np.random.default_rng(s) for s in
                                  np.random.SeedSequence([seed, 2019]).spawn(4))
    cells = _machines(rng_m, machines, window_s)
    capacity = float(cells["capacity"].struct.field("cpus").filter(
        cells["type"] == "1").sum())
    # Little's law on the in-window work of a pilot sample arriving uniformly over the window
    # (the cluster starts empty, so long services count only for the part they run inside).
    pilot = _Jobs(rng_p, np.sort(rng_p.random(PILOT_JOBS) * window_s), machines, window_s)
    rate = load * capacity / (pilot.cpu_s(window_s) / PILOT_JOBS)
    arrivals = sh.arrival_times(rng_j, int(rng_j.poisson(rate * window_s)), 0.0, window_s)
    work = _Jobs(rng_j, arrivals, machines, window_s)
    ids = cells.filter(pl.col("type") == "1")["machine_id"].unique(maintain_order=True)
    tables = {
        "machine_events": cells,
        "collection_events": work.collection_events(),
        "instance_events": work.instance_events(ids),
        "instance_usage": work.instance_usage(rng_u, ids),
    }
    files = []
    for name, frame in tables.items():
        files += _write_parts(out, name, frame)
    busy = work.cpu_s(window_s)
    return {
        "format": "google2019", "machines": machines, "hours": hours,
        "jobs": int(arrivals.size), "offered_load": busy / (capacity * window_s),
        "rows": {name: frame.height for name, frame in tables.items()}, "files": files,
    }


def _write_parts(out: Path, name: str, frame: pl.DataFrame) -> list[str]:
    """Gzipped NDJSON parts of ``PART_ROWS`` rows (gzip mtime 0: same input, same bytes)."""
    names = []
    for k in range(max(1, -(-frame.height // PART_ROWS))):
        rel = f"{name}-{k:012d}.json.gz"
        data = frame.slice(k * PART_ROWS, PART_ROWS).write_ndjson().encode()
        (out / rel).write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
        names.append(rel)
    return names


def _us(t_s: np.ndarray) -> pl.Series:
    """Seconds from the window start -> trace µs as strings (BigQuery's INT64 in JSON)."""
    return pl.Series(np.round(np.asarray(t_s) * 1e6).astype(np.int64) + OFFSET_US).cast(pl.String)


def _resources(cpus: np.ndarray, memory: np.ndarray) -> pl.Series:
    return pl.DataFrame({"cpus": cpus, "memory": memory}).to_struct()


def _machines(rng: np.random.Generator, n: int, window_s: float) -> pl.DataFrame:
    """ADD at time 0 ("before the window") per machine; [A] 1% a day removed, re-added 2 h on."""
    classes = np.array([c[:2] for c in sh.GOOGLE_MACHINE_CLASSES])[sh.machine_classes(rng, n)]
    ids = sh.unique_ids(rng, n, 10**8, 10**12)
    racks = max(1, n // 40)  # [A] 40 machines per top-of-rack switch
    switches = np.array(sh.hashed_strings(rng, racks))[rng.integers(0, racks, n)]
    platforms = np.array(sh.hashed_strings(rng, 3))[rng.integers(0, 3, n)]
    out = rng.random(n) < 0.01 * window_s / sh.DAY_S
    down = rng.random(n) * window_s
    who = np.concatenate([np.arange(n), np.flatnonzero(out), np.flatnonzero(out)])
    kind = np.repeat([1, 2, 1], [n, int(out.sum()), int(out.sum())])
    when = np.concatenate([np.zeros(n), down[out], down[out] + 7200.0])
    keep = when < window_s
    who, kind, when = who[keep], kind[keep], when[keep]
    frame = pl.DataFrame({
        "time": np.where(when > 0, _us(when).cast(pl.Int64), 0).astype(str),
        "machine_id": ids[who].astype(str), "type": kind.astype(str),
        "switch_id": switches[who], "capacity": _resources(classes[who, 0], classes[who, 1]),
        "platform_id": platforms[who],
    }).with_columns(pl.when(pl.col("type") == "2").then(None).otherwise(pl.col("capacity"))
                    .alias("capacity"))
    return frame.with_columns(pl.Series("_t", when)).sort("_t", "machine_id").drop("_t")


class _Jobs:
    """The jobs arriving at ``arrivals``: their tasks, attempts and published rows."""

    def __init__(self, rng: np.random.Generator, arrivals: np.ndarray, machines: int,
                 window_s: float) -> None:
        self.rng, self.window_s, self.n_machines = rng, window_s, machines
        n = arrivals.size
        self.arrival = arrivals
        self.job_ids = sh.unique_ids(rng, n, 10**11, 10**12) if n else np.zeros(0, np.int64)
        self.priority = sh.priorities(rng, n, PRIORITIES)
        tier = np.where(self.priority < 100, sh.FREE, np.where(self.priority < 120, sh.MIDDLE,
                                                                 sh.PRODUCTION))
        self.sched_class = sh.scheduling_classes(rng, tier)
        pmf = sh.tasks_per_job_pmf(int(np.clip(2 * machines, 5, 500)))
        self.width = rng.choice(pmf.size, size=n, p=pmf) + 1
        cpu = np.array([float(v) for v, _ in sh.GOOGLE_CPU_REQUESTS])
        mem = np.array([float(v) for v, _ in sh.GOOGLE_MEM_REQUESTS])
        self.cpu = cpu[sh.categorical(rng, n, sh.shares([w for _, w in sh.GOOGLE_CPU_REQUESTS]))]
        self.mem = mem[sh.categorical(rng, n, sh.shares([w for _, w in sh.GOOGLE_MEM_REQUESTS]))]
        self.user = rng.choice(sh.user_count(machines), size=n,
                               p=sh.zipf_weights(sh.user_count(machines)))
        self.batch = rng.random(n) < BATCH_SHARE
        self.after = np.where((rng.random(n) < AFTER_SHARE) & (np.arange(n) > 0),
                              np.floor(rng.random(n) * np.arange(n)).astype(np.int64), -1)
        self.alloc = rng.random(n) < ALLOC_JOB_SHARE
        self.job, self.index = sh.expand(self.width)
        m = self.job.size
        self.run = sh.task_durations(rng, sh.job_durations(rng, tier)[self.job])
        self.start = arrivals[self.job] + np.floor(rng.exponential(5.0, m))
        self.evicted = rng.random(m) < EVICT_SHARE
        self.first_run = np.where(self.evicted, np.floor(rng.random(m) * self.run) + 1, 0.0)
        self.restart = self.start + self.first_run + np.where(
            self.evicted, np.floor(rng.exponential(30.0, m)) + 1, 0.0)
        self.end = self.restart + self.run
        u = rng.random(m)
        self.outcome = np.where(u < KILL_SHARE, 7, np.where(u < KILL_SHARE + FAIL_SHARE, 5, 6))
        self.machine = rng.integers(0, machines, (2, m))
        self.frac = sh.usage_fractions(rng, m)

    def cpu_s(self, until: float = np.inf) -> float:
        """Requested cpu x run time of every attempt (inside ``[0, until]``)."""
        runs = (np.minimum(self.start + self.first_run, until) - np.minimum(self.start, until)
                + np.minimum(self.end, until) - np.minimum(self.restart, until))
        return float((runs * self.cpu[self.job]).sum())

    def collection_events(self) -> pl.DataFrame:
        """SUBMIT/SCHEDULE/terminal per job, and the alloc sets (running from before)."""
        w, j = self.window_s, self.job
        n = self.arrival.size
        first = np.full(n, np.inf)
        np.minimum.at(first, j, self.start)
        last = np.zeros(n)
        np.maximum.at(last, j, self.end)
        kinds = [(self.arrival, 0), (first, 3), (last, 6)]
        rows = [(np.flatnonzero(t < w), t, k) for t, k in kinds]
        job = np.concatenate([r for r, _, _ in rows])
        t = np.concatenate([tt[r] for r, tt, _ in rows])
        kind = np.concatenate([np.full(r.size, k) for r, _, k in rows])
        after = pl.Series([[str(self.job_ids[a])] if a >= 0 else None
                           for a in self.after[job].tolist()], dtype=pl.List(pl.String))
        frame = pl.DataFrame({
            "time": _us(t), "type": kind.astype(str),
            "collection_id": self.job_ids[job].astype(str),
            "scheduling_class": self.sched_class[job].astype(str), "collection_type": "0",
            "priority": self.priority[job].astype(str),
            "alloc_collection_id": np.where(self.alloc[job], self._alloc_id(), 0).astype(str),
            "user": pl.Series([f"user_{u}" for u in self.user[job].tolist()]),
            "collection_name": pl.Series([f"name_{c}" for c in self.job_ids[job].tolist()]),
            "start_after_collection_ids": after,
            "vertical_scaling": np.where(self.batch[job], 1, 3).astype(str),
            "scheduler": self.batch[job].astype(int).astype(str),
        })
        alloc = pl.DataFrame({"time": ["0", "0"], "type": ["0", "3"],
                              "collection_id": [str(self._alloc_id())] * 2,
                              "collection_type": ["1", "1"], "priority": ["200", "200"],
                              "user": ["user_0", "user_0"]})
        return pl.concat([alloc, frame.with_columns(pl.Series("_t", t)).sort(
            "_t", "collection_id", "type").drop("_t")], how="diagonal")

    def _alloc_id(self) -> int:
        return 10**10 + 7

    def instance_events(self, machine_ids: pl.Series) -> pl.DataFrame:
        """SUBMIT, SCHEDULE, (EVICT, SUBMIT, SCHEDULE,) terminal per task, inside the window."""
        w, m = self.window_s, self.job.size
        ev = self.evicted
        pieces = [  # (time, type, attempt, rows)
            (self.arrival[self.job], 0, 0, np.ones(m, bool)),
            (self.start, 3, 0, np.ones(m, bool)),
            (self.start + self.first_run, 4, 0, ev),
            (self.start + self.first_run, 0, 1, ev),
            (self.restart, 3, 1, ev),
            (self.end, -1, 1, np.ones(m, bool)),
        ]
        rows, t, kind, attempt = [], [], [], []
        for time, k, a, sel in pieces:
            r = np.flatnonzero(sel & (time < w))
            rows.append(r)
            t.append(time[r])
            kind.append(self.outcome[r] if k < 0 else np.full(r.size, k))
            attempt.append(np.full(r.size, a))
        r, tt, k, a = (np.concatenate(x) for x in (rows, t, kind, attempt))
        on = np.isin(k, [3, 4, 5, 6, 7])
        machine = np.where(on, machine_ids.to_numpy()[self.machine[a, r]].astype(np.int64), 0)
        jobs = self.job[r]
        alloc = pl.DataFrame({"time": ["0", "0", "0", "0"], "type": ["0", "3", "0", "3"],
                              "collection_id": [str(self._alloc_id())] * 4,
                              "collection_type": ["1"] * 4, "instance_index": ["0", "0", "1", "1"],
                              "priority": ["200"] * 4,
                              "resource_request": _resources(np.full(4, 0.1), np.full(4, 0.1))})
        frame = pl.DataFrame({
            "time": _us(tt), "type": k.astype(str),
            "collection_id": self.job_ids[jobs].astype(str),
            "scheduling_class": self.sched_class[jobs].astype(str), "collection_type": "0",
            "priority": self.priority[jobs].astype(str),
            "alloc_collection_id": np.where(self.alloc[jobs], self._alloc_id(), 0).astype(str),
            "instance_index": self.index[r].astype(str), "machine_id": machine.astype(str),
            "alloc_instance_index": np.where(self.alloc[jobs], 0, -1).astype(str),
            "resource_request": _resources(self.cpu[jobs], self.mem[jobs]),
        })
        order = pl.DataFrame({"_t": tt, "_r": r, "_s": np.arange(r.size)})
        frame = pl.concat([frame, order], how="horizontal").sort("_t", "_r", "_s")
        return pl.concat([alloc, frame.drop("_t", "_r", "_s")], how="diagonal")

    def instance_usage(self, rng: np.random.Generator, machine_ids: pl.Series) -> pl.DataFrame:
        """300 s average_usage windows of every attempt's run inside the window."""
        starts = np.concatenate([self.start[self.evicted], self.restart])
        ends = np.concatenate([(self.start + self.first_run)[self.evicted], self.end])
        task = np.concatenate([np.flatnonzero(self.evicted), np.arange(self.job.size)])
        attempt = np.concatenate([np.zeros(int(self.evicted.sum()), int),
                                  np.ones(self.job.size, int)])
        piece, ws, we = sh.measurement_windows(starts, ends, 0.0, self.window_s, USAGE_PERIOD_S)
        order = np.lexsort((ws, piece))
        piece, ws, we = piece[order], ws[order], we[order]
        tk = task[piece]
        walk, _ = gu.cpu_walk(rng, piece, np.full(starts.size, np.nan))
        cpu = np.minimum(self.cpu[self.job[tk]] * self.frac[tk] * walk, 1.0)
        mem = np.minimum(self.mem[self.job[tk]] * self.frac[tk] * gu.mem_profile(
            rng, ws - starts[piece]), self.mem[self.job[tk]])
        frame = pl.DataFrame({
            "start_time": _us(ws), "end_time": _us(we),
            "collection_id": self.job_ids[self.job[tk]].astype(str),
            "instance_index": self.index[tk].astype(str),
            "machine_id": machine_ids.to_numpy()[self.machine[attempt[piece], tk]],
            "collection_type": "0", "average_usage": _resources(cpu, mem),
        })
        return frame.with_columns(pl.Series("_t", ws)).sort("_t", "collection_id",
                                                            "instance_index").drop("_t")
