"""Node labels (partitions) in the capacity-scheduler: golden cases through ``replay``.

Two machines tell the partitions apart by their cpu capacity: ``m0`` (200 cpu, DEFAULT)
and ``m1`` (201 cpu, selected by ``x:cpu>=201``), 100 GB each; tasks take 1 cpu, 1 GB.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies.capacity.partitions import assign_nodes, parse_node_labels
from pipeline.replay import replay
from tests.policies.test_conformance import (
    _write,
    assert_same_tables,
    check_run,
    small_trace,
)

POLICY = "capacity-scheduler"
P = "yarn.scheduler.capacity."
MACHINES = [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0},
            {"machine_id": "m1", "cpu": 201.0, "mem": 100.0}]


def _tasks(prefix: str, job: str, n: int, submit: float = 0.0,
           duration: float = 1000.0) -> list[dict]:
    return [{"task_id": f"{prefix}{i}", "job_id": job, "submit_s": submit,
             "duration_s": duration, "cpu": 1.0, "mem": 1.0} for i in range(n)]


def _job(job: str, user: str, queue: str, submit: float = 0.0) -> dict:
    return {"job_id": job, "user": user, "queue": queue, "submit_s": submit}


def _xml(path: Path, props: dict[str, str]) -> Path:
    body = "".join(f"<property><name>{k}</name><value>{escape(v)}</value></property>"
                   for k, v in props.items())
    path.write_text(f"<configuration>{body}</configuration>")
    return path


def _two_queues(labels: str, **extra: str) -> dict[str, str]:
    """a (50%) may use label x (100% of it, asked by default); b cannot."""
    return {P + "root.queues": "a,b", P + "root.a.capacity": "50",
            P + "root.b.capacity": "50", P + "root.a.user-limit-factor": "10",
            P + "root.b.user-limit-factor": "10", P + "root.a.accessible-node-labels": "x",
            P + "root.a.accessible-node-labels.x.capacity": "100",
            P + "root.b.accessible-node-labels": " ",
            P + "root.a.default-node-label-expression": "x",
            P + "maximum-am-resource-percent": "1.0",
            "tracereplay.node-labels": labels, **extra}


def _replay(tmp_path: Path, tasks: list[dict], jobs: list[dict], props: dict[str, str],
            horizon: float = 30.0, **params: object) -> tuple[pl.DataFrame, dict]:
    trace = write_trace(tmp_path / "t", MACHINES, tasks, jobs)
    config = _xml(tmp_path / "capacity-scheduler.xml", props)
    result = replay(trace, POLICY, {"config": str(config), **params}, 0, tmp_path / "run",
                    horizon_s=horizon)
    return pl.read_parquet(tmp_path / "run" / "task_runs.parquet"), result.metrics


def _where(tr: pl.DataFrame) -> dict[tuple[str, str], int]:
    ran = tr.filter(pl.col("start_s").is_not_null())
    return {(q, m): n for q, m, n in ran.group_by(["queue", "machine_id"]).len().iter_rows()}


def test_exclusive_label_isolates_queues_and_requests(tmp_path: Path) -> None:
    """a asks for x, b cannot access it: each stays on its own partition, idle or not."""
    tasks = _tasks("a", "ja", 150) + _tasks("b", "jb", 150)
    tr, _ = _replay(tmp_path, tasks, [_job("ja", "ua", "a"), _job("jb", "ub", "b")],
                    _two_queues("x:cpu>=201"))
    assert _where(tr) == {("root.a", "m1"): 100, ("root.b", "m0"): 100}


def test_labelled_requests_never_use_idle_default_nodes(tmp_path: Path) -> None:
    tr, _ = _replay(tmp_path, _tasks("a", "ja", 150), [_job("ja", "ua", "a")],
                    _two_queues("x:cpu>=201"))
    assert _where(tr) == {("root.a", "m1"): 100}  # m0 stays idle


def test_exclusive_label_idle_nodes_serve_nobody_else(tmp_path: Path) -> None:
    tr, _ = _replay(tmp_path, _tasks("b", "jb", 150), [_job("jb", "ub", "b")],
                    _two_queues("x:cpu>=201"))
    assert _where(tr) == {("root.b", "m0"): 100}


def test_label_capacities_split_the_partition(tmp_path: Path) -> None:
    """Both queues ask for x with 70/30 of it; label maximum-capacity = capacity."""
    props = _two_queues("x:cpu>=201", **{
        P + "root.b.accessible-node-labels": "x",
        P + "root.a.accessible-node-labels.x.capacity": "70",
        P + "root.a.accessible-node-labels.x.maximum-capacity": "70",
        P + "root.b.accessible-node-labels.x.capacity": "30",
        P + "root.b.accessible-node-labels.x.maximum-capacity": "30",
        P + "root.b.default-node-label-expression": "x"})
    tasks = _tasks("a", "ja", 150) + _tasks("b", "jb", 150)
    tr, _ = _replay(tmp_path, tasks, [_job("ja", "ua", "a"), _job("jb", "ub", "b")], props)
    assert _where(tr) == {("root.a", "m1"): 70, ("root.b", "m1"): 30}


def test_label_user_limit_follows_the_label_guarantee(tmp_path: Path) -> None:
    """user-limit-factor 1: one user of a gets its 40% of x (one container over, as the
    user limit is a '>' check), even though the queue may use all of x."""
    props = _two_queues("x:cpu>=201", **{
        P + "root.a.user-limit-factor": "1", P + "root.b.accessible-node-labels": "x",
        P + "root.a.accessible-node-labels.x.capacity": "40",
        P + "root.b.accessible-node-labels.x.capacity": "60"})
    tr, _ = _replay(tmp_path, _tasks("a", "ja", 150), [_job("ja", "ua", "a")], props)
    assert _where(tr) == {("root.a", "m1"): 41}


def test_non_exclusive_label_serves_default_requests_after_default_nodes(
        tmp_path: Path) -> None:
    """b's DEFAULT requests fill m0 first; the rest go to the idle x node at the next
    scheduling point (not before: DEFAULT nodes are tried first)."""
    tr, _ = _replay(tmp_path, _tasks("b", "jb", 150), [_job("jb", "ub", "b")],
                    _two_queues("x(exclusive=false):cpu>=201"))
    ran = tr.filter(pl.col("start_s").is_not_null())
    by_node = dict(ran.group_by("machine_id").agg(pl.col("start_s").min()).iter_rows())
    assert _where(tr) == {("root.b", "m0"): 100, ("root.b", "m1"): 50}
    assert by_node == {"m0": 0.0, "m1": 1.0}


def test_default_requests_prefer_default_nodes(tmp_path: Path) -> None:
    """Least-allocated-first would pick the emptier x node; DEFAULT nodes come first."""
    tr, _ = _replay(tmp_path, _tasks("b", "jb", 60), [_job("jb", "ub", "b")],
                    _two_queues("x(exclusive=false):cpu>=201"))
    assert _where(tr) == {("root.b", "m0"): 60}


def test_am_containers_are_never_placed_non_exclusively(tmp_path: Path) -> None:
    """m0 is full when jb2 arrives: its AM waits for DEFAULT room, x stays idle for it."""
    tasks = _tasks("b", "jb", 100) + _tasks("c", "jb2", 5, submit=5.0)
    jobs = [_job("jb", "ub", "b"), _job("jb2", "ub", "b", submit=5.0)]
    tr, _ = _replay(tmp_path, tasks, jobs, _two_queues("x(exclusive=false):cpu>=201"))
    assert tr.filter(pl.col("job_id") == "jb2")["start_s"].null_count() == 5


def test_label_queue_takes_its_nodes_back_by_preemption(tmp_path: Path) -> None:
    """b borrows 50 GB of x from t=1; a's demand for x (60) arrives at t=10 and gets the
    50 free.  Round at t=12 (partition x: a guaranteed 100, b 0): a's ideal is 60, b's
    40, so b gives 10 x 0.2 (natural termination) = 2 containers -- its newest
    non-exclusive ones, never those on m0 -- killed 15 s later (27); a starts them at 28.
    Later rounds repeat (marks at 30 -> 45, at 48 -> 63)."""
    tasks = _tasks("b", "jb", 150) + _tasks("a", "ja", 60, submit=10.0)
    jobs = [_job("jb", "ub", "b"), _job("ja", "ua", "a", submit=10.0)]
    props = _two_queues("x(exclusive=false):cpu>=201",
                        **{"yarn.resourcemanager.scheduler.monitor.enable": "true"})
    tr, metrics = _replay(tmp_path, tasks, jobs, props, horizon=80.0)
    hit = tr.filter(pl.col("preemptions") > 0).sort("task_id")
    assert hit["task_id"].to_list() == [f"b{i}" for i in range(144, 150)]
    assert (hit["first_start_s"] == 1.0).all()  # the ones placed on x, not on m0 (t=0)
    assert hit["wasted_s"].to_list() == [62.0, 62.0, 44.0, 44.0, 26.0, 26.0]
    assert metrics["preemptions"] == 6
    a_starts = tr.filter(pl.col("job_id") == "ja").group_by("start_s").len()
    assert dict(a_starts.drop_nulls().iter_rows()) == {10.0: 50, 28.0: 2, 46.0: 2, 64.0: 2}


def test_no_preemption_without_the_monitor(tmp_path: Path) -> None:
    tasks = _tasks("b", "jb", 150) + _tasks("a", "ja", 60, submit=10.0)
    jobs = [_job("jb", "ub", "b"), _job("ja", "ua", "a", submit=10.0)]
    _, metrics = _replay(tmp_path, tasks, jobs, _two_queues("x(exclusive=false):cpu>=201"),
                         horizon=80.0)
    assert metrics["preemptions"] == 0


def test_inline_queues_use_non_exclusive_labels_only_for_default_requests(
        tmp_path: Path) -> None:
    """Without a file every queue has 0% of every label (Hadoop's defaults): an exclusive
    label is never used, a non-exclusive one serves DEFAULT requests."""
    trace = write_trace(tmp_path / "t", MACHINES, _tasks("b", "jb", 150),
                        [_job("jb", "ub", "b")])
    for labels, want in (("x:cpu>=201", {"m0": 100}),
                         ("x(exclusive=false):cpu>=201", {"m0": 100, "m1": 50})):
        params = {"node_labels": labels, "max_am_resource_percent": 1.0,
                  "user_limit_factor": 10}
        replay(trace, POLICY, params, 0, tmp_path / "run", horizon_s=30.0)
        tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
        got = tr.filter(pl.col("start_s").is_not_null()).group_by("machine_id").len()
        assert dict(got.iter_rows()) == want


def test_labels_need_a_fixed_cluster(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", MACHINES, _tasks("b", "jb", 1), [_job("jb", "u", "b")])
    options = {"node_cpu": 8.0, "node_mem": 16.0, "max_nodes": 3}
    with pytest.raises(UsageError, match="node labels need a fixed cluster"):
        replay(trace, POLICY, {"node_labels": "x:50%"}, 0, tmp_path / "run",
               cluster="elastic", cluster_options=options)


def test_queue_rows_describe_labels(tmp_path: Path) -> None:
    _replay(tmp_path, _tasks("a", "ja", 5), [_job("ja", "ua", "a")],
            _two_queues("x:cpu>=201"))
    q = pl.read_parquet(tmp_path / "run" / "queues.parquet")
    rows = {r["queue"]: r for r in q.iter_rows(named=True)}
    assert rows["root.a"]["default_node_label"] == "x"
    assert rows["root.b"]["accessible_node_labels"] == ""
    assert rows["root.a"]["label_capacity"] == "x=1/1"


def test_a_label_on_no_node_changes_nothing(tmp_path: Path) -> None:
    """The partitioned path with an empty label decides exactly as the unlabelled one.

    Tasks of one shape on nodes that hold whole numbers of them: a request that fits the
    free room fits a node, so no container is ever reserved (reservations are modelled
    on the unlabelled path only, see capacity/reservations.py)."""
    rng = np.random.default_rng(3)
    n = 900
    submit = np.sort(rng.random(n) * 900.0).round(3)
    duration = np.clip(rng.lognormal(np.log(120.0), 0.8, n), 1.0, 1200.0).round(1)
    tasks = [{"task_id": f"t{i}", "job_id": f"j{i // 20}", "submit_s": float(submit[i]),
              "duration_s": float(duration[i]), "cpu": 1.0, "mem": 4.0} for i in range(n)]
    jobs = [_job(f"j{k}", f"u{k % 6}", "ab"[k % 3 == 2], float(submit[20 * k]))
            for k in range(n // 20)]
    machines = [{"machine_id": f"m{k}", "cpu": 16.0, "mem": 64.0} for k in range(6)]
    trace = write_trace(tmp_path / "t", machines, tasks, jobs)
    params = {"queues": "a:60,b:40:80", "preemption": True, "ordering": "fair",
              "minimum_user_limit_percent": 50, "user_limit_factor": 2}
    frames = []
    for labels in ("", "none:gpu"):
        result = replay(trace, POLICY, {**params, "node_labels": labels}, 0, tmp_path / "run")
        frames.append(pl.read_parquet(tmp_path / "run" / "task_runs.parquet").drop("run_id"))
    assert result.metrics["preemptions"] > 0  # the monitor acts in both paths
    assert frames[0].equals(frames[1])


# -- the node_labels specification -----------------------------------------------------
def test_node_labels_parse_and_assign_deterministically() -> None:
    specs = parse_node_labels("gpu:gpu; x(exclusive=false):50% ;big:mem>=64", source="t")
    assert [(s.name, s.exclusive) for s in specs] == [("gpu", True), ("x", False),
                                                      ("big", True)]
    cap = np.array([[8.0, 32.0, 1.0], [8.0, 64.0, 0.0], [8.0, 64.0, 0.0], [8.0, 32.0, 0.0],
                    [8.0, 32.0, 0.0]])
    one = assign_nodes(specs, cap, np.random.default_rng(3))
    two = assign_nodes(specs, cap, np.random.default_rng(3))
    assert one.tolist() == two.tolist() and one[0] == 1  # the GPU node is gpu's
    assert (one == 2).sum() == 2  # round(50% of 5) = 2 of the 4 unlabelled nodes
    assert set(np.flatnonzero(one == 3)) <= {1, 2}


@pytest.mark.parametrize(("text", "message"), [
    ("x", "label\\[\\(exclusive"), ("-x:gpu", "valid node label name"),
    ("x(exclusive=maybe):gpu", "exclusive must be"), ("x:gpu;x:50%", "defined twice"),
    ("x:150%", "share in"), ("x:disk>=3", "selector"),
])
def test_node_labels_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_node_labels(text, source="capacity-scheduler parameter 'node_labels'")


@pytest.mark.parametrize(("change", "message"), [
    ({P + "root.a.accessible-node-labels": "y"}, "'y' is not a cluster node label"),
    ({P + "root.a.accessible-node-labels.x.capacity": "60"}, "add up to 60, not 100"),
    ({P + "root.a.accessible-node-labels.x.capacity": "abc"}, "is not a number"),
    ({P + "root.b.accessible-node-labels.x.capacity": "10"}, "cannot access node label"),
    ({P + "root.b.default-node-label-expression": "x"}, "cannot access node label 'x'"),
    ({P + "root.a.default-node-label-expression": "x&&y"}, "expressions are not modelled"),
    ({P + "root.accessible-node-labels.x.capacity": "50"}, "root always has 100%"),
    ({P + "root.a.accessible-node-labels.x.maximum-capacity": "50"}, "below the label"),
    ({"tracereplay.node-labels": "x:cpu>=201;y:50%", P + "root.a.accessible-node-labels": "x,y",
      P + "root.a.accessible-node-labels.y.capacity": "20"}, "add up to 20, not 100"),
])
def test_label_config_errors_name_the_property(tmp_path: Path, change: dict[str, str],
                                               message: str) -> None:
    props = {**_two_queues("x:cpu>=201"), **change}
    with pytest.raises(UsageError, match=message) as info:
        _replay(tmp_path, _tasks("a", "ja", 1), [_job("ja", "ua", "a")], props)
    assert "capacity-scheduler.xml: property 'yarn.scheduler.capacity.root" in str(info.value)


def test_children_of_a_parent_without_label_capacity_have_none(tmp_path: Path) -> None:
    props = {P + "root.queues": "p,q", P + "root.p.capacity": "50", P + "root.q.capacity": "50",
             P + "root.q.accessible-node-labels.x.capacity": "100",
             P + "root.p.queues": "c", P + "root.p.c.capacity": "100",
             P + "root.p.c.accessible-node-labels.x.capacity": "100",
             "tracereplay.node-labels": "x:cpu>=201"}
    with pytest.raises(UsageError, match=r"children of 'root\.p' add up to 100, not 0"):
        _replay(tmp_path, _tasks("a", "ja", 1), [_job("ja", "ua", "c")], props)


def test_label_subsets_are_checked_below_root(tmp_path: Path) -> None:
    props = {P + "root.queues": "p", P + "root.p.capacity": "100",
             P + "root.p.queues": "c", P + "root.p.c.capacity": "100",
             P + "root.p.accessible-node-labels": "x",
             P + "root.p.c.accessible-node-labels": "x,y",
             "tracereplay.node-labels": "x:cpu>=201;y:gpu"}
    with pytest.raises(UsageError, match="labels y are not accessible to the parent"):
        _replay(tmp_path, _tasks("a", "ja", 1), [_job("ja", "ua", "c")], props)


def test_shipped_labels_example_parses() -> None:
    from pipeline.policies.capacity.config import from_xml

    conf = from_xml(Path(__file__).parents[2] / "configs" / "capacity-scheduler-labels.xml")
    caps = conf.caps
    assert caps is not None and caps.names == ("", "highmem", "gpu")
    t = conf.tree
    science = list(t.leaf_names).index("root.analytics.science")
    assert caps.leaf_part[science] == 1
    assert caps.abs_cap[1, t.index["root.analytics.science"]] == pytest.approx(0.6)
    assert not caps.access[1, t.index["root.adhoc"]]


# -- the conformance invariants with labels ----------------------------------------------
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=small_trace(), labels=st.sampled_from([
    "x(exclusive=false):50%", "x:50%;y(exclusive=false):cpu>=8", "g:gpu;m:mem>=16"]),
       preemption=st.booleans())
def test_labelled_replays_keep_the_conformance_invariants(
        case: dict, labels: str, preemption: bool,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """test_conformance's invariants (capacity never exceeded, runs inside provisioned
    intervals, every task accounted for, same run twice -> same tables) with node labels,
    on the fixed cluster (labels need one)."""
    root = tmp_path_factory.mktemp("case")
    trace = _write(case, root / "trace")
    params = {"node_labels": labels, "preemption": preemption}
    runs = [replay(trace, POLICY, params, 7, root / name, sched_interval_s=case["interval"],
                   horizon_s=case["horizon"]).run for name in ("a", "b")]
    check_run(case, root / "a", runs[0]["summary"]["end_s"])
    assert_same_tables(root / "a", root / "b")
