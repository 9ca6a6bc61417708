"""google2011 task_usage -> canonical task_usage: windows placed in their incarnation's
recorded run (times relative to its start), clipped, trimmed or rejected, every row counted."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.stage import ingest
from pipeline.trace.io import read_table
from pipeline.trace.validate import validate
from tests.ingest.google_raw import job, task, us, write_part

SUBMIT, SCHEDULE, EVICT, FINISH = 0, 1, 2, 4


def usage(start: float, end: float, job_id: int, index: int, cpu: object, mem: object
          ) -> list[object]:
    """One task_usage row (20 fields, published order) on machine 1."""
    return [us(start), us(end), job_id, index, 1, cpu, mem] + [None] * 13


@pytest.fixture(scope="module")
def placed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    src = tmp_path_factory.mktemp("raw")
    write_part(src, "job_events", [job(1, 3, SUBMIT)])
    write_part(src, "task_events", [
        task(5, 3, 0, SUBMIT), task(10, 3, 0, SCHEDULE, 1), task(20, 3, 1, SUBMIT),
        task(30, 3, 1, SCHEDULE, 1), task(40, 3, 1, FINISH, 1), task(50, 3, 1, SUBMIT),
        task(60, 3, 1, SCHEDULE, 1), task(200, 3, 0, EVICT, 1), task(210, 3, 0, SUBMIT),
        task(300, 3, 0, SCHEDULE, 1), task(400, 3, 1, FINISH, 1), task(1000, 3, 0, FINISH, 1),
    ])
    write_part(src, "machine_events", [[0, 1, 0, "p=", 0.5, 0.5], [0, 2, 0, "p=", 1.0, 1.0]])
    write_part(src, "task_usage", [
        usage(10, 200, 3, 0, 0.2, 0.01),      # the evicted attempt: outside the recorded run
        usage(250, 600, 3, 0, 0.1, 0.02),     # starts before the run: clipped to [0, 300]
        usage(600, 900, 3, 0, 1.5, 0.1),      # cpu above machine 2, mem above the request
        usage(850, 1000, 3, 0, 0.3, 0.03),    # overlaps the window before: trimmed
        usage(860, 880, 3, 0, 0.3, 0.03),     # inside earlier windows: rejected
        usage(30, 40, 3, 1, 0.05, 0.01),      # incarnation 0 of task 1
        usage(60, 360, 3, 1, 0.06, 0.02),     # incarnation 1 (task 3-1.1)
        usage(10, 20, 99, 0, 0.1, 0.01),      # no such task
        usage(1000, 1300, 3, 0, 0.1, 0.01),   # after the run ended
        usage(300, 600, 3, 1, -0.1, 0.01),    # negative usage
        usage(300, 600, 3, 0, 0.1, None),     # memory missing
    ])
    out = tmp_path_factory.mktemp("out") / "trace"
    return out, ingest("google2011", src, out)


def test_windows_become_segments_relative_to_the_run(placed: tuple[Path, object]) -> None:
    out, _ = placed
    rows = pl.from_arrow(read_table(out, "task_usage")).rows()
    assert rows == [
        ("3-0", 0.0, 300.0, 0.1, 0.02),
        ("3-0", 300.0, 600.0, 1.0, 0.0625),
        ("3-0", 600.0, 700.0, 0.3, 0.03),
        ("3-1", 0.0, 10.0, 0.05, 0.01),
        ("3-1.1", 0.0, 300.0, 0.06, 0.02),
    ]
    tasks = pl.from_arrow(read_table(out, "tasks"))
    assert tasks["task_id"].to_list() == ["3-0", "3-1", "3-1.1"]  # the order followed
    assert tasks["duration_s"].to_list() == [700.0, 10.0, 340.0]
    assert validate(out).ok


def test_every_window_is_counted(placed: tuple[Path, object]) -> None:
    _, manifest = placed
    assert manifest.input_rows["task_usage"] == 11
    assert manifest.rows_used["task_usage"] == 5
    assert manifest.rows_rejected["task_usage"] == {
        "missing_usage": 1, "negative_usage": 1, "outside_task_life": 2,
        "overlapping_sample": 1, "unknown_task": 1,
    }
    assert manifest.repaired["task_usage"] == {
        "clipped_to_task_life": 1, "cpu_above_machine_clipped": 1,
        "mem_above_request_clipped": 1, "overlap_trimmed": 1,
    }
    assert manifest.rows["task_usage"] == 5
    assert "task_usage" in manifest.notes


def test_means_are_unchanged(placed: tuple[Path, object]) -> None:
    out, _ = placed
    tasks = {r["task_id"]: r for r in pl.from_arrow(read_table(out, "tasks")).to_dicts()}
    # every positive, non-negative window of (3, 1), both incarnations alike
    assert tasks["3-1"]["cpu_used"] == pytest.approx((0.05 * 10 + 0.06 * 300) / 310)
    assert tasks["3-1.1"]["cpu_used"] == tasks["3-1"]["cpu_used"]


def test_generated_trace_with_usage_ingests_in_order(tmp_path: Path) -> None:
    from pipeline.generate import generate

    generate(tmp_path / "raw", "google2011", machines=30, hours=2.0, seed=3, usage=True)
    manifest = ingest("google2011", tmp_path / "raw", tmp_path / "out")
    usage_rows = pl.from_arrow(read_table(tmp_path / "out", "task_usage"))
    tasks = pl.from_arrow(read_table(tmp_path / "out", "tasks")).with_row_index("pos")
    joined = usage_rows.join(tasks.select("task_id", "pos", "duration_s", "mem"), on="task_id",
                             how="left", maintain_order="left")
    assert manifest.rows["task_usage"] == usage_rows.height == manifest.rows_used["task_usage"]
    assert joined["pos"].null_count() == 0
    assert joined.select(["pos", "start_s"]).equals(joined.select(["pos", "start_s"]).sort(
        "pos", "start_s"))
    assert (joined["end_s"] <= joined["duration_s"]).all()
    assert (joined["mem"] <= joined["mem_right"]).all()
