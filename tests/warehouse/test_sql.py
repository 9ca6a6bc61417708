"""The sql verb's function: names, files, text, table names; the plain table printer."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pipeline.errors import TraceError
from pipeline.warehouse import format_table, load, sql
from pipeline.warehouse.db import CHECKS_DIR, REPORTS_DIR
from tests.warehouse.rundirs import demo_runs


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sql")
    path = root / "wh.duckdb"
    load(demo_runs(root), path)
    return path


@pytest.mark.parametrize("name", [
    "policy_summary", "policy_summary.sql", "reports/policy_summary",
    str(REPORTS_DIR / "policy_summary.sql"),
])
def test_report_names_and_files(db: Path, name: str) -> None:
    columns, rows = sql(db, name)
    assert columns[:3] == ["run_id", "trace", "policy"] and len(rows) == 2


def test_every_report_and_check_runs_by_name(db: Path) -> None:
    for path in [*REPORTS_DIR.glob("*.sql"), *CHECKS_DIR.glob("*.sql")]:
        columns, rows = sql(db, path.stem)
        assert columns
        if path.parent == CHECKS_DIR:
            assert rows == []


def test_text_tables_and_statements(db: Path) -> None:
    assert sql(db, "select 1 as one")[0] == ["one"]
    assert len(sql(db, "task_runs")[1]) == 8
    assert sql(db, "select 1 as one; select 2 as two") == (["two"], [(2,)])
    assert sql(db, "select * from task_runs", max_rows=3)[1].__len__() == 3


def test_errors_are_one_line_and_named(db: Path, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"^nope\.sql: no such SQL file"):
        sql(db, "nope.sql")
    with pytest.raises(TraceError, match=r"^query: Parser Error"):
        sql(db, "selec 1 frm")
    with pytest.raises(TraceError, match="no_such_table"):
        sql(db, "no_such_table")
    with pytest.raises(TraceError, match="no such warehouse"):
        sql(tmp_path / "missing.duckdb", "select 1")
    with pytest.raises(TraceError, match="read-only"):
        sql(db, "delete from runs")


def test_format_table_aligns() -> None:
    text = format_table(
        ["name", "value", "when"],
        [("a", 1.5, datetime(2025, 1, 2, 3, 4, 5)), ("long name", None, None),
         ("c", 1234567.891, None)],
    )
    assert text.splitlines() == [
        "name      |   value | when",
        "----------+---------+--------------------",
        "a         |     1.5 | 2025-01-02 03:04:05",
        "long name |    NULL | NULL",
        "c         | 1234568 | NULL",
        "(3 rows)",
    ]
    assert format_table([], []) == "(no result)"
    assert format_table(["x"], [(1e-9,)]).splitlines()[2] == "1.00000e-09"
