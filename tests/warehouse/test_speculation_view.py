"""``speculation_effect``: a run with speculative execution beside its run without it, and
the ``speculation_consistent`` check."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipeline.errors import TraceError
from pipeline.warehouse import load
from tests.warehouse.rundirs import demo_runs, write_trace
from tests.warehouse.spec_rundirs import spec_run, speculation_runs, with_spec_columns


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("spec-view")
    path = root / "wh.duckdb"
    load(speculation_runs(root), path)
    return path


def _query(db: Path, sql: str) -> list[dict[str, Any]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        result = con.execute(sql)
        names = [d[0] for d in result.description]
        return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
    finally:
        con.close()


def _rows(db: Path) -> list[dict[str, Any]]:
    return _query(db, "select * from speculation_effect order by spec_rule, seed")


def test_paired_late_run(db: Path) -> None:
    rows = _rows(db)
    assert [(r["spec_rule"], r["seed"]) for r in rows] == [("hadoop", 0), ("late", 0),
                                                           ("late", 1)]
    late = rows[1]
    assert late["base_run_id"] is not None and late["base_label"] == "yarn-uniform"
    assert late["label"] == "yarn-uniform spec=late"
    assert late["spec_settings"] == "spec_cap=0.1"
    assert (late["jct_mean_s"], late["base_jct_mean_s"]) == (275.0, 350.0)
    assert late["jct_mean_change_pct"] == pytest.approx(100 * (275 - 350) / 350)
    assert late["jct_p50_change_pct"] == pytest.approx(100 * (275 - 350) / 350)
    assert (late["jct_p95_s"], late["base_jct_p95_s"]) == (297.5, 395.0)
    assert late["jct_p95_change_pct"] == pytest.approx(100 * (297.5 - 395) / 395)
    assert (late["spec_launched"], late["spec_won"]) == (2, 1)
    assert late["spec_wasted_task_s"] == 400.0 and late["spec_run_task_s"] == 300.0
    assert late["spec_extra_pct"] == pytest.approx(100 * 300 / 850)
    assert late["node_hours"] == late["base_node_hours"] == pytest.approx(2.0)
    assert late["tasks_finished"] == late["base_tasks_finished"] == 4


def test_paired_hadoop_run(db: Path) -> None:
    hadoop = _rows(db)[0]
    assert hadoop["spec_settings"] == ""
    assert hadoop["jct_mean_change_pct"] == pytest.approx(100 * (300 - 350) / 350)
    assert hadoop["jct_p95_change_pct"] == pytest.approx(100 * (300 - 395) / 395)
    assert hadoop["spec_extra_pct"] == pytest.approx(100 * 150 / 900)


def test_run_without_a_base_keeps_its_row(db: Path) -> None:
    row = _rows(db)[2]
    assert row["base_run_id"] is None and row["spec_launched"] == 2
    for column in ("base_jct_mean_s", "jct_mean_change_pct", "jct_p95_change_pct",
                   "base_node_hours", "base_label"):
        assert row[column] is None, column


def test_labels_and_jct_mean_in_policy_summary(db: Path) -> None:
    rows = _query(db, "select distinct label, jct_mean_s from policy_summary order by 1")
    # `spec=none` is the plain run; `spec` names the others, `spec_cap` (one value) does not
    assert rows == [{"label": "yarn-uniform", "jct_mean_s": 350.0},
                    {"label": "yarn-uniform spec=hadoop", "jct_mean_s": 300.0},
                    {"label": "yarn-uniform spec=late", "jct_mean_s": 275.0}]


def test_task_columns_are_loaded(db: Path) -> None:
    rows = _query(db, "select spec_copies, spec_won, spec_machine_id, spec_start_s, "
                      "spec_run_s, spec_wasted_s from task_runs join runs using (run_id) "
                      "where runs.params ->> 'spec' = 'late' and seed = 0 and task_id = 'a2'")
    assert list(rows[0].values()) == [1, True, "m1", 100.0, 150.0, 250.0]


def test_runs_before_speculation_load_and_give_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    load(demo_runs(tmp_path), path)  # task_runs without the speculation columns
    assert _rows(path) == []
    nulls = _query(path, "select count(*) as n from task_runs where spec_copies is null")
    assert nulls == [{"n": 8}]  # two runs of four tasks


def _break(column: str, task: str, value: Any, kind: pa.DataType) -> Any:
    """An ``edit_tasks`` that writes the late run's columns, then sets one cell."""
    def edit(table: pa.Table) -> pa.Table:
        table = with_spec_columns("late")(table)
        at = table.schema.get_field_index(column)
        cells = pc.if_else(pc.equal(table["task_id"], task), pa.scalar(value, kind),
                           table[column])
        return table.set_column(at, column, cells)
    return edit


@pytest.mark.parametrize(("column", "task", "value", "kind", "reason"), [
    ("spec_copies", "a2", 0, pa.int32(), "spec_won without a copy"),
    ("spec_run_s", "b1", 10.0, pa.float64(), "spec_run_s > 0 without a copy"),
    ("spec_wasted_s", "b2", -1.0, pa.float64(), "spec_wasted_s -1.0 < 0"),
    ("spec_machine_id", "b2", None, pa.string(), "copies without spec_machine_id"),
])
def test_check_refuses_inconsistent_tasks(tmp_path: Path, column: str, task: str, value: Any,
                                          kind: pa.DataType, reason: str) -> None:
    trace = write_trace(tmp_path, tasks=4)
    run = spec_run(tmp_path, "late", trace_path=trace, edit=_break(column, task, value, kind))
    with pytest.raises(TraceError, match=re.escape(reason)):
        load([run], tmp_path / "wh.duckdb")


def test_check_refuses_more_won_than_launched(tmp_path: Path) -> None:
    from tests.warehouse.rundirs import write_run
    from tests.warehouse.spec_rundirs import METRICS, PARAMS, SPEC_NODES, spec_tasks

    trace = write_trace(tmp_path, tasks=4)
    run = write_run(tmp_path, "yarn-uniform", spec_tasks("late"), SPEC_NODES,
                    trace_path=trace, params=PARAMS["late"],
                    edit_tasks=with_spec_columns("late"),
                    metric_overrides={**METRICS["late"], "spec_won": 3.0})
    with pytest.raises(TraceError, match=re.escape("spec_won 3.0 > spec_launched 2.0")):
        load([run], tmp_path / "wh.duckdb")
