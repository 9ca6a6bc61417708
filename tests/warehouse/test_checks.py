"""The data checks (sql/checks): each catches a deliberately broken run, and a failed check
rolls the load back."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipeline.errors import TraceError
from pipeline.warehouse import load, sql
from tests.warehouse.rundirs import (
    demo_intervals,
    demo_runs,
    demo_tasks,
    write_run,
    write_trace,
)

CHECKS = ("every_task_accounted_for", "no_node_over_capacity", "node_hours_match_intervals")


def set_value(column: str, task_id: str, value: object) -> Callable[[pa.Table], pa.Table]:
    """An edit setting ``column`` of task ``task_id``."""
    def edit(table: pa.Table) -> pa.Table:
        values = table[column].to_pylist()
        values[table["task_id"].to_pylist().index(task_id)] = value
        index = table.schema.get_field_index(column)
        return table.set_column(index, column, pa.array(values, table.schema.field(column).type))
    return edit


def drop_task(task_id: str) -> Callable[[pa.Table], pa.Table]:
    return lambda table: table.filter(pc.not_equal(table["task_id"], task_id))


def duplicate_last(table: pa.Table) -> pa.Table:
    return pa.concat_tables([table, table.slice(table.num_rows - 1, 1)])


def broken_run(tmp_path: Path, **kwargs: object) -> Path:
    """A yarn-uniform run of the demo trace, broken by ``kwargs`` (write_run options)."""
    trace = write_trace(tmp_path, tasks=4)
    return write_run(tmp_path, "yarn-uniform", demo_tasks(False), demo_intervals(False),
                     trace_path=trace, **kwargs)


BROKEN = {
    "over capacity": (dict(edit_tasks=set_value("cpu", "t2", 3.0)),
                      "no_node_over_capacity", "cpu over capacity"),
    "over memory": (dict(edit_intervals=lambda t: t.set_column(
                        t.schema.get_field_index("mem"), "mem", pa.array([5.0, 8.0]))),
                    "no_node_over_capacity", "mem over capacity"),
    "node down": (dict(edit_intervals=lambda t: t.set_column(
                      t.schema.get_field_index("down_s"), "down_s", pa.array([3600.0, 5.0])),
                       metric_overrides={"node_hours": 3605 / 3600}),
                  "no_node_over_capacity", "node not provisioned at task start"),
    "unknown node": (dict(edit_tasks=set_value("machine_id", "t1", "m9")),
                     "no_node_over_capacity", "node not provisioned at task start"),
    "missing task": (dict(edit_tasks=drop_task("t0")),
                     "every_task_accounted_for", "3 tasks recorded, the trace has 4"),
    "duplicate task": (dict(edit_tasks=duplicate_last),
                       "every_task_accounted_for", "task appears 2 times"),
    "bad outcome": (dict(edit_tasks=set_value("outcome", "t3", "lost")),
                    "every_task_accounted_for", "invalid outcome 'lost'"),
    "finished without end": (dict(edit_tasks=set_value("end_s", "t1", None)),
                             "every_task_accounted_for", "finished without start_s/end_s"),
    "wrong node_hours": (dict(metric_overrides={"node_hours": 1.0}),
                         "node_hours_match_intervals", "node_hours differs from the intervals"),
    "wrong tasks_finished": (dict(metric_overrides={"tasks_finished": 2.0}),
                             "every_task_accounted_for", "metric tasks_finished = 2"),
}


@pytest.fixture(scope="module")
def good_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse holding one good run (copied by each test, so it is loaded once)."""
    root = tmp_path_factory.mktemp("good")
    db = root / "wh.duckdb"
    load([demo_runs(root)[1]], db)
    return db


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_check_catches_a_broken_run(tmp_path: Path, good_warehouse: Path,
                                         case: str) -> None:
    options, check, reason = BROKEN[case]
    db = Path(shutil.copy(good_warehouse, tmp_path / "wh.duckdb"))
    bad = broken_run(tmp_path / "bad", **options)
    with pytest.raises(TraceError) as failure:
        load([bad], db)
    message = str(failure.value)
    assert f"check {check} failed" in message and reason in message
    assert all(f"check {c} failed" not in message for c in CHECKS if c != check)
    # rolled back: the good run is all there is, and it passes every check
    assert sql(db, "select policy from runs")[1] == [("packing",)]
    for name in CHECKS:
        assert sql(db, name)[1] == []


def test_checks_run_over_the_whole_warehouse_on_demand(tmp_path: Path) -> None:
    db = tmp_path / "wh.duckdb"
    load(demo_runs(tmp_path), db)
    with duckdb.connect(str(db)) as con:
        con.execute("update task_runs set cpu = 3 where task_id = 't2' and start_s = 100")
        con.execute("update metrics set value = 9 where metric = 'node_hours'")
        con.execute("delete from task_runs where task_id = 't3'")
    columns, rows = sql(db, "no_node_over_capacity")
    assert "reason" in columns and [r[columns.index("task_id")] for r in rows] == ["t2"]
    assert len(sql(db, "checks/node_hours_match_intervals")[1]) == 2
    _, rows = sql(db, "every_task_accounted_for.sql")
    assert {r[2] for r in rows} == {
        "3 tasks recorded, the trace has 4",
        "0 unschedulable tasks, metric tasks_unschedulable = 1.0",
    }


def test_tasks_starting_together_count_for_each_other(tmp_path: Path) -> None:
    """Each fits its node alone; together, both starts are over capacity and both named."""
    db = tmp_path / "wh.duckdb"
    load(demo_runs(tmp_path), db)
    with duckdb.connect(str(db)) as con:
        con.execute("update task_runs set start_s = 0, cpu = 2.5 "
                    "where task_id = 't2' and start_s = 100")
    columns, rows = sql(db, "no_node_over_capacity")
    assert sorted((r[columns.index("task_id")], r[columns.index("reason")]) for r in rows) == [
        ("t0", "cpu over capacity"), ("t2", "cpu over capacity")]


def test_back_to_back_tasks_and_unfinished_tasks_fit(tmp_path: Path) -> None:
    """A task ending when another starts frees its capacity first; no end = still running."""
    db = tmp_path / "wh.duckdb"
    unfinished, no_end = set_value("outcome", "t2", "unfinished"), set_value("end_s", "t2", None)
    runs = demo_runs(tmp_path, edit_tasks=lambda t: no_end(unfinished(t)),
                     metric_overrides={"tasks_finished": 2.0})
    load(runs, db)
    assert sql(db, "no_node_over_capacity")[1] == []
