"""The replay stage: run directory layout, determinism, run ids, defaults and user errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import TraceError, UsageError
from pipeline.policies import POLICIES, describe_policies
from pipeline.replay import replay
from pipeline.replay.output import TASK_RUNS_SCHEMA

MACHINES = [{"machine_id": f"m{i}", "cpu": 4.0, "mem": 8.0, "rack": f"r{i % 2}"}
            for i in range(3)]
TASKS = [{"task_id": f"t{i}", "job_id": f"j{i % 2}", "submit_s": float(i), "duration_s": 10.0,
          "cpu": 1.0, "mem": 2.0, "inputs": ["m1"] if i % 3 == 0 else None}
         for i in range(12)]
JOBS = [{"job_id": "j0", "user": "alice", "queue": "prod", "submit_s": 0.0},
        {"job_id": "j1", "user": "bob", "submit_s": 0.0}]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace(tmp_path_factory.mktemp("t") / "trace", MACHINES, TASKS, JOBS)


def test_run_directory(trace: Path, tmp_path: Path) -> None:
    result = replay(trace, "yarn-uniform", {}, 3, tmp_path / "run")
    names = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert names == ["metrics.parquet", "node_intervals.parquet", "provenance.json",
                     "run.json", "task_runs.parquet"]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    for key in ("run_id", "trace", "policy", "params", "seed", "window", "measured"):
        assert key in run
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert set(provenance) >= {"wall_s", "code_version", "created_at", "trace_path"}
    # what the run is does not depend on where, when or how fast it ran
    again = replay(trace, "yarn-uniform", {}, 3, tmp_path / "again")
    assert (tmp_path / "again" / "run.json").read_bytes() == (
        tmp_path / "run" / "run.json").read_bytes() and again.run_id == result.run_id
    assert run["run_id"] == result.run_id and run["seed"] == 3 and run["trace"] == "trace"
    tr = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    assert tr.columns == TASK_RUNS_SCHEMA.names and tr.schema["outcome"] == pl.String
    assert tr["task_id"].to_list() == [f"t{i}" for i in range(12)]  # trace row order
    assert set(tr["user"]) == {"alice", "bob"} and set(tr["queue"].drop_nulls()) == {"prod"}
    assert tr["locality"].null_count() == 8 and (tr["run_id"] == result.run_id).all()
    nodes = pl.read_parquet(tmp_path / "run" / "node_intervals.parquet")
    assert nodes.columns[:4] == ["run_id", "machine_id", "up_s", "down_s"]
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    assert metrics.columns == ["run_id", "metric", "value", "unit"]
    assert result.metrics["tasks_finished"] == 12
    assert 0.0 <= result.metrics["locality_node"] <= 1.0  # uniform ignores locality


def test_same_inputs_give_identical_tables(trace: Path, tmp_path: Path) -> None:
    a = replay(trace, "container-packing", {"packing_min_nodes": 1}, 0, tmp_path / "a")
    b = replay(trace, "container-packing", {"packing_min_nodes": "1"}, 0, tmp_path / "b")
    assert a.run_id == b.run_id
    for name in ("task_runs", "node_intervals", "metrics"):
        assert (tmp_path / "a" / f"{name}.parquet").read_bytes() == \
            (tmp_path / "b" / f"{name}.parquet").read_bytes()
    c = replay(trace, "container-packing", {"packing_min_nodes": 1}, 1, tmp_path / "c")
    assert c.run_id != a.run_id


def test_run_id_covers_cluster_and_defaults(trace: Path, tmp_path: Path) -> None:
    fixed = replay(trace, "yarn-uniform", None, 0, tmp_path / "f")
    elastic = replay(trace, "yarn-uniform", None, 0, tmp_path / "e", cluster="elastic",
                     cluster_options={"initial_nodes": 1, "max_nodes": 3})
    assert fixed.run_id != elastic.run_id
    assert elastic.run["cluster"]["node_cpu"] == 4.0  # the trace's common machine shape
    default = replay(trace, "container-packing", {}, 0, tmp_path / "d1")
    explicit = replay(trace, "container-packing", {"high_memory_threshold": 0.6}, 0,
                      tmp_path / "d2")
    assert default.run_id == explicit.run_id


@pytest.mark.parametrize(("units", "expected"), [
    ({"cpu": "cores", "mem": "GiB"}, (4.0, 16.0)),
    ({"cpu": "normalized: 1.0 = CPU capacity of the largest machine",
      "mem": "normalized: 1.0 = memory of the largest machine"}, (1.0, 1.0)),
])
def test_elastic_template_from_units(tmp_path: Path, units: dict, expected: tuple) -> None:
    small = [dict(t, cpu=0.5, mem=0.5) for t in TASKS[:2]]
    trace = write_trace(tmp_path / "t", [], small, JOBS, units=units)
    result = replay(trace, "yarn-uniform", {}, 0, tmp_path / "r", cluster="elastic",
                    cluster_options={"upscale_wait_s": 0, "boot_delay_s": 0})
    cl = result.run["cluster"]
    assert (cl["node_cpu"], cl["node_mem"]) == expected
    assert result.metrics["tasks_finished"] == 2


def test_fixed_cluster_without_machines_reports_unschedulable(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t", [], TASKS[:3], JOBS)
    result = replay(trace, "yarn-uniform", {}, 0, tmp_path / "r")
    assert result.metrics["tasks_unschedulable"] == 3 and result.metrics["node_hours"] == 0


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"policy": "no-such"}, UsageError, "unknown policy 'no-such'"),
    ({"params": {"threshold": 0.5}}, UsageError, "no parameter 'threshold'"),
    ({"params": {"high_memory_threshold": "abc"}}, UsageError, "expected float"),
    ({"params": {"high_memory_threshold": 1.5}}, UsageError, "above the maximum"),
    ({"params": {"packing_min_nodes": 2.5}}, UsageError, "expected int"),
    ({"cluster": "cloud"}, UsageError, "unknown cluster 'cloud'"),
    ({"cluster_options": {"idle_s": 5}}, UsageError, "elastic cluster only"),
    ({"cluster": "elastic", "cluster_options": {"min_nodes": 5, "max_nodes": 2}}, UsageError,
     "min_nodes <= initial_nodes <= max_nodes"),
    ({"cluster": "elastic", "cluster_options": {"nodes": 5}}, UsageError,
     "unknown cluster option 'nodes'"),
    ({"sched_interval_s": -1}, UsageError, "sched_interval_s"),
])
def test_user_errors(trace: Path, tmp_path: Path, kwargs: dict, error: type,
                     match: str) -> None:
    args = {"policy": "container-packing", "params": {}, "cluster": "fixed",
            "cluster_options": None, **kwargs}
    with pytest.raises(error, match=match):
        replay(trace, args["policy"], args["params"], 0, tmp_path / "run",
               cluster=args["cluster"], cluster_options=args["cluster_options"],
               sched_interval_s=kwargs.get("sched_interval_s", 1.0))
    assert not (tmp_path / "run").exists()


def test_bad_trace_fails_cleanly_and_keeps_an_old_run(trace: Path, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not found"):
        replay(tmp_path / "missing", "yarn-uniform", {}, 0, tmp_path / "run")
    bad = write_trace(tmp_path / "bad", MACHINES, [dict(TASKS[0], duration_s=-1.0)], JOBS)
    replay(trace, "yarn-uniform", {}, 0, tmp_path / "run")
    before = (tmp_path / "run" / "run.json").read_text()
    with pytest.raises(TraceError, match="duration_s"):
        replay(bad, "yarn-uniform", {}, 0, tmp_path / "run")
    assert (tmp_path / "run" / "run.json").read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="missing"):
        replay(tmp_path / "empty", "yarn-uniform", {}, 0, tmp_path / "run2")


def test_policies_listing_is_json() -> None:
    listing = json.loads(json.dumps(describe_policies()))
    packing = {p["name"]: p for p in listing}["container-packing"]
    assert {q["name"]: q["default"] for q in packing["params"]} == {
        "high_memory_threshold": 0.6, "packing_min_nodes": 5, "locality_delay_node_ms": 6.0}


def test_google_2011_sample(shared_traces: Path, tmp_path: Path) -> None:
    """The ingested Google 2011 sample replays on its machines and on an elastic cluster,
    measured over its window: every task runs from before the window to its end (censored),
    so none finishes, and the fixed cluster bills its machines for exactly the window."""
    stage = pytest.importorskip("pipeline.ingest.stage")
    src = shared_traces / "google-clusterdata-2011-2"
    try:
        stage.ingest("google2011", src, tmp_path / "g")
    except UsageError as exc:
        pytest.skip(f"google2011 adapter not available: {exc}")
    n = pl.scan_parquet(tmp_path / "g" / "tasks.parquet").select(pl.len()).collect().item()
    for cluster, options in (("fixed", {}), ("elastic", {"max_nodes": 500})):
        for policy in ("yarn-uniform", "container-packing"):
            result = replay(tmp_path / "g", policy, {}, 0, tmp_path / f"{policy}-{cluster}",
                            cluster=cluster, cluster_options=options)
            tr = pl.read_parquet(tmp_path / f"{policy}-{cluster}" / "task_runs.parquet")
            m, window = result.metrics, result.run["window"]
            assert tr.height == n and m["tasks_finished"] == 0
            assert m["tasks_censored"] == m["tasks_unfinished"] > 0.99 * n
            assert result.run["measured"]["to_s"] == window["end_s"] == pytest.approx(4998.9,
                                                                                     abs=0.1)
            if cluster == "fixed":
                machines = pl.read_parquet(tmp_path / "g" / "machines.parquet").height
                assert m["node_hours"] == pytest.approx(machines * window["end_s"] / 3600)
                assert m["backlog_tasks"] < 0.001 * n  # the trace ran them all on these
            else:
                assert result.run["cluster"]["node_cpu"] > 0
                assert m["node_hours"] <= 500 * window["end_s"] / 3600
                assert m["backlog_tasks"] > 0.5 * n  # 500 nodes hold far fewer


def test_ingested_traces_state_their_window_and_are_trusted_as_validated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingest states the window (a generated trace's from generated.json) and stamps the
    validated content digest: a replay of that trace skips the read-time checks, an edited
    copy gets them (and another identity)."""
    from pipeline.generate import generate
    from pipeline.ingest.stage import ingest
    from pipeline.replay import source

    generate(tmp_path / "raw", "google2011", machines=8, hours=2, seed=3)
    manifest = ingest("google2011", tmp_path / "raw", tmp_path / "t")
    assert (manifest.window_start_s, manifest.window_end_s) == (0.0, 7200.0)
    assert "generated.json" in manifest.window_source and len(manifest.digest) == 64
    checked: list[Path] = []
    monkeypatch.setattr(source, "quick_check", checked.append)
    first = replay(tmp_path / "t", "yarn-uniform", {}, 0, tmp_path / "r1")
    assert checked == [] and first.run["trace_validated"] is True
    assert first.run["measured"] == {"from_s": 0.0, "to_s": 7200.0, "drained": False}
    part = sorted((tmp_path / "t" / "tasks.parquet").glob("*.parquet"))[0]
    tasks = pl.read_parquet(part)
    tasks.with_columns(pl.col("cpu") * 0.5).write_parquet(part)
    edited = replay(tmp_path / "t", "yarn-uniform", {}, 0, tmp_path / "r2")
    assert checked == [tmp_path / "t"] and edited.run["trace_validated"] is False
    assert edited.run_id != first.run_id


def test_every_policy_pays_for_the_same_fixed_cluster_over_the_window(tmp_path: Path) -> None:
    """The issue's reproduction, small: censored services evicted by machine outages used to
    run on past the window and every machine was billed until the last one ended."""
    from pipeline.generate import generate
    from pipeline.ingest.stage import ingest
    from pipeline.policies import POLICIES
    from pipeline.sim.cluster import up_periods

    generate(tmp_path / "raw", "google2011", machines=24, hours=6, seed=2)
    ingest("google2011", tmp_path / "raw", tmp_path / "t")
    machines = pl.read_parquet(tmp_path / "t" / "machines.parquet")
    down = (pl.read_parquet(tmp_path / "t" / "machine_downtime.parquet")
            if (tmp_path / "t" / "machine_downtime.parquet").exists() else None)
    index = {m: i for i, m in enumerate(machines["machine_id"].to_list())}
    periods = up_periods(
        machines["added_s"].to_numpy(), machines["removed_s"].fill_null(np.nan).to_numpy(),
        np.array([index[m] for m in down["machine_id"]] if down is not None else [], np.int64),
        down["down_s"].to_numpy() if down is not None else np.zeros(0),
        down["up_s"].fill_null(np.nan).to_numpy() if down is not None else np.zeros(0))
    window = 6 * 3600.0
    up_hours = sum(min(e, window) - min(s, window) for _, s, e in periods) / 3600
    assert up_hours <= 24 * 6
    for policy in sorted(POLICIES):
        result = replay(tmp_path / "t", policy, {}, 0, tmp_path / policy)
        m = result.metrics
        assert m["node_hours"] == pytest.approx(up_hours), policy
        assert result.run["measured"]["to_s"] == window
        for name in ("backlog_tasks", "backlog_task_s", "tasks_unfinished", "tasks_censored"):
            assert m[name] is not None and m[name] >= 0, (policy, name)


@pytest.fixture(scope="module")
def empty_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace with one machine and no task at all."""
    root = tmp_path_factory.mktemp("empty")
    return write_trace(root / "trace", [{"machine_id": "m0", "cpu": 1.0, "mem": 1.0}], [],
                       jobs=[], window_end_s=100.0)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_trace_without_tasks_replays_to_an_empty_run(empty_trace: Path, tmp_path: Path,
                                                        policy: str) -> None:
    """Zero tasks is a trace, not a crash (the metrics' usage sum had no shape to unpack):
    every policy, and with each layer, gives a run with no task and the window's
    node-hours; load and report take it."""
    from pipeline.report import report
    from pipeline.warehouse import load

    runs = []
    layers = [{}, {"opp_by": "priority"}, {"spec": "late"}] if policy != "recorded" else [{}]
    for k, params in enumerate(layers):
        result = replay(empty_trace, policy, params, 0, tmp_path / f"run{k}")
        assert result.metrics["tasks_finished"] == 0
        assert result.metrics["node_hours"] == pytest.approx(100.0 / 3600.0)
        assert pl.read_parquet(tmp_path / f"run{k}" / "task_runs.parquet").height == 0
        runs.append(tmp_path / f"run{k}")
    if policy == "yarn-uniform":
        replay(empty_trace, policy, {}, 0, tmp_path / "elastic", cluster="elastic", drain=True)
        runs.append(tmp_path / "elastic")  # provisions no node at all
        load(runs, tmp_path / "w.duckdb")
        report(tmp_path / "w.duckdb", tmp_path / "report")
        assert (tmp_path / "report" / "summary.md").exists()
