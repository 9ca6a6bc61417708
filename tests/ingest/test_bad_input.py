"""Bad raw input: a clear error (file, line, field, reason) or a repair counted by reason."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.errors import TraceError
from pipeline.ingest.stage import ingest
from pipeline.trace.io import read_table
from tests.ingest.google_raw import job, task, write_part

SUBMIT, SCHEDULE, FINISH = 0, 1, 4


def good_source(root: Path) -> Path:
    write_part(root, "job_events", [job(1, 1, SUBMIT)])
    write_part(root, "task_events", [task(1, 1, 0, SUBMIT), task(2, 1, 0, SCHEDULE, 5),
                                     task(9, 1, 0, FINISH, 5)])
    return root


def test_malformed_rows_are_counted_with_file_and_line(tmp_path: Path) -> None:
    src = good_source(tmp_path / "raw")
    path = src / "task_events" / "part-00000-of-00001.csv.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    lines.insert(1, "1,2,3")                                     # wrong column count
    lines.insert(2, lines[0].replace(",1,0,", ",x1,0,", 1))       # non-numeric job id
    lines.insert(3, "," + lines[0].split(",", 1)[1])               # empty mandatory time
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    manifest = ingest("google2011", src, tmp_path / "out")
    assert manifest.rows_rejected["task_events"] == {
        "bad_number:job_id": 1, "missing_value:time": 1, "wrong_column_count": 1}
    assert manifest.input_rows["task_events"] == 6
    example = manifest.examples[0]
    assert example["path"] == "task_events/part-00000-of-00001.csv.gz" and example["line"] == 2
    assert manifest.rows["tasks"] == 1


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_unreadable_part_is_a_clear_error(tmp_path: Path, damage: str) -> None:
    src = good_source(tmp_path / "raw")
    path = src / "task_events" / "part-00000-of-00001.csv.gz"
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "empty": b"",
                      "garbage": b"\x1f\x8b" + b"nonsense" * 10}[damage])
    with pytest.raises(TraceError) as err:
        ingest("google2011", src, tmp_path / "out")
    assert "part-00000-of-00001.csv.gz" in str(err.value)


def test_missing_required_table_names_it(tmp_path: Path) -> None:
    src = tmp_path / "raw"
    write_part(src, "job_events", [job(1, 1, SUBMIT)])
    with pytest.raises(TraceError, match="task_events"):
        ingest("google2011", src, tmp_path / "out")


def test_failed_ingest_keeps_the_earlier_good_output(tmp_path: Path) -> None:
    src = good_source(tmp_path / "raw")
    out = tmp_path / "out"
    ingest("google2011", src, out)
    before = read_table(out, "tasks")
    (src / "task_events" / "part-00000-of-00001.csv.gz").write_bytes(b"\x1f\x8bbroken")
    with pytest.raises(TraceError):
        ingest("google2011", src, out)
    assert read_table(out, "tasks").equals(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "raw"]  # no temp dirs left


def test_cli_reports_one_line_and_nonzero_exit(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ingest", "google2011", str(tmp_path / "nope"),
                                      str(tmp_path / "out")])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "source directory not found" in result.output
    result = CliRunner().invoke(app, ["ingest", "nosuchformat", str(tmp_path), str(tmp_path)])
    assert result.exit_code == 1 and "unknown trace format" in result.output


def test_cli_ingest_and_validate(tmp_path: Path) -> None:
    src = good_source(tmp_path / "raw")
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "google2011", str(src), str(tmp_path / "o")])
    assert result.exit_code == 0
    result = runner.invoke(app, ["validate", str(tmp_path / "o")])
    assert result.exit_code == 0 and '"ok": true' in result.output
