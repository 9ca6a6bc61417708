"""The report's data-locality part: shown with the right numbers when runs measured locality,
absent (and locality never mentioned) when none did."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from pipeline.report import locality_charts
from pipeline.report.locality import delay_sweep, locality_observation, percent
from pipeline.report.render import chart_png
from pipeline.report.tables import duration, gib, share
from tests.report.conftest import LOCALITY_SECTIONS_WITH_CHARTS
from tests.report.test_report import chart_specs

Built = tuple[Path, dict[str, Any]]


def _section(page: str, key: str) -> str | None:
    found = re.search(rf'<section id="[\w.-]*?-?{key}">(.*?)</section>', page, re.S)
    return found.group(1) if found else None


def _summary(db: Path) -> pl.DataFrame:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.sql("select * from policy_summary").pl()
    finally:
        con.close()


def test_sections_and_charts_appear(locality_report: Built) -> None:
    out, result = locality_report
    names = [Path(c).name for c in result["charts"]]
    assert names == [f"trace-{s}.png" for s in LOCALITY_SECTIONS_WITH_CHARTS]
    page = (out / "report.html").read_text()
    for key in ("locality", "locality-job-size"):
        section = _section(page, key)
        assert section is not None and "<table>" in section, key
        assert len(re.findall(r'<div class="chart" id="chart-\d+">', section)) == 1, key
    assert {"trace-locality.csv", "trace-locality-job-size.csv"} <= {
        p.name for p in (out / "tables").iterdir()}


def test_table_has_the_warehouse_numbers(locality_report: Built,
                                         locality_warehouse: Path) -> None:
    text = (locality_report[0] / "summary.md").read_text()
    table = text.split("### Data locality\n")[1].split("###")[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()
            if line.startswith("| ") and "Setting" not in line}
    summary = _summary(locality_warehouse)
    assert set(rows) == set(summary["label"])
    for run in summary.iter_rows(named=True):
        cells = [c.strip() for c in rows[run["label"]].strip("|").split("|")]
        assert cells[1:] == [
            share(run["locality_node"]), share(run["locality_rack"]),
            share(run["locality_any"]), gib(run["data_read_core_gb"]),
            gib(run["data_read_rack_gb"]), duration(run["jct_p50_s"]),
            duration(run["jct_p95_s"]), f"{run['jain_fairness']:.2f}"], run["label"]
    # settings in order, numbers as numbers: skip_count=0 before =8
    order = [line.split(" | ")[0].strip("| ") for line in table.splitlines()
             if line.startswith("| delay")]
    assert order == ["delay-scheduling delay=skip, skip_count=0",
                     "delay-scheduling delay=skip, skip_count=8",
                     "delay-scheduling delay=time, skip_count=10"]


def test_chart_follows_the_swept_delay(locality_report: Built) -> None:
    page = (locality_report[0] / "report.html").read_text()
    section = _section(page, "locality")
    assert section is not None
    chart_id = re.search(r'<div class="chart" id="(chart-\d+)">', section)
    assert chart_id is not None
    spec = dict(chart_specs(page))[chart_id.group(1)]
    assert "skip_count" in spec["title"]["text"]
    values = [row for rows in spec["datasets"].values() for row in rows]
    # the line: the two skip runs at their skip_count; the rest are levels (x null)
    on_line = sorted((r["label"], r["x"]) for r in values if r.get("x") is not None)
    assert sorted(set(on_line)) == [("delay-scheduling delay=skip, skip_count=0", 0.0),
                                    ("delay-scheduling delay=skip, skip_count=8", 8.0)]
    levels = {r["label"] for r in values if r.get("x") is None}
    assert levels == {"yarn-uniform", "delay-scheduling delay=time, skip_count=10"}
    assert (locality_report[0] / "charts" / "trace-locality.png").read_bytes()[:4] == b"\x89PNG"


def test_job_size_table_matches_the_view(locality_report: Built,
                                         locality_warehouse: Path) -> None:
    text = (locality_report[0] / "summary.md").read_text()
    table = text.split("### Data locality by job size")[1].split("###")[0]
    head = next(line for line in table.splitlines() if line.startswith("| Setting"))
    assert [c.strip() for c in head.strip("|").split("|")][1:] == [
        "1 task (3 jobs)", "2-10 tasks (4 jobs)", "11-50 tasks (2 jobs)",
        "51-150 tasks (1 jobs)"]
    con = duckdb.connect(str(locality_warehouse), read_only=True)
    bins = con.sql("select label, bin, b.locality_node from locality_by_job_size b "
                   "join policy_summary using (run_id) order by label, bin_order").fetchall()
    con.close()
    for label, _, node in bins:
        row = next(line for line in table.splitlines() if line.startswith(f"| {label} |"))
        assert f"{100 * node:.1f}%" in row


def test_observation_states_the_trade_off(locality_report: Built,
                                          locality_warehouse: Path) -> None:
    text = (locality_report[0] / "summary.md").read_text()
    seen = text.split("### What the replays show")[1].split("###")[0]
    summary = _summary(locality_warehouse)
    ref = summary.filter(pl.col("policy") == "yarn-uniform").row(0, named=True)
    best = summary.filter(pl.col("policy") != "yarn-uniform").sort(
        ["locality_node", "jct_p95_s"], descending=[True, False]).row(0, named=True)
    expected = (
        f"- {best['label']} on the fixed cluster ran {percent(best['locality_node'])} of "
        "the tasks that read input data on a machine holding that data, against "
        f"{percent(ref['locality_node'])} under yarn-uniform (the status quo), and "
        f"{'cut' if best['data_read_core_gb'] <= ref['data_read_core_gb'] else 'raised'} "
        f"data read across racks from {gib(ref['data_read_core_gb'])} GiB to "
        f"{gib(best['data_read_core_gb'])} GiB; median job time {duration(best['jct_p50_s'])} "
        f"instead of {duration(ref['jct_p50_s'])}, p95 job time {duration(best['jct_p95_s'])} "
        f"instead of {duration(ref['jct_p95_s'])}.")
    assert expected in seen.splitlines()


@pytest.mark.parametrize("fixture", ["built_report", "queue_report"])
def test_no_locality_no_word_of_it(fixture: str, request: pytest.FixtureRequest) -> None:
    """Runs without input data: no section, no chart, no observation, no assumption line
    (the queue schedulers' delay settings may be listed among the run settings)."""
    out, result = request.getfixturevalue(fixture)
    assert "locality" not in _no_settings((out / "summary.md").read_text())
    page = (out / "report.html").read_text()
    body = page.split("<body>")[1].split("<script")[0]
    assert "locality" not in _no_settings(body)
    assert not any("locality" in c for c in result["charts"])


def _no_settings(text: str) -> str:
    """``text`` without the names of the schedulers' delay-scheduling parameters."""
    for name in ("rack_locality_additional_delay", "rack_locality_full_reset",
                 "node_locality_delay", "locality_threshold_node", "locality_threshold_rack",
                 "locality_delay_node_ms", "locality_delay_rack_ms"):
        text = text.replace(name, "")
    return text.lower()


def _settings(rows: list[tuple[str, str, dict[str, Any], float]]) -> pl.DataFrame:
    import json

    return pl.DataFrame(
        {"label": [r[0] for r in rows], "policy": [r[1] for r in rows],
         "params": [json.dumps(r[2]) for r in rows], "locality_node": [r[3] for r in rows],
         "cluster": ["fixed"] * len(rows), "setting": [r[0] for r in rows]})


def test_delay_sweep_keeps_each_mode_apart() -> None:
    """node_wait_s varies among the delay=time runs only: that is the line; the skip run and
    the other policy are levels, and a knob with one value is no sweep."""
    rows = _settings([
        ("ds skip", "delay-scheduling", {"delay": "skip", "skip_count": 10,
                                         "node_wait_s": None}, 0.6),
        ("ds w=0", "delay-scheduling", {"delay": "time", "skip_count": 10,
                                        "node_wait_s": 0.0}, 0.5),
        ("ds w=6", "delay-scheduling", {"delay": "time", "skip_count": 10,
                                        "node_wait_s": 6.0}, 0.8),
        ("ds w=15", "delay-scheduling", {"delay": "time", "skip_count": 10,
                                         "node_wait_s": 15.0}, 0.9),
        ("uniform", "yarn-uniform", {}, 0.1)])
    sweep = delay_sweep(rows)
    assert sweep is not None and (sweep.policy, sweep.knob) == ("delay-scheduling",
                                                                 "node_wait_s")
    assert sweep.points["x"].to_list() == [0.0, 6.0, 15.0]
    assert set(sweep.points["series"]) == {"delay-scheduling delay=time"}
    assert sorted(sweep.references["label"]) == ["ds skip", "uniform"]
    assert delay_sweep(rows.filter(pl.col("label").is_in(["ds skip", "uniform"]))) is None


def test_observation_without_a_status_quo_compares_with_the_least_local() -> None:
    runs = pl.DataFrame({
        "trace": ["t"] * 2, "policy": ["delay-scheduling"] * 2, "label": ["a", "b"],
        "seed": [0, 0], "cluster_mode": ["fixed"] * 2, "params": ["{}"] * 2,
        "locality_node": [0.9, 0.4], "locality_rack": [0.1, 0.3], "locality_any": [0.0, 0.3],
        "data_read_core_gb": [2.0, 150.0], "data_read_rack_gb": [1.0, 5.0],
        "jct_p50_s": [10.0, 12.0], "jct_p95_s": [None, 100.0], "jain_fairness": [1.0, 1.0]})
    assert locality_observation(runs, "yarn-uniform") == [
        "a on the fixed cluster ran 90% of the tasks that read input data on a machine "
        "holding that data, against 40% under b, and cut data read across racks from "
        "150 GiB to 2 GiB; median job time 10 s instead of 12 s."]
    assert locality_observation(runs.with_columns(pl.lit(None, pl.Float64).alias(
        "locality_node")), "yarn-uniform") == []


def test_job_size_chart_puts_clusters_in_panels() -> None:
    bins = pl.DataFrame({
        "label": ["a", "a", "a [elastic]"], "setting": ["a", "a", "a"],
        "cluster": ["fixed", "fixed", "elastic"], "bin": ["1", "2-10", "1"],
        "bin_order": [1, 2, 1], "jobs": [3.0, 1.0, 3.0], "tasks_with_inputs": [3.0, 5.0, 3.0],
        "locality_node": [1.0, 0.6, 0.0], "locality_rack": [0.0, 0.2, 0.0],
        "locality_any": [0.0, 0.2, 1.0]})
    spec = locality_charts.job_size_chart(bins, ["a", "a [elastic]"]).to_dict()
    assert spec["facet"]["row"]["field"] == "cluster"
    assert chart_png(spec).startswith(b"\x89PNG")
    one = locality_charts.job_size_chart(bins.filter(pl.col("cluster") == "fixed"), ["a"])
    assert "facet" not in one.to_dict()


@pytest.mark.parametrize(("value", "text"), [(0.92, "92%"), (0.996, "99.6%"), (1.0, "100%"),
                                             (0.001, "0.1%"), (0.0, "0%")])
def test_shares_in_sentences_never_round_to_all_or_none(value: float, text: str) -> None:
    assert percent(value) == text


def test_table_keeps_preemptions_and_solver_figures_only_where_they_say_something() -> None:
    """Quincy rows bring their flow rounds and graph size (and QFP its preemptions); a table
    of settings that neither preempt nor solve a flow leaves those columns out.  Wall-clock
    solver time never appears: the report is the same on every run."""
    from pipeline.report.locality import TABLE_COLUMNS, table_columns

    cols = ("preemptions", "solver_rounds", "solver_arcs_p50")
    quiet = pl.DataFrame({"label": ["a", "b"], **{c: [0.0, None] for c in cols}},
                         schema={"label": pl.String, **{c: pl.Float64 for c in cols}})
    assert not set(cols) & set(table_columns(quiet))
    busy = quiet.with_columns(*(pl.Series(c, [0.0, 12.0]) for c in cols))
    assert table_columns(busy) == TABLE_COLUMNS
    assert not any("_ms_" in c for c in TABLE_COLUMNS)
