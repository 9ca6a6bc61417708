"""Alibaba cluster-trace-v2018 ingest: real machine_meta with batch/container fixtures."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import TraceError
from pipeline.ingest.alibaba2018 import WINDOW_END_S, Alibaba2018
from pipeline.ingest.dag import dag_levels
from pipeline.ingest.stage import ingest
from pipeline.trace.io import atomic_dir
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.validate import count_rows, validate

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / ".." / "shared" / "traces" / "alibaba-cluster-trace-v2018"
FIXTURES = ROOT / "tests" / "fixtures" / "alibaba2018"
BATCH = ("batch_task.csv", "batch_instance.csv", "container_meta.csv")


def _src(tmp_path: Path, *names: str, real_meta: bool = False) -> Path:
    """A source dir: fixture copies, and the real machine_meta.csv (symlink) or the fixture."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    if real_meta:
        if not (SAMPLE / "machine_meta.csv").exists():
            pytest.skip(f"real 2018 machine_meta.csv not found under {SAMPLE.resolve()}")
        (src / "machine_meta.csv").symlink_to(SAMPLE / "machine_meta.csv")
    else:
        shutil.copy(FIXTURES / "machine_meta.csv", src)
    for name in names:
        shutil.copy(FIXTURES / name, src / name)
    return src


def _run(adapter: Alibaba2018, src: Path, out: Path) -> Manifest:
    """What the ingest stage does, for an adapter built with non-default options."""
    with atomic_dir(out) as tmp:
        ledger, manifest = Ledger(), Manifest(source_format=adapter.name)
        adapter.run(src, tmp, ledger, manifest)
        ledger.fill(manifest)
        manifest.rows = count_rows(tmp)
        manifest.write(tmp)
        assert validate(tmp).ok, validate(tmp).first()
    return manifest


def _tasks(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "tasks.parquet")


def _task(tasks: pl.DataFrame, task_id: str) -> dict:
    return tasks.filter(pl.col("task_id") == task_id).row(0, named=True)


def _balanced(m: Manifest) -> None:
    for table, rows in m.input_rows.items():
        assert rows == m.rows_used.get(table, 0) + sum(m.rows_rejected.get(table, {}).values())


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    tmp = tmp_path_factory.mktemp("full18")
    out = tmp / "trace"
    return ingest("alibaba2018", _src(tmp, *BATCH, real_meta=True), out), out


def test_real_machine_meta(full: tuple[Manifest, Path]) -> None:
    m, out = full
    machines = pl.read_parquet(out / "machines.parquet")
    assert machines.height == 4033  # 4034 ids; m_2739 is only ever IMPORT_INSTALLING
    assert m.dropped["machines"] == {"never_in_service": 1}
    assert set(machines["cpu"]) == {96.0} and set(machines["mem"]) == {1.0}
    assert machines["rack"].null_count() == 0 and machines["added_s"].min() == 0.0
    assert m.input_rows["machine_meta"] == 17_592
    _balanced(m)


def test_accounting_and_manifest(full: tuple[Manifest, Path]) -> None:
    m, _ = full
    assert m.input_rows == {"batch_instance": 39, "batch_task": 14, "container_meta": 6,
                            "machine_meta": 17_592}
    assert m.rows_rejected == {}
    assert m.repaired["batch_task"] == {
        "missing_parent": 1, "self_dependency": 1, "unparsed_task_name": 1,
    }
    assert m.repaired["tasks"]["invalid_usage"] == 1
    assert m.dropped["jobs"] == {"no_task_emitted": 1}  # j_1005 only Waiting
    assert m.units["mem"].startswith("normalized") and m.notes["barrier_tasks"] == "1"
    assert m.tables_absent == ["container_usage"]  # optional, not in the fixture set


def test_golden_dag_on_instances(full: tuple[Manifest, Path]) -> None:
    tasks = _tasks(full[1]).filter(pl.col("job_id") == "j_1001")
    edges = tasks.select(
        "job_id", pl.col("task_id").str.split("/").list.get(1).alias("task_name"),
        pl.col("depends_on").alias("parent_name"),
    ).explode("parent_name").drop_nulls().with_columns(
        pl.col("parent_name").str.split("/").list.get(1)
    ).unique()
    levels, pending = dag_levels(edges.select("job_id", "task_name").vstack(
        tasks.select("job_id", pl.lit("M1").alias("task_name"))).unique(), edges)
    grouped = levels.group_by("level").agg("task_name").sort("level")["task_name"]
    assert [set(g) for g in grouped] == [{"M1"}, {"M2_1", "M3_1"}, {"R4_2"}, {"M5_3_4"}]
    assert pending.height == 0
    m5 = _task(tasks, "j_1001/M5_3_4/ins_5109")["depends_on"]
    assert m5 == ["j_1001/M3_1/ins_5104", "j_1001/M3_1/ins_5105", "j_1001/M3_1/ins_5106",
                  "j_1001/R4_2/ins_5107"]


def test_barrier_bounds_dependencies(full: tuple[Manifest, Path], tmp_path: Path) -> None:
    tasks = _tasks(full[1])
    barrier = _task(tasks, "j_1004/M1/barrier")
    assert len(barrier["depends_on"]) == 20 and barrier["cpu"] == barrier["mem"] == 0.0
    assert barrier["synthetic"] is True and barrier["trace_attempts"] == 0
    assert _task(tasks, "j_1004/R2_1/ins_5421")["depends_on"] == ["j_1004/M1/barrier"]
    m = _run(Alibaba2018(direct_limit=100), _src(tmp_path, *BATCH), tmp_path / "out")
    direct = _tasks(tmp_path / "out")
    assert len(_task(direct, "j_1004/R2_1/ins_5421")["depends_on"]) == 20
    assert m.notes["barrier_tasks"] == "0"
    assert direct.height == tasks.height - 1


def test_instances_retries_usage_and_statuses(full: tuple[Manifest, Path]) -> None:
    tasks = _tasks(full[1])
    retried = _task(tasks, "j_1001/M5_3_4/ins_5108")
    assert (retried["trace_attempts"], retried["trace_lost_s"]) == (2, 19.0)
    assert (retried["duration_s"], retried["end_event"]) == (68.0, "finished")
    first = _task(tasks, "j_1001/M1/ins_5101")
    assert (first["cpu"], first["mem"], first["cpu_used"]) == pytest.approx((1.0, 0.0039, 0.87))
    assert _task(tasks, "j_1001/M3_1/ins_5106")["mem_used"] is None  # published 101
    running = _task(tasks, "j_1006/task_MTk0NjA3NzQ0NzY2MDQ5MDI3Nw==/ins_5601")
    assert running["end_event"] == "censored"
    assert running["duration_s"] == WINDOW_END_S - 690_005
    assert _task(tasks, "j_1007/M1/ins_5701")["end_event"] == "failed"


def test_containers_are_long_running_tasks(full: tuple[Manifest, Path]) -> None:
    m, out = full
    tasks = _tasks(out)
    assert _task(tasks, "c_401")["duration_s"] == 452_781.0
    assert _task(tasks, "c_402")["duration_s"] == WINDOW_END_S  # single row
    resized = _task(tasks, "c_403")
    assert (resized["cpu"], resized["mem"]) == pytest.approx((16.0, 0.0313))
    assert resized["job_id"] == "app_7730"
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert dict(jobs.select("job_id", "queue").iter_rows())["app_2113"] == "online"
    assert m.repaired["tasks"]["single_row_run_to_window_end"] == 1


def test_without_instances_tasks_expand(tmp_path: Path) -> None:
    m = ingest("alibaba2018", _src(tmp_path, "batch_task.csv"), tmp_path / "out")
    assert m.tables_absent == ["batch_instance", "container_meta", "container_usage"]
    tasks = _tasks(tmp_path / "out")
    assert tasks.height == 38 + 1  # usable instances + one barrier (j_1004/M1)
    assert m.dropped["tasks"] == {"never_started": 3}
    assert _task(tasks, "j_1001/M5_3_4/1")["depends_on"] == [
        "j_1001/M3_1/0", "j_1001/M3_1/1", "j_1001/M3_1/2", "j_1001/R4_2/0",
    ]


def test_bad_instance_rows(tmp_path: Path) -> None:
    src = _src(tmp_path, "batch_task.csv")
    good = (FIXTURES / "batch_instance.csv").read_text().splitlines()[:3]
    bad = [
        "ins_9001,M1,j_1001,1,Terminated,86501,86530,m_11,1,1,87,99,0.31",  # 13 fields
        "ins_9002,M1,j_1001,1,Terminated,865x1,86530,m_11,1,1,87,99,0.31,0.35",
        "ins_9003,M1,j_1001,1,Terminated,86530,86501,m_11,1,1,87,99,0.31,0.35",  # end < start
        "ins_9004,M1,j_1001,1,Terminated,86530,86530,m_11,1,1,87,99,0.31,0.35",  # zero span
        good[0],  # exact duplicate instance attempt
        "ins_9005,M1,j_9999,1,Terminated,86501,86530,m_11,1,1,87,99,0.31,0.35",
        "ins_9006,M1,j_1001,1,Waiting,0,0,,1,1,,,,",
    ]
    (src / "batch_instance.csv").write_text("\n".join(good + bad) + "\n")
    m = ingest("alibaba2018", src, tmp_path / "out")
    assert m.rows_rejected["batch_instance"] == {
        "bad_number:start_time": 1, "duplicate_instance": 1, "wrong_column_count": 1,
    }
    assert m.dropped["tasks"] == {
        "end_before_start": 1, "never_started": 1, "task_not_in_batch_task": 1,
    }
    assert m.repaired["tasks"]["zero_duration"] == 1
    assert _task(_tasks(tmp_path / "out"), "j_1001/M1/ins_9004")["duration_s"] == 1.0
    _balanced(m)


def test_missing_required_table_is_named(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="batch_task"):
        ingest("alibaba2018", _src(tmp_path, "batch_instance.csv"), tmp_path / "out")


def test_chunked_gzip_reading_and_determinism(tmp_path: Path) -> None:
    plain = _run(Alibaba2018(), _src(tmp_path, *BATCH), tmp_path / "a")
    gz = tmp_path / "gz"
    shutil.copytree(tmp_path / "src", gz)
    for name in ("batch_instance.csv", "batch_task.csv"):
        (gz / f"{name}.gz").write_bytes(gzip.compress((gz / name).read_bytes()))
        (gz / name).unlink()
    chunked = _run(Alibaba2018(chunk_bytes=64), gz, tmp_path / "b")  # < one line
    assert chunked.input_rows == plain.input_rows and chunked.dropped == plain.dropped
    assert _tasks(tmp_path / "a").equals(_tasks(tmp_path / "b"))
    again = ingest("alibaba2018", tmp_path / "src", tmp_path / "c")
    assert _tasks(tmp_path / "a").equals(_tasks(tmp_path / "c"))
    assert again.rows == plain.rows


def test_truncated_gzip_chunk_is_a_clear_error(tmp_path: Path) -> None:
    src = _src(tmp_path, "batch_task.csv")
    data = gzip.compress((FIXTURES / "batch_instance.csv").read_bytes())
    (src / "batch_instance.csv.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="truncated gzip") as err:
        _run(Alibaba2018(chunk_bytes=64), src, tmp_path / "out")
    assert "batch_instance.csv.gz" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_container_usage_becomes_task_usage(tmp_path: Path) -> None:
    src = _src(tmp_path, *BATCH)
    shutil.copy(ROOT / "tests" / "fixtures" / "alibaba2018-usage" / "container_usage.csv", src)
    m = ingest("alibaba2018", src, tmp_path / "out")
    usage = pl.read_parquet(tmp_path / "out" / "task_usage.parquet")
    # percent of the container's request x the request (c_401: 4 cores, mem 0.0156);
    # a sample holds until the next one, the last for the container's median gap
    assert usage.select("task_id", "start_s", "end_s").rows() == [
        ("c_401", 100.0, 110.0), ("c_401", 110.0, 120.0), ("c_401", 120.0, 130.0),
        ("c_402", 1000.0, 1010.0), ("c_403", 0.0, 10.0), ("c_403", 10.0, 281891.0),
    ]
    assert usage["cpu"].to_list() == pytest.approx([2.0, 2.4, 1.6, 0.8, 4.0, 96.0])
    assert usage["mem"].to_list() == pytest.approx(
        [0.8 * 0.0156, 0.82 * 0.0156, 0.0156, 0.3 * 0.0156, 0.5 * 0.0313, 0.5 * 0.0313])
    assert m.rows_rejected["container_usage"] == {
        "missing_usage": 1, "negative_usage": 1, "outside_task_life": 1,
        "overlapping_sample": 1, "unknown_task": 1,
    }
    assert m.rows_used["container_usage"] == 6 == m.rows["task_usage"]
    assert m.repaired["task_usage"] == {"clipped_to_task_life": 2,
                                        "cpu_above_machine_clipped": 1,
                                        "mem_above_request_clipped": 1}
    _balanced(m)
    assert not usage["task_id"].str.contains("/").any()  # batch tasks: means only


def test_container_usage_without_container_meta_is_not_read(tmp_path: Path) -> None:
    src = _src(tmp_path, "batch_task.csv", "batch_instance.csv")
    shutil.copy(ROOT / "tests" / "fixtures" / "alibaba2018-usage" / "container_usage.csv", src)
    m = ingest("alibaba2018", src, tmp_path / "out")
    assert "container_usage" not in m.input_rows and "task_usage" not in m.rows
    assert "container_meta" in m.notes["container_usage"]


def test_task_kinds_follow_the_dag_names(full: tuple[Manifest, Path]) -> None:
    tasks = _tasks(full[1]).filter(~pl.col("synthetic").fill_null(False)).with_columns(
        pl.col("task_id").str.split("/").list.get(1, null_on_oob=True).alias("name"))
    kinds = dict(tasks.select("name", "task_kind").unique().iter_rows())
    assert kinds["M1"] == "map" and kinds["M2_1"] == "map"
    assert all(kinds[n] == "reduce" for n in kinds if n and n.startswith("R"))
    assert all(kinds[n] is None for n in kinds if n and n[:1] not in ("M", "R"))
