"""Gang placement in the core: members of a gang start in one scheduling round or none."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


def _starts(tmp_path: Path, tasks: list[dict], policy: str = "yarn-uniform") -> dict:
    machines = [{"machine_id": f"m{i}", "cpu": 4.0, "mem": 16.0} for i in range(2)]
    rows = [{"job_id": "j", "mem": 1.0, "duration_s": 10.0, **t} for t in tasks]
    trace = write_trace(tmp_path / "t", machines, rows, window_end_s=100.0)
    result = replay(trace, policy, {}, 0, tmp_path / "run", sched_interval_s=0.0)
    runs = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    return {**dict(zip(runs["task_id"], runs["start_s"], strict=True)),
            "held": result.run["summary"]["gang_held"]}


def test_a_gang_that_does_not_fit_whole_waits_whole(tmp_path: Path) -> None:
    lone = {"task_id": "lone", "submit_s": 0.0, "cpu": 4.0}
    gang = [{"task_id": f"g{k}", "submit_s": 0.0, "cpu": 2.0, "gang_id": "g"}
            for k in range(3)]
    starts = _starts(tmp_path, [lone, *gang])
    assert starts["lone"] == 0
    assert [starts[f"g{k}"] for k in range(3)] == [10.0, 10.0, 10.0]
    assert starts["held"] > 0


def test_a_gang_waits_for_its_last_member_to_arrive(tmp_path: Path) -> None:
    gang = [{"task_id": "g0", "submit_s": 0.0, "cpu": 1.0, "gang_id": "g"},
            {"task_id": "g1", "submit_s": 5.0, "cpu": 1.0, "gang_id": "g"},
            {"task_id": "solo", "submit_s": 1.0, "cpu": 1.0}]
    starts = _starts(tmp_path, gang)
    assert (starts["g0"], starts["g1"], starts["solo"]) == (5.0, 5.0, 1.0)


def test_without_gangs_members_would_start_apart(tmp_path: Path) -> None:
    lone = {"task_id": "lone", "submit_s": 0.0, "cpu": 4.0}
    loose = [{"task_id": f"g{k}", "submit_s": 0.0, "cpu": 2.0} for k in range(3)]
    starts = _starts(tmp_path, [lone, *loose])
    assert sorted(starts[f"g{k}"] for k in range(3)) == [0.0, 0.0, 10.0]
    assert starts["held"] == 0
