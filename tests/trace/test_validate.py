"""The validator on any directory: valid traces pass; each kind of defect is found."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.trace.io import write_table
from pipeline.trace.manifest import Manifest
from pipeline.trace.validate import count_rows, validate


def write_trace(root: Path, machines: list[dict], jobs: list[dict], tasks: list[dict]) -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    write_table(root, "machines", pa.Table.from_pylist(machines))
    write_table(root, "jobs", pa.Table.from_pylist(jobs))
    write_table(root, "tasks", pa.Table.from_pylist(tasks))
    manifest = Manifest(source_format="test")
    manifest.rows = count_rows(root)
    manifest.write(root)
    return root


FIXTURE_OK = [HealthCheck.function_scoped_fixture]  # each example rewrites its own dir

task_rows = st.lists(
    st.tuples(st.floats(0, 1e6), st.floats(0.001, 1e5), st.floats(0, 8), st.floats(0, 64),
              st.integers(0, 2)),
    min_size=1, max_size=30,
)


def build(rows: list[tuple]) -> tuple[list[dict], list[dict], list[dict]]:
    machines = [{"machine_id": f"m{i}", "cpu": 8.0, "mem": 64.0} for i in range(3)]
    jobs = [{"job_id": f"j{i}", "user": f"u{i}", "submit_s": 0.0} for i in range(3)]
    rows = sorted(rows)
    tasks = [{"task_id": f"t{k}", "job_id": f"j{r[4]}", "submit_s": r[0], "duration_s": r[1],
              "cpu": r[2], "mem": r[3], "inputs": [f"m{r[4]}"],
              "depends_on": [f"t{k - 1}"] if k else None} for k, r in enumerate(rows)]
    return machines, jobs, tasks


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_OK)
@given(rows=task_rows)
def test_valid_traces_pass(tmp_path: Path, rows: list[tuple]) -> None:
    report = validate(write_trace(tmp_path / "t", *build(rows)))
    assert report.ok, report.problems


DEFECTS = {
    "duplicate task_id": lambda m, j, t: t.append(dict(t[-1])),
    "duration_s must be finite and > 0": lambda m, j, t: t[0].update(duration_s=0.0),
    "job_id not in jobs": lambda m, j, t: t[0].update(job_id="nope"),
    "cpu must be > 0": lambda m, j, t: m[0].update(cpu=-1.0),
    "inputs name unknown machines": lambda m, j, t: t[0].update(inputs=["m99"]),
    "depends_on names unknown tasks": lambda m, j, t: t[0].update(depends_on=["zz"]),
    "not sorted by submit_s": lambda m, j, t: t[-1].update(submit_s=-0.0 + t[0]["submit_s"] - 1),
    "duplicate machine_id": lambda m, j, t: m.append(dict(m[0])),
}


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(rows=task_rows.filter(lambda r: len(r) >= 2 and min(x[0] for x in r) >= 2),
       defect=st.sampled_from(sorted(DEFECTS)))
def test_each_defect_is_reported(tmp_path: Path, rows: list[tuple], defect: str) -> None:
    machines, jobs, tasks = build(rows)
    DEFECTS[defect](machines, jobs, tasks)
    report = validate(write_trace(tmp_path / "t", machines, jobs, tasks))
    assert any(defect in p.check for p in report.problems), report.problems


def test_row_defects_in_one_table_are_each_counted_with_an_example(tmp_path: Path) -> None:
    """The row checks share one scan per table: each still gets its own count and example."""
    machines, jobs, tasks = build([(float(k), 1.0, 1.0, 1.0, 0) for k in range(8)])
    tasks[1].update(duration_s=0.0)
    tasks[2].update(duration_s=-1.0, cpu=float("nan"))
    tasks[5].update(mem=-2.0)
    tasks[6].update(depends_on=["t6"])
    machines[1].update(mem=float("inf"))
    report = validate(write_trace(tmp_path / "t", machines, jobs, tasks))
    found = [(p.table, p.check, p.rows, p.example) for p in report.problems]
    assert found == [
        ("machines", "mem must be > 0", 1, "m1"),
        ("tasks", "duration_s must be finite and > 0", 2, found[1][3]),
        ("tasks", "cpu must be finite and >= 0", 1, "t2"),
        ("tasks", "mem must be finite and >= 0", 1, "t5"),
        ("tasks", "task depends on itself", 1, "t6"),
    ]
    assert found[1][3] in ("t1", "t2")


def test_missing_tables_columns_and_manifest(tmp_path: Path) -> None:
    report = validate(tmp_path)
    assert {p.check for p in report.problems} >= {"missing tasks.parquet",
                                                 "manifest.json missing"}
    root = write_trace(tmp_path / "t", *build([(0.0, 1.0, 1.0, 1.0, 0)]))
    tasks = pq.read_table(root / "tasks.parquet").drop_columns(["duration_s"])
    pq.write_table(tasks, root / "tasks.parquet")  # a user's file, written without conforming
    report = validate(root)
    assert any("missing required column duration_s" in p.check for p in report.problems)


def test_manifest_accounting_must_add_up(tmp_path: Path) -> None:
    root = write_trace(tmp_path / "t", *build([(0.0, 1.0, 1.0, 1.0, 0)]))
    manifest = Manifest.read(root)
    manifest.input_rows = {"raw": 10}
    manifest.rows_used = {"raw": 7}
    manifest.rows_rejected = {"raw": {"bad": 2}}
    manifest.write(root)
    report = validate(root)
    assert any("10 input rows but 7 used + 2 rejected" in p.check for p in report.problems)


def test_dependency_cycles_are_found_with_an_example(tmp_path: Path) -> None:
    machines, jobs, tasks = build([(float(i), 1.0, 1.0, 1.0, 0) for i in range(6)])
    assert validate(write_trace(tmp_path / "ok", machines, jobs, tasks)).ok  # a chain
    tasks[1]["depends_on"] = ["t4"]  # t1 -> t2 -> t3 -> t4 -> t1; t5 waits on it
    report = validate(write_trace(tmp_path / "t", machines, jobs, tasks))
    problem = next(p for p in report.problems if "dependency cycle" in p.check)
    assert problem.rows == 5  # t1..t4 in the cycle, t5 behind it
    assert problem.example in {"t1 -> t2 -> t3 -> t4 -> t1", "t2 -> t3 -> t4 -> t1 -> t2",
                               "t3 -> t4 -> t1 -> t2 -> t3", "t4 -> t1 -> t2 -> t3 -> t4"}


def test_self_dependency_is_not_also_a_cycle(tmp_path: Path) -> None:
    machines, jobs, tasks = build([(float(i), 1.0, 1.0, 1.0, 0) for i in range(3)])
    tasks[2]["depends_on"] = ["t2"]
    checks = [p.check for p in validate(write_trace(tmp_path / "t", machines, jobs,
                                                    tasks)).problems]
    assert checks == ["task depends on itself"]


def test_long_dependency_chain_is_checked_in_linear_time(tmp_path: Path) -> None:
    n = 20_000
    machines = [{"machine_id": "m0", "cpu": 8.0, "mem": 64.0}]
    jobs = [{"job_id": "j0", "user": "u0", "submit_s": 0.0}]
    tasks = [{"task_id": f"t{k}", "job_id": "j0", "submit_s": 0.0, "duration_s": 1.0,
              "cpu": 1.0, "mem": 1.0, "depends_on": [f"t{k - 1}"] if k else None}
             for k in range(n)]
    assert validate(write_trace(tmp_path / "t", machines, jobs, tasks)).ok
    tasks[0]["depends_on"] = [f"t{n - 1}"]
    report = validate(write_trace(tmp_path / "c", machines, jobs, tasks))
    problem = next(p for p in report.problems if "dependency cycle" in p.check)
    assert problem.rows == n and problem.example.endswith("-> ...")


@pytest.mark.parametrize(("table", "column"), [("machines", "cpu"), ("machines", "mem"),
                                               ("machines", "speed"), ("tasks", "gpu"),
                                               ("tasks", "duration_s")])
def test_nan_beside_finite_values_is_found(tmp_path: Path, table: str, column: str) -> None:
    """Parquet statistics leave NaN out; a check answered from them would miss it."""
    machines, jobs, tasks = build([(float(i), 1.0, 1.0, 1.0, 0) for i in range(4)])
    rows = machines if table == "machines" else tasks
    for row in rows:  # the column in every row (from_pylist takes columns from the first)
        row.setdefault(column, 1.0)
    rows[1][column] = math.nan
    report = validate(write_trace(tmp_path / "t", machines, jobs, tasks))
    assert any(p.table == table and p.check.startswith(column) for p in report.problems), \
        report.problems


def test_checkers_draw_no_progress_bar() -> None:
    """DuckDB draws a bar on stderr for queries over 2 s, even into a log file."""
    from pipeline.trace.usagecheck import check_connection

    con = check_connection()
    settings = dict(con.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN "
        "('enable_progress_bar', 'disabled_optimizers')").fetchall())
    con.close()
    assert settings["enable_progress_bar"] == "false"
    assert "filter_pushdown" in settings["disabled_optimizers"]
