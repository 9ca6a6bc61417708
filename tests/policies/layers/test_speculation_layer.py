"""The speculation layer composed over a placement policy: what the inner policy sees, where
copies go, caps and wake-ups (small stand-in views), the ``spec_*`` parameters, and whole
replays with a slow machine through the real core."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies import describe_policies, make_policy
from pipeline.policies.layers.speculation import Speculation
from pipeline.replay import replay
from pipeline.sim.interface import ClusterInfo, Decisions, NodeView, SchedView
from pipeline.sim.needs import Needs
from pipeline.sim.tasks import KIND_MAP, KIND_REDUCE

COLUMNS = ("node", "req", "start_s", "progress", "job", "row", "inputs", "kind",
           "speculative", "has_copy", "copies", "opportunistic")


@dataclass
class FakeRunning:
    """A stand-in for RunningView: the columns the layer and the rules read."""

    node: np.ndarray
    req: np.ndarray
    start_s: np.ndarray
    progress: np.ndarray
    job: np.ndarray
    row: np.ndarray
    inputs: np.ndarray
    kind: np.ndarray
    speculative: np.ndarray
    has_copy: np.ndarray
    copies: np.ndarray
    opportunistic: np.ndarray

    def __len__(self) -> int:
        return len(self.node)

    def subset(self, index: np.ndarray) -> FakeRunning:
        return FakeRunning(**{c: getattr(self, c)[index] for c in COLUMNS})


def running(node: list[int], progress: list[float], *, start: list[float] | None = None,
            kind: int = KIND_MAP, job: list[int] | None = None,
            speculative: list[bool] | None = None, req: float = 1.0) -> FakeRunning:
    n = len(node)
    spec = np.array(speculative or [False] * n)
    return FakeRunning(
        node=np.array(node), req=np.tile([req, req, 0.0], (n, 1)),
        start_s=np.array(start if start is not None else [0.0] * n),
        progress=np.array(progress), job=np.array(job or [0] * n),
        row=np.arange(n), inputs=np.full((n, 8), -1), kind=np.full(n, kind),
        speculative=spec, has_copy=np.zeros(n, bool), copies=np.zeros(n, np.int32),
        opportunistic=np.zeros(n, bool))


def nodes(n: int, cap: float = 4.0, alloc: list[float] | None = None,
          done: list[int] | None = None) -> NodeView:
    a = np.array(alloc or [0.0] * n)
    return NodeView(
        cap=np.tile([cap, cap, 0.0], (n, 1)), alloc=np.stack([a, a, 0 * a], axis=1),
        used=np.zeros((n, 2)), n_containers=np.zeros(n, np.int64), state=np.full(n, 2),
        speed=np.ones(n), rack=np.zeros(n, np.int64),
        done=np.array(done or [0] * n), done_run_s=np.zeros(n))


def jobs(arrived: int, finished: int, run_s: float = 100.0, kind: int = KIND_MAP
         ) -> SimpleNamespace:
    a, f = np.zeros((1, 3), np.int64), np.zeros((1, 3), np.int64)
    a[0, kind], f[0, kind] = arrived, finished
    s = np.zeros((1, 3))
    s[0, kind] = run_s * finished
    return SimpleNamespace(arrived=a, finished=f, run_s_sum=s, run_s_sq=s * run_s)


CLUSTER = ClusterInfo(kind="fixed", n_nodes=4, min_nodes=None, max_nodes=None, n_racks=1,
                      users=("u",), queues=("q",))


@dataclass
class Inner:
    """An inner policy that records what it saw and returns fixed decisions."""

    decisions: Decisions = field(default_factory=Decisions)
    seen: list[SchedView] = field(default_factory=list)
    name: ClassVar[str] = "fake"
    running: bool = True

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        return Needs(running=self.running)

    def decide(self, view: SchedView) -> Decisions:
        self.seen.append(view)
        return self.decisions

    def get_params(self) -> dict[str, Any]:
        return {}


def layer(rule: str, inner: Inner | None = None, **spec: Any) -> Speculation:
    from pipeline.policies.layers.speculation.params import resolve
    policy = Speculation(inner or Inner(), resolve("fake", {"spec": rule, **spec}))  # type: ignore[arg-type]
    policy.setup(CLUSTER, np.random.default_rng(0))
    return policy


def view(run: FakeRunning, node_view: NodeView, stats: SimpleNamespace | None,
         now: float = 100.0, pending_req: np.ndarray | None = None) -> SchedView:
    pending = SimpleNamespace(req=np.zeros((0, 3)) if pending_req is None else pending_req)
    return SchedView(now=now, cluster=CLUSTER, nodes=node_view, pending=pending,  # type: ignore[arg-type]
                     running=run, jobs=stats)  # type: ignore[arg-type]


# -- what the inner policy sees ----------------------------------------------------------------
def test_inner_never_sees_copies_and_its_stops_map_back() -> None:
    run = running([0, 1, 2, 1], [0.9, 0.1, 0.9, 0.05],
                  speculative=[False, True, False, False])
    inner = Inner(Decisions(preempt=np.array([2]), kill=np.array([0])))
    d = layer("hadoop", inner).decide(view(run, nodes(4), jobs(3, 0)))
    seen = inner.seen[0].running
    assert len(seen) == 3 and not np.asarray(seen.speculative).any()
    assert d.preempt.tolist() == [3] and d.kill.tolist() == [0]


def test_inner_without_needs_running_gets_none() -> None:
    inner = Inner(running=False)
    layer("late", inner).decide(view(running([0], [0.5]), nodes(2), jobs(1, 0)))
    assert inner.seen[0].running is None


def test_pass_throughs() -> None:
    policy = make_policy("yarn-uniform", {"spec": "hadoop"})
    assert policy.get_params()["spec"] == "hadoop" and "spec_gap" in policy.get_params()
    needs = policy.setup(CLUSTER, np.random.default_rng(0))
    assert needs == Needs(running=True, job_stats=True)  # yarn-uniform itself needs nothing
    assert policy.run_metrics() == {}
    assert "spec_gap" in policy.effective_settings({"spec"})


# -- copies ---------------------------------------------------------------------------------
def _stragglers(n: int = 8) -> tuple[FakeRunning, SimpleNamespace]:
    """A job of 10 maps: 2 finished, 8 running for 100 s; the last 4 far behind."""
    progress = [0.9] * (n - 4) + [0.1] * 4
    run = running([i % 4 for i in range(n)], progress)
    return run, jobs(10, 2)


def test_hadoop_copies_stragglers_on_other_nodes_within_free_room() -> None:
    run, stats = _stragglers()
    node_view = nodes(4, cap=4.0, alloc=[3.0, 2.0, 4.0, 3.0])  # room: 1, 2, 0, 1
    d = layer("hadoop").decide(view(run, node_view, stats))
    assert len(d.spec_run) > 0
    assert set(d.spec_run.tolist()) <= {4, 5, 6, 7}
    assert len(set(d.spec_run.tolist())) == len(d.spec_run)
    assert np.all(d.spec_node != run.node[d.spec_run])
    used = np.bincount(d.spec_node, minlength=4)
    assert np.all(used <= [1, 2, 0, 1])


def test_copies_use_only_room_the_inner_policy_left() -> None:
    run, stats = _stragglers()
    node_view = nodes(4, cap=4.0, alloc=[4.0, 3.0, 4.0, 4.0])  # only node 1 has room
    inner = Inner(Decisions(place_req=np.array([0]), place_node=np.array([1])))
    d = layer("hadoop", inner).decide(view(run, node_view, stats,
                                           pending_req=np.array([[1.0, 1.0, 0.0]])))
    assert len(d.spec_run) == 0
    assert d.place_req.tolist() == [0]


def test_no_copy_for_a_task_with_a_copy_or_being_stopped() -> None:
    run, stats = _stragglers()
    run.has_copy[4] = True
    inner = Inner(Decisions(kill=np.array([5])))
    d = layer("hadoop", inner).decide(view(run, nodes(4), stats))
    assert 4 not in d.spec_run and 5 not in d.spec_run
    assert set(d.spec_run.tolist()) == {6, 7}


def test_wake_up_while_tasks_run_and_looks_only_every_interval() -> None:
    run, stats = _stragglers()
    policy = layer("hadoop", spec_interval_s=3.0)
    d = policy.decide(view(run, nodes(4, cap=1.0), stats, now=100.0))
    assert d.wake_at_s == pytest.approx(103.0)
    again = policy.decide(view(run, nodes(4), stats, now=101.0))
    assert len(again.spec_run) == 0 and again.wake_at_s == pytest.approx(103.0)
    later = policy.decide(view(run, nodes(4), stats, now=103.0))
    assert len(later.spec_run) > 0 and later.wake_at_s == pytest.approx(106.0)
    idle = policy.decide(view(running([], []), nodes(4), stats, now=110.0))
    assert idle.wake_at_s is None


def test_inner_wake_up_is_kept_when_earlier() -> None:
    run, stats = _stragglers()
    d = layer("late", Inner(Decisions(wake_at_s=100.5))).decide(view(run, nodes(4), stats))
    assert d.wake_at_s == pytest.approx(100.5)


def test_late_cascade_respects_the_cap() -> None:
    """30% of 100 reducers finished, 70 at the end of copy (PS 1/3), started at different
    times: the native rule marks all 70; LATE launches 10% of the task slots."""
    n = 70
    run = running([i % 4 for i in range(n)], [0.5] * n, kind=KIND_REDUCE,
                  start=list(-np.arange(n, dtype=float)))
    stats = jobs(100, 30, kind=KIND_REDUCE)
    roomy = nodes(4, cap=25.0)  # 100 slots of the median request, all free
    hadoop = layer("hadoop").decide(view(run, roomy, stats))
    assert len(hadoop.spec_run) == n
    late = layer("late").decide(view(run, roomy, stats))
    assert len(late.spec_run) == 10  # 0.1 x 100 slots (18 are below the 25th percentile)
    # the ones launched are the slowest (started last: longest time left)
    assert set(late.spec_run.tolist()) == set(range(n - 10, n))
    capped = layer("late", spec_speculative_cap=0.02).decide(view(run, roomy, stats))
    assert len(capped.spec_run) == 2


def test_late_skips_slow_nodes() -> None:
    run, stats = _stragglers()
    node_view = nodes(4, done=[0, 5, 5, 5])  # node 0 below the 25th percentile
    d = layer("late", spec_slow_task_pct=75.0).decide(view(run, node_view, stats))
    assert len(d.spec_run) > 0 and 0 not in d.spec_node


def test_late_stddev_thresholds() -> None:
    run, stats = _stragglers()
    d = layer("late", spec_thresholds="stddev", spec_slow_task_threshold=0.5).decide(
        view(run, nodes(4), stats))
    assert set(d.spec_run.tolist()) == {4, 5, 6, 7}


def test_mrv2_one_per_pass_and_waits_after_speculating() -> None:
    run, stats = _stragglers()
    policy = layer("mrv2")
    d = policy.decide(view(run, nodes(4), stats, now=100.0))
    assert len(d.spec_run) == 1 and d.spec_run[0] in {4, 5, 6, 7}
    assert d.wake_at_s == pytest.approx(115.0)  # retry-after-speculate
    run.has_copy[d.spec_run[0]] = True
    between = policy.decide(view(run, nodes(4), stats, now=110.0))
    assert len(between.spec_run) == 0
    later = policy.decide(view(run, nodes(4), stats, now=115.0))
    assert len(later.spec_run) == 1 and later.spec_run[0] != d.spec_run[0]


def test_mrv2_waits_for_pending_tasks_and_finished_estimates() -> None:
    run, _ = _stragglers()
    pending = layer("mrv2").decide(view(run, nodes(4), jobs(12, 2)))  # 2 still pending
    assert len(pending.spec_run) == 0
    unknown = layer("mrv2").decide(view(run, nodes(4), jobs(10, 0)))  # nothing finished
    assert len(unknown.spec_run) == 0


# -- parameters -----------------------------------------------------------------------------------
def test_bad_parameters_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="spec"):
        make_policy("yarn-uniform", {"spec": "fast"})
    with pytest.raises(UsageError, match="spec_reduce_phases"):
        make_policy("yarn-uniform", {"spec": "late", "spec_reduce_phases": "0.5,0.5"})
    with pytest.raises(UsageError, match="spec_nope"):
        make_policy("yarn-uniform", {"spec": "late", "spec_nope": 1})
    with pytest.raises(UsageError, match="cannot take speculative copies"):
        make_policy("recorded", {"spec": "hadoop"})


def test_spec_none_keeps_the_plain_policy() -> None:
    assert not isinstance(make_policy("yarn-uniform", {"spec": "none"}), Speculation)
    assert not isinstance(make_policy("yarn-uniform", {}), Speculation)
    assert any(p["name"] == "spec_* (any policy)" for p in describe_policies())


# -- whole replays --------------------------------------------------------------------------------
def _slow_machine_trace(root: Path) -> Path:
    """Four machines with room for 4 maps each, one at quarter speed; a job of 8 equal
    maps of 200 s (spread 2 per machine)."""
    machines = [{"machine_id": f"m{i}", "cpu": 4.0, "mem": 4.0, "rack": "r0",
                 "speed": 0.25 if i == 0 else 1.0} for i in range(4)]
    tasks = [{"task_id": f"t{i}", "job_id": "j0", "submit_s": 0.0, "duration_s": 200.0,
              "cpu": 1.0, "mem": 1.0, "task_kind": "map"} for i in range(8)]
    return write_trace(root / "trace", machines, tasks, window_end_s=5000.0)


@pytest.mark.parametrize("rule", ["hadoop", "late", "mrv2"])
def test_replay_copies_the_slow_machines_tasks(tmp_path: Path, rule: str) -> None:
    trace = _slow_machine_trace(tmp_path)
    replay(trace, "yarn-uniform", {"spec": rule, "spec_lag_s": 30}, 0, tmp_path / "run",
           drain=True)
    runs = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    assert runs["outcome"].to_list() == ["finished"] * 8
    copied = runs.filter(pl.col("spec_copies") > 0)
    assert len(copied) > 0
    assert (copied["spec_machine_id"] != copied["machine_id"]).all()
    assert copied["spec_copies"].max() == 1
    slow = runs.filter(pl.col("machine_id") == "m0")
    assert slow["spec_won"].sum() > 0  # a copy on a fast machine beats the slow original
    assert slow["end_s"].max() < 800.0  # the slow machine alone would take 800 s


def test_a_run_records_only_the_parameters_its_rule_reads() -> None:
    from pipeline.policies import policy_class, resolve_params

    cls = policy_class("yarn-uniform")
    assert set(resolve_params(cls, {"spec": "hadoop"})) == {
        "spec", "spec_interval_s", "spec_reduce_phases", "spec_gap", "spec_lag_s"}
    # another rule's key (a sweep grid over several rules) is left out of this one's
    assert "spec_gap" not in resolve_params(cls, {"spec": "mrv2", "spec_gap": 0.3})
    assert resolve_params(cls, {"spec": "none"}) == {"spec": "none"}


@pytest.mark.parametrize("rule", ["hadoop", "late", "mrv2"])
def test_copies_of_gpu_tasks_keep_their_models_and_devices(tmp_path: Path, rule: str) -> None:
    """Nine 1-GPU maps on six 2-GPU machines, the first slow: copies go only to V100
    machines (m5 is a T4 with idle GPUs), and at no time do a machine's originals and
    copies hold more GPUs than it has."""
    machines = [{"machine_id": f"m{i}", "cpu": 8.0, "mem": 8.0, "gpu": 2.0, "rack": "r0",
                 "gpu_model": "T4" if i == 5 else "V100",
                 "speed": 0.25 if i == 0 else 1.0} for i in range(6)]
    tasks = [{"task_id": f"t{i}", "job_id": "j0", "submit_s": 0.0, "duration_s": 200.0,
              "cpu": 1.0, "mem": 1.0, "gpu": 1.0, "gpu_spec": ["V100"], "task_kind": "map"}
             for i in range(9)]
    trace = write_trace(tmp_path / "trace", machines, tasks, window_end_s=5000.0)
    result = replay(trace, "yarn-uniform", {"spec": rule, "spec_lag_s": 30}, 0,
                    tmp_path / "run", drain=True)
    runs = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    v100 = {f"m{i}" for i in range(5)}
    assert runs["outcome"].to_list() == ["finished"] * 9
    assert set(runs["machine_id"]) <= v100
    copied = runs.filter(pl.col("spec_copies") > 0)
    assert len(copied) > 0 and set(copied["spec_machine_id"]) <= v100
    spans = [(r["machine_id"], r["start_s"], r["end_s"]) for r in runs.iter_rows(named=True)]
    spans += [(r["spec_machine_id"], r["spec_start_s"], r["end_s"] if r["spec_won"] else None)
              for r in copied.iter_rows(named=True)]
    for m in v100:  # GPUs held at each start never exceed the 2 devices
        mine = [(s, e) for mm, s, e in spans if mm == m]
        for s, _ in mine:
            held = sum(1 for s2, e2 in mine if s2 <= s and (e2 is None or e2 > s))
            assert held <= 2, (rule, m, s)
    assert result.run["summary"]["gpu_model_held"] == 0
