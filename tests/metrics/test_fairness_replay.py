"""``jain_fairness`` of whole replays: 1 where nobody is held back, lower under FIFO when
one user is made to wait behind another."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay

POLICIES = ("yarn-uniform", "container-packing", "drf", "fair-scheduler",
            "capacity-scheduler")


def two_users(root: Path, a_tasks: int, b_tasks: int, duration_s: float,
              cpu: float) -> Path:
    """User a submits at 0, user b at 1; one-cpu tasks; one machine of ``cpu`` cpus."""
    tasks = [{"task_id": f"{u}{i}", "job_id": f"j{u}", "submit_s": float(u == "b"),
              "duration_s": duration_s, "cpu": 1.0, "mem": 1.0}
             for u, n in (("a", a_tasks), ("b", b_tasks)) for i in range(n)]
    jobs = [{"job_id": f"j{u}", "user": u, "submit_s": float(u == "b")} for u in "ab"]
    machines = [{"machine_id": "m0", "cpu": cpu, "mem": 4 * cpu}]
    return write_trace(root / "trace", machines, tasks, jobs)


@pytest.mark.parametrize("cluster", ["fixed", "elastic"])
@pytest.mark.parametrize("policy", POLICIES)
def test_uncontended_skewed_users_score_one(tmp_path: Path, policy: str,
                                            cluster: str) -> None:
    # One task for a, four for b, room for all: every policy serves everyone.  The equal-
    # share index reads the skew of the workload as unfairness.
    trace = two_users(tmp_path, 1, 4, 600.0, 8.0)
    metrics = replay(trace, policy, {}, 0, tmp_path / "run", cluster=cluster,
                     drain=True).metrics
    assert metrics["jain_fairness"] == pytest.approx(1.0, abs=0.01)
    assert metrics["jain_equal_share"] < 0.8


def test_fifo_starving_a_user_scores_below_drf(tmp_path: Path) -> None:
    # 4 cpus, 20 ten-second tasks each.  yarn-uniform runs a's tasks first: b waits from 1
    # to 50 holding nothing while its fair share is half (J = 1/2), so J ~ (1 + 49 * 0.5 +
    # 50) / 100 = 0.755.  DRF gives b the containers freed at 10: J ~ (1 + 9 * 0.5 + 90) /
    # 100 = 0.955.
    trace = two_users(tmp_path, 20, 20, 10.0, 4.0)
    fifo = replay(trace, "yarn-uniform", {}, 0, tmp_path / "fifo", drain=True).metrics[
        "jain_fairness"]
    drf = replay(trace, "drf", {}, 0, tmp_path / "drf", drain=True).metrics["jain_fairness"]
    assert fifo == pytest.approx(0.755, abs=0.02)
    assert drf == pytest.approx(0.955, abs=0.02)
