"""The command line as people meet it: help in words, --version, sql output formats."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from pipeline import __version__
from pipeline.cli import app
from tests.warehouse.rundirs import demo_runs

VERBS = sorted(get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("verb", VERBS)
def test_help_names_values_in_words(verb: str) -> None:
    result = CliRunner().invoke(app, [verb, "--help"], env={"COLUMNS": "120"},
                                prog_name="tracereplay")
    assert result.exit_code == 0, result.output
    assert f"Usage: tracereplay {verb}" in result.output
    assert "<bool>" not in result.output and "<path>" not in result.output
    usage = result.output.split("Usage:")[1].splitlines()[0]
    assert "{" not in usage and "<" not in usage, usage


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"tracereplay {__version__}"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipeline.warehouse import load

    root = tmp_path_factory.mktemp("cli")
    load(demo_runs(root), root / "w.duckdb")
    return root / "w.duckdb"


def run_sql(warehouse: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["sql", "--db", str(warehouse), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_sql_formats(warehouse: Path) -> None:
    query = "select run_id, policy, node_hours, params from policy_summary order by policy"
    rows = list(csv.DictReader(io.StringIO(run_sql(warehouse, query, "--format", "csv"))))
    assert [r["policy"] for r in rows] == ["packing", "yarn-uniform"]
    assert float(rows[0]["node_hours"]) == 1.5  # full precision, no rounding
    lines = run_sql(warehouse, query, "--format", "json").splitlines()
    assert json.loads(lines[1])["policy"] == "yarn-uniform"
    assert isinstance(json.loads(lines[0])["params"], dict)  # JSON stays JSON
    markdown = run_sql(warehouse, query, "--format", "markdown").splitlines()
    assert markdown[0] == "| run_id | policy | node_hours | params |"
    table = run_sql(warehouse, "select 'x' || repeat('y', 200) as long_text")
    assert max(len(line) for line in table.splitlines()) <= 70  # long cells shortened
    assert "\u2026" in table


def test_sql_unknown_name_lists_the_known_ones(warehouse: Path) -> None:
    result = CliRunner().invoke(app, ["sql", "--db", str(warehouse), "policy_sumary"])
    assert result.exit_code == 1
    assert "did you mean policy_summary?" in result.output
    assert "cost_savings" in result.output and "task_runs" in result.output
    assert "Traceback" not in result.output
    bad = CliRunner().invoke(app, ["sql", "--db", str(warehouse), "runs", "--format", "xml"])
    assert bad.exit_code == 1 and "formats: table, csv, json, markdown" in bad.output


def test_load_summary_follows_run_contents_not_only_ids(tmp_path: Path) -> None:
    """dvc reruns the report when the summary changes: a run redone by other code keeps its
    run id, so the summary must say that its contents changed."""
    runs = demo_runs(tmp_path)
    summary = tmp_path / "loaded.json"

    def load_once() -> dict:
        result = CliRunner().invoke(app, ["load", *map(str, runs), "--db",
                                          str(tmp_path / "w.duckdb"), "--summary", str(summary)])
        assert result.exit_code == 0, result.output
        return json.loads(summary.read_text())

    first = load_once()
    assert load_once() == first  # the same runs, the same summary
    (runs[0] / "provenance.json").write_text('{"wall_s": 99}')
    assert load_once() == first  # provenance is not content
    metrics = runs[0] / "metrics.parquet"
    table = pq.read_table(metrics)
    fair = pc.equal(table["metric"], "jain_fairness")  # other code, other results, same id
    values = pc.if_else(fair, pc.multiply(table["value"], 0.5), table["value"])
    pq.write_table(table.set_column(table.schema.get_field_index("value"), "value", values),
                   metrics)
    changed = load_once()
    assert changed["rows"] == first["rows"] and changed["runs"].keys() == first["runs"].keys()
    assert changed != first
