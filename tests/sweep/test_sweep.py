"""Sweeps: the grid, skipping finished runs, Dask = serial, and surviving a dying worker."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from pipeline.errors import UsageError
from pipeline.generate import generate
from pipeline.ingest.stage import ingest
from pipeline.sweep import build_grid, sweep
from pipeline.sweep.grid import RunSpec, check_specs, expand
from pipeline.sweep.runner import run_dask, run_one


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    generate(root / "raw", "google2011", machines=12, hours=3, seed=1)
    ingest("google2011", root / "raw", root / "trace")
    return root / "trace"


def write_params(root: Path, trace: Path, runs_dir: str = "runs") -> Path:
    section = {
        "traces": {"t": str(trace)}, "runs_dir": runs_dir, "seeds": [0, 1],
        "policies": {"yarn-uniform": {},
                     "container-packing": {"high_memory_threshold": [0.6, 0.8]}},
        "clusters": {"fixed": {"kind": "fixed"}, "elastic": {"kind": "elastic", "idle_s": 0}},
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump({"sweep": section}))
    return path


def test_grid_is_the_full_product_with_stable_keys(trace: Path, tmp_path: Path) -> None:
    assert expand({"a": [1, 2], "b": 3, "c": ["x", "y"]}) == [
        {"a": 1, "b": 3, "c": "x"}, {"a": 1, "b": 3, "c": "y"},
        {"a": 2, "b": 3, "c": "x"}, {"a": 2, "b": 3, "c": "y"}]
    section = yaml.safe_load(write_params(tmp_path, trace).read_text())["sweep"]
    specs = build_grid(section, tmp_path)
    assert len(specs) == (1 + 2) * 2 * 2
    assert len({s.key for s in specs}) == len(specs)
    assert [s.key for s in build_grid(section, tmp_path)] == [s.key for s in specs]


def test_a_trace_may_have_its_own_policies_and_clusters(trace: Path, tmp_path: Path) -> None:
    section = yaml.safe_load(write_params(tmp_path, trace).read_text())["sweep"]
    section["traces"]["mr"] = {"path": str(trace), "policies": {
        "delay-scheduling": {"skip_count": [0, 5]}}, "clusters": {"hdfs": {
            "kind": "fixed", "dfs": "hdfs"}}}
    specs = build_grid(section, tmp_path)
    mine = [s for s in specs if s.trace == "mr"]
    assert len(mine) == 2 * 2  # two settings x two seeds, on the hdfs cluster only
    assert {s.policy for s in mine} == {"delay-scheduling"}
    assert all(s.cluster_options == {"dfs": "hdfs"} for s in mine)
    assert len(specs) - len(mine) == (1 + 2) * 2 * 2  # the shared grid for the other
    section["traces"]["mr"]["policy"] = {}
    with pytest.raises(UsageError, match="unknown key 'policy'"):
        build_grid(section, tmp_path)


def test_a_policy_for_some_cluster_kinds_gets_runs_on_those_only(trace: Path,
                                                                 tmp_path: Path) -> None:
    section = yaml.safe_load(write_params(tmp_path, trace).read_text())["sweep"]
    section["policies"]["recorded"] = {}
    specs = build_grid(section, tmp_path)
    assert sorted((s.cluster, s.seed) for s in specs if s.policy == "recorded") == [
        ("fixed", 0), ("fixed", 1)]
    assert len(specs) == (1 + 2) * 2 * 2 + 2


def test_user_mistakes_fail_before_any_run(trace: Path, tmp_path: Path) -> None:
    bad = RunSpec("t", str(trace), "container-packing", {"threshold": 0.5}, out_dir="x")
    with pytest.raises(UsageError, match="threshold"):
        check_specs([bad])
    with pytest.raises(UsageError, match="fixed cluster"):
        check_specs([RunSpec("t", str(trace), "yarn-uniform", {}, "fixed", {"min_nodes": 1})])
    with pytest.raises(UsageError, match="not found"):
        sweep(tmp_path / "missing.yaml")


def tables(run_dir: Path) -> dict[str, object]:
    return {name: pq.read_table(run_dir / f"{name}.parquet")
            for name in ("task_runs", "node_intervals", "metrics")}


def test_sweep_on_a_scheduler_equals_serial_and_skips_finished_runs(
    trace: Path, tmp_path: Path
) -> None:
    from dask.distributed import LocalCluster

    serial = sweep(write_params(tmp_path / "a", trace), scheduler="serial", progress=False)
    # a real dask.distributed scheduler with two worker processes on 127.0.0.1, by address
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        parallel = sweep(write_params(tmp_path / "b", trace), scheduler=cluster.scheduler_address,
                         progress=False)
    assert serial["ran"] == parallel["ran"] == 12
    for run in sorted((tmp_path / "a" / "runs").rglob("run.json")):
        twin = tmp_path / "b" / run.parent.relative_to(tmp_path / "a")
        for name, table in tables(run.parent).items():
            assert table.equals(tables(twin)[name]), (run.parent, name)
    again = sweep(tmp_path / "b" / "params.yaml", scheduler="serial", progress=False)
    assert again == {**again, "ran": 0, "skipped": 12}


def test_a_worker_that_dies_mid_run_is_retried_once(trace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "died-once"
    spec = RunSpec("t", str(trace), "yarn-uniform", {}, seed=0, key="k1",
                   out_dir=str(tmp_path / "run"))

    def dies_first_time(s: RunSpec) -> dict:
        if not marker.exists():
            marker.write_text("x")
            os._exit(1)  # the worker process dies without a word
        return run_one(s)

    results = run_dask([spec], workers=2, progress=False, func=dies_first_time)
    assert results[0]["skipped"] is False and marker.exists()
    assert (tmp_path / "run" / "run.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


CAPACITY_XML = """<configuration>
<property><name>yarn.scheduler.capacity.root.queues</name><value>a,default</value></property>
<property><name>yarn.scheduler.capacity.root.a.capacity</name><value>{a}</value></property>
<property><name>yarn.scheduler.capacity.root.default.capacity</name><value>{rest}</value>
</property></configuration>"""


def test_configuration_file_contents_are_part_of_the_key(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "configs" / "cs.xml"
    conf.parent.mkdir()
    conf.write_text(CAPACITY_XML.format(a=50, rest=50))
    section = {"traces": {"t": str(trace)}, "runs_dir": "runs",
               "policies": {"yarn-uniform": {},
                            "capacity-scheduler": {"config": "configs/cs.xml"}}}

    def keys() -> dict[str, str]:
        return {s.policy: s.key for s in build_grid(section, tmp_path)}

    first = keys()
    conf.write_text(CAPACITY_XML.format(a=50, rest=50))  # rewritten, same contents
    assert keys() == first
    conf.write_text(CAPACITY_XML.format(a=70, rest=30))  # edited
    edited = keys()
    assert edited["capacity-scheduler"] != first["capacity-scheduler"]
    assert edited["yarn-uniform"] == first["yarn-uniform"]
    # paths are relative to params.yaml's directory, wherever the sweep runs from
    spec = next(s for s in build_grid(section, tmp_path) if s.policy == "capacity-scheduler")
    monkeypatch.chdir(trace.parent)
    assert run_one(spec)["skipped"] is False
    run = json.loads((Path(spec.out_dir) / "run.json").read_text())
    assert run["params"]["config"] == "configs/cs.xml"
    assert len(run["param_files"]["config"]["sha256"]) == 64
    conf.unlink()
    with pytest.raises(UsageError, match="parameter 'config': no such file") as err:
        keys()
    assert err.value.field == "sweep.policies.capacity-scheduler.config"
    assert "cs.xml" in str(err.value)


def _section(trace: Path, **extra: object) -> dict:
    return {"traces": {"t": str(trace)}, "runs_dir": "runs",
            "policies": {"yarn-uniform": {}}, **extra}


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def _finished(root: Path) -> set[Path]:
    return {p.parent for p in (root / "runs").rglob("run.json")}


@pytest.mark.parametrize(("typo", "bad", "known"), [
    ({"sweep": {"seed": [1]}}, "seed", "seeds"),
    ({"sweep": {"cluster": {}}}, "cluster", "clusters"),
    ({"sweep": {"run_dir": "x"}}, "run_dir", "runs_dir"),
    ({"generate": {"machine": 5}}, "machine", "machines"),
    ({"sweeps": {}}, "sweeps", "sweep"),
    ({"ingest": {"traces": {"d": {"fromat": "x"}}}}, "fromat", "format"),
])
def test_a_misspelt_params_key_is_an_error_naming_it(trace: Path, tmp_path: Path, typo: dict,
                                                      bad: str, known: str) -> None:
    data = {"sweep": _section(trace)}
    for section, values in typo.items():
        data[section] = {**data.get(section, {}), **values}
    path = _write(tmp_path / "params.yaml", data)
    with pytest.raises(UsageError, match=f"unknown (key|section) '{bad}'.*{known}"):
        sweep(path, scheduler="serial", progress=False)
    assert not (tmp_path / "runs").exists()  # nothing ran, nothing was pruned


def test_pruning_removes_only_this_sweeps_own_old_runs(trace: Path, tmp_path: Path) -> None:
    big = {"sweep": {**_section(trace), "clusters": {
        "fixed": {"kind": "fixed"}, "elastic": {"kind": "elastic", "idle_s": 0}}}}
    first = sweep(_write(tmp_path / "params.yaml", big), scheduler="serial", progress=False)
    assert first["ran"] == 2 and first["removed"] == []
    runs = _finished(tmp_path)
    # another params file with a smaller grid in the same runs_dir keeps the others' runs
    small = _write(tmp_path / "other.yaml", {"sweep": _section(trace)})
    other = sweep(small, scheduler="serial", progress=False)
    assert other["removed"] == [] and other["kept_other"] == 1 and _finished(tmp_path) == runs
    # the first definition shrinks its own grid: it removes its own run, and says which
    shrunk = sweep(_write(tmp_path / "params.yaml", {"sweep": _section(trace)}),
                   scheduler="serial", progress=False)
    assert len(shrunk["removed"]) == 1 and "yarn-uniform" in shrunk["removed"][0]
    assert _finished(tmp_path) == runs - {Path(shrunk["removed"][0])}
    # runs nobody owns (copied in by hand) stay unless --prune
    stray = tmp_path / "runs" / "t" / "yarn-uniform" / "by-hand"
    stray.mkdir()
    (stray / "run.json").write_text("{}")
    kept = sweep(small, scheduler="serial", progress=False)
    assert kept["removed"] == [] and kept["kept_other"] == 1 and stray.exists()
    pruned = sweep(small, scheduler="serial", progress=False, prune=True)
    assert pruned["removed"] == [str(stray)] and not stray.exists()


def test_what_killed_runs_left_is_removed_and_listed(trace: Path, tmp_path: Path) -> None:
    """A replay killed mid-run leaves its temporary directory; when the run's key changes
    (new code, an edited trace) nothing writes that output again, so the sweep cleans it."""
    import subprocess
    import sys

    from pipeline.trace.outdir import Owner, host_name

    params = _write(tmp_path / "params.yaml", {"sweep": _section(trace)})
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = Owner(host_name(), int(child.stdout), 0)
    policy_dir = tmp_path / "runs" / "t" / "yarn-uniform"
    policy_dir.mkdir(parents=True)
    killed = policy_dir / f".0123456789abcdef.tmp-0123abcd-{dead.tag()}"
    killed.mkdir()
    (killed / "task_runs.parquet").write_bytes(b"")  # half written
    result = sweep(params, scheduler="serial", progress=False)
    assert result["ran"] == 1 and result["removed"] == [str(killed)]
    assert not killed.exists() and len(_finished(tmp_path)) == 1


def test_runs_a_killed_sweep_finished_are_its_own_next_time(
        trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep killed after some runs never writes its index; those runs are still its own,
    so when its grid changes the next sweep prunes them instead of keeping them forever."""
    import pipeline.sweep as sweep_module

    two_seeds = {"sweep": {**_section(trace), "seeds": [0, 1]}}
    params = _write(tmp_path / "params.yaml", two_seeds)

    def killed_after_one(specs: list[RunSpec], progress: bool) -> list[dict]:
        run_one(specs[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module, "run_serial", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        sweep(params, scheduler="serial", progress=False)
    orphan = _finished(tmp_path)
    assert len(orphan) == 1
    monkeypatch.undo()
    index = tmp_path / "runs" / "t" / "index.json"
    with pytest.raises(UsageError, match="no finished sweep yet"):  # nothing to load
        sweep_module.sweep_runs(params)
    other = _write(tmp_path / "params.yaml", {"sweep": {**_section(trace), "seeds": [2]}})
    result = sweep(other, scheduler="serial", progress=False)
    assert result["ran"] == 1 and result["removed"] == [str(p) for p in orphan]
    assert result["kept_other"] == 0 and not orphan & _finished(tmp_path)
    assert "claimed" not in json.loads(index.read_text())["sweeps"]["../../params.yaml"]


def test_an_edited_trace_gets_new_run_ids_and_is_swept_again(trace: Path,
                                                             tmp_path: Path) -> None:
    """Editing tasks.parquet (the trace still validates) changes its identity."""
    import shutil

    import polars as pl

    from pipeline.replay import replay
    from pipeline.trace.validate import validate

    copy = tmp_path / "trace"
    shutil.copytree(trace, copy)
    params = _write(tmp_path / "params.yaml", {"sweep": _section(copy)})
    assert sweep(params, scheduler="serial", progress=False)["ran"] == 1
    before = replay(copy, "yarn-uniform", {}, 0, tmp_path / "hand1").run_id
    part = sorted((copy / "tasks.parquet").glob("*.parquet"))[0]
    tasks = pl.read_parquet(part)
    tasks.with_columns(pl.col("duration_s") * 2).write_parquet(part)
    assert validate(copy).ok
    again = sweep(params, scheduler="serial", progress=False)
    assert again["ran"] == 1 and len(again["removed"]) == 1
    assert replay(copy, "yarn-uniform", {}, 0, tmp_path / "hand2").run_id != before


def test_a_policy_may_list_several_grids(trace: Path, tmp_path: Path) -> None:
    """A list of mappings joins their grids: a policy with and without a layer."""
    section = {"traces": {"t": str(trace)}, "policies": {"yarn-uniform": [
        {}, {"opp_by": "priority", "opp_nm_queue": [3, 5]}, {}]}}
    specs = build_grid(section, tmp_path)
    assert [s.params for s in specs] == [{}, {"opp_by": "priority", "opp_nm_queue": 3},
                                         {"opp_by": "priority", "opp_nm_queue": 5}]
    check_specs(specs)
    with pytest.raises(UsageError, match="list of mappings"):
        build_grid({"traces": {"t": str(trace)}, "policies": {"yarn-uniform": [1]}}, tmp_path)


@pytest.mark.parametrize("where", ["shared", "trace"])
def test_an_unknown_cluster_kind_is_refused_naming_file_and_key(trace: Path, tmp_path: Path,
                                                               where: str) -> None:
    """A misspelt kind (``elastik``) is refused before any run, naming the params file and
    the key; before, every policy passed the unknown kind by and the sweep exited 0 with the
    cluster's runs missing."""
    clusters = {"fixed": {"kind": "fixed"}, "elastic": {"kind": "elastik", "min_nodes": 0}}
    entry: dict = {"path": str(trace)}
    section: dict = {"traces": {"t": entry}, "policies": {"yarn-uniform": {}},
                     "runs_dir": str(tmp_path / "runs")}
    if where == "shared":
        section["clusters"] = clusters
        key = "sweep.clusters.elastic.kind"
    else:
        entry["clusters"] = clusters
        key = "sweep.traces.t.clusters.elastic.kind"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"sweep": section}))
    with pytest.raises(UsageError) as err:
        sweep(params, scheduler="serial", progress=False)
    message = str(err.value)
    assert str(params) in message and key in message and "elastik" in message
    assert not (tmp_path / "runs").exists()
