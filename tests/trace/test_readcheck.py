"""Read-time checks: ``replay`` refuses what ``validate`` refuses, naming file, row and field."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pipeline.bench.workload import write_trace
from pipeline.cli import app
from pipeline.errors import TraceError
from pipeline.trace import readcheck
from pipeline.trace.idsets import HashSpool
from pipeline.trace.io import part_files
from pipeline.trace.readcheck import quick_check
from pipeline.trace.validate import validate

MACHINES = [{"machine_id": f"m{i}", "cpu": 4.0, "mem": 8.0} for i in range(2)]
JOBS = [{"job_id": "j", "user": "u", "submit_s": 0.0}]


def tasks(n: int = 6) -> list[dict]:
    return [{"task_id": f"t{i}", "job_id": "j", "submit_s": float(i), "duration_s": 5.0,
             "cpu": 1.0, "mem": 1.0, "depends_on": [f"t{i - 1}"] if i % 2 else None,
             "inputs": ["m1"] if i == 2 else None} for i in range(n)]


def raw_trace(root: Path, machines: list[dict], task_rows: list[dict]) -> Path:
    """A trace written as given (no sorting), one tasks file, for defects write_trace fixes."""
    trace = write_trace(root, machines, tasks(1), JOBS)
    shutil.rmtree(trace / "tasks.parquet")
    pq.write_table(pa.Table.from_pylist(task_rows), trace / "tasks.parquet")
    return trace


# name -> (edit of machines and tasks, field named, words of the reason)
DEFECTS: dict[str, tuple[Callable[[list[dict], list[dict]], None], str, str]] = {
    "duplicate task id": (lambda m, t: t[3].update(task_id="t1"), "task_id", "appears again"),
    "unknown dependency": (lambda m, t: t[4].update(depends_on=["zz"]), "depends_on",
                           "not in tasks"),
    "self dependency": (lambda m, t: t[4].update(depends_on=["t4"]), "depends_on", "itself"),
    "dependency cycle": (lambda m, t: t[1].update(depends_on=["t3"])
                         or t[3].update(depends_on=["t1"]), "depends_on", "cycle"),
    "machine cpu 0": (lambda m, t: m[1].update(cpu=0.0), "cpu", "cpu must be"),
    "machine mem nan": (lambda m, t: m[0].update(mem=math.nan), "mem", "mem must be"),
    "machine gpu < 0": (lambda m, t: m[0].update(gpu=-1.0), "gpu", "gpu must be"),
    "duplicate machine": (lambda m, t: m.append(dict(m[0])), "machine_id", "more than once"),
    "unknown input machine": (lambda m, t: t[2].update(inputs=["m9"]), "inputs", "'m9'"),
    "negative submit": (lambda m, t: [r.update(submit_s=r["submit_s"] - 1) for r in t],
                        "submit_s", "finite and >= 0"),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_replay_refuses_what_validate_refuses(tmp_path: Path, defect: str) -> None:
    edit, field, words = DEFECTS[defect]
    machines, rows = [dict(m) for m in MACHINES], tasks()
    edit(machines, rows)
    trace = write_trace(tmp_path / "trace", machines, rows, JOBS)
    assert not validate(trace).ok, defect
    result = CliRunner().invoke(app, ["replay", str(trace), "--policy", "yarn-uniform",
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tracereplay: error: {trace}/"), lines
    assert f"[{field}]" in lines[0] and words in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace"]  # no run, no temp dir


def test_valid_trace_passes(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace", MACHINES, tasks(), JOBS)
    assert validate(trace).ok
    quick_check(trace)


def replay_error(trace: Path, out: Path) -> str:
    """The one line ``tracereplay replay`` prints for a refused trace."""
    result = CliRunner().invoke(app, ["replay", str(trace), "--policy", "yarn-uniform",
                                      "--out", str(out)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr.strip()


def test_unsorted_tasks_name_the_file_and_row(tmp_path: Path) -> None:
    rows = tasks()
    rows[4]["submit_s"] = 1.5
    trace = raw_trace(tmp_path / "t", MACHINES, rows)
    with pytest.raises(TraceError) as err:
        quick_check(trace)
    assert (err.value.path, err.value.line, err.value.field) == (
        trace / "tasks.parquet", 5, "submit_s")
    assert "1.5 is before 3.0" in err.value.reason
    assert replay_error(trace, tmp_path / "run").startswith(
        f"tracereplay: error: {trace / 'tasks.parquet'}:5 [submit_s]: 1.5 is before 3.0")


def test_tasks_file_that_is_not_parquet(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", MACHINES, tasks(), JOBS)
    part = part_files(trace, "tasks")[0]
    part.write_text("task_id,submit_s\nt0,0\n")
    with pytest.raises(TraceError, match="not a readable Parquet file") as err:
        quick_check(trace)
    assert err.value.path == part
    assert replay_error(trace, tmp_path / "run").startswith(
        f"tracereplay: error: {part}: not a readable Parquet file")


def test_rows_are_counted_within_each_part(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readcheck, "BATCH_ROWS", 2)
    rows = tasks(9)
    rows[7]["task_id"] = "t0"  # a repeat found in the second part, batches of 2
    trace = write_trace(tmp_path / "t", MACHINES, rows, JOBS, part_rows=4)
    parts = part_files(trace, "tasks")
    assert len(parts) == 3
    with pytest.raises(TraceError) as err:
        quick_check(trace)
    assert (err.value.path, err.value.line) == (parts[1], 4)
    assert f"first at {parts[0]}:1" in err.value.reason


def test_dependencies_across_parts_and_batches(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readcheck, "BATCH_ROWS", 3)
    rows = tasks(12)
    rows[0]["depends_on"] = ["t11"]  # a parent submitted later: allowed, no cycle
    trace = write_trace(tmp_path / "t", MACHINES, rows, JOBS, part_rows=5)
    quick_check(trace)
    rows[11]["depends_on"] = ["t1"]  # t1 -> t0 -> t11 -> t1
    rows[1]["depends_on"] = ["t0"]
    trace = write_trace(tmp_path / "c", MACHINES, rows, JOBS, part_rows=5)
    with pytest.raises(TraceError, match=r"cycle: t\d+ -> t\d+ -> t\d+ -> t\d+"):
        quick_check(trace)


def test_hash_collisions_are_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id hashing alike must not be taken for a duplicate; a real one still is."""
    monkeypatch.setattr(readcheck, "id_hashes",
                        lambda ids, seed=0: np.full(len(ids), 7 + seed, np.uint64))
    trace = write_trace(tmp_path / "t", MACHINES, [dict(r, depends_on=None) for r in tasks()],
                        JOBS)
    quick_check(trace)
    rows = [dict(r, depends_on=None) for r in tasks()]
    rows[5]["task_id"] = "t2"
    trace = write_trace(tmp_path / "d", MACHINES, rows, JOBS)
    with pytest.raises(TraceError, match="'t2' appears again"):
        quick_check(trace)


def test_hash_spool_spills_and_finds_repeats() -> None:
    spool = HashSpool(limit=10, parts=4)
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**63, 1000, dtype=np.uint64)
    try:
        for chunk in np.array_split(np.concatenate([values, values[[3, 500]]]), 37):
            spool.add(chunk)
        assert spool._dir is not None  # it did spill
        assert sorted(spool.duplicates().tolist()) == sorted(values[[3, 500]].tolist())
    finally:
        spool.close()


def test_workload_trace_without_machines_may_name_inputs(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", [], tasks(), JOBS)  # replayed on an elastic cluster
    quick_check(trace)
