"""tracereplay generate --format google2019: raw v3 layout, deterministic, ingestible."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.generate import GENERATORS, generate
from pipeline.trace.manifest import Manifest
from pipeline.trace.validate import validate


def test_cli_generate_then_ingest_round_trip(tmp_path: Path) -> None:
    raw, trace = tmp_path / "raw", tmp_path / "trace"
    made = CliRunner().invoke(app, ["generate", str(raw), "--format", "google2019",
                                    "--machines", "20", "--hours", "2"])
    assert made.exit_code == 0, made.output
    names = sorted(p.name for p in raw.iterdir())
    assert "instance_events-000000000000.json.gz" in names and "generated.json" in names
    first = json.loads(gzip.decompress(
        (raw / "instance_events-000000000000.json.gz").read_bytes()).splitlines()[0])
    assert isinstance(first["time"], str) and set(first["resource_request"]) == {"cpus",
                                                                                  "memory"}
    done = CliRunner().invoke(app, ["ingest", "google2019", str(raw), str(trace)])
    assert done.exit_code == 0, done.output
    assert validate(trace).ok, validate(trace).first()
    m = Manifest.read(trace)
    assert m.window_end_s == 7200.0
    tasks = pl.read_parquet(trace / "tasks.parquet")
    assert tasks.height > 100 and set(tasks["end_event"]) >= {"finished", "censored"}
    assert (tasks["trace_attempts"] > 1).any() and tasks["depends_on"].is_not_null().any()
    assert m.rows["task_usage"] > 0 and m.rows["machines"] == 20
    summary = json.loads(made.output)
    assert 0.3 < summary["offered_load"] < 1.0


def test_same_arguments_same_bytes(tmp_path: Path) -> None:
    assert "google2019" in GENERATORS
    generate(tmp_path / "a", "google2019", machines=10, hours=1.0, seed=3)
    generate(tmp_path / "b", "google2019", machines=10, hours=1.0, seed=3)
    generate(tmp_path / "c", "google2019", machines=10, hours=1.0, seed=4)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert ((tmp_path / "a" / "instance_events-000000000000.json.gz").read_bytes()
            != (tmp_path / "c" / "instance_events-000000000000.json.gz").read_bytes())
