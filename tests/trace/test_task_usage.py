"""The optional task_usage table: valid profiles pass; each broken rule is found by the
validator (table, field, row and task named) and refused by the replay's quick check."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.errors import TraceError
from pipeline.trace.identity import content_digest
from pipeline.trace.io import table_path, write_table
from pipeline.trace.manifest import Manifest
from pipeline.trace.readcheck import quick_check
from pipeline.trace.schema import TASK_USAGE, conform
from pipeline.trace.validate import count_rows, validate

MACHINES = [{"machine_id": "m0", "cpu": 8.0, "mem": 64.0},
            {"machine_id": "m1", "cpu": 16.0, "mem": 32.0}]
JOBS = [{"job_id": "j0", "user": "u0", "submit_s": 0.0}]
TASKS = [{"task_id": "t0", "job_id": "j0", "submit_s": 0.0, "duration_s": 100.0, "cpu": 2.0,
          "mem": 4.0},
         {"task_id": "t1", "job_id": "j0", "submit_s": 5.0, "duration_s": 50.0, "cpu": 1.0,
          "mem": 2.0}]
USAGE = [{"task_id": "t0", "start_s": 0.0, "end_s": 40.0, "cpu": 3.0, "mem": 4.0},
         {"task_id": "t0", "start_s": 60.0, "end_s": 100.0, "cpu": 1.0, "mem": 3.0},
         {"task_id": "t1", "start_s": 10.0, "end_s": 50.0, "cpu": 0.5, "mem": 1.0}]


def write_trace(root: Path, usage: list[dict]) -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for name, rows in (("machines", MACHINES), ("jobs", JOBS), ("tasks", TASKS)):
        write_table(root, name, pa.Table.from_pylist(rows))
    write_table(root, "task_usage", pa.Table.from_pylist(usage, schema=TASK_USAGE))
    manifest = Manifest(source_format="test")
    manifest.rows = count_rows(root)
    manifest.write(root)
    return root


def test_valid_usage_passes_and_is_counted(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", USAGE)
    report = validate(trace)
    assert report.ok, report.problems
    assert report.rows["task_usage"] == 3 and count_rows(trace)["task_usage"] == 3
    quick_check(trace)


def test_usage_is_part_of_the_trace_identity(tmp_path: Path) -> None:
    a = content_digest(write_trace(tmp_path / "a", USAGE))
    changed = [dict(USAGE[0], cpu=2.5), *USAGE[1:]]
    assert content_digest(write_trace(tmp_path / "b", changed)) != a
    assert content_digest(write_trace(tmp_path / "c", USAGE)) == a


def _set(row: int, **values: object) -> Callable[[list[dict]], None]:
    def edit(usage: list[dict]) -> None:
        usage[row].update(values)
    return edit


# (defect, edit, field, 1-based row named)
DEFECTS: list[tuple[str, Callable[[list[dict]], None], str, int]] = [
    ("unknown task", _set(2, task_id="t9"), "task_id", 3),
    ("negative start", _set(0, start_s=-1.0), "start_s", 1),
    ("end after duration", _set(1, end_s=100.5), "end_s", 2),
    ("start not before end", _set(1, start_s=100.0), "end_s", 2),
    ("negative cpu", _set(0, cpu=-0.1), "cpu", 1),
    ("nan mem", _set(2, mem=float("nan")), "mem", 3),
    ("infinite cpu", _set(2, cpu=float("inf")), "cpu", 3),
    ("mem above request", _set(2, mem=2.5), "mem", 3),
    ("cpu above largest machine", _set(0, cpu=16.5), "cpu", 1),
    ("overlap", _set(1, start_s=30.0), "start_s", 2),
    ("wrong task order", lambda u: u.insert(0, u.pop(2)), "task_id", 2),
    ("wrong start order", lambda u: u.insert(0, u.pop(1)), "task_id", 2),
]


@pytest.mark.parametrize(("defect", "edit", "field", "row"), DEFECTS,
                         ids=[d[0] for d in DEFECTS])
def test_broken_rules_are_named(tmp_path: Path, defect: str,
                                edit: Callable[[list[dict]], None], field: str, row: int) -> None:
    usage = [dict(r) for r in USAGE]
    edit(usage)
    trace = write_trace(tmp_path / "t", usage)
    report = validate(trace)
    assert not report.ok, defect
    problem = report.problems[0]
    assert problem.table == "task_usage" and problem.check.startswith(f"{field}:"), problem
    assert problem.example.startswith(f"row {row},"), problem
    with pytest.raises(TraceError) as caught:
        quick_check(trace)
    assert caught.value.field == field and caught.value.line == row, caught.value
    assert "task_usage" in str(caught.value.path)
    assert len(str(caught.value).splitlines()) == 1


def test_missing_column_is_refused(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", USAGE)
    pq.write_table(conform(pa.Table.from_pylist(USAGE), "task_usage").drop_columns(["mem"]),
                   table_path(trace, "task_usage"))
    report = validate(trace)
    assert any(p.table == "task_usage" and "mem" in p.check for p in report.problems)
    with pytest.raises(TraceError, match="missing required column mem"):
        quick_check(trace)
