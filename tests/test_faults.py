"""File-system faults in every stage, through the CLI: one line on stderr, exit 1, no leftovers.

A full disk is simulated by a writer raising ``OSError(ENOSPC)`` (always) and, where this
machine lets tests mount file systems, also met for real on a tiny full tmpfs; a read-only
file system likewise (tests run as root, so ``chmod`` would not stop a write).
"""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import Result
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.trace.outdir import leftovers
from tests.warehouse.test_load import snapshot

REPO = Path(__file__).resolve().parents[1]

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def cli(*args: object) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_line_error(result: Result, *fragments: str) -> str:
    """Exit 1, exactly one ``tracereplay: error:`` line on stderr, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracereplay: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A generated raw trace, its canonical trace, one run and a warehouse holding it."""
    root = tmp_path_factory.mktemp("world")
    paths = {"raw": root / "raw", "trace": root / "trace", "run": root / "run",
             "db": root / "wh.duckdb"}
    for args in (["generate", paths["raw"], "--machines", "6", "--hours", "1"],
                 ["ingest", "google2011", paths["raw"], paths["trace"]],
                 ["replay", paths["trace"], "--policy", "yarn-uniform", "--out", paths["run"]],
                 ["load", paths["run"], "--db", paths["db"]]):
        assert cli(*args).exit_code == 0, args
    return paths


def stage_args(world: dict[str, Path], stage: str, out: Path) -> list[object]:
    """The CLI arguments of ``stage`` writing to ``out``."""
    return {
        "ingest": ["ingest", "google2011", world["raw"], out],
        "replay": ["replay", world["trace"], "--policy", "yarn-uniform", "--out", out],
        "report": ["report", "--db", world["db"], "--out", out],
        "load": ["load", world["run"], "--db", out],
        "generate": ["generate", out, "--machines", "3", "--hours", "0.5"],
    }[stage]


STAGES = ("ingest", "replay", "report", "load", "generate")


@pytest.mark.parametrize("stage", STAGES)
def test_parent_that_is_a_file(world: dict[str, Path], tmp_path: Path, stage: str) -> None:
    (tmp_path / "file").write_text("not a directory")
    result = cli(*stage_args(world, stage, tmp_path / "file" / "out"))
    assert_one_line_error(result, str(tmp_path / "file"), "Not a directory")
    assert entries(tmp_path) == ["file"]


@pytest.mark.parametrize("stage", ["ingest", "replay", "report", "generate"])
def test_output_that_is_a_file_is_not_replaced(world: dict[str, Path], tmp_path: Path,
                                               stage: str) -> None:
    (tmp_path / "out").write_text("precious")
    assert_one_line_error(cli(*stage_args(world, stage, tmp_path / "out")), "out")
    assert (tmp_path / "out").read_text() == "precious"


# Where each stage writes (patched to fail as a full disk would).
FULL_DISK_WRITERS = {
    "ingest": "pipeline.trace.manifest.Manifest.write",
    "replay": "pipeline.replay.output.write_json",
    "report": "pipeline.report.stage.write_charts",
    "generate": "pipeline.generate.google2011._Generator._write",
}


def raise_enospc(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("stage", sorted(FULL_DISK_WRITERS))
def test_full_disk_is_one_line_and_leaves_nothing(world: dict[str, Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  stage: str) -> None:
    monkeypatch.setattr(FULL_DISK_WRITERS[stage], raise_enospc)
    out = tmp_path / "out"
    assert_one_line_error(cli(*stage_args(world, stage, out)), f"{out}: No space left on device")
    assert entries(tmp_path) == []


def test_full_disk_while_task_runs_is_written_stops_the_replay(
        world: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """task_runs is written on a second thread while the core runs: its error is the
    replay's, on one line, and nothing is left."""
    monkeypatch.setattr("pipeline.replay.output.write_task_runs", raise_enospc)
    out = tmp_path / "out"
    assert_one_line_error(cli(*stage_args(world, "replay", out)),
                          f"{out}: No space left on device")
    assert entries(tmp_path) == []


def test_full_disk_while_a_task_runs_batch_is_encoded_stops_the_replay(
        world: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each task_runs batch is encoded on a thread of its own while the next is built:
    an error there is the replay's too, on one line, and nothing is left."""
    write_table = pq.ParquetWriter.write_table

    def full_on_task_runs(self: pq.ParquetWriter, table: pa.Table, *args: object,
                          **kwargs: object) -> None:
        if "task_id" not in table.column_names:  # (the other tables are written in place)
            return write_table(self, table, *args, **kwargs)
        assert threading.current_thread().name.startswith("task_runs-encode")
        raise_enospc()

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_on_task_runs)
    out = tmp_path / "out"
    assert_one_line_error(cli(*stage_args(world, "replay", out)),
                          f"{out}: No space left on device")
    assert entries(tmp_path) == []


def test_full_disk_during_load_rolls_back(world: dict[str, Path], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise duckdb.IOException(
            'IO Error: Could not write file "wh.duckdb.wal": No space left on device')

    monkeypatch.setattr("pipeline.warehouse.stage._check_loaded", full)
    db = tmp_path / "wh.duckdb"
    line = assert_one_line_error(cli("load", world["run"], "--db", db), str(db),
                                 "No space left on device")
    assert "nothing stored" in line
    assert entries(tmp_path) == []  # a first load that failed leaves no empty warehouse


def test_read_only_output_by_errno(world: dict[str, Path], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    out = tmp_path / "out"
    assert_one_line_error(cli(*stage_args(world, "replay", out)), str(tmp_path),
                          "Read-only file system")


def test_malformed_index_json_is_one_line(world: dict[str, Path], tmp_path: Path) -> None:
    for text, fragment in (("{not json", "unreadable sweep index"),
                           ('{"runs": 5}', "[sweeps]"), ("[1, 2]", "[sweeps]"),
                           ('{"sweeps": {"p": {"runs": [null]}}}', "[sweeps.p.runs]"),
                           ('{"sweeps": {"p": 5}}', "[sweeps.p.runs]")):
        index = tmp_path / "index.json"
        index.write_text(text)
        assert_one_line_error(cli("load", index, "--db", tmp_path / "wh.duckdb"), str(index),
                              fragment)
    assert entries(tmp_path) == ["index.json"]


def test_load_onto_a_json_file_stores_nothing_and_says_so(world: dict[str, Path],
                                                          tmp_path: Path) -> None:
    target = tmp_path / "index.json"
    target.write_text(json.dumps({"runs": []}))
    assert_one_line_error(cli("load", world["run"], "--db", target), str(target),
                          "not a DuckDB file")
    assert json.loads(target.read_text()) == {"runs": []}
    for verb in (["sql", "select 1", "--db", target], ["report", "--db", target, "--out",
                                                       tmp_path / "rep"]):
        assert_one_line_error(cli(*verb), str(target), "not a DuckDB file")


@pytest.mark.parametrize(("where", "error"), [
    ("pipeline.ingest.google2011.spill_connection", "duckdb"),
    ("pipeline.ingest.google2011.write_tasks", "polars"),
])
def test_full_disk_inside_ingest_libraries(world: dict[str, Path], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, where: str,
                                           error: str) -> None:
    """DuckDB and polars report a full disk in their own words; still one line."""
    import polars as pl

    exc = (duckdb.IOException('IO Error: Could not write file "x": No space left on device')
           if error == "duckdb" else pl.exceptions.ComputeError(
               "parquet: underlying IO error: No space left on device (os error 28)"))

    def full(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(where, full)
    out = tmp_path / "trace"
    assert_one_line_error(cli(*stage_args(world, "ingest", out)),
                          f"{out}: No space left on device")
    assert entries(tmp_path) == []


# A stage run in a child process that stops (as if killed) once its output is written.
KILLABLE = """
import sys, time
from pipeline.cli import app
import {module} as target
original = target.{function}
def stalled(*args, **kwargs):
    result = original(*args, **kwargs)
    print("ready", flush=True)
    time.sleep(120)
    return result
target.{function} = stalled
app(sys.argv[1:])
"""
STALL_POINTS = {
    "ingest": ("pipeline.ingest.stage", "validate"),
    "replay": ("pipeline.replay.stage", "_write_metrics"),
    "report": ("pipeline.report.stage", "summary_markdown"),
}


@pytest.mark.parametrize("stage", sorted(STALL_POINTS))
def test_killed_run_leftovers_are_removed_by_the_next_run(world: dict[str, Path],
                                                          tmp_path: Path, stage: str) -> None:
    out = tmp_path / "out"
    module, function = STALL_POINTS[stage]
    script = KILLABLE.format(module=module, function=function)
    args = [str(a) for a in stage_args(world, stage, out)]
    proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    left = [p for p, _, _ in leftovers(out)]
    assert len(left) == 1 and any(left[0].iterdir())  # what a killed run leaves behind
    assert cli(*stage_args(world, stage, out)).exit_code == 0
    assert entries(tmp_path) == ["out"]


# -- real file systems (where mounting is permitted) ------------------------------------------


def _mount(point: Path, options: str) -> bool:
    point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
                          capture_output=True, check=False)
    return done.returncode == 0


def _fill(point: Path) -> None:
    """Write until the file system is full."""
    with (point / "filler").open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted under ``tmp_path`` (skipped where mounting is not permitted)."""
    point = tmp_path / "mnt"
    if not _mount(point, "size=4m"):
        pytest.skip("cannot mount a tmpfs here (needs privileges)")
    yield point
    subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


@pytest.mark.parametrize("stage", STAGES)
def test_really_full_disk(world: dict[str, Path], tmpfs: Path, stage: str) -> None:
    _fill(tmpfs)
    out = tmpfs / "out"
    assert_one_line_error(cli(*stage_args(world, stage, out)), str(out),
                          "No space left on device")
    assert entries(tmpfs) == ["filler"]


def test_really_full_disk_keeps_the_existing_warehouse(world: dict[str, Path],
                                                       tmpfs: Path) -> None:
    db = tmpfs / "wh.duckdb"
    assert cli("load", world["run"], "--db", db).exit_code == 0
    before = snapshot(db)
    replay_dir = tmpfs.parent / "run2"
    assert cli("replay", world["trace"], "--policy", "drf", "--out", replay_dir).exit_code == 0
    _fill(tmpfs)
    assert_one_line_error(cli("load", replay_dir, "--db", db), str(db), "No space left")
    (tmpfs / "filler").unlink()
    assert snapshot(db) == before


@pytest.mark.parametrize("stage", STAGES)
def test_really_read_only(world: dict[str, Path], tmpfs: Path, stage: str) -> None:
    remount = subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], capture_output=True,
                             check=False)
    if remount.returncode:
        pytest.skip("cannot remount read-only here")
    out = tmpfs / "out"
    assert_one_line_error(cli(*stage_args(world, stage, out)), str(out),
                          "Read-only file system")
