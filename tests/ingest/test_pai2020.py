"""Alibaba PAI cluster-trace-gpu-v2020 ingest: the real machine spec, fixture jobs/tasks/instances.

The fixtures (tests/fixtures/alibaba-gpu2020) follow the published headers exactly (no header
row, float-formatted numbers, empty fields where the docs allow); ids are hex like the real
ones: job ``a..k``, inst_id ``b..k``, user ``c..k``, inst_name ``d..k``, worker ``e..k``,
machine ``f..k`` (see :func:`hexid`).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.errors import TraceError
from pipeline.fetch.pai2020 import ARCHIVES, alibaba_gpu2020
from pipeline.ingest.pai2020 import Pai2020
from pipeline.ingest.stage import ingest
from pipeline.trace.io import atomic_dir
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.validate import count_rows, validate

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / ".." / "shared" / "traces" / "alibaba-cluster-trace-gpu-v2020"
FIXTURES = ROOT / "tests" / "fixtures" / "alibaba-gpu2020"
SPEC, JOBS, TASKS = "pai_machine_spec.csv", "pai_job_table.csv", "pai_task_table.csv"
INSTANCES, SENSORS, GROUPS = ("pai_instance_table.csv", "pai_sensor_table.csv",
                              "pai_group_tag_table.csv")
ALL = (JOBS, TASKS, INSTANCES, SENSORS, GROUPS)
ORIGIN = 1_739_000.0  # the earliest time in the fixtures (job 1's submission)


def hexid(prefix: str, k: int, width: int) -> str:
    """A fixture id: ``prefix``, zeros, ``k`` in hex, ``width`` characters."""
    tail = f"{k:x}"
    return prefix + "0" * (width - len(prefix) - len(tail)) + tail


def job(k: int) -> str:
    return hexid("a", k, 24)


def inst(k: int) -> str:
    return hexid("d", k, 60)


def machine(k: int) -> str:
    return hexid("f", k, 24)


def _src(tmp_path: Path, *names: str, real_spec: bool = False) -> Path:
    """A source dir with fixture copies and the real machine spec (symlink) or the fixture's."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    if real_spec:
        if not (SAMPLE / SPEC).exists():
            pytest.skip(f"real pai_machine_spec.csv not found under {SAMPLE.resolve()}")
        (src / SPEC).symlink_to((SAMPLE / SPEC).resolve())
    else:
        shutil.copy(FIXTURES / SPEC, src)
    for name in names:
        shutil.copy(FIXTURES / name, src / name)
    return src


def _append(src: Path, name: str, *lines: str) -> None:
    with (src / name).open("a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _tasks(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "tasks.parquet")


def _task(tasks: pl.DataFrame, task_id: str) -> dict:
    return tasks.filter(pl.col("task_id") == task_id).row(0, named=True)


def _balanced(m: Manifest) -> None:
    for table, rows in m.input_rows.items():
        assert rows == m.rows_used.get(table, 0) + sum(m.rows_rejected.get(table, {}).values())


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    tmp = tmp_path_factory.mktemp("pai")
    out = tmp / "trace"
    return ingest("alibaba-gpu2020", _src(tmp, *ALL), out), out


def test_real_machine_spec_every_row_accounted(tmp_path: Path) -> None:
    m = ingest("alibaba-gpu2020", _src(tmp_path, JOBS, TASKS, real_spec=True), tmp_path / "out")
    machines = pl.read_parquet(tmp_path / "out" / "machines.parquet")
    assert m.input_rows["pai_machine_spec"] == 1897 == m.rows_used["pai_machine_spec"]
    assert "pai_machine_spec" not in m.rows_rejected
    counts = dict(machines.group_by("gpu_model").len().iter_rows())
    assert counts == {"P100": 798, "T4": 497, "MISC": 280, "V100M32": 135, "V100": 104,
                      None: 83}
    assert machines["gpu"].sum() == 6742 and machines["machine_id"].n_unique() == 1897
    assert set(machines.filter(pl.col("gpu_model").is_null())["gpu"]) == {0.0}
    assert set(machines["cpu"]) == {64.0, 96.0} and set(machines["mem"]) == {384.0, 512.0}
    assert machines["added_s"].max() == 0.0 and machines["rack"].null_count() == 1897
    _balanced(m)


def test_instances_map_to_tasks(full: tuple[Manifest, Path]) -> None:
    m, out = full
    tasks = _tasks(out)
    assert tasks.height == 11 and m.rows == {"jobs": 7, "machines": 7, "tasks": 11}
    share = _task(tasks, f"{job(1)}/tensorflow/{inst(1)}")
    assert (share["gpu"], share["cpu"], share["mem"]) == (0.5, 6.0, 29.296875)
    assert share["gpu_spec"] is None  # MISC names no model; group tag gives no spec
    assert (share["submit_s"], share["recorded_start_s"], share["duration_s"]) == (0, 10, 190)
    assert share["recorded_machine_id"] == machine(1) and share["end_event"] == "finished"
    assert share["cpu_used"] == pytest.approx(1.401451612903226)
    assert share["mem_used"] == pytest.approx(1.4627511160714286)
    whole = _task(tasks, f"{job(2)}/worker/{inst(2)}")
    assert (whole["gpu"], whole["gpu_spec"], whole["gang_id"]) == (2.0, ["V100"], None)
    assert whole["cpu_used"] is None  # no sensor row


def test_gang_of_four_instances(full: tuple[Manifest, Path]) -> None:
    tasks = _tasks(full[1]).filter(pl.col("job_id") == job(3))
    workers = tasks.filter(pl.col("task_id").str.contains("/worker/"))
    assert workers.height == 4 and set(workers["gang_id"]) == {f"{job(3)}/worker"}
    assert set(workers["gpu"]) == {1.0} and set(workers["recorded_machine_id"]) == {
        machine(3), machine(4)}
    ps = _task(tasks, f"{job(3)}/ps/{inst(3)}")
    assert (ps["gang_id"], ps["gpu"], ps["gpu_spec"]) == (None, 0.0, None)
    assert _task(tasks, f"{job(3)}/worker/{inst(4)}")["cpu_used"] == 2.5


def test_statuses_window_and_jobs(full: tuple[Manifest, Path]) -> None:
    m, out = full
    tasks = _tasks(out)
    running = _task(tasks, f"{job(4)}/worker/{inst(8)}")
    assert running["end_event"] == "censored" and running["gpu_spec"] == ["T4"]
    assert m.window_end_s == 1_841_000.0 - ORIGIN
    assert running["duration_s"] == m.window_end_s - running["recorded_start_s"]
    assert _task(tasks, f"{job(5)}/tensorflow/{inst(9)}")["end_event"] == "failed"
    assert not tasks["job_id"].is_in([job(6)]).any()  # Waiting: never started
    assert m.dropped == {"jobs": {"no_task_emitted": 1}, "tasks": {"never_started": 1}}
    assert m.repaired["tasks"] == {"gpu_rounded_up_to_whole_devices": 1,
                                   "gpu_spec_model_absent": 1, "missing_plan_gpu_read_as_0": 1}
    assert _task(tasks, f"{job(7)}/worker/{inst(11)}")["gpu"] == 2.0  # plan_gpu 150
    assert m.notes["gpu_spec_model_absent"] == "models no machine has: A100"
    jobs = pl.read_parquet(out / "jobs.parquet")
    first = jobs.row(0, named=True)
    assert (first["job_id"], first["user"], first["status"], first["workload"]) == (
        job(1), "c00000000001", "Terminated", "ctr")
    assert first["inst_id"] == hexid("b", 1, 60) and first["queue"] is None
    assert "1739000.0" in m.time_origin and m.window_start_s == 0.0
    assert validate(out).ok
    _balanced(m)


def test_without_instances_tasks_expand(tmp_path: Path) -> None:
    m = ingest("alibaba-gpu2020", _src(tmp_path, JOBS, TASKS, SENSORS), tmp_path / "out")
    assert m.tables_absent == ["pai_instance_table", "pai_group_tag_table"]
    assert "pai_sensor_table" not in m.input_rows and "absent" in m.notes["pai_sensor_table"]
    tasks = _tasks(tmp_path / "out")
    assert tasks.height == 11 and tasks["recorded_machine_id"].null_count() == 11
    gang = tasks.filter(pl.col("gang_id") == f"{job(3)}/worker")
    assert sorted(gang["task_id"]) == [f"{job(3)}/worker/{k}" for k in range(4)]
    specs = dict(tasks.select("job_id", "gpu_spec").unique("job_id").iter_rows())
    assert specs[job(5)] == ["T4"] and specs[job(8)] == ["A100"] and specs[job(1)] is None
    assert m.dropped["tasks"] == {"never_started": 1}
    assert validate(tmp_path / "out").ok


BAD = {
    JOBS: [
        f"{job(101)},{hexid('b', 101, 60)},c00000000009,Terminated,1739100.0",
        f"{job(102)},{hexid('b', 102, 60)},c00000000009,Terminated,17391x0.0,1739200.0",
        f"{job(103)},{hexid('b', 103, 60)},,Terminated,1739100.0,1739200.0",
        f"{job(104)},{hexid('b', 104, 60)},c00000000009,Terminated,-5.0,1739200.0",
        f"{job(1)},{hexid('b', 1, 60)},c00000000001,Terminated,1739000.0,1739200.0",
    ],
    TASKS: [
        f"{job(2)},neg,1.0,Terminated,1740060.0,1743600.0,600.0,30.0,-50.0,T4",
        f"{job(999)},worker,1.0,Terminated,1740060.0,1743600.0,600.0,30.0,100.0,T4",
        f"{job(1)},tensorflow,1.0,Terminated,1739010.0,1739200.0,600.0,29.0,50.0,MISC",
        f"{job(2)},evaluator,0.0,Terminated,1740060.0,1743600.0,600.0,30.0,0.0,",
        f"{job(2)},half,1.5,Terminated,1740060.0,1743600.0,600.0,30.0,0.0,",
        f"{job(2)},big,1.0,Terminated,1740060.0,1743600.0,600.0,30.0,900.0,V100",
    ],
    INSTANCES: [
        f"{job(2)},big,{inst(30)},{hexid('e', 30, 60)},b,Terminated,1740060.0,1743600.0,"
        f"{machine(999)}",
        f"{job(8)},worker,{inst(31)},{hexid('e', 31, 60)},b,Terminated,1840900.0,1840100.0,"
        f"{machine(2)}",
        f"{job(1)},nosuchtask,{inst(32)},{hexid('e', 32, 60)},b,Terminated,1739010.0,"
        f"1739200.0,{machine(1)}",
        f"{job(1)},tensorflow,{inst(1)},{hexid('e', 33, 60)},b,Failed,1739005.0,1739008.0,"
        f"{machine(1)}",
        f"{job(8)},worker,{inst(34)},{hexid('e', 34, 60)},b,Interrupted,1840100.0,1840200.0,"
        f"{machine(2)}",
        f"{job(8)},worker,{inst(35)},{hexid('e', 35, 60)},b,Terminated,1840100.0,,{machine(2)}",
        f"{job(8)},worker,{inst(36)},{hexid('e', 36, 60)},b,Terminated,1840100.0,1840100.0,"
        f"{machine(2)}",
        f"{job(7)},worker,{inst(37)},{hexid('e', 37, 60)},b,Terminated,1829000.0,1830000.0,"
        f"{machine(6)}",
    ],
    SENSORS: [
        f"{job(1)},tensorflow,{hexid('e', 77, 60)},b,{machine(1)},/dev/nvidia0,1.0,1.0,1.0,"
        "1.0,1.0,1.0,1.0,1.0,1.0,1.0",
        f"{job(1)},tensorflow,{hexid('e', 1, 60)},b,{machine(1)},/dev/nvidia0,1.0,1.0,1.0,"
        "1.0,1.0,1.0,1.0,1.0,1.0,1.0",
        f"{job(6)},worker,{hexid('e', 10, 60)},b,,,1.0,,1.0,,,,,,,",
        f"{job(2)},worker,{hexid('e', 2, 60)},b,{machine(2)},/dev/nvidia0,-1.0,1.0,1.0,"
        "1.0,1.0,1.0,1.0,1.0,1.0,1.0",
    ],
    GROUPS: [
        f"{hexid('b', 555, 60)},c00000000001,V100,{hexid('9', 555, 32)},",
        f"{hexid('b', 1, 60)},c00000000001,T4,{hexid('9', 556, 32)},",
    ],
}


def test_bad_rows_are_counted_by_reason(tmp_path: Path) -> None:
    src = _src(tmp_path, *ALL)
    for name, lines in BAD.items():
        _append(src, name, *lines)
    m = ingest("alibaba-gpu2020", src, tmp_path / "out")
    assert m.rows_rejected == {
        "pai_job_table": {"bad_number:start_time": 1, "duplicate_job": 1,
                          "missing_value:user": 1, "negative_value:start_time": 1,
                          "wrong_column_count": 1},
        "pai_task_table": {"bad_number:inst_num": 1, "duplicate_task": 1,
                           "negative_value:plan_gpu": 1, "no_instances": 1, "unknown_job": 1},
        "pai_instance_table": {"duplicate_instance": 1, "unknown_task": 1},
        "pai_sensor_table": {"duplicate_worker_name": 1, "instance_not_emitted": 1,
                             "negative_value:cpu_usage": 1, "unknown_instance": 1},
        "pai_group_tag_table": {"duplicate_inst_id": 1, "unknown_job": 1},
    }
    assert m.dropped["tasks"] == {"end_before_start": 1, "never_started": 1,
                                  "no_end_time": 1, "unknown_status": 1}
    # job 7 and job 8 gained an emitted instance each (plan_gpu 150; spec A100)
    assert m.repaired["tasks"] == {
        "gpu_rounded_up_to_whole_devices": 2, "gpu_spec_model_absent": 2,
        "missing_plan_gpu_read_as_0": 1, "more_gpus_than_any_node": 1,
        "recorded_machine_not_in_spec": 1, "started_before_job_submit": 1, "zero_duration": 1,
    }
    tasks = _tasks(tmp_path / "out")
    big = _task(tasks, f"{job(2)}/big/{inst(30)}")
    assert big["gpu"] == 9.0 and big["recorded_machine_id"] is None
    assert _task(tasks, f"{job(8)}/worker/{inst(36)}")["duration_s"] == 1.0
    early = _task(tasks, f"{job(7)}/worker/{inst(37)}")
    assert early["submit_s"] == early["recorded_start_s"] == 1_829_000.0 - ORIGIN
    kept = _task(tasks, f"{job(1)}/tensorflow/{inst(1)}")  # the later of two rows
    assert kept["end_event"] == "finished" and kept["cpu_used"] is not None
    assert {e["table"] for e in m.examples} >= {"pai_job_table", "pai_instance_table"}
    assert validate(tmp_path / "out").ok
    _balanced(m)


def test_bad_machine_rows(tmp_path: Path) -> None:
    src = _src(tmp_path, JOBS, TASKS)
    _append(src, SPEC, f"{machine(1)},T4,96,512,2", f"{machine(50)},T4,0,512,2",
            f"{machine(51)},T4,96,512,1.5", f"{machine(52)},T4,96,512",
            f"{machine(53)},T4,96,512,-2")
    m = ingest("alibaba-gpu2020", src, tmp_path / "out")
    assert m.rows_rejected["pai_machine_spec"] == {
        "duplicate_machine": 1, "fractional_gpu_count": 1, "negative_value:cap_gpu": 1,
        "no_capacity": 1, "wrong_column_count": 1,
    }
    assert m.rows["machines"] == 7
    _balanced(m)


def test_missing_required_table_is_one_line(tmp_path: Path) -> None:
    src = _src(tmp_path, JOBS, INSTANCES)
    with pytest.raises(TraceError, match="pai_task_table") as err:
        ingest("alibaba-gpu2020", src, tmp_path / "out")
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()
    (src / "pai_task_table.tar.gz").write_bytes(b"packed")
    with pytest.raises(TraceError, match=r"tar -xzf pai_task_table\.tar\.gz"):
        ingest("alibaba-gpu2020", src, tmp_path / "out")


def test_unusable_job_table_is_an_error(tmp_path: Path) -> None:
    src = _src(tmp_path, TASKS)
    (src / JOBS).write_text("a1,b1,c1,Terminated\n")
    with pytest.raises(TraceError, match="no usable rows in table pai_job_table"):
        ingest("alibaba-gpu2020", src, tmp_path / "out")


def test_gzip_parts_chunked_and_deterministic(tmp_path: Path, full: tuple[Manifest, Path]
                                              ) -> None:
    src = _src(tmp_path, *ALL)
    for name in (INSTANCES, TASKS):
        (src / f"{name}.gz").write_bytes(gzip.compress((src / name).read_bytes()))
        (src / name).unlink()
    out = tmp_path / "out"
    with atomic_dir(out) as tmp:
        ledger, manifest = Ledger(), Manifest(source_format=Pai2020.name)
        Pai2020(chunk_bytes=64).run(src, tmp, ledger, manifest)  # blocks below one line
        ledger.fill(manifest)
        manifest.rows = count_rows(tmp)
        manifest.write(tmp)
    assert manifest.input_rows == full[0].input_rows and manifest.dropped == full[0].dropped
    assert _tasks(out).equals(_tasks(full[1]))


def test_cli_ingest_exit_0(tmp_path: Path) -> None:
    src = _src(tmp_path, *ALL)
    result = CliRunner().invoke(app, ["ingest", "alibaba-gpu2020", str(src),
                                      str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert '"tasks": 11' in result.output


def test_fetch_dataset_matches_published_checksums() -> None:
    spec = alibaba_gpu2020()
    assert spec.base_url == "https://aliopentrace.oss-cn-beijing.aliyuncs.com/v2020GPUTraces/"
    assert len(spec.all_files()) == 7 and set(spec.default_parts) <= set(spec.tables)
    sums = SAMPLE / "docs" / "SHA256SUMS.txt"
    if not sums.exists():
        pytest.skip("published SHA256SUMS.txt not found")
    published = dict(reversed(line.split()) for line in sums.read_text().splitlines() if line)
    for f in spec.all_files():
        assert published[f.rel] == f.sha256
    assert set(ARCHIVES) == {t for t in spec.tables}
