"""Queue runs in the warehouse: the ``queues`` table, the queue views and the report."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay
from pipeline.report import report
from pipeline.warehouse import load


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("queues")
    tasks = [{"task_id": f"{q}{i}", "job_id": f"j{q}{i % 3}", "submit_s": float(i),
              "duration_s": 600.0, "cpu": 1.0, "mem": 1.0}
             for q in ("a", "b") for i in range(60 if q == "a" else 10)]
    tasks += [{"task_id": f"c{i}", "job_id": "jc", "submit_s": 300.0, "duration_s": 600.0,
               "cpu": 1.0, "mem": 1.0} for i in range(40)]
    jobs = [{"job_id": f"j{q}{k}", "user": f"u{q}{k}", "queue": q, "submit_s": 0.0}
            for q in ("a", "b") for k in range(3)]
    jobs.append({"job_id": "jc", "user": "uc", "queue": "b", "submit_s": 300.0})
    trace = write_trace(root / "trace", [{"machine_id": "m0", "cpu": 64.0, "mem": 64.0}],
                        tasks, jobs)
    capacity = {"queues": "a:50,b:50", "user_limit_factor": 2, "preemption": True}
    replay(trace, "capacity-scheduler", capacity, 0, root / "cs")
    replay(trace, "yarn-uniform", {}, 0, root / "uniform")
    return [root / "cs", root / "uniform"]


def test_load_queues_and_views(runs: list[Path], tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    load(runs, db)
    load(runs[:1], db)  # idempotent
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("select count(*) from queues").fetchone() == (3,)
    rows = con.execute(
        "select queue, guaranteed_share, preemptions, wasted_task_s, jain_queues "
        "from queue_summary order by queue").fetchall()
    assert [r[0] for r in rows] == ["root.a", "root.b"]
    assert [r[1] for r in rows] == [0.5, 0.5]
    assert rows[0][2] > 0 and rows[0][3] > 0  # a borrowed and was preempted for b
    assert 0.5 <= rows[0][4] <= 1.0
    share = con.execute(
        "select max(mem_share) from queue_share_over_time where queue = 'root.a'").fetchone()
    assert share is not None and 0.5 < share[0] <= 1.0
    con.close()


def test_scheduler_comparison(runs: list[Path], tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    load(runs, db)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "select policy, cluster, has_queues, preemptions, wasted_task_s, "
        "preemption_wasted_task_s, leaves, leaves_used, min_share_of_guarantee, "
        "max_share_of_guarantee, jain_queues from scheduler_comparison order by policy"
    ).fetchall()
    con.close()
    capacity, uniform = rows
    assert capacity[:3] == ("capacity-scheduler", "fixed", True) and capacity[3] > 0
    # a borrows and is preempted for b: every lost second here is a preemption's
    assert capacity[5] == pytest.approx(capacity[4]) and capacity[5] > 0
    assert capacity[6:8] == (2, 2) and 0 < capacity[8] < capacity[9]
    assert 0.5 <= capacity[10] <= 1.0
    assert uniform[:3] == ("yarn-uniform", "fixed", False)
    assert uniform[5] == 0 and uniform[6:] == (None,) * 5


def test_report_has_the_queue_section(runs: list[Path], tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    load(runs, db)
    report(db, tmp_path / "report")
    html = next((tmp_path / "report").glob("*.html")).read_text()
    assert "Queues against their guarantees" in html and "How long each queue waited" in html
    assert any("queue-shares" in p.name for p in (tmp_path / "report").rglob("*.png"))
