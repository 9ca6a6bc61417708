"""Hadoop SLS ingest: the real SLS and Rumen samples, replays of them, tiny fixtures, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.errors import TraceError
from pipeline.ingest import sls_json
from pipeline.ingest.sls_json import JsonObjects
from pipeline.ingest.stage import ingest
from pipeline.replay import replay
from pipeline.trace.manifest import Manifest
from pipeline.trace.validate import validate

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT.parent / "shared" / "traces" / "hadoop-sls"
RUMEN = "2jobs2min-rumen-jh.json"
SLS = "inputsls.json"


def _balanced(m: Manifest) -> None:
    for table, rows in m.input_rows.items():
        assert rows == m.rows_used.get(table, 0) + sum(m.rows_rejected.get(table, {}).values())


def _read(out: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(out / f"{name}.parquet")


def _ingest_sample(factory: pytest.TempPathFactory, *names: str) -> tuple[Manifest, Path]:
    if not (SAMPLE / RUMEN).exists():
        pytest.skip(f"SLS samples not found at {SAMPLE}")
    src = factory.mktemp("src")
    for name in names:
        (src / name).symlink_to(SAMPLE / name)
    out = factory.mktemp("out") / "trace"
    return ingest("sls", src, out), out


@pytest.fixture(scope="module")
def rumen(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    return _ingest_sample(tmp_path_factory, RUMEN)


@pytest.fixture(scope="module")
def sls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    return _ingest_sample(tmp_path_factory, SLS)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    if not SAMPLE.is_dir():
        pytest.skip(f"SLS samples not found at {SAMPLE}")
    out = tmp_path_factory.mktemp("both") / "trace"
    return ingest("sls", SAMPLE, out), out  # the shared directory as published (docs too)


def test_rumen_sample_every_job_and_task(rumen: tuple[Manifest, Path]) -> None:
    m, out = rumen
    assert m.input_rows == m.rows_used == {"rumen_jobs": 2, "rumen_tasks": 192}
    assert not m.rows_rejected and not m.dropped and not m.repaired
    _balanced(m)
    assert m.rows == {"machines": 4, "jobs": 2, "tasks": 192}
    tasks, jobs = _read(out, "tasks"), _read(out, "jobs")
    assert tasks.group_by("job_id").len()["len"].to_list() == [96, 96]
    assert set(tasks["task_kind"]) == {"map"} and tasks["depends_on"].null_count() == 192
    assert jobs["submit_s"].to_list() == [0.0, 105.204] and set(jobs["user"]) == {"jenkins"}
    assert set(jobs["queue"]) == {"sls_queue_1"} and set(jobs["name"]) == {"TeraGen"}
    # container size from the job conf (mapreduce.map.memory.mb), not jobMapMB (the -Xmx heap)
    assert set(tasks["mem"]) == {1024.0} and set(tasks["cpu"]) == {1.0}
    assert set(tasks["end_event"]) == {"finished"} and set(tasks["trace_attempts"]) == {1}
    assert (tasks["recorded_start_s"] >= tasks["submit_s"]).all()
    first = tasks.filter(pl.col("task_id") == "task_1369942127770_1205_m_000000").row(0, named=True)
    assert (first["submit_s"], first["recorded_start_s"], first["duration_s"]) == pytest.approx(
        (4.554, 6.664, 17.043))
    assert first["recorded_machine_id"] == "a2118.smile.com"
    assert first["input_mb"] == pytest.approx(82 / 2**20)
    assert first["cpu_used"] == pytest.approx(14.3 / 17.043)
    assert tasks["inputs"].null_count() == 192  # TeraGen reads no splits: no preferredLocations
    assert (m.window_start_s, m.window_end_s) == (0.0, pytest.approx(197.256))
    assert m.units["cpu"] == "vcores" and m.units["mem"].startswith("MB")
    assert "2013-06-14" in m.time_origin and [s.table for s in m.sources] == ["rumen_jobs"]


def test_rumen_sample_machines_from_attempt_hosts(rumen: tuple[Manifest, Path]) -> None:
    _, out = rumen
    machines = _read(out, "machines")
    assert machines["machine_id"].to_list() == [f"a211{i}.smile.com" for i in (5, 6, 7, 8)]
    assert set(machines["rack"]) == {"default-rack"}
    assert set(machines["cpu"]) == {10.0} and set(machines["mem"]) == {10240.0}
    recorded = set(_read(out, "tasks")["recorded_machine_id"])
    assert recorded == set(machines["machine_id"])
    assert validate(out).ok


def test_sls_sample_containers(sls: tuple[Manifest, Path]) -> None:
    m, out = sls
    assert m.input_rows == m.rows_used == {"sls_containers": 5, "sls_jobs": 2}
    assert m.rows == {"machines": 3, "jobs": 2, "tasks": 5} and not m.repaired
    tasks = _read(out, "tasks")
    assert tasks.group_by("job_id").len().sort("job_id")["len"].to_list() == [3, 2]
    assert tasks["submit_s"].to_list() == [0.0, 0.0, 0.0, 105.204, 105.204]
    row = tasks.filter(pl.col("task_id") == "job_1/2").row(0, named=True)
    assert (row["recorded_start_s"], row["duration_s"]) == pytest.approx((68.77, 17.843))
    assert (row["recorded_machine_id"], row["task_kind"], row["mem"]) == ("node2", "map", 1024.0)
    machines = _read(out, "machines")
    assert machines["machine_id"].to_list() == ["node1", "node2", "node3"]
    assert set(machines["rack"]) == {"default-rack"}
    assert _read(out, "jobs")["queue"].to_list() == ["sls_queue_1", "sls_queue_2"]
    assert (m.window_start_s, m.window_end_s) == (0.0, pytest.approx(197.256))
    assert validate(out).ok


def test_sls_sample_agrees_with_the_rumen_it_came_from(
    sls: tuple[Manifest, Path], rumen: tuple[Manifest, Path]
) -> None:
    """inputsls.json was converted from the Rumen sample (rumen2sls): the same origin, starts
    and durations, so both readings of the times agree to the millisecond."""
    keys = ["recorded_start_s", "duration_s"]
    from_sls = _read(sls[1], "tasks").select(keys)
    from_rumen = _read(rumen[1], "tasks").select(keys)
    assert from_sls.join(from_rumen, on=keys, how="anti").is_empty()


def test_both_samples_in_the_published_directory(both: tuple[Manifest, Path]) -> None:
    m, out = both
    assert m.rows == {"machines": 7, "jobs": 4, "tasks": 197}
    assert m.input_rows == {"rumen_jobs": 2, "rumen_tasks": 192, "sls_containers": 5,
                            "sls_jobs": 2}
    _balanced(m)
    assert validate(out).ok


def test_replay_recorded_and_a_policy(both: tuple[Manifest, Path], tmp_path: Path) -> None:
    _, trace = both
    result = CliRunner().invoke(app, ["replay", str(trace), "--policy", "recorded", "--out",
                                      str(tmp_path / "rec")])
    assert result.exit_code == 0, result.output
    runs = _read(tmp_path / "rec", "task_runs").join(
        _read(trace, "tasks").select("task_id", "recorded_machine_id", "recorded_start_s"),
        on="task_id")
    assert runs.height == 197 and set(runs["outcome"]) == {"finished"}
    assert (runs["machine_id"] == runs["recorded_machine_id"]).all()
    assert ((runs["start_s"] - runs["recorded_start_s"]).abs() <= 1.0).all()
    uniform = replay(trace, "yarn-uniform", {}, 0, tmp_path / "uniform")
    assert uniform.metrics["tasks_finished"] == 197


# -- small fixtures in the exact formats -------------------------------------------------------

def _attempt(host: str, start: int, finish: int, result: str = "SUCCESS") -> dict[str, Any]:
    return {"location": {"layers": host.split("/")}, "hostName": f"/{host}",
            "startTime": start, "finishTime": finish, "result": result,
            "attemptID": f"attempt_{start}", "resourceUsageMetrics": {"cumulativeCpuUsage": 500}}


def _task(task_id: str, start: int, attempts: list[dict[str, Any]],
          preferred: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"startTime": start, "taskID": task_id, "taskType": "MAP" if "_m_" in task_id else
            "REDUCE", "finishTime": attempts[-1]["finishTime"], "attempts": attempts,
            "preferredLocations": [{"layers": p.split("/")} for p in preferred],
            "taskStatus": "SUCCESS", "inputBytes": 64 * 2**20}


def _job(job_id: str, submit: int, maps: list[dict[str, Any]],
         reduces: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"priority": "NORMAL", "jobID": job_id, "user": "ann", "jobName": "sort",
            "submitTime": submit, "finishTime": submit + 60_000, "queue": "q1",
            "mapTasks": maps, "reduceTasks": reduces or [], "otherTasks": [],
            "jobProperties": {"mapreduce.map.memory.mb": "2048",
                              "mapreduce.reduce.memory.mb": "3072"}}


def _stream(*objects: dict[str, Any]) -> str:
    return "".join(json.dumps(o, indent=2) + "\n" for o in objects)  # concatenated, no array


def _sls_job(job_id: str, start: int, *containers: dict[str, Any]) -> dict[str, Any]:
    return {"am.type": "mapreduce", "job.start.ms": start, "job.end.ms": start + 9000,
            "job.queue.name": "q", "job.id": job_id, "job.user": "bob",
            "job.tasks": list(containers)}


def _container(host: str, start: int, end: int, kind: str = "map") -> dict[str, Any]:
    return {"container.host": host, "container.start.ms": start, "container.end.ms": end,
            "container.priority": 20, "container.type": kind}


T0 = 1_700_000_000_000
MAPS = [_task("task_1_0001_m_000000", T0 + 1000, [_attempt("r1/h1", T0 + 1500, T0 + 9500)],
              preferred=("r1/h1", "r2/h9")),
        _task("task_1_0001_m_000001", T0 + 1000,
              [_attempt("r2/h2", T0 + 1500, T0 + 3500, "FAILED"),
               _attempt("r1/h3", T0 + 4000, T0 + 8000)], preferred=("r2/h2",))]
REDUCES = [_task("task_1_0001_r_000000", T0 + 2000, [_attempt("r1/h1", T0 + 9000, T0 + 20000)])]


def _write(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, content in files.items():
        (src / name).write_text(content)
    return src


def test_preferred_locations_retries_and_reduce_dependencies(tmp_path: Path) -> None:
    src = _write(tmp_path, {"x-rumen.json": _stream(_job("job_1_0001", T0, MAPS, REDUCES))})
    m = ingest("sls", src, tmp_path / "out")
    tasks = _read(tmp_path / "out", "tasks").sort("task_id")
    machines = _read(tmp_path / "out", "machines")
    # every host named: attempts (the failed one too) and preferred locations
    assert dict(zip(machines["machine_id"], machines["rack"], strict=True)) == {
        "h1": "r1", "h2": "r2", "h3": "r1", "h9": "r2"}
    assert tasks["inputs"].to_list() == [["h1", "h9"], ["h2"], None]
    assert set(tasks["inputs"].explode().drop_nulls()) <= set(machines["machine_id"])
    assert tasks["input_mb"].to_list() == [64.0, 64.0, None]
    retried = tasks.row(1, named=True)
    assert (retried["recorded_machine_id"], retried["trace_attempts"]) == ("h3", 2)
    assert (retried["trace_lost_s"], retried["recorded_start_s"]) == (2.0, 4.0)
    reduce = tasks.row(2, named=True)
    assert reduce["depends_on"] == ["task_1_0001_m_000000", "task_1_0001_m_000001"]
    assert (reduce["task_kind"], reduce["mem"], reduce["submit_s"]) == ("reduce", 3072.0, 2.0)
    assert tasks["mem"].to_list()[:2] == [2048.0, 2048.0]
    assert m.notes["reduces_overlapping_maps"] == "1"  # started 9.0 s, before the maps' 9.5 s
    assert validate(tmp_path / "out").ok


def test_topology_file_decides_machines_and_counts_outsiders(tmp_path: Path) -> None:
    topology = _stream({"rack": "r1", "nodes": [{"node": "h1"}, {"node": "h3"}]},
                       {"rack": "r2", "nodes": [{"node": "h2"}, {"node": "h2"}, {}]})
    src = _write(tmp_path, {"jobs.json": _stream(_job("job_1_0001", T0, MAPS)),
                            "cluster-topo.json": topology})
    m = ingest("sls", src, tmp_path / "out")
    machines = _read(tmp_path / "out", "machines")
    assert machines["machine_id"].to_list() == ["h1", "h2", "h3"]  # h9 is only preferred
    assert m.rows_rejected["topology_nodes"] == {"duplicate:node": 1, "missing_value:node": 1}
    assert m.repaired["tasks"] == {"preferred_host_not_in_topology": 1}
    tasks = _read(tmp_path / "out", "tasks").sort("task_id")
    assert tasks["inputs"].to_list() == [["h1"], ["h2"]]
    _balanced(m)


def test_many_maps_wait_through_one_barrier(tmp_path: Path) -> None:
    maps = [_task(f"task_2_0001_m_{i:06d}", T0, [_attempt("r1/h1", T0 + i, T0 + 5000 + i)])
            for i in range(20)]
    reduces = [_task(f"task_2_0001_r_{i:06d}", T0, [_attempt("r1/h2", T0 + 9000, T0 + 12000)])
               for i in range(2)]
    src = _write(tmp_path, {"rumen.json": _stream(_job("job_2_0001", T0, maps, reduces))})
    m = ingest("sls", src, tmp_path / "out")
    tasks = _read(tmp_path / "out", "tasks")
    barrier = tasks.filter(pl.col("synthetic")).row(0, named=True)
    assert barrier["task_id"] == "job_2_0001/maps-done" and len(barrier["depends_on"]) == 20
    assert (barrier["cpu"], barrier["mem"], barrier["trace_attempts"]) == (0.0, 0.0, 0)
    reduce_deps = tasks.filter(pl.col("task_kind") == "reduce")["depends_on"].to_list()
    assert reduce_deps == [["job_2_0001/maps-done"]] * 2
    assert m.notes["barrier_tasks"] == "1" and m.rows["tasks"] == 23
    assert validate(tmp_path / "out").ok


def test_gzipped_rumen_and_blocks_smaller_than_an_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects cut anywhere by the block boundary decode the same, with the right lines."""
    first = _stream(_job("job_1_0001", T0, MAPS, REDUCES))
    other = {**MAPS[0], "taskID": "task_1_0002_m_000000"}
    text = first + "  \n" + _stream(_job("job_1_0002", T0 + 5, [other]))
    path = tmp_path / "jobs.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    monkeypatch.setattr(sls_json, "BLOCK_CHARS", 7)
    objects = JsonObjects(path, path.name)
    decoded = list(objects)
    assert [o["jobID"] for _, o in decoded] == ["job_1_0001", "job_1_0002"]
    assert [line for line, _ in decoded] == [1, first.count("\n") + 2]  # each one's '{'
    assert objects.source("rumen_jobs").rows == 2
    src = tmp_path / "src"
    src.mkdir()
    path.rename(src / path.name)
    assert ingest("sls", src, tmp_path / "out").rows["tasks"] == 4


# -- bad input ---------------------------------------------------------------------------------

def test_unparsable_json_names_file_and_line(tmp_path: Path) -> None:
    good = _stream(_sls_job("j1", 0, _container("/r/n1", 10, 20)))
    broken = '{\n  "job.id": "j2",\n  "job.start.ms": 5\n  "job.tasks": []\n}\n'
    src = _write(tmp_path, {"sls.json": good + broken})
    with pytest.raises(TraceError) as err:
        ingest("sls", src, tmp_path / "out")
    line = good.count("\n") + 4
    assert err.value.line == line and str(err.value).startswith(f"{src / 'sls.json'}:{line}:")
    assert "unparsable JSON" in str(err.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("content, reason", [
    ('{"job.id": "j1", "job.tasks": [', "unparsable JSON"),  # truncated
    ('[{"job.id": "j1"}]', "top-level array"),
    ("\x00\x01binary", "binary content"),
])
def test_unreadable_files_are_one_line_errors(tmp_path: Path, content: str, reason: str) -> None:
    src = _write(tmp_path, {"sls.json": content})
    with pytest.raises(TraceError, match=reason):
        ingest("sls", src, tmp_path / "out")


def test_bad_jobs_and_containers_are_counted_by_reason(tmp_path: Path) -> None:
    first = _stream(_sls_job(
        "j1", 0, _container("/r/n1", 10, 20), _container("/r/n2", -5, 20),
        _container("/r/n3", 30, 25), {**_container("/r/n1", 1, 2), "container.memory-mb": -1024}))
    no_id = {k: v for k, v in _sls_job("j2", 0, _container("/r/n1", 1, 9)).items()
             if k != "job.id"}
    rest = _stream(no_id, _sls_job("j3", 7, {"container.host": "/r/n1", "container.start.ms": 9}),
                   _sls_job("j1", 8, _container("/r/n1", 10, 20)))
    src = _write(tmp_path, {"sls.json": first + rest})
    m = ingest("sls", src, tmp_path / "out")
    assert m.rows_rejected["sls_jobs"] == {"duplicate:job_id": 1, "missing_value:job.id": 1}
    assert m.rows_rejected["sls_containers"] == {
        "end_before_start:container.end.ms": 1, "job_rejected": 2,
        "missing_value:container.end.ms": 1, "negative_value:container.memory-mb": 1,
        "negative_value:container.start.ms": 1}
    assert m.dropped == {"jobs": {"no_usable_tasks": 1}}  # j3: its only container was bad
    assert m.rows == {"machines": 1, "jobs": 1, "tasks": 1}
    _balanced(m)
    example = next(e for e in m.examples if e["reason"] == "missing_value:job.id")
    assert example == {"table": "sls_jobs", "path": "sls.json", "line": first.count("\n") + 1,
                       "field": "job.id", "reason": "missing_value:job.id"}


def test_rumen_task_without_attempts_or_with_bad_times(tmp_path: Path) -> None:
    no_attempts = {**MAPS[0], "taskID": "task_1_0001_m_000007", "attempts": []}
    negative = _task("task_1_0001_m_000008", T0, [_attempt("r1/h1", -1, T0 + 5)])
    setup = {"taskID": "task_1_0001_s_000000", "taskType": "SETUP", "attempts": []}
    job = {**_job("job_1_0001", T0, [*MAPS, no_attempts, negative]), "otherTasks": [setup]}
    src = _write(tmp_path, {"rumen.json": _stream(job)})
    m = ingest("sls", src, tmp_path / "out")
    assert m.rows_rejected["rumen_tasks"] == {
        "negative_value:attempt.startTime": 1, "no_attempts:attempts": 1,
        "setup_or_cleanup_task:otherTasks": 1}
    assert m.rows["tasks"] == 2
    _balanced(m)


def test_task_id_in_two_jobs_keeps_the_first(tmp_path: Path) -> None:
    src = _write(tmp_path, {"rumen.json": _stream(_job("job_1_0001", T0, MAPS),
                                                  _job("job_1_0002", T0 + 5, MAPS[:1]))})
    m = ingest("sls", src, tmp_path / "out")
    assert m.dropped == {"jobs": {"no_usable_tasks": 1},
                         "tasks": {"duplicate_task_id_in_another_job": 1}}
    tasks = _read(tmp_path / "out", "tasks")
    assert tasks.height == 2 and set(tasks["job_id"]) == {"job_1_0001"}
    assert _read(tmp_path / "out", "jobs")["job_id"].to_list() == ["job_1_0001"]


def test_every_row_rejected_is_an_error_naming_the_field(tmp_path: Path) -> None:
    job = {k: v for k, v in _sls_job("j1", 0, _container("/r/n1", 1, 2)).items()
           if k != "job.start.ms"}
    src = _write(tmp_path, {"sls.json": _stream(job)})
    with pytest.raises(TraceError, match="no usable rows in table sls_jobs") as err:
        ingest("sls", src, tmp_path / "out")
    assert (err.value.field, err.value.line) == ("job.start.ms", 1)


def test_no_job_file_is_an_error(tmp_path: Path) -> None:
    src = _write(tmp_path, {"nodes-topo.json": _stream({"rack": "r", "nodes": [{"node": "a"}]}),
                            "other.json": '{"hello": 1}'})
    with pytest.raises(TraceError, match="no SLS or Rumen job file"):
        ingest("sls", src, tmp_path / "out")
