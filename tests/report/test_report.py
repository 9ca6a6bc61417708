"""The report: files, offline HTML, one chart per section, Markdown, errors, atomic output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from pipeline.errors import TraceError, UsageError
from pipeline.report import answer_charts, charts, report
from pipeline.report import stage as report_stage
from pipeline.report.data import read_report_data
from tests.report.conftest import (
    QUEUE_SECTIONS_WITH_CHARTS,
    SECTIONS,
    SECTIONS_WITH_CHARTS,
    SECTIONS_WITH_TABLES,
)

Built = tuple[Path, dict[str, Any]]


def chart_specs(page: str) -> list[tuple[str, dict[str, Any]]]:
    """The (div id, Vega-Lite spec) pairs the page embeds."""
    match = re.search(r"const CHARTS = (.*);\n", page)
    assert match is not None
    return json.loads(match.group(1))


def test_report_writes_html_pngs_and_markdown(built_report: Built) -> None:
    out, result = built_report
    assert result["traces"] == ["demo"] and result["runs"] == 2
    assert sorted(p.name for p in out.iterdir()) == ["charts", "report.html", "summary.md",
                                                     "tables"]
    csvs = {p.name for p in (out / "tables").iterdir()}
    assert {"demo-answer.csv", "demo-backlog.csv", "demo-runs.csv"} <= csvs
    pngs = sorted((out / "charts").iterdir())
    assert [p.name for p in pngs] == sorted(f"demo-{s}.png" for s in SECTIONS_WITH_CHARTS)
    assert all(p.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") for p in pngs)
    assert [Path(c).name for c in result["charts"]] == [f"demo-{s}.png"
                                                         for s in SECTIONS_WITH_CHARTS]


def test_html_is_self_contained(built_report: Built) -> None:
    page = (built_report[0] / "report.html").read_text()
    scripts = re.findall(r"<script\b[^>]*>", page)
    assert scripts and not any("src=" in s for s in scripts)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    assert "window.vegaEmbed" in page


def test_one_chart_per_section(built_report: Built) -> None:
    page = (built_report[0] / "report.html").read_text()
    specs = chart_specs(page)
    assert len(specs) == len(SECTIONS_WITH_CHARTS)
    for key in SECTIONS:
        section = re.search(rf'<section id="[\w.-]*?-?{key}">(.*?)</section>', page, re.S)
        assert section is not None, key
        divs = re.findall(r'<div class="chart" id="(chart-\d+)">', section.group(1))
        assert len(divs) == (1 if key in SECTIONS_WITH_CHARTS else 0), key
        assert ("<table>" in section.group(1)) == (key in SECTIONS_WITH_TABLES), key
    assert [s[0] for s in specs] == [f"chart-{i}" for i in range(len(specs))]
    assert all("$schema" in spec for _, spec in specs)


def test_summary_markdown(built_report: Built) -> None:
    text = (built_report[0] / "summary.md").read_text()
    assert "## Trace demo" in text
    # the answer first: the saving against the status quo, per day and month
    answer = text.split("### The answer")[1].split("###")[0]
    assert answer.lstrip().startswith(
        "**packing on the elastic cluster saves 25.0% against yarn-uniform on the trace's "
        "fixed cluster, which costs $0.38 (2 node-hours)")
    assert "$0.10 per day, $2.88 per 30-day month" in answer
    assert "| elastic | packing | 2 | $0.29 | +25.0% | $0.10 |" in answer
    for key in SECTIONS_WITH_CHARTS:
        assert f"(charts/demo-{key}.png)" in text
    assert "| Run | Setting | Seed | Settings used |" in text
    fixed = text.split("### Schedulers compared on the fixed cluster")[1].split("###")[0]
    assert "| Setting | Node-hours | Job time p50 |" in fixed
    assert "| yarn-uniform | 2 |" in fixed and "packing" not in fixed


def test_baseline_option_and_unknown_baseline(warehouse: Path) -> None:
    data = read_report_data(warehouse, "packing")
    saved = dict(data.savings.select("policy", "node_hours_saved").iter_rows())
    assert saved == {"packing": 0.0, "yarn-uniform": -0.5}
    with pytest.raises(UsageError, match=r"baseline policy 'nope' .*packing, yarn-uniform"):
        report(warehouse, warehouse.parent / "never", baseline="nope")
    assert not (warehouse.parent / "never").exists()


def test_empty_or_missing_warehouse(tmp_path: Path) -> None:
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    with pytest.raises(TraceError, match="holds no runs"):
        report(empty, tmp_path / "out")
    with pytest.raises(TraceError, match="no such warehouse"):
        report(tmp_path / "missing.duckdb", tmp_path / "out")


def test_failed_report_leaves_the_previous_one(
    built_report: Built, warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.md").write_text("previous")

    def broken(spec: dict[str, Any], scale: float = 2.0) -> bytes:
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(report_stage, "chart_png", broken)
    with pytest.raises(RuntimeError, match="renderer crashed"):
        report(warehouse, out)
    assert [p.name for p in out.iterdir()] == ["summary.md"]
    assert (out / "summary.md").read_text() == "previous"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report")]


def test_refuses_to_replace_a_directory_that_is_not_a_report(warehouse: Path,
                                                             tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="refusing to replace"):
        report(warehouse, tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_charts_accept_empty_frames(warehouse: Path) -> None:
    data = read_report_data(warehouse, "yarn-uniform")
    for chart in (
        charts.provisioned_nodes_chart(data.utilization.clear(), []),
        charts.allocated_capacity_chart(data.utilization.clear(), []),
        charts.utilization_chart(data.summary.clear(), []),
        charts.fairness_wait_chart(data.fairness.with_columns(
            pl.lit(None, pl.Float64).alias("jain_fairness")), []),
        charts.scheduler_comparison_chart(data.comparison.clear(), []),
        answer_charts.distribution_chart(data.distributions.clear(), data.summary, []),
        answer_charts.queue_wait_chart(data.queue_waits.with_columns(
            pl.lit("x").alias("label"), pl.lit("fixed").alias("cluster_mode")).clear(), []),
    ):
        assert "$schema" in chart.to_dict()


def test_queue_report_compares_the_three_schedulers(queue_report: Built) -> None:
    out, result = queue_report
    assert [Path(c).name for c in result["charts"]] == [
        f"trace-{key}.png" for key in QUEUE_SECTIONS_WITH_CHARTS]
    page = (out / "report.html").read_text()
    assert len(chart_specs(page)) == len(QUEUE_SECTIONS_WITH_CHARTS)
    shares = re.search(r'<section id="trace-queue-shares-fixed">(.*?)</section>', page, re.S)
    assert shares is not None and "root.research" in shares.group(1)
    text = (out / "summary.md").read_text()
    table = text.split("### Schedulers compared on the fixed cluster")[1].split("<details>")[0]
    header, _, *lines = [[cell.strip() for cell in line.strip("|").split("|")]
                         for line in table.splitlines() if line.startswith("|")]
    rows = {cells[0]: dict(zip(header, cells, strict=True)) for cells in lines}
    assert sorted(rows) == ["capacity-scheduler", "drf", "fair-scheduler", "yarn-uniform"]
    assert float(rows["capacity-scheduler"]["Preemptions"].replace(",", "")) > 0
    assert float(rows["capacity-scheduler"]["Lost to preemption (task-h)"]) >= 0
    assert rows["drf"]["Queue fairness (1 = fair)"] == "\u2013"
    assert 0 < float(rows["fair-scheduler"]["Queue fairness (1 = fair)"]) <= 1
    waits = text.split("### How long each queue waited (fixed cluster)")[1].split("###")[0]
    assert "research" in waits and "Wait p95" in waits


def test_the_recorded_cluster_is_a_reference_never_the_answer(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """recorded (the trace's own placements) appears beside the policies, with how the real
    cluster did in the headline, but is never the setting the report recommends."""
    from pipeline.bench.workload import write_trace
    from pipeline.replay import replay
    from pipeline.warehouse import load

    root = tmp_path_factory.mktemp("recorded-report")
    # the real cluster started every task 120 s after its submit, on machine m1
    tasks = [{"task_id": f"t{i}", "job_id": f"j{i % 3}", "submit_s": 10.0 * i,
              "duration_s": 300.0, "cpu": 1.0, "mem": 1.0,
              "recorded_machine_id": "m1", "recorded_start_s": 10.0 * i + 120.0}
             for i in range(6)]
    machines = [{"machine_id": f"m{i}", "cpu": 8.0, "mem": 8.0} for i in range(2)]
    trace = write_trace(root / "trace", machines, tasks, window_end_s=3600.0)
    runs = [replay(trace, name, {}, 0, root / "runs" / name).out_dir
            for name in ("yarn-uniform", "recorded")]
    load(runs, root / "wh.duckdb")
    report(root / "wh.duckdb", root / "report")
    text = (root / "report" / "summary.md").read_text()
    answer = text.split("### The answer")[1].split("###")[0]
    assert ("For reference, the real cluster as the trace records it (recorded: each task "
            "where and when it ran) started tasks within 2.0 min at p95") in answer
    assert "**recorded" not in answer  # never the recommendation
    row = next(line for line in answer.splitlines() if line.startswith("| recorded |"))
    assert row.rstrip().endswith("| \u2013 |")  # no tolerance verdict for a reference


@pytest.mark.parametrize(("work_h", "ending"), [
    ((464, 969, 1_088), "; the most work left on the fixed cluster: container-packing, "
                        "1,088 task-hours)."),
    ((2_000, 969, 1_088), ", the most on the fixed cluster)."),
])
def test_observations_name_the_most_work_left_only_when_it_is(
        work_h: tuple[int, ...], ending: str) -> None:
    """Work left counts running tasks too: the run with tasks waiting (29-day trace: recorded)
    need not be the one that left the most work (there, container-packing)."""
    from pipeline.report.observations import _backlog

    runs = pl.DataFrame({"label": ["recorded", "yarn-uniform", "container-packing"],
                         "backlog_tasks": [11.0, 0.0, 0.0],
                         "backlog_task_s": [3600.0 * h for h in work_h]})
    [line] = _backlog(runs, "fixed")
    assert line == (f"At the window's end recorded left 11 tasks waiting ({work_h[0]:,} "
                    f"task-hours of work left, running tasks included{ending}")


def test_observations_state_the_work_lost_to_preemption_alone() -> None:
    """The preemption sentence quotes the work preemptions lost, not evictions' as well."""
    from pipeline.report.observations import observations

    summary = pl.DataFrame({
        "run_id": ["a"], "label": ["capacity-scheduler"], "cluster_mode": ["fixed"],
        "wait_p95_s": [1.0], "preemptions": [3.0], "tasks_preempted": [2.0],
        "preemptions_per_task_max": [2.0], "wasted_task_s": [36_000.0],
        "backlog_tasks": [0.0], "backlog_task_s": [0.0]})
    comparison = pl.DataFrame({"run_id": ["a"], "preemption_wasted_task_s": [7_200.0]})
    lines = observations(summary, pl.DataFrame(), comparison)
    assert lines == ["capacity-scheduler preempted 3 containers of 2 tasks (at most 2 times "
                     "one task), losing 2.0 task-hours of work they had done on the fixed "
                     "cluster."]
