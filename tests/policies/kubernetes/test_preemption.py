"""kube-scheduler's ``DefaultPreemption``: worked cases through the public ``replay``, and
Kubernetes' own test cases on :func:`~pipeline.policies.kubernetes.preemption.preempt`.

Each case reproduces one rule of Kubernetes v1.31's preemption (``preemption.go``,
``default_preemption.go``; the same situations as ``default_preemption_test.go``'s
``SelectCandidate`` cases): nodes are filled one pod per scheduling point with sizes that
fit one node only, so each pod's node is known, then a pod of priority 10 arrives that
fits nowhere.  The assertions name the node it lands on and the pods it preempts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies.kubernetes.dryrun import dry_run
from pipeline.policies.kubernetes.preemption import (
    Args,
    Running,
    Snapshot,
    dry_run_reference,
    importance_order,
    lower_than,
    num_candidates,
    pick_one,
    preempt,
    select_victims,
)
from pipeline.replay import replay

NO_PREEMPTION = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption
"""


def _replay(tmp_path: Path, machines: list[tuple[float, float]],
            pods: list[tuple[float, float, float, int]], params: dict | None = None,
            name: str = "run") -> dict[str, dict]:
    """Replay pods ``(submit_s, cpu, mem, priority)`` (task ids ``t0``, ``t1``, ...) for
    half an hour (no pod ends) and return each task's row: a preempted one waits again
    (no machine) with its preemption counted."""
    rows = [{"machine_id": f"m{i}", "cpu": c, "mem": m} for i, (c, m) in enumerate(machines)]
    tasks = [{"task_id": f"t{i}", "job_id": f"j{i}", "duration_s": 3600.0, "submit_s": s,
              "cpu": c, "mem": m, "priority": p} for i, (s, c, m, p) in enumerate(pods)]
    trace = write_trace(tmp_path / f"{name}-trace", rows, tasks, window_end_s=1800.0)
    replay(trace, "kube-scheduler", params or {}, 0, tmp_path / name)
    runs = pl.read_parquet(tmp_path / name / "task_runs.parquet").sort("task_id")
    return {r["task_id"]: r for r in runs.iter_rows(named=True)}


def test_the_node_whose_highest_victim_is_lowest_is_picked(tmp_path: Path) -> None:
    """Three full nodes whose pods have priorities 3, 1 and 5: the preemptor takes the
    node of the priority-1 pod (criterion 1), which is preempted; the others keep
    running."""
    runs = _replay(tmp_path, [(4.0, 10.0), (5.0, 10.0), (6.0, 10.0)],
                   [(0.0, 6.0, 1.0, 5), (1.0, 5.0, 1.0, 1), (2.0, 4.0, 1.0, 3),
                    (10.0, 4.0, 1.0, 10)])
    assert [runs[t]["machine_id"] for t in ("t0", "t2")] == ["m2", "m0"]
    assert runs["t3"]["machine_id"] == "m1" and runs["t3"]["start_s"] == pytest.approx(10.0)
    assert [runs[t]["preemptions"] for t in ("t0", "t1", "t2")] == [0, 1, 0]
    # the victim ran 1..10 s: that run is lost, and it waits for room again
    assert runs["t1"]["outcome"] == "preempted" and runs["t1"]["wasted_s"] == pytest.approx(9.0)


def test_equal_highest_victims_go_to_the_lowest_priority_sum(tmp_path: Path) -> None:
    """Both nodes would lose two pods, the highest of priority 2 on each; node ``m1``'s
    other victim has priority 1, ``m0``'s priority 2: ``m1`` (criterion 2)."""
    runs = _replay(tmp_path, [(4.0, 4.0), (6.0, 10.0)],
                   [(0.0, 3.0, 5.0, 2), (1.0, 3.0, 5.0, 1), (2.0, 2.0, 1.0, 2),
                    (3.0, 2.0, 1.0, 2), (10.0, 4.0, 1.0, 10)])
    assert [runs[f"t{i}"]["machine_id"] for i in (2, 3)] == ["m0", "m0"]
    assert runs["t4"]["machine_id"] == "m1"
    assert [runs[f"t{i}"]["preemptions"] for i in range(4)] == [1, 1, 0, 0]


def test_ties_go_to_the_node_whose_victim_started_latest(tmp_path: Path) -> None:
    """One priority-1 victim on each node, alike but for their starts (0 s and 5 s): the
    node of the one started later (criterion 4)."""
    runs = _replay(tmp_path, [(4.0, 10.0), (5.0, 10.0)],
                   [(0.0, 5.0, 1.0, 1), (5.0, 4.0, 1.0, 1), (10.0, 4.0, 1.0, 10)])
    assert runs["t0"]["machine_id"] == "m1" and runs["t2"]["machine_id"] == "m0"
    assert [runs["t0"]["preemptions"], runs["t1"]["preemptions"]] == [0, 1]


def test_reprieve_keeps_every_pod_the_preemptor_fits_beside(tmp_path: Path) -> None:
    """An 8-cpu node with pods of 4 (priority 1, started first), 2 (priority 2) and 2
    (priority 1) cpus; the preemptor asks 4.  All three removed, they come back most
    important first: the priority-2 pod (6 cpus free after it), then the 4-cpu pod (2 left:
    too few, a victim), then the last 2-cpu pod (4 left: kept).  One victim."""
    runs = _replay(tmp_path, [(8.0, 10.0)],
                   [(0.0, 4.0, 1.0, 1), (1.0, 2.0, 1.0, 2), (2.0, 2.0, 1.0, 1),
                    (10.0, 4.0, 1.0, 10)])
    assert [runs[f"t{i}"]["preemptions"] for i in range(3)] == [1, 0, 0]
    assert runs["t3"]["machine_id"] == "m0" and runs["t3"]["start_s"] == pytest.approx(10.0)


def test_no_preemption_without_a_lower_priority_or_when_disabled(tmp_path: Path) -> None:
    """An equal priority preempts nothing (strictly lower only); with DefaultPreemption
    disabled in the user's profile (or ``preemption=false``) the pod waits."""
    full = [(0.0, 4.0, 1.0, 5)]
    runs = _replay(tmp_path, [(4.0, 10.0)], [*full, (10.0, 4.0, 1.0, 5)], name="equal")
    assert runs["t0"]["preemptions"] == 0 and runs["t1"]["start_s"] is None
    cfg = tmp_path / "sched.yaml"
    cfg.write_text(NO_PREEMPTION)
    for name, params in (("file", {"config": str(cfg)}), ("param", {"preemption": False})):
        runs = _replay(tmp_path, [(4.0, 10.0)], [(0.0, 4.0, 1.0, 1), (10.0, 4.0, 1.0, 10)],
                       params, name=name)
        assert runs["t0"]["preemptions"] == 0 and runs["t1"]["start_s"] is None


def test_candidate_count_is_ten_percent_at_least_a_hundred() -> None:
    """``GetOffsetAndNumCandidates``: 10% of the potential nodes, at least 100, at most
    all of them."""
    assert [num_candidates(Args(), n) for n in (1, 50, 100, 999, 1000, 5000, 12500)] == [
        1, 50, 100, 100, 100, 500, 1250]
    assert num_candidates(Args(50, 0), 12) == 6


def test_selection_criteria_in_order() -> None:
    """``pickOneNodeForPreemption`` straight on victim sets: lowest highest priority, then
    lowest offset sum, then fewest, then the latest start of the highest victims, then
    the first."""
    prio = np.array([5, 1, 3, 1, 1, 2, 1], np.int64)
    start = np.array([0.0, 0.0, 0.0, 1.0, 9.0, 0.0, 9.0])
    running = Running(np.zeros(7, np.int64), np.zeros((7, 3)), prio, start, np.ones(7, bool))
    assert pick_one([(0, np.array([0])), (1, np.array([2])), (2, np.array([1]))], running) == 2
    assert pick_one([(0, np.array([5, 3])), (1, np.array([1, 3]))], running) == 1
    assert pick_one([(0, np.array([3])), (1, np.array([4]))], running) == 1  # started 9 > 1
    assert pick_one([(0, np.array([4])), (1, np.array([6]))], running) == 0  # the first


def test_select_victims_needs_the_pod_to_fit_with_all_lower_gone() -> None:
    running = Running(np.zeros(2, np.int64), np.array([[2.0, 1, 0], [2.0, 1, 0]]),
                      np.array([1, 7]), np.zeros(2), np.ones(2, bool))
    cap, alloc = np.array([4.0, 10, 0]), np.array([4.0, 2, 0])
    on_node = np.array([0, 1])
    # priority 5 may only remove pod 0: 2 cpus free, too few for 3
    assert select_victims(np.array([3.0, 1, 0]), 5, on_node, running, cap, alloc, 2,
                          110) is None
    victims = select_victims(np.array([2.0, 1, 0]), 5, on_node, running, cap, alloc, 2, 110)
    assert victims is not None and victims.tolist() == [0]
    # the pod count is a filter too: two pods allowed, both slots taken
    victims = select_victims(np.array([0.0, 0, 0]), 9, on_node, running, cap, alloc, 2, 2)
    assert victims is not None and len(victims) == 1


def test_bad_preemption_arguments_name_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                   "kind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n"
                   "  - name: DefaultPreemption\n    args:\n"
                   "      minCandidateNodesPercentage: 150\n")
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 1.0, "mem": 1.0}],
                        [{"task_id": "t0", "job_id": "j0", "submit_s": 0.0,
                          "duration_s": 1.0, "cpu": 0.5, "mem": 0.5}])
    with pytest.raises(UsageError, match=r"bad\.yaml: DefaultPreemption args"):
        replay(trace, "kube-scheduler", {"config": str(cfg)}, 0, tmp_path / "run")


# default_preemption_test.go's own cases (v1.31): nodes of 500m cpu and 500 memory,
# pods small 100, medium 200, large 300; priorities neg -100, low 0, mid 100, high 1000.
SIZE = {"small": 100.0, "medium": 200.0, "large": 300.0}
PRIO = {"neg": -100, "low": 0, "mid": 100, "high": 1000}


def _upstream(nodes: list[list[tuple[str, str, float]]], req: float,
              priority: int = 1000) -> tuple[int, list[int]] | None:
    """:func:`preempt` on nodes of (priority, size, start) pods; running indices count
    across the nodes in order."""
    pods = [(nd, p, s, t) for nd, on in enumerate(nodes) for p, s, t in on]
    k, n = len(pods), len(nodes)
    node = np.array([p[0] for p in pods], np.int64)
    size = np.array([SIZE[p[2]] for p in pods])
    reqs = np.stack([size, size, np.zeros(k)], axis=1)
    running = Running(node, reqs,
                      np.array([PRIO[p[1]] for p in pods], np.int64),
                      np.array([p[3] for p in pods]), np.ones(k, bool))
    alloc = np.zeros((n, 3))
    np.add.at(alloc, node, reqs)
    snap = Snapshot(np.tile([500.0, 500.0, 0.0], (n, 1)), alloc,
                    np.bincount(node, minlength=n), np.ones(n, bool), np.zeros(0, np.int64),
                    np.arange(n, dtype=np.int64))
    got = preempt(np.array([req, req, 0.0]), priority, 0, snap, running, 32, Args(),
                  np.random.default_rng(0))
    return None if got is None else (got[0], got[1].tolist())


def test_upstream_select_best_candidate_cases() -> None:
    # "node with min highest priority pod is picked"
    assert _upstream([[("mid", "medium", 0), ("mid", "large", 0)],
                      [("mid", "medium", 0), ("low", "medium", 0)],
                      [("low", "medium", 0), ("low", "medium", 0)]], 500) == (2, [4, 5])
    # "sum of adjusted priorities is considered": raw sums would pick node 1
    assert _upstream([[("mid", "small", 0), ("neg", "small", 0), ("neg", "small", 0)],
                      [("mid", "large", 0), ("neg", "medium", 0)],
                      [("mid", "medium", 0), ("neg", "small", 0), ("low", "small", 0)]],
                     500) == (1, [3, 4])
    # "different priority, same number of victims, different start time for all pods"
    assert _upstream([[("low", "medium", 4), ("mid", "medium", 2)],
                      [("mid", "medium", 6), ("low", "medium", 1)],
                      [("low", "medium", 3), ("mid", "medium", 5)]], 500) == (1, [2, 3])


def test_upstream_dry_run_reprieves_the_older_of_equal_pods() -> None:
    """"mixed priority pods are preempted, pick later StartTime one when priorities are
    equal": the high pod on node 0 is no victim (equal priority) and node 1 holds only a
    high pod (no candidate).  Node 0's mid pod goes; of its two equal low pods the older
    (started 4) is put back and the newer (started 5) goes."""
    nodes = [[("low", "small", 5), ("low", "small", 4), ("mid", "medium", 3),
              ("high", "small", 2)], [("high", "large", 1)]]
    assert _upstream(nodes, 300) == (0, [2, 0])
    # "basic preemption logic": node 0 loses two low pods rather than node 2 one mid pod
    assert _upstream([[("low", "small", 0), ("low", "small", 0)], [("high", "large", 0)],
                      [("mid", "medium", 0)]], 500) == (0, [0, 1])


@pytest.mark.nojit
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_compiled_dry_run_matches_its_reference(n: int, k: int, seed: int) -> None:
    """:func:`dry_run` against :func:`dry_run_reference` on random nodes and pods
    (priorities, starts, some pods already victims, full pod slots), from a random walk
    and candidate count: the same candidates, victims and order."""
    rng = np.random.default_rng(seed)
    cap = rng.choice([2.0, 4.0, 8.0], (n, 3))
    node = rng.integers(0, n, k)
    reqs = rng.choice([0.0, 0.5, 1.0, 2.0], (k, 3))
    running = Running(node, reqs, rng.integers(-2, 4, k),
                      rng.choice([0.0, 1.0, 5.0], k), rng.random(k) < 0.9)
    alloc = np.zeros((n, 3))
    np.add.at(alloc, node, reqs)
    snap = Snapshot(cap, alloc, np.bincount(node, minlength=n), np.ones(n, bool),
                    np.zeros(0, np.int64), rng.permutation(n).astype(np.int64))
    lower = lower_than(int(rng.integers(-1, 5)), running, importance_order(running), n)
    req = rng.choice([0.0, 0.5, 1.0, 3.0], 3)
    walk, wanted, max_pods = rng.permutation(n).astype(np.int64), int(rng.integers(1, n + 1)), \
        int(rng.integers(1, 8))
    fast = dry_run(req, walk, wanted, snap, lower, running.req, max_pods)
    slow = dry_run_reference(req, walk, wanted, snap, lower, running.req, max_pods)
    assert [(nd, v.tolist()) for nd, v in fast] == [(nd, v.tolist()) for nd, v in slow]
