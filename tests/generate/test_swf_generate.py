"""generate --format swf: a Standard Workload Format log that ingests whole, the same bytes
for the same arguments, at about the load asked for."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.generate import generate
from pipeline.ingest.stage import ingest
from pipeline.trace.validate import validate


def test_generated_log_ingests_with_every_line_accounted_for(tmp_path: Path) -> None:
    summary = generate(tmp_path / "a", "swf", machines=64, hours=48, seed=2, load=0.7)
    generate(tmp_path / "b", "swf", machines=64, hours=48, seed=2, load=0.7)
    log = (tmp_path / "a" / "synthetic.swf").read_bytes()
    assert log == (tmp_path / "b" / "synthetic.swf").read_bytes()
    assert b"; MaxProcs: 64" in log
    manifest = ingest("swf", tmp_path / "a", tmp_path / "t")
    assert validate(tmp_path / "t").ok
    n = summary["rows"]["swf"]
    assert manifest.input_rows["swf"] == n and not manifest.rows_rejected
    assert manifest.dropped["tasks"]["run_time_missing"] == summary["cancelled"]
    tasks = pl.read_parquet(tmp_path / "t" / "tasks.parquet")
    assert tasks["cpu"].max() <= 64 and (tasks["requested_s"] >= tasks["duration_s"]).all()
    offered = float((tasks["cpu"] * tasks["duration_s"]).sum()) / (64 * 48 * 3600)
    assert 0.5 < offered < 0.9  # about the load asked for (cancelled jobs left out)
