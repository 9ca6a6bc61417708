"""SWF ingest (Parallel Workloads Archive): the two shared logs whole, and a hand-written log
that exercises every mapped field, the ``size`` option and each rejection reason."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.errors import TraceError, UsageError
from pipeline.fetch.datasets import select
from pipeline.fetch.swf import LOGS, swf
from pipeline.ingest.registry import make_adapter
from pipeline.ingest.stage import ingest
from pipeline.ingest.swf import ZERO_RUN_TIME_S, Swf
from pipeline.trace.io import atomic_dir
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.validate import validate

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / ".." / "shared" / "traces" / "parallel-workloads-archive-swf"

HEADER = """; Version: 2.2
; Computer: Test SP
; UnixStartTime: 893466664
; TimeZoneString: US/Pacific
; MaxNodes: 64
; MaxProcs: 64
; Queue:  1  batch
;
"""
# job submit wait run alloc cpu mem req_procs req_time req_mem status user group exe queue
# partition preceding think
JOBS = """\
    1      0   10  100   8   50  -1   16  3600  -1  1  3  2  7  1  1 -1 -1
    2     20   -1    0   4   -1  -1   -1    -1  -1  0  -1 -1 -1 -1 -1  1 -1
    3     30    5   -1  -1   -1  -1    4   600  -1  5  4  2  7  1  1 -1 -1
    4     40    0  200  96  300  -1   96     0  -1  5  5  2  8  2  2 -1 -1
    5     50    1   60   2   -1  -1    2   120  -1  3  6  2  9  1  1  9 -1
"""
BAD = """\
    6     60    1   60   2   -1  -1    2   120  -1  1  6  2  9  1  1
    7    7x0    1   60   2   -1  -1    2   120  -1  1  6  2  9  1  1 -1 -1
    8    -70    1   60   2   -1  -1    2   120  -1  1  6  2  9  1  1 -1 -1
    1     80    1   60   2   -1  -1    2   120  -1  1  6  2  9  1  1 -1 -1
    9     90    1   60  -1   -1  -1   -1   120  -1  1  6  2  9  1  1 -1 -1
   10    100    1   60  2.5   -1  -1    2   120  -1  1  6  2  9  1  1 -1 -1
"""


def _log(tmp_path: Path, text: str, name: str = "test.swf", gz: bool = False) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    data = text.encode()
    (src / name).write_bytes(gzip.compress(data) if gz else data)
    return src


def _rows(out: Path, table: str) -> dict[str, dict]:
    frame = pl.read_parquet(out / f"{table}.parquet")
    return {row["job_id"]: row for row in frame.iter_rows(named=True)}


def _balanced(m: Manifest) -> None:
    for table, rows in m.input_rows.items():
        assert rows == m.rows_used.get(table, 0) + sum(m.rows_rejected.get(table, {}).values())


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    tmp = tmp_path_factory.mktemp("swf")
    out = tmp / "trace"
    return ingest("swf", _log(tmp, HEADER + JOBS + BAD), out), out


def test_every_mapped_field(small: tuple[Manifest, Path]) -> None:
    m, out = small
    tasks, jobs = _rows(out, "tasks"), _rows(out, "jobs")
    assert set(tasks) == {"1", "2", "4"}  # 3 never ran; 5 is a partial-execution record
    one = tasks["1"]
    assert (one["task_id"], one["submit_s"], one["duration_s"], one["cpu"]) == ("1", 0, 100, 16)
    assert (one["mem"], one["gpu"], one["requested_s"]) == (0.0, 0.0, 3600.0)
    assert one["cpu_used"] == pytest.approx(50 / 100 * 8)  # avg cpu / run x allocated
    assert (one["end_event"], one["swf_status"]) == ("finished", 1)
    assert (one["recorded_machine_id"], one["recorded_start_s"]) == ("pool", 10.0)
    assert jobs["1"] == {"job_id": "1", "user": "u3", "queue": "1", "submit_s": 0.0,
                         "priority": None, "name": "app7", "sched_class": None,
                         "swf_group": 2, "swf_partition": 1}
    two = tasks["2"]
    assert two["duration_s"] == ZERO_RUN_TIME_S and two["cpu"] == 4.0  # from allocated
    assert (two["end_event"], two["recorded_start_s"], two["requested_s"]) == (
        "failed", None, None)
    assert two["depends_on"] == ["1"] and two["cpu_used"] is None
    assert (jobs["2"]["user"], jobs["2"]["queue"], jobs["2"]["name"]) == ("unknown", None, None)
    four = tasks["4"]
    assert (four["cpu"], four["end_event"], four["requested_s"]) == (96.0, "killed", None)
    assert four["cpu_used"] == 96.0  # 300 s of cpu in a 200 s run: clipped at 1 per processor
    machines = pl.read_parquet(out / "machines.parquet").row(0, named=True)
    assert (machines["machine_id"], machines["cpu"], machines["mem"]) == ("pool", 64.0, 1.0)
    assert m.window_end_s == 40 + 0 + 200 and m.window_start_s == 0.0


def test_counts_by_reason(small: tuple[Manifest, Path]) -> None:
    m, _ = small
    assert m.input_rows == {"swf": 11} and m.rows_used == {"swf": 4}
    assert m.rows_rejected["swf"] == {
        "bad_number:allocated_processors": 1, "bad_number:submit_time": 1,
        "duplicate_job_number": 1, "negative_value:submit_time": 1, "no_processors": 1,
        "partial_execution_record": 1, "wrong_column_count": 1,
    }
    assert m.dropped == {"jobs": {"run_time_missing": 1}, "tasks": {"run_time_missing": 1}}
    assert m.repaired == {
        "jobs": {"user_missing": 1},
        "tasks": {"cpu_time_above_run_time_clipped": 1, "larger_than_pool_kept": 1,
                  "processors_from_allocated": 1, "requested_time_not_positive": 1,
                  "zero_run_time": 1},
    }
    example = next(e for e in m.examples if e["reason"] == "wrong_column_count")
    assert (example["path"], example["line"]) == ("test.swf", 8 + 5 + 1)  # header, JOBS, then BAD
    assert m.notes["options"] == '{"machine": "pool", "size": "requested"}'
    assert m.notes["queues"] == "1 batch"
    assert m.time_origin.startswith("UnixStartTime 893466664 (1998-04-25T01:11:04Z)")
    _balanced(m)


def test_size_allocated_option(small: tuple[Manifest, Path], tmp_path: Path) -> None:
    m = ingest("swf", _log(tmp_path, HEADER + JOBS, gz=True, name="t.swf.gz"),
               tmp_path / "out", options={"size": "allocated"})
    tasks = _rows(tmp_path / "out", "tasks")
    assert tasks["1"]["cpu"] == 8.0 and tasks["2"]["cpu"] == 4.0
    assert m.notes["options"] == '{"machine": "pool", "size": "allocated"}'
    assert "processors_from_requested" not in m.repaired["tasks"]
    assert m.digest != small[0].digest
    assert validate(tmp_path / "out").ok


def test_no_max_procs_uses_largest_job(tmp_path: Path) -> None:
    m = ingest("swf", _log(tmp_path, JOBS), tmp_path / "out")
    assert pl.read_parquet(tmp_path / "out" / "machines.parquet")["cpu"].to_list() == [96.0]
    assert "largest job size" in m.notes["machines"]
    assert "larger_than_pool_kept" not in m.repaired["tasks"]


def test_option_errors_are_one_line_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown option 'sizes'.*known: size"):
        make_adapter("swf", sizes="allocated")
    with pytest.raises(UsageError, match="takes no options"):
        make_adapter("swim", size="allocated")
    with pytest.raises(UsageError, match="one of: requested, allocated") as caught:
        ingest("swf", _log(tmp_path, JOBS), tmp_path / "out", options={"size": "bogus"})
    assert "size" in str(caught.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "needle"), [
    ("", "empty file"),
    (HEADER, "no job lines"),
    ("job,submit,wait\n1,2,3\n", "no usable job lines: all 2 rejected (wrong_column_count: 2"),
])
def test_not_swf_is_one_line_error_naming_the_file(tmp_path: Path, text: str,
                                                   needle: str) -> None:
    with pytest.raises(TraceError, match=re.escape(needle)) as caught:
        ingest("swf", _log(tmp_path, text), tmp_path / "out")
    assert "test.swf" in str(caught.value) and "\n" not in str(caught.value)


def test_two_logs_in_one_directory_are_refused(tmp_path: Path) -> None:
    _log(tmp_path, JOBS, name="a.swf")
    with pytest.raises(TraceError, match="put one log per directory"):
        ingest("swf", _log(tmp_path, JOBS, name="b.swf"), tmp_path / "out")


def test_blocks_smaller_than_a_line_give_the_same_trace(tmp_path: Path) -> None:
    src = _log(tmp_path, HEADER + JOBS + BAD)
    whole = ingest("swf", src, tmp_path / "a")
    with atomic_dir(tmp_path / "b") as tmp:  # what the stage does, with tiny blocks
        ledger, manifest = Ledger(), Manifest(source_format="swf")
        Swf(block_bytes=16).run(src, tmp, ledger, manifest)
        ledger.fill(manifest)
    assert manifest.rows_rejected == whole.rows_rejected
    assert manifest.examples == whole.examples
    assert pl.read_parquet(tmp_path / "a" / "tasks.parquet").equals(
        pl.read_parquet(tmp_path / "b" / "tasks.parquet"))


def test_cli_ingest_and_bad_option(tmp_path: Path) -> None:
    src = _log(tmp_path, HEADER + JOBS)
    runner = CliRunner()
    ok = runner.invoke(app, ["ingest", "swf", str(src), str(tmp_path / "out"), "--no-progress"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["ingest", "swf", str(src), str(tmp_path / "out2"),
                              "--no-progress", "--set", "size=bogus"])
    assert bad.exit_code != 0
    lines = bad.output.strip().splitlines()
    assert len(lines) == 1 and "size" in lines[0] and "requested, allocated" in lines[0]


# --- the shared PWA logs ----------------------------------------------------------------

REAL = {
    "SDSC-SP2-1998-4.2-cln.swf.gz": {
        "input": 59_715, "tasks": 54_044, "pool": 128.0,
        "dropped": {"jobs": {"run_time_missing": 5671}, "tasks": {"run_time_missing": 5671}},
        "repaired": {"tasks": {"cpu_time_above_run_time_clipped": 3, "zero_run_time": 10}},
    },
    "CTC-SP2-1996-3.1-cln.swf.gz": {
        "input": 77_222, "tasks": 77_222, "pool": 338.0, "dropped": {},
        "repaired": {"tasks": {"cpu_time_above_run_time_clipped": 156,
                               "processors_from_allocated": 77_222, "zero_run_time": 17}},
    },
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_shared_log_every_line_accounted(tmp_path: Path, name: str) -> None:
    if not (SHARED / name).exists():
        pytest.skip(f"{name} not found under {SHARED.resolve()}")
    src = tmp_path / "src"
    src.mkdir()
    (src / name).symlink_to((SHARED / name).resolve())
    m = ingest("swf", src, tmp_path / "out")
    want = REAL[name]
    assert m.input_rows == {"swf": want["input"]} and m.rows_rejected == {}
    _balanced(m)
    assert m.rows["tasks"] == m.rows["jobs"] == want["tasks"]
    assert m.dropped == want["dropped"] and m.repaired == want["repaired"]
    assert pl.read_parquet(tmp_path / "out" / "machines.parquet")["cpu"].item() == want["pool"]
    assert validate(tmp_path / "out").ok
    tasks = pl.read_parquet(tmp_path / "out" / "tasks.parquet")
    assert tasks["recorded_start_s"].null_count() == 0 and (tasks["cpu"] <= want["pool"]).all()


def test_fetch_dataset_names_parts_by_log() -> None:
    spec = swf()
    assert spec.base_url == "https://www.cs.huji.ac.il/labs/parallel/workload/"
    assert [f.rel for f in select(spec, None)] == [
        "l_sdsc_sp2/SDSC-SP2-1998-4.2-cln.swf.gz", "l_ctc_sp2/CTC-SP2-1996-3.1-cln.swf.gz"]
    for folder, file, size, sha256 in LOGS.values():
        path = SHARED / file
        if path.exists():  # the shared copies are the verified bytes
            assert path.stat().st_size == size
            assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256
        assert folder.startswith("l_")
