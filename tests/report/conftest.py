"""One warehouse of two policies x one trace x one seed, and its report, shared by the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.report import report
from pipeline.warehouse import load
from tests.warehouse.rundirs import demo_runs

SECTIONS_WITH_CHARTS = ("cost", "provisioned-nodes", "allocated-capacity", "utilization",
                        "fairness-wait")
SECTIONS = (*SECTIONS_WITH_CHARTS, "unschedulable", "parameters")


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report-runs")
    db = root / "wh.duckdb"
    load(demo_runs(root), db)
    return db


@pytest.fixture(scope="session")
def built_report(warehouse: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("report-out") / "report"
    return out, report(warehouse, out)
