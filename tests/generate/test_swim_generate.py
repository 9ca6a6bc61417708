"""The SWIM generator: the published layout, the FB-2010 shape, determinism, and the round trip
generate -> ingest -> replay through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.generate import generate
from pipeline.generate.swim import FILE
from pipeline.ingest.window import GENERATED
from pipeline.trace.io import read_table
from pipeline.trace.manifest import Manifest


def _cli(*args: str) -> dict:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _fields(root: Path) -> list[list[str]]:
    return [line.split("\t") for line in (root / FILE).read_text().splitlines()]


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A day for 20 machines (SWIM's shape holds at any size: bytes scale with machines)."""
    out = tmp_path_factory.mktemp("swim") / "day"
    return out, generate(out, "swim", machines=20, hours=24.0, seed=11)


def test_layout_is_swims_fb2010_with_paths(day: tuple[Path, dict]) -> None:
    root, summary = day
    assert sorted(p.name for p in root.iterdir()) == sorted([FILE, GENERATED])
    rows = _fields(root)
    assert len(rows) == summary["jobs"] == summary["rows"]["workload"]
    assert {len(r) for r in rows} == {9} and {(r[7], r[8]) for r in rows} == {("", "")}
    assert [r[0] for r in rows] == [f"job{k}" for k in range(len(rows))]
    submit = np.array([int(r[1]) for r in rows])
    gaps = np.array([int(r[2]) for r in rows])
    assert (np.diff(submit) >= 0).all() and (gaps == np.diff(submit, prepend=0)).all()
    assert submit.max() < 24 * 3600
    numbers = [int(r[6].removeprefix("inputPath")) for r in rows]
    first_use = list(dict.fromkeys(numbers))
    assert first_use == list(range(1, len(first_use) + 1))  # numbered in order of first use


def test_heavy_tailed_sizes_and_popular_paths(day: tuple[Path, dict]) -> None:
    root, summary = day
    frame = pl.DataFrame([r[1:7] for r in _fields(root)], orient="row", schema=[
        "submit", "gap", "input", "shuffle", "output", "path"]).with_columns(
        pl.col("input", "shuffle", "output").cast(pl.Int64))
    inp = np.sort(frame["input"].to_numpy())[::-1]
    assert np.median(inp) < 0.01 * inp.mean()  # most jobs tiny ...
    assert inp[: len(inp) // 100].sum() > 0.5 * inp.sum()  # ... 1 % of them hold most bytes
    map_only = (frame["shuffle"] == 0).mean()
    assert 0.25 < map_only < 0.42  # [S] a third
    per_path = frame.group_by("path").agg(pl.len(), pl.col("input").n_unique().alias("sizes"))
    assert (per_path["sizes"] == 1).all()  # a path's jobs read its size
    assert 0.6 < per_path.height / frame.height < 0.75  # [S] 0.675 of jobs read a new path
    assert per_path["len"].max() > 20 * per_path["len"].median()
    assert 0.4 < summary["offered_load"] < 0.9  # load 0.65 on average


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    args = {"machines": 12, "hours": 2.0, "load": 0.5}
    generate(tmp_path / "a", "swim", seed=4, **args)
    generate(tmp_path / "b", "swim", seed=4, **args)
    generate(tmp_path / "c", "swim", seed=5, **args)
    for name in (FILE, GENERATED):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / FILE).read_bytes() != (tmp_path / "c" / FILE).read_bytes()


def test_generate_ingest_replay_round_trip(tmp_path: Path) -> None:
    raw, trace, run = tmp_path / "raw", tmp_path / "trace", tmp_path / "run"
    summary = _cli("generate", str(raw), "--format", "swim", "--machines", "16", "--hours",
                   "1", "--seed", "2")
    ingested = _cli("ingest", "swim", str(raw), str(trace), "--no-progress")
    assert ingested["input_rows"] == {"workload": summary["jobs"]}
    assert ingested["rejected"] == {} and ingested["rows"]["machines"] == 16
    manifest = Manifest.read(trace)
    assert (manifest.window_start_s, manifest.window_end_s) == (0.0, 3600.0)
    assert GENERATED in manifest.window_source and GENERATED in manifest.notes["cluster"]
    assert manifest.notes["scaling"].startswith("bytes x 16/16")
    tasks = pl.from_arrow(read_table(trace, "tasks"))
    inputs = sum(int(r[3]) for r in _fields(raw)) / 2**20
    assert tasks.filter(pl.col("task_kind") == "map")["input_mb"].sum() == pytest.approx(inputs)
    shared = tasks.filter(pl.col("task_kind") == "map").group_by("input_file").agg(
        pl.col("job_id").n_unique().alias("jobs"))
    assert shared["jobs"].max() > 1  # jobs share input files
    result = _cli("replay", str(trace), "--policy", "yarn-uniform", "--out", str(run))
    metrics = result["metrics"]
    assert metrics["tasks_finished"] > 0.5 * tasks.height
    assert metrics["tasks_unschedulable"] == 0
    task_runs = pl.read_parquet(run / "task_runs.parquet")
    assert task_runs.height == tasks.height
