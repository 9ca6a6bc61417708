"""The report's over-subscription part: shown, with the warehouse's numbers, when runs used
opportunistic containers; absent otherwise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.report import opportunistic, report
from pipeline.report.data import read_report_data
from tests.warehouse.rundirs import opportunistic_runs

Built = tuple[Path, dict[str, Any]]


def _section(page: str, key: str) -> str | None:
    found = re.search(rf'<section id="[\w.-]*?-?{key}">(.*?)</section>', page, re.S)
    return found.group(1) if found else None


@pytest.fixture(scope="module")
def opp_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipeline.warehouse import load

    root = tmp_path_factory.mktemp("opp-report")
    db = root / "wh.duckdb"
    load(opportunistic_runs(root), db)
    return db


@pytest.fixture(scope="module")
def opp_report(opp_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("opp-out") / "report"
    return out, report(opp_warehouse, out)


def test_section_table_chart_and_summary(opp_report: Built) -> None:
    out, result = opp_report
    assert "demo-oversubscription.png" in [Path(c).name for c in result["charts"]]
    section = _section((out / "report.html").read_text(), "oversubscription")
    assert section is not None and "<table>" in section
    assert len(re.findall(r'<div class="chart" id="chart-\d+">', section)) == 1
    assert "30.0% \u2192 50.0%" in section and "+20.0 pts" in section
    assert "1.25\u00d7" in section  # guaranteed jobs: mean slowdown over seed 0's pair
    text = (out / "summary.md").read_text()
    block = text.split("### Over-subscription\n")[1].split("###")[0]
    assert "from 30.0% to 50.0%" in block and "1.25\u00d7 as long" in block
    assert "charts/demo-oversubscription.png" in block
    csv = pl.read_csv(out / "tables" / "demo-oversubscription.csv")
    assert csv.height == 1 and csv["seeds"].to_list() == [2]


def test_the_same_warehouse_gives_the_same_section(opp_warehouse: Path, opp_report: Built,
                                                   tmp_path: Path) -> None:
    again = tmp_path / "again"
    report(opp_warehouse, again)
    first = (opp_report[0] / "summary.md").read_text()
    assert (again / "summary.md").read_text() == first
    assert (again / "report.html").read_text() == (opp_report[0] / "report.html").read_text()


def test_absent_without_opportunistic_runs(built_report: Built, warehouse: Path) -> None:
    out, result = built_report
    page = (out / "report.html").read_text()
    assert _section(page, "oversubscription") is None
    assert "Over-subscription" not in (out / "summary.md").read_text()
    assert not any("oversubscription" in c for c in result["charts"])
    assert read_report_data(warehouse, "yarn-uniform").opportunistic.height == 0


def test_paragraph_without_a_run_to_compare_with(opp_warehouse: Path) -> None:
    data = read_report_data(opp_warehouse, "yarn-uniform")
    unpaired = data.opportunistic.filter(pl.col("base_run_id").is_null())
    rows = opportunistic.settings_table(unpaired)
    assert rows.height == 1 and rows["util_used_cpu_gain_pts"].to_list() == [None]
    assert "cannot be told" in opportunistic.payer_paragraph(rows)
    assert opportunistic.table(rows)["CPU used, before \u2192 after"].to_list() == [
        "\u2013 \u2192 50.0%"]
