"""The report views that rank or sum over every task, against plain Python on the same rows.

``completion_cdf`` ranks by run and measure and interpolates; ``run_peaks`` keeps running
sums a day at a time.  Both are written for 35 M-task runs; these tests hold them to the
definitions on the locality warehouse (four replays of 145 tasks with varied waits).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from pipeline.warehouse.db import create_schema, refresh_views


def _rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def test_completion_quantiles_are_numpys_linear_quantiles(locality_warehouse: Path) -> None:
    got = _rows(locality_warehouse,
                "select run_id, measure, n, fraction, value_s from completion_cdf")
    tasks = _rows(locality_warehouse, "select run_id, job_id, submit_s, end_s, outcome, "
                  "ready_s, first_start_s from task_runs")
    runs = sorted({t[0] for t in tasks})
    assert len(runs) == 4 and {g[0] for g in got} == set(runs)
    for run in runs:
        mine = [t for t in tasks if t[0] == run]
        jobs: dict[str, list[tuple[Any, ...]]] = {}
        for t in mine:
            jobs.setdefault(t[1], []).append(t)
        values = {
            "job completion": [max(t[3] for t in ts) - min(t[2] for t in ts)
                               for ts in jobs.values() if all(t[4] == "finished" for t in ts)],
            "task wait": [t[6] - t[5] for t in mine if t[6] is not None and t[5] is not None],
        }
        for measure, vals in values.items():
            assert len(set(vals)) > 5  # the interpolation is tested, not a constant
            rows = [g for g in got if g[0] == run and g[1] == measure]
            assert len(rows) == 28 and {n for _, _, n, _, _ in rows} == {len(vals)}
            for _, _, _, fraction, value in rows:
                assert value == pytest.approx(np.quantile(vals, float(fraction)), abs=1e-9)


def test_run_peaks_are_the_highest_allocation_over_every_change(
        locality_warehouse: Path) -> None:
    peaks = {r[0]: r[1:] for r in _rows(
        locality_warehouse, "select run_id, peak_cpu_allocated, peak_mem_allocated "
        "from run_peaks")}
    rows = _rows(locality_warehouse, "select t.run_id, start_s, coalesce(end_s, "
                 "r.measured_to_s), cpu, mem from task_runs t join runs r using (run_id) "
                 "where start_s is not null")
    assert len(peaks) == 4
    for run, (peak_cpu, peak_mem) in peaks.items():
        # ends before starts at the same instant
        events = sorted([(s, c, m) for r, s, _, c, m in rows if r == run]
                        + [(e, -c, -m) for r, _, e, c, m in rows if r == run and e is not None])
        cpu = mem = best_cpu = best_mem = 0.0
        for _, c, m in events:
            cpu, mem = cpu + c, mem + m
            best_cpu, best_mem = max(best_cpu, cpu), max(best_mem, mem)
        assert best_cpu > 0 and (peak_cpu, peak_mem) == pytest.approx((best_cpu, best_mem))


def test_run_peaks_do_not_depend_on_the_order_rows_are_stored_in() -> None:
    # Three tasks run from day 0 into day 1, where a fourth starts: the peak is day 1's
    # allocation, day 0's total plus the new task, whichever order day 0's rows are added in
    # (as doubles, 0.1 + 0.2 + 0.3 is 0.6000000000000001 and 0.3 + 0.2 + 0.1 is 0.6).
    tasks = [("a", 0.1, 0.3), ("b", 0.2, 0.2), ("c", 0.3, 0.1)]
    peaks = set()
    for order in itertools.permutations(tasks):
        con = duckdb.connect()
        create_schema(con)
        con.execute("insert into runs (run_id, trace, policy, measured_to_s) "
                    "values ('r', 't', 'p', 200000)")
        for name, cpu, mem in (*order, ("d", 0.001, 0.001)):
            start = 90000 if name == "d" else 5
            con.execute("insert into task_runs (run_id, task_id, submit_s, start_s, end_s, "
                        "outcome, cpu, mem) values ('r', ?, 0, ?, 100000, 'finished', ?, ?)",
                        [name, start, cpu, mem])
        refresh_views(con)
        peaks.add(con.execute("select peak_cpu_allocated, peak_mem_allocated "
                              "from run_peaks").fetchone())
    assert len(peaks) == 1 and next(iter(peaks)) == pytest.approx((0.601, 0.601))


def test_queue_waits_percentiles_are_numpy_quantiles(
        queue_report: tuple[Path, dict[str, Any]]) -> None:
    db = queue_report[0].parent / "wh.duckdb"  # capacity and fair runs with two queues
    got = _rows(db, "select run_id, queue, started, wait_p50_s, wait_p95_s from queue_waits")
    rows = _rows(db, "select run_id, queue, first_start_s - ready_s from task_runs "
                 "where queue is not null and first_start_s is not null and ready_s is not null")
    assert len(got) >= 4 and len({w for *_, w in rows}) > 5
    for run, queue, started, p50, p95 in got:
        waits = [w for r, q, w in rows if r == run and q == queue]
        assert started == len(waits)
        assert (p50, p95) == pytest.approx(
            (np.quantile(waits, 0.5), np.quantile(waits, 0.95)), abs=1e-9)
