"""Alibaba cluster-trace-v2017 ingest: the real sample, small fixtures, accounting, bad input."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import TraceError
from pipeline.ingest.stage import ingest
from pipeline.trace.manifest import Manifest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / ".." / "shared" / "traces" / "alibaba-cluster-trace-v2017"
FIXTURES = ROOT / "tests" / "fixtures" / "alibaba2017"
SAMPLE_INSTANCES = 2_892_948  # sum of instance_num over batch_task.head20k.csv


def _src(tmp_path: Path, *names: str, extra: dict[str, str] | None = None) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(FIXTURES / name, src / name)
    for name, text in (extra or {}).items():
        (src / name).write_text(text)
    return src


def _tasks(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "tasks.parquet").sort("task_id")


def _balanced(m: Manifest) -> None:
    for table, rows in m.input_rows.items():
        assert rows == m.rows_used.get(table, 0) + sum(m.rows_rejected.get(table, {}).values())


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    if not (SAMPLE / "server_event.csv").exists():
        pytest.skip(f"real 2017 sample not found at {SAMPLE.resolve()}")
    src = tmp_path_factory.mktemp("src17")
    for name in ("server_event.csv", "batch_task.head20k.csv"):
        (src / name).symlink_to(SAMPLE / name)
    out = tmp_path_factory.mktemp("out17") / "trace"
    return ingest("alibaba2017", src, out), out


def test_sample_machines_and_downtime(sample: tuple[Manifest, Path]) -> None:
    m, out = sample
    machines = pl.read_parquet(out / "machines.parquet")
    assert machines.height == 1313 and m.rows["machines"] == 1313
    assert set(machines["cpu"]) == {64.0} and machines["mem"].max() == 1.0
    downtime = pl.read_parquet(out / "machine_downtime.parquet")
    assert downtime["up_s"].null_count() == downtime.height == 7  # no recovery is published
    assert m.repaired["machine_downtime"] == {"no_recovery_event": 7}


def test_sample_every_instance_is_emitted_or_dropped(sample: tuple[Manifest, Path]) -> None:
    m, _ = sample
    assert m.input_rows == {"batch_task": 20_000, "server_event": 1352}
    _balanced(m)
    assert m.tables_absent == ["batch_instance"]
    assert m.rows["tasks"] + sum(m.dropped["tasks"].values()) == SAMPLE_INSTANCES
    assert set(m.dropped["tasks"]) <= {"never_started", "no_end_in_trace", "no_resource_request"}
    assert m.repaired["tasks"]["started_before_trace"] > 0
    assert m.units["cpu"].startswith("cores") and m.time_origin


def test_sample_big_task_expands_vectorized(sample: tuple[Manifest, Path]) -> None:
    _, out = sample
    big = pl.scan_parquet(out / "tasks.parquet").filter(pl.col("job_id") == "3").collect()
    assert big.filter(pl.col("task_id").str.starts_with("3/4/")).height == 15_740
    row = big.filter(pl.col("task_id") == "3/4/15739").row(0, named=True)
    assert (row["submit_s"], row["duration_s"], row["cpu"]) == (6459.0, 65.0, 0.5)
    assert row["end_event"] == "finished"


def test_fixture_expansion_decisions(tmp_path: Path) -> None:
    src = _src(tmp_path, "server_event.csv", "batch_task.csv")
    m = ingest("alibaba2017", src, tmp_path / "out")
    tasks = _tasks(tmp_path / "out")
    events = dict(tasks.group_by("end_event").len().iter_rows())
    assert events == {"finished": 7, "censored": 3, "failed": 2}
    assert m.dropped["tasks"] == {"never_started": 2, "no_end_in_trace": 1}
    assert m.repaired["tasks"] == {"started_before_trace": 2, "zero_duration": 1}
    assert m.dropped["jobs"] == {"no_task_emitted": 1}
    censored = tasks.filter(pl.col("task_id") == "28/151/0").row(0, named=True)
    assert censored["duration_s"] == 86_400 - 16_302
    clamped = tasks.filter(pl.col("task_id") == "6168/37200/1").row(0, named=True)
    assert (clamped["submit_s"], clamped["duration_s"]) == (0.0, 110.0)
    assert tasks.filter(pl.col("job_id") == "18")["duration_s"].to_list() == [1.0]


def test_fixture_machines_errors_and_recovery(tmp_path: Path) -> None:
    m = ingest("alibaba2017", _src(tmp_path, "server_event.csv", "batch_task.csv"),
               tmp_path / "out")
    downtime = pl.read_parquet(tmp_path / "out" / "machine_downtime.parquet")
    assert downtime.rows() == [("2", 1204.0, 9020.0), ("3", 31877.0, None), ("4", 41210.0, None)]
    assert m.rows_rejected["server_event"] == {
        "error_for_machine_never_added": 1, "unknown_event_type": 1,
    }
    assert m.dropped["machines"] == {"no_capacity": 1}
    _balanced(m)


def test_fixture_one_task_per_instance_row(tmp_path: Path) -> None:
    src = _src(tmp_path, "server_event.csv", "batch_task.csv", "batch_instance.csv")
    m = ingest("alibaba2017", src, tmp_path / "out")
    tasks = _tasks(tmp_path / "out")
    assert tasks["task_id"].to_list() == [
        "28/151/0-7", "3/4/0-1", "3/4/0-2", "3/4/0-3", "3/4/0-4", "3/5/0-5", "61/444/0-9",
        "6168/37200/0-10",
    ]
    assert m.rows_rejected["batch_instance"] == {"missing_value:job_id": 1}
    assert m.dropped["tasks"] == {
        "never_started": 1, "no_end_in_trace": 1, "task_not_in_batch_task": 1,
    }
    first = tasks.row(1, named=True)
    assert (first["cpu"], first["cpu_used"], first["mem_used"]) == (0.5, 0.42, 0.0064)
    assert m.tables_absent == []
    _balanced(m)


def test_bad_rows_are_rejected_by_reason(tmp_path: Path) -> None:
    bad = "6412,6490,3,4,3,Terminated,50\n6412,6490,x3,4,3,Terminated,50,0.1\n"
    good = (FIXTURES / "batch_task.csv").read_text()
    src = _src(tmp_path, "server_event.csv", extra={"batch_task.csv": good + bad})
    m = ingest("alibaba2017", src, tmp_path / "out")
    assert m.rows_rejected["batch_task"] == {"bad_number:job_id": 1, "wrong_column_count": 1}
    _balanced(m)


def test_duplicate_task_rows_rejected(tmp_path: Path) -> None:
    good = (FIXTURES / "batch_task.csv").read_text()
    src = _src(tmp_path, "server_event.csv", extra={"batch_task.csv": good + good.splitlines()[0]})
    m = ingest("alibaba2017", src, tmp_path / "out")
    assert m.rows_rejected["batch_task"] == {"duplicate_task": 1}
    assert m.rows["tasks"] == 12


def test_missing_required_table_is_named(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="server_event"):
        ingest("alibaba2017", _src(tmp_path, "batch_task.csv"), tmp_path / "out")


def test_gzip_parts_and_determinism(tmp_path: Path) -> None:
    src = _src(tmp_path, "batch_instance.csv")
    for name in ("server_event.csv", "batch_task.csv"):
        (src / f"{name}.gz").write_bytes(gzip.compress((FIXTURES / name).read_bytes()))
    first = ingest("alibaba2017", src, tmp_path / "a")
    ingest("alibaba2017", src, tmp_path / "b")
    assert {s.path for s in first.sources} == {
        "server_event.csv.gz", "batch_task.csv.gz", "batch_instance.csv",
    }
    assert _tasks(tmp_path / "a").equals(_tasks(tmp_path / "b"))
    assert pl.read_parquet(tmp_path / "a" / "tasks.parquet").equals(
        pl.read_parquet(tmp_path / "b" / "tasks.parquet"))
