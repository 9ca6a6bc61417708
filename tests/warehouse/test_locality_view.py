"""``locality_by_job_size``: jobs binned by their tasks with input data, at the bin edges."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from pipeline.warehouse import load
from tests.warehouse.rundirs import NodeInterval, TaskRun, write_run, write_trace

# a job per edge of the paper's bins; bins as the view labels them
SIZES = [1, 2, 10, 11, 50, 51, 150, 151, 500, 501]
BINS = ["1", "2-10", "2-10", "11-50", "11-50", "51-150", "51-150", "151-500", "151-500",
        ">500"]
LEVELS = ["node", "rack", "any", "node"]  # task k of a job ran at LEVELS[k % 4]


def _tasks() -> list[TaskRun]:
    """The jobs of ``SIZES`` (tasks with input data, placed by ``LEVELS``), plus what must not
    count: a job's task without input data, one that never started, a job without inputs."""
    tasks = [TaskRun(f"j{j}-{k}", f"j{j}", "u", 0.0, float(k % 3000), float(k % 3000) + 1.0,
                     "m0", "finished", cpu=0.01, mem=0.01, locality=LEVELS[k % 4])
             for j, n in enumerate(SIZES) for k in range(n)]
    tasks += [
        TaskRun("j0-reduce", "j0", "u", 0.0, 5.0, 6.0, "m0", "finished", cpu=0.01, mem=0.01),
        TaskRun("j1-waiting", "j1", "u", 0.0, None, None, None, "unfinished"),
        TaskRun("plain", "plain", "u", 0.0, 5.0, 6.0, "m0", "finished", cpu=0.01, mem=0.01),
    ]
    return tasks


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("locality-view")
    tasks = _tasks()
    trace = write_trace(root, tasks=len(tasks))
    hour = [NodeInterval("m0", 0.0, 3600.0)]
    runs = [write_run(root, "delay-scheduling", tasks, hour, trace_path=trace),
            write_run(root, "yarn-uniform", [replace(t, locality=None) for t in tasks], hour,
                      trace_path=trace)]
    path = root / "wh.duckdb"
    load(runs, path)
    return path


def test_bins_jobs_and_fractions(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "select bin, bin_order, jobs, tasks_with_inputs, locality_node, locality_rack, "
        "locality_any from locality_by_job_size order by bin_order").fetchall()
    con.close()
    expected: dict[str, list[int]] = {}
    for size, name in zip(SIZES, BINS, strict=True):
        levels = [LEVELS[k % 4] for k in range(size)]
        jobs, tasks, node, rack, off = expected.get(name, [0, 0, 0, 0, 0])
        expected[name] = [jobs + 1, tasks + size, node + levels.count("node"),
                          rack + levels.count("rack"), off + levels.count("any")]
    assert [r[0] for r in rows] == list(expected)
    assert [r[1] for r in rows] == [1, 2, 3, 4, 5, 6]
    for (name, _, jobs, tasks, node, rack, off) in rows:
        want = expected[name]
        assert (jobs, tasks) == (want[0], want[1]), name
        assert (node, rack, off) == pytest.approx(
            (want[2] / want[1], want[3] / want[1], want[4] / want[1])), name
        assert node + rack + off == pytest.approx(1.0)


def test_runs_without_input_data_have_no_rows(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    policies = con.execute(
        "select distinct policy from locality_by_job_size join runs using (run_id)").fetchall()
    columns = [d[0] for d in con.execute("select * from locality_by_job_size").description]
    con.close()
    assert policies == [("delay-scheduling",)]
    assert columns == ["run_id", "trace", "bin", "bin_order", "jobs", "tasks_with_inputs",
                       "locality_node", "locality_rack", "locality_any"]
