"""The answer per trace means what its runs can answer, on the first page and in the section:
savings where a cluster model can save, what differs in the work on a fixed cluster, and time
freed (never a saving) on a replay run until every job ended."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay
from pipeline.report import report
from pipeline.warehouse import load


def _trace(root: Path) -> Path:
    """Two machines and a burst of jobs: a queue forms, the policies order it differently,
    and an elastic cluster can release the idle machine afterwards."""
    tasks = [{"task_id": f"t{i}", "job_id": f"j{i % 4}", "submit_s": 5.0 * i,
              "duration_s": 200.0 + 50 * (i % 3), "cpu": 2.0 + 2 * (i % 2), "mem": 1.0,
              "user": f"u{i % 2}"} for i in range(12)]
    machines = [{"machine_id": f"m{i}", "cpu": 8.0, "mem": 8.0} for i in range(2)]
    return write_trace(root / "trace", machines, tasks, window_end_s=7200.0)


def _report(root: Path, runs: list[Path]) -> tuple[str, str, dict[str, object]]:
    load(runs, root / "wh.duckdb")
    report(root / "wh.duckdb", root / "report")
    text = (root / "report" / "summary.md").read_text()
    page = (root / "report" / "report.html").read_text()
    spec = json.loads(re.search(r"const CHARTS = (.*);\n", page).group(1))[0][1]  # type: ignore[union-attr]
    return text, page, spec


def _glance(text: str) -> list[list[str]]:
    block = text.split("## At a glance")[1].split("## Trace")[0]
    return [[c.strip() for c in line.strip("|").split(" | ")]
            for line in block.splitlines() if line.startswith("| ") and "Question" not in line]


def test_a_fixed_cluster_says_what_differs_and_draws_no_savings(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    runs = [replay(trace, p, {}, 0, tmp_path / p).out_dir for p in ("yarn-uniform", "drf")]
    text, _, spec = _report(tmp_path, runs)
    answer = text.split("### The answer")[1].split("###")[0]
    assert "none can save" in answer and not re.search(r"saves [\d.]+%", answer)
    assert "What each setting saves" not in json.dumps(spec)  # no savings panel
    assert "Saved" not in answer.split("\n| ")[0] and "Saved per day" not in answer
    [row] = _glance(text)
    assert row[0] == "trace" and row[1] == "What differs between the settings?"
    assert row[3].startswith("Fixed cluster only")
    assert "save" not in row[2].lower()


def test_a_drained_replay_frees_machines_sooner_and_never_saves(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    runs = [replay(trace, p, {}, 0, tmp_path / p, drain=True).out_dir
            for p in ("yarn-uniform", "fcfs", "easy-backfill")]
    text, _, _ = _report(tmp_path, runs)
    answer = text.split("### The answer")[1].split("###")[0]
    lead = answer.split("**")[1]
    assert "none saves money" in lead and "saving" not in lead.replace("none saves", "")
    [row] = _glance(text)
    assert row[1] == "Which setting finishes the same work soonest?"
    assert "save" not in row[2].lower() and "worth money only if" in row[3]


def _elastic_report(root: Path, initial_nodes: int) -> tuple[str, str, dict[str, object]]:
    trace = _trace(root)
    runs = [replay(trace, "yarn-uniform", {}, 0, root / "fixed").out_dir,
            replay(trace, "container-packing", {}, 0, root / "elastic", cluster="elastic",
                   cluster_options={"min_nodes": 0, "idle_s": 60,
                                    "initial_nodes": initial_nodes}).out_dir]
    return _report(root, runs)


def test_an_elastic_cluster_names_what_to_use_and_its_monthly_saving(tmp_path: Path) -> None:
    # both machines up when the burst comes, released once idle
    text, page, _ = _elastic_report(tmp_path, initial_nodes=2)
    [row] = _glance(text)
    assert row[1] == "Which setting is cheapest without slowing the work?"
    assert re.match(r"Use container-packing on the elastic cluster: it saves [\d.]+% of the "
                    r"status quo's cost, \$[\d,.]+ per 30-day month", row[2]), row[2]
    assert "One seed" in row[3]
    # the first page comes first; then a table of contents; every section after the answer
    # is folded under its title
    assert text.index("## At a glance") < text.index("## Trace trace")
    assert page.index('id="glance"') < page.index('class="toc"') < page.index('id="trace-trace"')
    assert '<section id="trace-answer">\n<h3>' in page
    assert '<section id="trace-assumptions">\n<details><summary class="title">' in page


def test_a_saving_that_slows_the_work_is_the_caveat_not_the_answer(tmp_path: Path) -> None:
    # no machine up when the burst comes: jobs wait for nodes to boot
    text, _, _ = _elastic_report(tmp_path, initial_nodes=0)
    [row] = _glance(text)
    assert row[2].startswith("Keep yarn-uniform: no setting saves money")
    assert re.match(r"The cheapest, container-packing on the elastic cluster, would save "
                    r"[\d.]+% but its p95 job completion is \+[\d.]+%", row[3]), row[3]


@pytest.mark.parametrize("key", ["answer", "assumptions", "backlog"])
def test_contents_link_every_section(tmp_path_factory: pytest.TempPathFactory,
                                     key: str) -> None:
    root = tmp_path_factory.mktemp(f"toc-{key}")
    trace = _trace(root)
    runs = [replay(trace, "yarn-uniform", {}, 0, root / "run").out_dir]
    _, page, _ = _report(root, runs)
    toc = page.split('class="toc"')[1].split("</nav>")[0]
    assert f'href="#trace-{key}"' in toc and f'<section id="trace-{key}">' in page
