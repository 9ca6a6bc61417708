"""google2011 adapter: the real sample, task life histories, parts, machines, usage."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.stage import ingest
from pipeline.trace.io import read_table
from pipeline.trace.manifest import Manifest
from tests.ingest.google_raw import AFTER, job, task, us, write_part

SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPD_PENDING, UPD_RUNNING = range(9)


def tasks_of(out: Path) -> dict[str, dict]:
    rows = pl.from_arrow(read_table(out, "tasks")).to_dicts()
    return {r["task_id"]: r for r in rows}


@pytest.fixture
def histories(tmp_path: Path) -> Path:
    """One job whose tasks walk every branch of the task life cycle."""
    src = tmp_path / "raw"
    write_part(src, "job_events", [job(1, 7, SUBMIT), job(2, 7, SCHEDULE)])
    write_part(src, "task_events", [
        task(0, 7, 6, SUBMIT, machine=501, raw_time=True),   # running before the window
        task(0, 7, 6, SCHEDULE, machine=501, raw_time=True),
        task(10, 7, 0, SUBMIT), task(20, 7, 0, SCHEDULE, 501), task(120, 7, 0, FINISH, 501),
        task(10, 7, 1, SUBMIT), task(20, 7, 1, SCHEDULE, 502), task(50, 7, 1, EVICT, 502),
        task(60, 7, 1, SUBMIT), task(70, 7, 1, SCHEDULE, 503), task(170, 7, 1, FINISH, 503),
        task(10, 7, 2, SUBMIT), task(30, 7, 2, SCHEDULE, 501), task(45, 7, 2, FAIL, 501),
        task(10, 7, 3, SUBMIT), task(40, 7, 3, KILL),
        task(10, 7, 4, SUBMIT), task(15, 7, 4, UPD_PENDING, cpu=0.25, mem=0.25),
        task(20, 7, 4, SCHEDULE, 502, cpu=0.25, mem=0.25),
        task(25, 7, 4, UPD_RUNNING, 502, cpu=0.5, mem=0.25),
        task(10, 7, 5, SUBMIT), task(20, 7, 5, SCHEDULE, 502), task(30, 7, 5, FINISH, 502),
        task(40, 7, 5, SUBMIT), task(50, 7, 5, SCHEDULE, 502), task(80, 7, 5, FINISH, 502),
        task(90, 7, 9, 9),                                  # unknown event type
        task(95, 7, 8, FINISH, 501),                         # end of a task never seen
        task(AFTER, 7, 0, FINISH, 501, raw_time=True),       # after the window
        task(200, 7, 7, SUBMIT, cpu=None, mem=None),         # never gets a request
        task(210, 7, 7, SCHEDULE, 501, cpu=None, mem=None),
        task(300, 7, 7, FINISH, 501, cpu=None, mem=None),
    ])
    return src


def test_life_histories_map_to_documented_tasks(histories: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace"
    manifest = ingest("google2011", histories, out)
    t = tasks_of(out)
    assert t["7-0"]["submit_s"] == 10 and t["7-0"]["duration_s"] == 100
    assert t["7-0"]["end_event"] == "finished" and t["7-0"]["trace_attempts"] == 0
    # evicted after 30 s, resubmitted, finished after 100 s
    assert t["7-1"]["duration_s"] == 100 and t["7-1"]["trace_attempts"] == 1
    assert t["7-1"]["trace_lost_s"] == 30 and t["7-1"]["end_event"] == "finished"
    assert t["7-2"]["end_event"] == "failed" and t["7-2"]["duration_s"] == 15
    assert "7-3" not in t                                     # killed before it ran
    assert t["7-4"]["cpu"] == 0.5 and t["7-4"]["mem"] == 0.25  # request from the update
    assert t["7-4"]["end_event"] == "censored"
    assert t["7-4"]["duration_s"] == pytest.approx(300 - 20)  # window end = 300 s
    assert t["7-5"]["duration_s"] == 10 and t["7-5.1"]["duration_s"] == 30
    assert t["7-5.1"]["submit_s"] == 40
    assert t["7-6"]["submit_s"] == 0 and t["7-6"]["end_event"] == "censored"
    assert t["7-6"]["duration_s"] == pytest.approx(300)
    assert "7-7" not in t
    assert manifest.rows_rejected["task_events"] == {
        "after_window": 1, "event_for_unknown_task": 1, "unknown_event_type": 1,
    }
    assert manifest.dropped["tasks"] == {"never_scheduled": 1, "no_resource_request": 1}
    assert manifest.repaired["tasks"]["resubmitted_after_end"] == 1
    assert manifest.repaired["tasks"]["started_before_window"] == 1
    assert manifest.repaired["machines"]["capacity_assumed"] == 3
    jobs = pl.from_arrow(read_table(out, "jobs"))
    assert jobs.row(0, named=True)["user"] == "alice=" and jobs["priority"][0] == 9


def test_task_spanning_parts_keeps_its_history(tmp_path: Path) -> None:
    src = tmp_path / "raw"
    write_part(src, "job_events", [job(1, 3, SUBMIT)], 0, 2)
    write_part(src, "job_events", [job(500, 4, SUBMIT)], 1, 2)
    write_part(src, "task_events", [task(5, 3, 0, SUBMIT), task(6, 3, 0, SCHEDULE, 1)], 0, 2)
    write_part(src, "task_events", [task(400, 3, 0, FINISH, 1)], 1, 2)
    ingest("google2011", src, tmp_path / "out")
    t = tasks_of(tmp_path / "out")
    assert t["3-0"]["duration_s"] == 394 and t["3-0"]["end_event"] == "finished"


def test_machine_events_and_usage(tmp_path: Path) -> None:
    src = tmp_path / "raw"
    write_part(src, "job_events", [job(1, 3, SUBMIT)])
    write_part(src, "task_events", [task(5, 3, 0, SUBMIT), task(10, 3, 0, SCHEDULE, 1),
                                    task(610, 3, 0, FINISH, 1), task(20, 3, 1, SUBMIT),
                                    task(30, 3, 1, SCHEDULE, 99), task(40, 3, 1, FINISH, 99)])
    write_part(src, "machine_events", [
        [0, 1, 0, "plat=", 0.5, 0.5], [0, 2, 0, "plat=", 1.0, 1.0],
        [us(100), 2, 1, None, None, None], [us(200), 2, 0, "plat=", 1.0, 1.0],
        [us(300), 1, 2, "plat=", 0.5, 0.75], [us(500), 2, 1, None, None, None],
    ])
    usage = [[us(10), us(310), 3, 0, 1, 0.1, 0.02] + [None] * 13,
             [us(310), us(610), 3, 0, 1, 0.3, 0.04] + [None] * 13,
             [us(310), us(310), 3, 0, 1, 0.9, 0.9] + [None] * 13]
    write_part(src, "task_usage", usage)
    manifest = ingest("google2011", src, tmp_path / "out")
    machines = {r["machine_id"]: r for r in
                pl.from_arrow(read_table(tmp_path / "out", "machines")).to_dicts()}
    assert machines["1"]["mem"] == 0.75 and machines["1"]["removed_s"] is None
    assert machines["2"]["removed_s"] == 500 and machines["2"]["cpu"] == 1.0
    assert machines["99"]["cpu"] == 0.5  # only seen in task events: assumed capacity
    downtime = pl.from_arrow(read_table(tmp_path / "out", "machine_downtime"))
    assert downtime.rows() == [("2", 100.0, 200.0)]
    t = tasks_of(tmp_path / "out")
    assert t["3-0"]["cpu_used"] == pytest.approx(0.2)
    assert t["3-0"]["mem_used"] == pytest.approx(0.03)
    assert t["3-1"]["cpu_used"] is None
    assert manifest.rows_rejected["task_usage"] == {"nonpositive_interval": 1}


def test_real_sample_ingests_and_accounts_for_every_row(
    shared_traces: Path, tmp_path: Path
) -> None:
    out = tmp_path / "g"
    manifest = ingest("google2011", shared_traces / "google-clusterdata-2011-2", out)
    again = Manifest.read(out)
    assert again.rows == manifest.rows
    assert manifest.input_rows == {"job_events": 10704, "task_events": 120000}
    assert manifest.rows_used["task_events"] == 120000
    assert set(manifest.tables_absent) == {"machine_events", "task_usage"}
    # every task in the 120k-line head is a snapshot row at time 0: either running since
    # before the window (kept, censored at the window end) or pending (never scheduled)
    dropped = sum(manifest.dropped["tasks"].values())
    assert manifest.rows["tasks"] + dropped == manifest.repaired["tasks"]["started_before_window"] \
        + manifest.dropped["tasks"]["never_scheduled"]
    tasks = pl.from_arrow(read_table(out, "tasks"))
    assert tasks["end_event"].unique().to_list() == ["censored"]
    assert tasks["submit_s"].max() == 0.0
    assert manifest.rows["jobs"] == 4900
    assert {s.sha256 for s in manifest.sources if s.table == "job_events"} == {
        "921fa8e019fb8ec5be9a2cb096912850d5959da33d9fb3b46807d9d0a9eae86f"}


def test_ingest_is_deterministic(histories: Path, tmp_path: Path) -> None:
    ingest("google2011", histories, tmp_path / "a")
    ingest("google2011", histories, tmp_path / "b")
    for table in ("tasks", "jobs", "machines"):
        assert read_table(tmp_path / "a", table).equals(read_table(tmp_path / "b", table))
    assert (tmp_path / "a" / "manifest.json").read_text() == \
        (tmp_path / "b" / "manifest.json").read_text()
