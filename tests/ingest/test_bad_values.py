"""Bad values and bad parts through ``tracereplay ingest``, on every adapter: rows rejected and
counted by reason (never clamped silently, never aborting the ingest), and a one-line error
naming the file (and line) only when nothing usable is left or the file is not CSV at all."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import shutil
from pathlib import Path

import polars as pl
import pytest
from click.testing import Result
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.trace.manifest import Manifest
from tests.ingest.google_raw import job, task, us, write_part

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SUBMIT, SCHEDULE, FINISH = 0, 1, 4


def cli_ingest(fmt: str, src: Path, out: Path) -> Result:
    return CliRunner().invoke(app, ["ingest", fmt, str(src), str(out)])


def ingested(fmt: str, src: Path, out: Path) -> Manifest:
    """Ingest through the CLI, which must succeed; the manifest written."""
    result = cli_ingest(fmt, src, out)
    assert result.exit_code == 0, (result.stderr, result.exception)
    summary = json.loads(result.stdout)
    manifest = Manifest.read(out)
    assert summary["rejected"] == {t: sum(r.values()) for t, r in manifest.rows_rejected.items()}
    return manifest


def one_line_error(result: Result, *fragments: str) -> str:
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracereplay: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def google_source(root: Path, extra_tasks: list[list[object]] = ()) -> Path:
    """Two tasks that run and finish, plus ``extra_tasks`` rows."""
    write_part(root, "job_events", [job(1, 1, SUBMIT)])
    rows = [task(1, 1, i, SUBMIT) for i in range(2)]
    rows += [task(2, 1, i, SCHEDULE, 5) for i in range(2)]
    rows += [task(9, 1, i, FINISH, 5) for i in range(2)]
    write_part(root, "task_events", sorted(rows + list(extra_tasks), key=lambda r: r[0]))
    return root


def alibaba_source(tmp_path: Path, fmt: str) -> Path:
    src = tmp_path / "src"
    shutil.copytree(FIXTURES / fmt, src)
    return src


def replace_field(path: Path, line: int, field: int, value: str) -> None:
    """Set field ``field`` (0-based) of line ``line`` (1-based) of a plain CSV file."""
    lines = path.read_text().splitlines()
    row = lines[line - 1].split(",")
    row[field] = value
    lines[line - 1] = ",".join(row)
    path.write_text("\n".join(lines) + "\n")


# -- google2011 --------------------------------------------------------------------------------


def test_negative_times_are_rejected_not_clamped(tmp_path: Path) -> None:
    src = google_source(tmp_path / "raw", [task(-5, 1, 7, SUBMIT, raw_time=True)])
    write_part(src, "job_events", [job(1, 1, SUBMIT), job(-1, 2, SUBMIT, raw_time=True)])
    write_part(src, "machine_events", [[0, 5, 0, "p=", 0.5, 0.5], [-3, 6, 0, "p=", 0.5, 0.5]])
    usage = [[us(2), us(9), 1, 0, 5, 0.1, 0.02] + [None] * 13,
             [-1, us(9), 1, 1, 5, 0.1, 0.02] + [None] * 13]
    write_part(src, "task_usage", usage)
    manifest = ingested("google2011", src, tmp_path / "out")
    for table in ("task_events", "job_events", "machine_events"):
        assert manifest.rows_rejected[table] == {"negative_value:time": 1}, table
    assert manifest.rows_rejected["task_usage"] == {"negative_value:start": 1}
    example = next(e for e in manifest.examples if e["table"] == "task_events")
    assert example["line"] == 1 and example["field"] == "time"
    jobs = pl.read_parquet(tmp_path / "out" / "jobs.parquet")
    assert jobs["job_id"].to_list() == ["1"]  # job 2's only event was rejected, not set to 0
    assert manifest.rows["tasks"] == 2


def test_times_inside_the_offset_are_counted_repairs(tmp_path: Path) -> None:
    src = google_source(tmp_path / "raw", [task(5, 1, 7, SUBMIT, raw_time=True)])
    manifest = ingested("google2011", src, tmp_path / "out")
    assert manifest.repaired["task_events"] == {"time_inside_offset_read_as_before_window": 1}


@pytest.mark.parametrize(("cpu", "mem", "reason"), [
    (-0.5, 0.1, "negative_value:cpu"), (0.1, -1.0, "negative_value:mem"),
    ("nan", 0.1, "not_finite:cpu"), (0.1, "inf", "not_finite:mem"),
    ("-inf", 0.1, "not_finite:cpu"),
])
def test_bad_requests_are_rejected_rows_and_the_ingest_goes_on(
    tmp_path: Path, cpu: object, mem: object, reason: str
) -> None:
    bad = [task(3, 2, 0, SUBMIT, cpu=cpu, mem=mem), task(4, 2, 0, SCHEDULE, 5, cpu=cpu, mem=mem),
           task(8, 2, 0, FINISH, 5, cpu=cpu, mem=mem)]
    src = google_source(tmp_path / "raw", bad)
    manifest = ingested("google2011", src, tmp_path / "out")
    assert manifest.rows_rejected["task_events"] == {reason: 3}
    assert manifest.rows["tasks"] == 2  # the good tasks, nothing aborted
    example = next(e for e in manifest.examples if e["table"] == "task_events")
    assert example["path"] == "task_events/part-00000-of-00001.csv.gz"


def test_negative_usage_is_rejected(tmp_path: Path) -> None:
    src = google_source(tmp_path / "raw")
    write_part(src, "task_usage", [[us(2), us(9), 1, 0, 5, -0.1, 0.02] + [None] * 13,
                                   [us(2), us(9), 1, 1, 5, 0.1, 0.02] + [None] * 13])
    manifest = ingested("google2011", src, tmp_path / "out")
    assert manifest.rows_rejected["task_usage"] == {"negative_usage": 1}


def test_part_whose_every_row_is_rejected_is_counted(tmp_path: Path) -> None:
    src = google_source(tmp_path / "raw")
    write_part(src, "task_events", [[1, 2, 3], [4, 5, 6]], part=1, parts=2)
    manifest = ingested("google2011", src, tmp_path / "out")
    assert manifest.rows_rejected["task_events"] == {"wrong_column_count": 2}
    assert manifest.rows["tasks"] == 2


def test_table_with_no_usable_row_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    src = google_source(tmp_path / "raw")
    write_part(src, "task_events", [[1, 2, 3], task(-1, 1, 0, SUBMIT, raw_time=True)])
    line = one_line_error(cli_ingest("google2011", src, tmp_path / "out"),
                          "task_events/part-00000-of-00001.csv.gz:1",
                          "no usable rows in table task_events", "wrong_column_count: 1",
                          "negative_value:time: 1")
    assert "Traceback" not in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("compress", "message"), [
    (bz2.compress, "bzip2-compressed"), (lzma.compress, "xz-compressed"),
    (lambda data: data, "named .gz but not gzip"),
    (lambda data: b"\x00\x01binary" + data, "named .gz but not gzip"),
])
def test_part_that_is_not_gzip_is_one_line(tmp_path: Path, compress: object,
                                           message: str) -> None:
    src = google_source(tmp_path / "raw")
    path = src / "task_events" / "part-00000-of-00001.csv.gz"
    path.write_bytes(compress(gzip.decompress(path.read_bytes())))  # type: ignore[operator]
    one_line_error(cli_ingest("google2011", src, tmp_path / "out"), str(path), message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


# -- alibaba2017 / alibaba2018 -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["alibaba2017", "alibaba2018"])
def test_alibaba_bzip2_part_is_one_line(tmp_path: Path, fmt: str) -> None:
    src = alibaba_source(tmp_path, fmt)
    path = src / "batch_task.csv"
    path.write_bytes(bz2.compress(path.read_bytes()))
    one_line_error(cli_ingest(fmt, src, tmp_path / "out"), str(path), "bzip2-compressed")


# (format, file, line, field index, value, table, reason counted)
ALIBABA_BAD_VALUES = [
    ("alibaba2017", "server_event.csv", 1, 5, "nan", "server_event", "not_finite:mem"),
    ("alibaba2017", "batch_task.csv", 1, 6, "inf", "batch_task", "not_finite:plan_cpu"),
    ("alibaba2017", "batch_instance.csv", 1, 9, "inf", "batch_instance", "not_finite:cpu_avg"),
    ("alibaba2018", "batch_task.csv", 1, 7, "inf", "batch_task", "not_finite:plan_cpu"),
    ("alibaba2018", "batch_instance.csv", 1, 10, "-inf", "batch_instance",
     "not_finite:cpu_avg"),
    ("alibaba2018", "container_meta.csv", 1, 5, "inf", "container_meta",
     "not_finite:cpu_request"),
]


@pytest.mark.parametrize(("fmt", "name", "line", "field", "value", "table", "reason"),
                         ALIBABA_BAD_VALUES)
def test_alibaba_non_finite_values_are_rejected_rows(
    tmp_path: Path, fmt: str, name: str, line: int, field: int, value: str, table: str,
    reason: str,
) -> None:
    src = alibaba_source(tmp_path, fmt)
    replace_field(src / name, line, field, value)
    manifest = ingested(fmt, src, tmp_path / "out")
    assert manifest.rows_rejected[table].get(reason) == 1
    example = next(e for e in manifest.examples if e["reason"] == reason)
    assert (example["path"], example["line"]) == (name, line)


@pytest.mark.parametrize(("fmt", "field"), [("alibaba2017", 6), ("alibaba2018", 7)])
def test_alibaba_negative_request_drops_its_tasks_and_goes_on(tmp_path: Path, fmt: str,
                                                              field: int) -> None:
    src = alibaba_source(tmp_path, fmt)
    good = ingested(fmt, src, tmp_path / "good")
    replace_field(src / "batch_task.csv", 1, field, "-50")
    manifest = ingested(fmt, src, tmp_path / "out")
    assert manifest.dropped["tasks"]["invalid_resource_request"] >= 1
    assert 0 < manifest.rows["tasks"] < good.rows["tasks"]


@pytest.mark.parametrize(("fmt", "name", "field", "table"), [
    ("alibaba2017", "server_event.csv", 0, "server_event"),
    ("alibaba2018", "machine_meta.csv", 1, "machine_meta"),
])
def test_alibaba_negative_machine_times_are_counted(tmp_path: Path, fmt: str, name: str,
                                                    field: int, table: str) -> None:
    src = alibaba_source(tmp_path, fmt)
    replace_field(src / name, 1, field, "-30")
    manifest = ingested(fmt, src, tmp_path / "out")
    assert manifest.repaired[table] == {"negative_time_read_as_0": 1}


@pytest.mark.parametrize(("fmt", "name"), [
    ("alibaba2017", "server_event.csv"), ("alibaba2017", "batch_task.csv"),
    ("alibaba2017", "batch_instance.csv"), ("alibaba2018", "machine_meta.csv"),
    ("alibaba2018", "batch_task.csv"), ("alibaba2018", "batch_instance.csv"),
    ("alibaba2018", "container_meta.csv"),
])
def test_alibaba_file_with_no_usable_row(tmp_path: Path, fmt: str, name: str) -> None:
    src = alibaba_source(tmp_path, fmt)
    (src / name).write_text("x,y\n1,2\n")
    one_line_error(cli_ingest(fmt, src, tmp_path / "out"), f"{src / name}:1",
                   "no usable rows in table", "wrong_column_count: 2")
    # The same rows in an extra part beside the good one: counted, ingest goes on.
    src2 = alibaba_source(tmp_path / "again", fmt)
    (src2 / name.replace(".csv", "-2.csv")).write_text("x,y\n1,2\n")
    manifest = ingested(fmt, src2, tmp_path / "out2")
    assert manifest.rows_rejected[name.removesuffix(".csv")]["wrong_column_count"] == 2
