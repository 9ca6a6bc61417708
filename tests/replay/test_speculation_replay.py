"""Speculation rules through ``replay``: one job of ten maps on ten machines, two of them four
times slower (pipeline.policies.layers.speculation over yarn-uniform)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay

N = 10


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    machines = [{"machine_id": f"m{i}", "cpu": 2.0, "mem": 2.0,
                 "platform": "old" if i < 2 else "new"} for i in range(N)]
    # one 100 s map per machine (yarn-uniform spreads them), each machine with room for one
    # more container: a copy
    tasks = [{"task_id": f"t{i}", "job_id": "j", "submit_s": 0.0, "duration_s": 100.0,
              "cpu": 1.0, "mem": 1.0, "task_kind": "map"} for i in range(N)]
    return write_trace(tmp_path_factory.mktemp("spec") / "trace", machines, tasks,
                       window_end_s=2000.0)


def _run(trace: Path, out: Path, rule: str) -> pl.DataFrame:
    replay(trace, "yarn-uniform", {"spec": rule}, 0, out,
           cluster_options={"platform_speed": "old=0.25;new=1"})
    return pl.read_parquet(out / "task_runs.parquet")


def _slow(tr: pl.DataFrame) -> list[tuple]:
    return tr.filter(pl.col("machine_id").is_in(["m0", "m1"])).sort("machine_id").select(
        "end_s", "spec_copies", "spec_won", "spec_machine_id", "spec_start_s").rows()


def test_without_speculation_the_job_waits_for_its_stragglers(trace: Path,
                                                               tmp_path: Path) -> None:
    tr = _run(trace, tmp_path / "none", "none")
    assert tr["end_s"].max() == 400.0 and (tr["spec_copies"] == 0).all()


def test_hadoop_copies_both_stragglers_but_one_copy_lands_on_the_other_slow_machine(
        trace: Path, tmp_path: Path) -> None:
    """The native rule: behind the job's average by 0.2 after 60 s; a free slot takes the
    first candidate whatever the slot's machine, so one copy runs as slowly and loses."""
    tr = _run(trace, tmp_path / "hadoop", "hadoop")
    assert _slow(tr) == [(400.0, 1, False, "m1", 60.0), (160.0, 1, True, "m2", 60.0)]
    assert tr["end_s"].max() == 400.0


def test_late_never_copies_onto_a_slow_machine(trace: Path, tmp_path: Path) -> None:
    tr = _run(trace, tmp_path / "late", "late")
    assert _slow(tr) == [(160.0, 1, True, "m2", 60.0), (160.0, 1, True, "m3", 60.0)]
    fast = tr.filter(~pl.col("machine_id").is_in(["m0", "m1"]))
    assert (fast["spec_copies"] == 0).all() and tr["end_s"].max() == 160.0
    # each original is killed when its copy finishes: its whole run is lost
    slow = tr.filter(pl.col("machine_id").is_in(["m0", "m1"]))
    assert (slow["spec_wasted_s"] == slow["end_s"] - slow["start_s"]).all()


def test_mrv2_waits_for_finished_tasks_and_speculates_one_task_per_pass(
        trace: Path, tmp_path: Path) -> None:
    """DefaultSpeculator: the replacement estimate is the mean run time of finished tasks
    (none before 100 s), and after a pass that speculates the next waits 15 s."""
    tr = _run(trace, tmp_path / "mrv2", "mrv2")
    assert _slow(tr) == [(200.0, 1, True, "m2", 100.0), (215.0, 1, True, "m3", 115.0)]


def test_a_trace_studied_under_another_name_keeps_that_name(trace: Path, tmp_path: Path) -> None:
    """A sweep's trace key names its runs (one directory, two studies: swim, swim-stragglers)."""
    import json

    replay(trace, "yarn-uniform", {}, 0, tmp_path / "a", trace_name="trace-stragglers")
    replay(trace, "yarn-uniform", {}, 0, tmp_path / "b")
    assert json.loads((tmp_path / "a" / "run.json").read_text())["trace"] == "trace-stragglers"
    assert json.loads((tmp_path / "b" / "run.json").read_text())["trace"] == "trace"
