"""CapacityScheduler golden cases end to end through the public ``replay`` on small traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay

POLICY = "capacity-scheduler"
CONFIGS = Path(__file__).parents[2] / "configs"


def _tasks(prefix: str, job: str, n: int, submit: float = 0.0, mem: float = 1.0,
           duration: float = 1000.0) -> list[dict]:
    return [{"task_id": f"{prefix}{i}", "job_id": job, "submit_s": submit,
             "duration_s": duration, "cpu": 1.0, "mem": mem} for i in range(n)]


def _job(job: str, user: str, queue: str | None = None, submit: float = 0.0) -> dict:
    return {"job_id": job, "user": user, "queue": queue, "submit_s": submit}


def _runs(run: Path) -> pl.DataFrame:
    return pl.read_parquet(run / "task_runs.parquet")


def test_preemption_marks_two_gb_and_kills_after_fifteen_seconds(tmp_path: Path) -> None:
    """100 GB, A and B 50% (max 100%): A 90 GB, B 10 GB + 40 GB pending from t=5."""
    tasks = _tasks("a", "ja", 90) + _tasks("b", "jb", 10) + _tasks("c", "jc", 40, 5.0)
    jobs = [_job("ja", "ua", "a"), _job("jb", "ub", "b"), _job("jc", "ub", "b", 5.0)]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        tasks, jobs)
    params = {"queues": "a:50,b:50", "user_limit_factor": 2, "preemption": True}
    result = replay(trace, POLICY, params, 0, tmp_path / "run", horizon_s=30.0)
    tr = _runs(tmp_path / "run")
    hit = tr.filter(pl.col("preemptions") > 0)
    # monitor rounds every 3 s: first round with B pending is t=6; 2 GB (two containers,
    # the newest of A's, never its AM) are killed at 6 + 15 = 21 s, having run 21 s.
    assert sorted(hit["task_id"]) == ["a88", "a89"]
    assert hit["queue"].unique().to_list() == ["root.a"]
    assert hit["wasted_s"].to_list() == [21.0, 21.0]
    assert result.metrics["preemptions"] == 2 and result.metrics["wasted_task_s"] == 42.0
    started_c = tr.filter(pl.col("job_id") == "jc", pl.col("start_s").is_not_null())
    assert started_c["start_s"].to_list() == [22.0, 22.0]  # the next heartbeat


def test_preemption_off_by_default(tmp_path: Path) -> None:
    tasks = _tasks("a", "ja", 90) + _tasks("b", "jb", 10) + _tasks("c", "jc", 40, 5.0)
    jobs = [_job("ja", "ua", "a"), _job("jb", "ub", "b"), _job("jc", "ub", "b", 5.0)]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        tasks, jobs)
    result = replay(trace, POLICY, {"queues": "a:50,b:50", "user_limit_factor": 2}, 0,
                    tmp_path / "run", horizon_s=30.0)
    assert result.metrics["preemptions"] == 0


def test_user_limit_blocks_the_user_over_it(tmp_path: Path) -> None:
    """One 100 GB queue, MULP 25: u1 60 GB, u2 20 GB, both ask more -> limit 41 GB."""
    tasks = _tasks("x", "j1", 60) + _tasks("y", "j2", 20)
    tasks += _tasks("p", "j3", 30, 10.0) + _tasks("q", "j4", 30, 10.0)
    jobs = [_job("j1", "u1"), _job("j2", "u2"), _job("j3", "u1", submit=10.0),
            _job("j4", "u2", submit=10.0)]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        tasks, jobs)
    params = {"minimum_user_limit_percent": 25, "max_am_resource_percent": 1.0}
    replay(trace, POLICY, params, 0, tmp_path / "run", horizon_s=20.0)
    tr = _runs(tmp_path / "run").filter(pl.col("start_s").is_not_null())
    late = tr.filter(pl.col("submit_s") == 10.0).group_by("user").len()
    # u1 (60 GB > 41) gets nothing even though its job came first; u2 takes the free 20 GB
    assert dict(late.iter_rows()) == {"u2": 20}
    assert tr.filter(pl.col("submit_s") == 0.0).height == 80
    assert set(tr["queue"]) == {"root.default"}


def test_requests_are_normalised_to_the_minimum_allocation(tmp_path: Path) -> None:
    """0.6 GB asks count as 1 GB: a 10 GB node runs 10 of them at once, not 16."""
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 100.0, "mem": 10.0}],
                        _tasks("t", "j", 16, mem=0.6, duration=100.0), [_job("j", "u")])
    replay(trace, POLICY, {"max_am_resource_percent": 1.0}, 0, tmp_path / "run", drain=True)
    starts = _runs(tmp_path / "run")["start_s"].value_counts().sort("start_s")
    assert starts["count"].to_list() == [10, 6]
    replay(trace, POLICY, {"min_alloc_mem": 0.2}, 0, tmp_path / "fine")
    assert _runs(tmp_path / "fine")["start_s"].n_unique() == 1


def test_am_limit_holds_applications_back(tmp_path: Path) -> None:
    """AM limit 10% of 10 GB = 1 GB: one single-container app at a time after the first."""
    tasks = [t for j in range(4) for t in _tasks(f"j{j}-", f"j{j}", 1, duration=10.0)]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 100.0, "mem": 10.0}],
                        tasks, [_job(f"j{j}", "u") for j in range(4)])
    replay(trace, POLICY, {}, 0, tmp_path / "run", drain=True)
    assert sorted(_runs(tmp_path / "run")["start_s"].to_list()) == [0.0, 10.0, 20.0, 30.0]
    replay(trace, POLICY, {"max_am_resource_percent": 0.5}, 0, tmp_path / "wide")
    assert set(_runs(tmp_path / "wide")["start_s"]) == {0.0}


def test_queue_ordering_and_max_capacity(tmp_path: Path) -> None:
    """a:70 max 80 and b:30: with both asking for everything, a is held at 80%."""
    tasks = _tasks("a", "ja", 100) + _tasks("b", "jb", 100)
    jobs = [_job("ja", "ua", "a"), _job("jb", "ub", "b")]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        tasks, jobs)
    params = {"queues": "a:70:80,b:30", "user_limit_factor": -1}
    replay(trace, POLICY, params, 0, tmp_path / "run", horizon_s=5.0)
    tr = _runs(tmp_path / "run").filter(pl.col("start_s") == 0.0)
    # relative use orders the queues: a reaches 70 when b reaches 30, the cluster is full
    assert dict(tr.group_by("queue").len().iter_rows()) == {"root.a": 70, "root.b": 30}
    trace = write_trace(tmp_path / "t2", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        _tasks("a", "ja", 100) + _tasks("b", "jb", 10), jobs)
    replay(trace, POLICY, {"queues": "a:50:60,b:50", "user_limit_factor": -1}, 0,
           tmp_path / "cap", horizon_s=5.0)
    tr = _runs(tmp_path / "cap").filter(pl.col("start_s") == 0.0)
    # b asks for 10 only; a may borrow the idle rest only up to its maximum (60%)
    assert dict(tr.group_by("queue").len().iter_rows()) == {"root.a": 60, "root.b": 10}


def test_xml_config_queues_and_queue_table(tmp_path: Path) -> None:
    machines = [{"machine_id": f"m{i}", "cpu": 16.0, "mem": 64.0} for i in range(4)]
    users = [f"user{k}" for k in range(9)]
    tasks = [t for k in range(9) for t in _tasks(f"k{k}-", f"j{k}", 5, float(k), 2.0, 50.0)]
    trace = write_trace(tmp_path / "t", machines, tasks,
                        [_job(f"j{k}", users[k], submit=float(k)) for k in range(9)])
    params = {"config": str(CONFIGS / "capacity-scheduler.xml"), "groups": "hash:3:tenant"}
    result = replay(trace, POLICY, params, 0, tmp_path / "run")
    tr = _runs(tmp_path / "run")
    assert (tr["outcome"] == "finished").all()
    assert set(tr["queue"]) <= {"root.etl", "root.analytics.science", "root.adhoc"}
    assert tr["queue"].n_unique() >= 2
    queues = pl.read_parquet(tmp_path / "run" / "queues.parquet")
    row = queues.filter(pl.col("queue") == "root.analytics.science").row(0, named=True)
    assert row["guaranteed_share"] == pytest.approx(0.18) and row["leaf"]
    assert row["guaranteed_mem"] == pytest.approx(0.18 * 256)
    assert row["ordering_policy"] == "fair" and row["parent"] == "root.analytics"
    assert result.run["params"]["config"].endswith("capacity-scheduler.xml")


def test_other_policies_write_no_queue_table(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 4.0, "mem": 4.0}],
                        _tasks("t", "j", 2, duration=5.0), [_job("j", "u", "q1")])
    replay(trace, "yarn-uniform", {}, 0, tmp_path / "run")
    assert not (tmp_path / "run" / "queues.parquet").exists()
    assert set(_runs(tmp_path / "run")["queue"]) == {"q1"}


def test_maximum_applications_holds_applications_back(tmp_path: Path) -> None:
    """maximum-applications 2 on one 100% leaf: at most two jobs at a time (the rest wait)."""
    tasks = [t for j in range(4) for t in _tasks(f"j{j}-", f"j{j}", 1, duration=10.0)]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 100.0, "mem": 10.0}],
                        tasks, [_job(f"j{j}", f"u{j}") for j in range(4)])
    params = {"maximum_applications": 2, "max_am_resource_percent": 1.0}
    replay(trace, POLICY, params, 0, tmp_path / "run", drain=True)
    assert sorted(_runs(tmp_path / "run")["start_s"].to_list()) == [0.0, 0.0, 10.0, 10.0]
