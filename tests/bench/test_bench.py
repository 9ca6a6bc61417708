"""The benchmark's workload and ``bench --scale`` (figures are not checked: only shapes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.bench.scale import parse_counts
from pipeline.bench.workload import synthetic_workload
from pipeline.cli import app
from pipeline.errors import UsageError


def _tasks(trace: Path) -> pl.DataFrame:
    return pl.read_parquet(trace / "tasks.parquet" / "*.parquet")


@pytest.mark.parametrize("chunk", [37, 1 << 20])
def test_workload_is_written_in_submit_order_with_every_task(tmp_path: Path,
                                                           chunk: int) -> None:
    trace = synthetic_workload(tmp_path / "w", machines=20, tasks=1_000, seed=3,
                               chunk_tasks=chunk)
    tasks = _tasks(trace)
    jobs = pl.read_parquet(trace / "jobs.parquet")
    assert tasks.height == 1_000 and tasks["task_id"].n_unique() == 1_000
    assert tasks["submit_s"].is_sorted()
    assert set(tasks["job_id"]) <= set(jobs["job_id"])
    # a task arrives after its job (exponential offsets from the job's submit time)
    joined = tasks.join(jobs.select("job_id", pl.col("submit_s").alias("job_s")), on="job_id")
    assert (joined["submit_s"] >= joined["job_s"].round(3) - 1e-3).all()


def test_workload_chunks_only_change_the_draws_not_the_shape(tmp_path: Path) -> None:
    one = _tasks(synthetic_workload(tmp_path / "a", 20, 4_000, 1, chunk_tasks=1 << 20))
    many = _tasks(synthetic_workload(tmp_path / "b", 20, 4_000, 1, chunk_tasks=500))
    again = _tasks(synthetic_workload(tmp_path / "c", 20, 4_000, 1, chunk_tasks=500))
    assert many.equals(again)  # seeded: the same bytes again
    for col in ("cpu", "duration_s"):
        assert np.isclose(one[col].mean(), many[col].mean(), rtol=0.1)


def test_scale_counts_are_parsed_or_refused() -> None:
    assert parse_counts("1e3,2000") == [1000, 2000]
    for bad in ("1.5", "0", "lots", ""):
        with pytest.raises(UsageError, match="--scale"):
            parse_counts(bad)


def test_bench_scale_prints_one_line_per_stage(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    result = CliRunner().invoke(app, ["bench", "--scale", "300", "--machines", "20"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [r["stage"] for r in lines] == ["workload", "replay", "load"]
    for record in lines:
        assert record["tasks"] == 300 and record["peak_rss_mb"] > 0
        assert record["tasks_per_s"] > 0 and record["cpu_s"] > 0
    assert lines[1]["policy"] == "yarn-uniform" and lines[1]["events"] > 0
    assert lines[2]["rows"] > 300  # task_runs + nodes + metrics + the run's row


def test_bench_scale_error_is_one_line() -> None:
    result = CliRunner().invoke(app, ["bench", "--scale", "many"])
    assert result.exit_code != 0
    assert "--scale" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("setting", ["bogus=1", "min_nodes=-3"])
def test_bench_scale_bad_setting_is_one_line(setting: str) -> None:
    """A misspelt policy parameter is refused before any stage; a cluster option the child
    refuses comes back as the same one line (no traceback either way)."""
    result = CliRunner().invoke(app, ["bench", "--scale", "50", "--machines", "5",
                                      "--set", setting])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1].startswith("tracereplay: error:")


def test_bench_gpu_runs_a_gpu_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench --gpu`` with a GPU placement policy: its warm-up has GPU machines too, and
    the figures are the inflation experiment's pods (no events)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    result = CliRunner().invoke(app, ["bench", "--gpu", "--policy", "fgd", "--machines", "20",
                                      "--tasks", "300"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output.splitlines()[-1])
    assert record["policy"] == "fgd" and record["gpu"] and record["experiment"] == "inflation"
    assert record["pods"] >= 300
    assert record["pods_placed"] + record["pods_dropped"] == record["pods"]
