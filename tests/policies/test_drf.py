"""DRF: the paper's example (Ghodsi et al., NSDI 2011, section 4) end to end through
``replay``, weighted DRF, and the progressive-filling kernel on small cases."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies import make_policy
from pipeline.policies.drf import parse_weights
from pipeline.replay import replay


def _trace(directory: Path, machines: list[dict], shapes: dict[str, tuple[float, float]],
           n_each: int = 20) -> Path:
    tasks, jobs = [], []
    for user, (cpu, mem) in shapes.items():
        jobs.append({"job_id": f"j{user}", "user": user, "submit_s": 0.0})
        tasks += [{"task_id": f"{user}{i}", "job_id": f"j{user}", "submit_s": 0.0,
                   "duration_s": 1000.0, "cpu": cpu, "mem": mem} for i in range(n_each)]
    return write_trace(directory, machines, tasks, jobs)


def _running_at_start(run: Path) -> dict[str, int]:
    tr = pl.read_parquet(run / "task_runs.parquet")
    first = tr.filter(pl.col("start_s") == 0.0)
    return dict(first.group_by("user").len().iter_rows())


PAPER = {"A": (1.0, 4.0), "B": (3.0, 1.0)}


def test_paper_example_one_node(tmp_path: Path) -> None:
    """9 CPUs, 18 GB; A <1 CPU, 4 GB>, B <3 CPUs, 1 GB>: A runs 3, B runs 2 (shares 2/3)."""
    trace = _trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 9.0, "mem": 18.0}], PAPER)
    replay(trace, "drf", {}, 0, tmp_path / "run", horizon_s=10.0)
    counts = _running_at_start(tmp_path / "run")
    assert counts == {"A": 3, "B": 2}
    share_a = max(3 * 1.0 / 9, 3 * 4.0 / 18)
    share_b = max(2 * 3.0 / 9, 2 * 1.0 / 18)
    assert share_a == pytest.approx(2 / 3) and share_b == pytest.approx(2 / 3)


def test_paper_example_split_over_three_nodes(tmp_path: Path) -> None:
    """The same pool as three <3 CPUs, 6 GB> nodes: each container must fit one node.

    Least allocated first puts A on m0, B on m1, A on m2; then neither a 3-CPU nor a 4-GB
    hole is left on any node, so fragmentation stops filling at A 2, B 1.
    """
    machines = [{"machine_id": f"m{i}", "cpu": 3.0, "mem": 6.0} for i in range(3)]
    trace = _trace(tmp_path / "t", machines, PAPER)
    replay(trace, "drf", {}, 0, tmp_path / "run", horizon_s=10.0)
    assert _running_at_start(tmp_path / "run") == {"A": 2, "B": 1}


def test_weighted_drf_doubles_a_users_share(tmp_path: Path) -> None:
    """Section 4.3: with one weight per user, dominant shares end in the ratio of weights."""
    shapes = {"A": (1.0, 1.0), "B": (1.0, 1.0)}
    trace = _trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 12.0, "mem": 12.0}], shapes)
    replay(trace, "drf", {"user_weights": "A=2"}, 0, tmp_path / "run", horizon_s=10.0)
    assert _running_at_start(tmp_path / "run") == {"A": 8, "B": 4}


def test_existing_usage_counts(tmp_path: Path) -> None:
    """A user already holding resources waits until the other catches up."""
    tasks = ([{"task_id": f"a{i}", "job_id": "ja", "submit_s": 0.0, "duration_s": 1000.0,
               "cpu": 1.0, "mem": 1.0} for i in range(6)]
             + [{"task_id": f"b{i}", "job_id": "jb", "submit_s": 5.0, "duration_s": 1000.0,
                 "cpu": 1.0, "mem": 1.0} for i in range(6)]
             + [{"task_id": f"c{i}", "job_id": "ja", "submit_s": 5.0, "duration_s": 1000.0,
                 "cpu": 1.0, "mem": 1.0} for i in range(6)])
    jobs = [{"job_id": "ja", "user": "A", "submit_s": 0.0},
            {"job_id": "jb", "user": "B", "submit_s": 5.0}]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 10.0, "mem": 10.0}],
                        tasks, jobs)
    replay(trace, "drf", {}, 0, tmp_path / "run", horizon_s=20.0)
    tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    running = dict(tr.filter(pl.col("start_s").is_not_null()).group_by("user").len()
                   .iter_rows())
    assert running == {"A": 6, "B": 4}  # B gets all 4 free slots: its share stays lower


def test_weights_are_checked() -> None:
    assert list(parse_weights("a=2, b=0.5,zz=3", ("a", "b", "c"), "w")) == [2.0, 0.5, 1.0]
    for bad in ("a", "a=0", "a=x", "=2"):
        with pytest.raises(UsageError, match="NAME=WEIGHT"):
            parse_weights(bad, ("a",), "w")
    policy = make_policy("drf", {"user_weights": "a=-1"})
    with pytest.raises(UsageError, match="user_weights"):
        policy.setup(_info(), None)  # type: ignore[arg-type]


def _info() -> object:
    from pipeline.sim.interface import ClusterInfo

    return ClusterInfo("fixed", 1, None, None, 0, ("a",), ("",))
