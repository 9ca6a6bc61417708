"""The report's speculation part: shown, with the warehouse's numbers, when runs used
speculative execution; absent otherwise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.report import report, speculation, speculation_charts
from pipeline.report.data import read_report_data
from tests.warehouse.spec_rundirs import speculation_runs

Built = tuple[Path, dict[str, Any]]


def _section(page: str, key: str) -> str | None:
    found = re.search(rf'<section id="[\w.-]*?-?{key}">(.*?)</section>', page, re.S)
    return found.group(1) if found else None


@pytest.fixture(scope="module")
def spec_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipeline.warehouse import load

    root = tmp_path_factory.mktemp("spec-report")
    db = root / "wh.duckdb"
    load(speculation_runs(root), db)
    return db


@pytest.fixture(scope="module")
def spec_report(spec_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("spec-out") / "report"
    return out, report(spec_warehouse, out)


@pytest.fixture(scope="module")
def rows(spec_warehouse: Path) -> pl.DataFrame:
    return speculation.settings_table(read_report_data(spec_warehouse, "yarn-uniform")
                                      .speculation)


def test_section_table_chart_and_summary(spec_report: Built) -> None:
    out, result = spec_report
    assert "demo-speculation.png" in [Path(c).name for c in result["charts"]]
    assert (out / "charts" / "demo-speculation.png").read_bytes()[:4] == b"\x89PNG"
    section = _section((out / "report.html").read_text(), "speculation")
    assert section is not None and "<table>" in section
    assert len(re.findall(r'<div class="chart" id="chart-\d+">', section)) == 1
    # late on seed 0: mean job time 350 s -> 275 s, copies 300 s over the tasks' own 850 s
    assert "5.8 min \u2192 4.6 min" in section and "-21.4%" in section
    assert "35.3%" in section and "LATE" in section and "Hadoop&#x27;s rule" in section
    text = (out / "summary.md").read_text()
    block = text.split("### Speculation\n")[1].split("###")[0]
    assert ("LATE cut mean job completion time by 21.4% (p95: 24.7% shorter) using 35.3% "
            "extra capacity") in block
    assert "Hadoop's rule cut it by 14.3% (p95: 24.1% shorter) using 16.7%" in block
    assert "launched 2 copies, 1 of which finished first" in block
    assert "charts/demo-speculation.png" in block
    runs = pl.read_csv(out / "tables" / "demo-speculation.csv")
    assert runs.height == 3 and sorted(runs["spec_rule"].to_list()) == ["hadoop", "late",
                                                                        "late"]
    settings = pl.read_csv(out / "tables" / "demo-speculation-1.csv")
    assert settings["seeds"].to_list() == [1, 2] and settings["paired_seeds"].to_list() == [1, 1]


def test_the_same_warehouse_gives_the_same_section(spec_warehouse: Path, spec_report: Built,
                                                   tmp_path: Path) -> None:
    again = tmp_path / "again"
    report(spec_warehouse, again)
    assert (again / "summary.md").read_text() == (spec_report[0] / "summary.md").read_text()


def test_absent_without_speculation_runs(built_report: Built, warehouse: Path) -> None:
    out, result = built_report
    assert _section((out / "report.html").read_text(), "speculation") is None
    assert "### Speculation" not in (out / "summary.md").read_text()
    assert not any("speculation" in c for c in result["charts"])
    assert read_report_data(warehouse, "yarn-uniform").speculation.height == 0


def test_settings_numbered_in_label_order(rows: pl.DataFrame) -> None:
    assert rows.select("setting_no", "label", "rule").rows() == [
        ("1", "yarn-uniform spec=hadoop", "Hadoop's rule"),
        ("2", "yarn-uniform spec=late", "LATE")]
    # late's change is over seed 0 alone (seed 1 has no run to compare with)
    assert rows["jct_mean_change_pct"][1] == pytest.approx(100 * (275 - 350) / 350)


def test_chart_has_a_mean_and_a_p95_point_per_setting(rows: pl.DataFrame) -> None:
    points = speculation_charts.points(rows)
    assert points.height == 4
    late = points.filter(pl.col("label") == "yarn-uniform spec=late").sort("measure")
    assert late["change_pct"].to_list() == pytest.approx([100 * (275 - 350) / 350,
                                                          100 * (297.5 - 395) / 395])
    assert late["spec_extra_pct"].to_list() == pytest.approx([100 * 300 / 850] * 2)
    spec = speculation_charts.tradeoff_chart(rows, rows["label"].to_list()).to_dict()
    assert spec["title"]["text"] == "Job time against extra capacity"


def test_summary_without_a_run_to_compare_with(spec_warehouse: Path) -> None:
    effect = read_report_data(spec_warehouse, "yarn-uniform").speculation
    unpaired = speculation.settings_table(effect.filter(pl.col("base_run_id").is_null()))
    assert "cannot be told" in speculation.summary_line(unpaired)
    assert speculation_charts.points(unpaired).height == 0


def test_summary_words_slower_and_several_settings(rows: pl.DataFrame) -> None:
    slower = rows.with_columns(
        pl.when(pl.col("spec_rule") == "hadoop").then(pl.lit(12.0))
        .otherwise(pl.col("jct_mean_change_pct")).alias("jct_mean_change_pct"),
        pl.lit("late").alias("spec_rule"))
    line = speculation.summary_line(slower)
    # both settings are LATE's now: the better one (#2) speaks for the rule
    assert line.startswith("Against the same runs without speculation, LATE (best of 2 "
                           "settings: #2) cut mean job completion time by 21.4%")
    unchanged = rows.with_columns(pl.lit(0.01).alias("jct_mean_change_pct"),
                                  pl.lit(None, pl.Float64).alias("jct_p95_change_pct"))
    assert "LATE left it unchanged using 35.3%" in speculation.summary_line(unchanged)


def test_settings_shown_are_those_that_differ_between_runs() -> None:
    from pipeline.report.speculation import varying_settings

    phases = "spec_reduce_phases=0.5,0.25,0.25"
    assert varying_settings([f"spec_gap=0.2,{phases},spec_thresholds=percentile",
                             f"spec_gap=0.2,{phases},spec_thresholds=stddev"]) == [
        "spec_thresholds=percentile", "spec_thresholds=stddev"]
    assert varying_settings(["spec_gap=0.2", "spec_gap=0.2"]) == ["defaults"] * 2
    # each rule records its own keys: only keys that differ where present are shown
    assert varying_settings(["spec_gap=0.2", "spec_thresholds=percentile",
                             "spec_thresholds=stddev"]) == [
        "defaults", "spec_thresholds=percentile", "spec_thresholds=stddev"]


def test_the_assumptions_state_slow_machines() -> None:
    import json

    import polars as pl

    from pipeline.report.assumptions import cluster_lines

    spec = json.dumps({"kind": "fixed", "price_per_hour": 0.192, "billing_s": 1.0,
                       "slow_fraction": 0.2, "slow_factor": 2.5})
    runs = pl.DataFrame({"run_id": ["r"], "cluster": [spec]})
    summary = pl.DataFrame({"run_id": ["r"], "evictions": [0.0]})
    (line,) = cluster_lines(runs, summary)
    assert line.endswith("A share of 20% of the machines (chosen by the seed, the same for "
                         "every policy) runs 2.5 times slower than the rest.")
