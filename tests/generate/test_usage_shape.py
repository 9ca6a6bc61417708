"""Generated task usage: shaped over each run (CPU an AR(1) walk, memory a ramp then flat),
drawn from its own random stream only, and switched on by ``generate --usage``."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.generate import generate
from pipeline.generate import usage as gu

NAMES = ["start", "end", "job", "index", "machine", "cpu", "mem"] + [f"c{k}" for k in range(13)]


def _usage(root: Path) -> pl.DataFrame:
    frames = [pl.read_csv(gzip.decompress(p.read_bytes()), has_header=False, new_columns=NAMES,
                          infer_schema_length=None)
              for p in sorted((root / "task_usage").glob("part-*.csv.gz"))]
    return pl.concat(frames, how="vertical_relaxed")


@pytest.fixture(scope="module")
def with_usage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "u"
    generate(out, "google2011", machines=40, hours=6.0, seed=11, usage=True, rows_per_part=3000)
    return out


def test_other_tables_are_byte_identical_with_and_without_usage(
    with_usage: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    generate(plain, "google2011", machines=40, hours=6.0, seed=11, rows_per_part=3000)
    files = sorted(p.relative_to(plain) for p in plain.rglob("*.csv.gz"))
    assert files and not (plain / "task_usage").exists()
    for rel in files:
        assert (with_usage / rel).read_bytes() == (plain / rel).read_bytes(), rel


def test_cpu_varies_more_than_memory_and_is_correlated(with_usage: Path) -> None:
    usage = _usage(with_usage).sort("job", "index", "start")
    per_task = usage.group_by("job", "index", "machine").agg(
        pl.len().alias("n"), (pl.col("cpu").std() / pl.col("cpu").mean()).alias("cpu_cv"),
        (pl.col("mem").tail(pl.len() - 1).std() / pl.col("mem").tail(pl.len() - 1).mean())
        .alias("mem_cv"),
    ).filter(pl.col("n") >= 8)
    assert per_task.height > 20
    assert per_task["cpu_cv"].median() > 3 * per_task["mem_cv"].median()
    # neighbouring windows of one task are correlated (mean-reverting walk, phi = 0.8)
    log_cpu = usage.filter(pl.col("cpu") > 0).with_columns(pl.col("cpu").log().alias("x"))
    lagged = log_cpu.with_columns(pl.col("x").shift(1).over("job", "index", "machine")
                                  .alias("prev")).drop_nulls("prev")
    centred = lagged.with_columns(
        (pl.col(c) - pl.col(c).mean().over("job", "index", "machine")) for c in ("x", "prev"))
    assert float(np.corrcoef(centred["x"], centred["prev"])[0, 1]) > 0.3


def test_walk_is_stationary_with_mean_one() -> None:
    rng = np.random.default_rng(0)
    group = np.repeat(np.arange(2000), 50)
    walk, state = gu.cpu_walk(rng, group, np.full(2000, np.nan))
    assert walk.mean() == pytest.approx(1.0, abs=0.02)
    assert np.isfinite(state).all()
    again, _ = gu.cpu_walk(rng, np.arange(2000), state)  # continues from the state
    assert again.size == 2000


def test_memory_ramps_up_then_stays_flat() -> None:
    rng = np.random.default_rng(1)
    early = gu.mem_profile(rng, np.full(1000, 10.0))
    late = gu.mem_profile(rng, np.full(1000, 3000.0))
    assert early.mean() < 0.6 < late.min() and late.max() <= 1.0 + gu.MEM_NOISE


def test_cli_usage_flag(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["generate", str(tmp_path / "g"), "--format", "google2011",
                             "--machines", "10", "--hours", "1", "--usage"])
    assert ok.exit_code == 0, ok.output
    assert list((tmp_path / "g" / "task_usage").glob("part-*.csv.gz"))
    off = runner.invoke(app, ["generate", str(tmp_path / "n"), "--format", "google2011",
                              "--machines", "10", "--hours", "1"])
    assert off.exit_code == 0 and not (tmp_path / "n" / "task_usage").exists()
    refused = runner.invoke(app, ["generate", str(tmp_path / "a"), "--format", "alibaba2018",
                                  "--usage"])
    assert refused.exit_code != 0
    assert "--usage" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
