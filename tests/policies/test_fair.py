"""fair-scheduler: ComputeFairShares golden case, allocation files, assignment and preemption
through ``replay``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies import make_policy
from pipeline.policies.fair import compute_shares, tree_shares
from pipeline.policies.fair.allocation import parse_resources, read_allocations
from pipeline.replay import replay
from pipeline.sim.interface import ClusterInfo

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
W = np.array([1.0, 1.0, 2.0])
NO_MIN, NO_MAX = np.zeros(3), np.full(3, np.inf)


def test_golden_instantaneous_and_steady_shares() -> None:
    """102,400 MB; A (1), B (1, idle), C (2): 34,133 / 0 / 68,267 and 25,600/25,600/51,200."""
    active = np.array([True, False, True])
    inst = compute_shares(W, NO_MIN, NO_MAX, 102_400, active, truncate=True)
    steady = compute_shares(W, NO_MIN, NO_MAX, 102_400, None, truncate=True)
    assert inst.tolist() == [34_133, 0, 68_267]
    assert steady.tolist() == [25_600, 25_600, 51_200]
    exact = compute_shares(W, NO_MIN, NO_MAX, 102_400, active)
    assert exact == pytest.approx([102_400 / 3, 0, 2 * 102_400 / 3], rel=1e-6)


def test_min_max_and_fixed_cases() -> None:
    """Clamp to min/max; weight 0 gets its minimum; max <= 0 gets nothing; truncation."""
    share = compute_shares(np.array([1.0, 1.0, 0.0, 1.0]), np.array([50.0, 0, 10, 0]),
                           np.array([np.inf, 20, np.inf, 0]), 100)
    assert share == pytest.approx([70, 20, 10, 0], abs=1e-3)
    assert compute_shares(np.ones(3), np.zeros(3), NO_MAX, 100, None, True).tolist() == [
        34, 34, 34]  # Hadoop's truncation plus upper bound (docs/semantics.md section 2)
    assert compute_shares(np.ones(2), np.zeros(2), np.array([10.0, 15]), 100).sum() == \
        pytest.approx(25)  # total is min(cluster, sum of maxima)


def test_hierarchy_splits_parent_share() -> None:
    children = ((1, 2), (3, 4), (), (), ())
    w = np.array([1.0, 1, 1, 1, 3])
    total = np.array([8.0, 100.0, 0.0])
    low, high = np.zeros((5, 3)), np.tile(total, (5, 1))
    steady = tree_shares(children, w, low, high, total)
    assert steady[:, 1] == pytest.approx([100, 50, 50, 12.5, 37.5], abs=1e-3)
    active = np.array([True, True, False, True, False])
    inst = tree_shares(children, w, low, high, total, active)
    assert inst[:, 1] == pytest.approx([100, 100, 0, 100, 0], abs=1e-3)


def test_example_allocation_file_reads() -> None:
    alloc = read_allocations(CONFIGS / "fair-scheduler.xml")
    paths = [q.path for q in alloc.queues]
    assert paths == ["root", "root.prod", "root.research", "root.research.batch",
                     "root.research.adhoc", "root.default"]
    assert alloc.queues[1].props["policy"] == "drf"
    assert [r for r, _ in alloc.rules] == ["specified", "primaryGroup", "default"]
    policy = make_policy("fair-scheduler", {"allocation_file": str(CONFIGS /
                                                                   "fair-scheduler.xml")})
    policy.setup(ClusterInfo("fixed", 1, None, None, 0, ("u",), ("prod", "")), None)
    assert policy.queues_.fs_timeout[1] == 30 and policy.queues_.fs_timeout[3] == 60


@pytest.mark.parametrize(("body", "match"), [
    ("<queue name='a'><weight>x</weight></queue>", "queue 'root.a'.*<weight>"),
    ("<queue name='a'><colour>red</colour></queue>", "unknown element <colour>"),
    ("<queue name='a'><schedulingPolicy>lifo</schedulingPolicy></queue>", "lifo"),
    ("<queue name='a'><minResources>lots</minResources></queue>", "minResources"),
    ("<queue name='a'><fairSharePreemptionThreshold>2</fairSharePreemptionThreshold></queue>",
     "Threshold"),
    ("<queuePlacementPolicy><rule name='nestedUserQueue'/></queuePlacementPolicy>"
     "<queue name='a'/>", "nestedUserQueue"),
    ("<queue name='p'><schedulingPolicy>fifo</schedulingPolicy><queue name='c'/></queue>",
     "only allowed on leaf"),
    ("<queue name='p'><queue name='c'><schedulingPolicy>drf</schedulingPolicy></queue>"
     "</queue>", "drf under a fair parent"),
    ("", "no <queue>"),
    ("<queue name='a'>", "cannot read"),
])
def test_bad_allocation_files(tmp_path: Path, body: str, match: str) -> None:
    path = tmp_path / "fair-scheduler.xml"
    path.write_text(f"<allocations>{body}</allocations>")
    policy = make_policy("fair-scheduler", {"allocation_file": str(path)})
    with pytest.raises(UsageError, match=match) as err:
        policy.setup(ClusterInfo("fixed", 1, None, None, 0, ("u",), ("",)), None)
    assert str(path) in str(err.value)


def test_resource_forms() -> None:
    assert parse_resources("1024 mb, 4 vcores", "x").values == (4.0, 1024.0, None)
    assert parse_resources("memory-mb=2048, vcores=2", "x").values == (2.0, 2048.0, None)
    assert parse_resources("50%", "x").percent
    assert parse_resources("30% memory, 20% cpu", "x").values == (20.0, 30.0, None)


def _trace(tmp: Path, n_a: int, n_c: int, c_submit: float, mem_gib: float = 100.0) -> Path:
    tasks = [{"task_id": f"a{i}", "job_id": "ja", "submit_s": 0.0, "duration_s": 1000.0,
              "cpu": 1.0, "mem": 1.0} for i in range(n_a)]
    tasks += [{"task_id": f"c{i}", "job_id": "jc", "submit_s": c_submit, "duration_s": 1000.0,
               "cpu": 1.0, "mem": 1.0} for i in range(n_c)]
    jobs = [{"job_id": "ja", "user": "ua", "queue": "A", "submit_s": 0.0},
            {"job_id": "jc", "user": "uc", "queue": "C", "submit_s": c_submit}]
    return write_trace(tmp / "t", [{"machine_id": "m0", "cpu": 1000.0, "mem": mem_gib}],
                       tasks, jobs)


QUEUES = {"queues": "A:1w,B:1w,C:2w"}


def test_weights_through_replay(tmp_path: Path) -> None:
    """100 GiB (102,400 MB) of 1-GiB containers: A 34, C 66 (shares 34,133 / 68,267 MB)."""
    trace = _trace(tmp_path, 200, 200, 0.0)
    replay(trace, "fair-scheduler", QUEUES, 0, tmp_path / "run", horizon_s=10.0)
    tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    running = dict(tr.filter(pl.col("start_s").is_not_null()).group_by("queue").len()
                   .iter_rows())
    assert running == {"root.A": 34, "root.C": 66}


def test_max_resources_caps_a_queue(tmp_path: Path) -> None:
    xml = tmp_path / "fs.xml"
    xml.write_text("<allocations><queue name='A'><maxResources>10240 mb, 500 vcores"
                   "</maxResources></queue><queue name='C'><weight>2</weight></queue>"
                   "</allocations>")
    trace = _trace(tmp_path, 200, 0, 0.0)
    replay(trace, "fair-scheduler", {"allocation_file": str(xml)}, 0, tmp_path / "run",
           horizon_s=10.0)
    tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    assert tr["start_s"].is_not_null().sum() == 10


@pytest.mark.parametrize("preemption", [False, True])
def test_fair_share_preemption(tmp_path: Path, preemption: bool) -> None:
    """A fills the cluster; C arrives at 10 s.  With a 5 s timeout and threshold 0.5, C
    claims 0.5 x its 2/3 share (33.3 GiB) at 15 s: floor(33.3) = 33 one-GiB requests
    (getStarvedResourceRequests), A's containers warned then and killed 15 s later
    (waitTimeBeforeKill), at 30 s; C starts on the freed room; A keeps >= 1/3."""
    trace = _trace(tmp_path, 100, 100, 10.0)
    params = dict(QUEUES, preemption=preemption, fair_share_preemption_timeout_s=5.0)
    result = replay(trace, "fair-scheduler", params, 0, tmp_path / "run", horizon_s=40.0)
    tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    running = dict(tr.filter(pl.col("start_s").is_not_null()).group_by("queue").len()
                   .iter_rows())
    if not preemption:
        assert running == {"root.A": 100} and result.metrics["preemptions"] == 0
        return
    assert result.metrics["preemptions"] == 33
    assert running == {"root.A": 67, "root.C": 33}
    hit = tr.filter(pl.col("preemptions") > 0)
    assert hit["wasted_s"].unique().to_list() == [30.0]  # ran 0..30: warned at 15


@pytest.mark.parametrize(("policy", "expected"), [("fair", {"j1": 5, "j2": 5}),
                                                  ("drf", {"j1": 5, "j2": 5}),
                                                  ("fifo", {"j1": 10})])
def test_applications_inside_a_leaf(tmp_path: Path, policy: str, expected: dict) -> None:
    """Two jobs in one queue: fair/drf split the queue between them, fifo serves j1 first."""
    tasks = [{"task_id": f"{j}-{i}", "job_id": j, "submit_s": 0.0, "duration_s": 100.0,
              "cpu": 1.0, "mem": 1.0} for j in ("j1", "j2") for i in range(10)]
    jobs = [{"job_id": j, "user": "u", "queue": "Q", "submit_s": 0.0} for j in ("j1", "j2")]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 10.0, "mem": 10.0}],
                        tasks, jobs)
    replay(trace, "fair-scheduler", {"default_policy": policy}, 0, tmp_path / "run",
           horizon_s=10.0)
    tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    got = dict(tr.filter(pl.col("start_s").is_not_null()).group_by("job_id").len()
               .iter_rows())
    assert got == expected
    assert set(tr["queue"]) == {"root.Q"}


def test_preemption_keeps_the_replay_invariants(tmp_path: Path) -> None:
    """The conformance checks on generated traces with preemption on and no timeout."""
    from hypothesis import HealthCheck, given, settings

    from tests.policies import test_conformance as conf

    params = {"preemption": True, "fair_share_preemption_timeout_s": 0.0,
              "fair_share_preemption_threshold": 1.0, "queues": "A:1w,B:3w"}

    preempted = []

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=conf.small_trace())
    def check(case: dict) -> None:
        for k, job in enumerate(case["jobs"]):
            job["queue"] = "AB"[k % 2]
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        trace = conf._write(case, root / "trace")
        result = replay(trace, "fair-scheduler", params, 7, root / "a",
                        sched_interval_s=case["interval"], horizon_s=case["horizon"])
        end_s = result.run["summary"]["end_s"]
        tr = pl.read_parquet(root / "a" / "task_runs.parquet")
        nodes = pl.read_parquet(root / "a" / "node_intervals.parquet")
        conf._check_tasks(tr, case)
        conf._check_capacity(tr, nodes, end_s)
        conf._check_inside_intervals(tr, nodes, end_s)
        preempted.append(result.metrics["preemptions"])

    check()
    assert sum(preempted) > 0  # the generated cases do exercise preemption


def test_queue_rows_carry_steady_shares() -> None:
    """The golden steady shares in the run's queue table: 25 / 25 / 50 of 100 GiB."""
    policy = make_policy("fair-scheduler", QUEUES)
    policy.setup(ClusterInfo("fixed", 1, None, None, 0, ("u",), ("A",)), None)
    rows = policy.queue_rows(np.array([1000.0, 100.0, 0.0]))
    by_queue = dict(zip(rows["queue"], rows["steady_fair_mem"], strict=True))
    assert by_queue == pytest.approx({"root": 100.0, "root.A": 25.0, "root.B": 25.0,
                                      "root.C": 50.0}, rel=1e-6)
    fair = policy.fair_shares(np.array([1000.0, 102_400.0, 0.0]),
                              np.array([True, True, False, True]))
    assert fair[1:, 1] == pytest.approx([102_400 / 3, 0, 2 * 102_400 / 3], rel=1e-6)


def test_example_file_end_to_end(tmp_path: Path) -> None:
    """configs/fair-scheduler.xml through replay: placement rules and the queue table."""
    names = {"jp": "prod", "jb": "batch", "jx": "nosuch", "jn": None}
    jobs = [{"job_id": j, "user": f"u{j}", "queue": q, "submit_s": 0.0}
            for j, q in names.items()]
    tasks = [{"task_id": f"{j}{i}", "job_id": j, "submit_s": float(i), "duration_s": 20.0,
              "cpu": 1.0, "mem": 2.0} for j in names for i in range(20)]
    trace = write_trace(tmp_path / "t", [{"machine_id": f"m{i}", "cpu": 8.0, "mem": 16.0}
                                         for i in range(4)], tasks, jobs)
    params = {"allocation_file": str(CONFIGS / "fair-scheduler.xml"), "preemption": True}
    result = replay(trace, "fair-scheduler", params, 0, tmp_path / "run", drain=True)
    tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    assert result.metrics["tasks_finished"] == 80
    queue_of = dict(tr.select("job_id", "queue").unique().iter_rows())
    assert queue_of == {"jp": "root.prod", "jb": "root.research.batch",
                        "jx": "root.default", "jn": "root.default"}
    rows = pl.read_parquet(tmp_path / "run" / "queues.parquet")
    assert "steady_fair_mem" in rows.columns and rows.height == 6
