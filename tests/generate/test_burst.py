"""A tenant's burst in the generated Google 2011 trace: where the options say, deterministic,
and no change at all to a trace generated without one."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import UsageError
from pipeline.generate import generate

HOURS = 4.0


def submits_by_user(root: Path) -> pl.DataFrame:
    """Job SUBMIT rows (window seconds, user) of a generated trace."""
    frames = []
    for part in sorted((root / "job_events").glob("*.csv.gz")):
        with gzip.open(part) as fh:
            text = fh.read()
        if text:
            frame = pl.read_csv(text, has_header=False, infer_schema_length=0)
            frames.append(frame.select(
                pl.col(frame.columns[0]).cast(pl.Int64).alias("time"),
                pl.col(frame.columns[3]).cast(pl.Int64).alias("type"),
                pl.col(frame.columns[4]).alias("user")))
    rows = pl.concat(frames).filter((pl.col("type") == 0) & (pl.col("time") > 0))
    return rows.select(((pl.col("time") - 600_000_000) / 1e6).alias("t_s"), "user")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("burst")
    args = {"machines": 60, "hours": HOURS, "seed": 4, "load": 0.6}
    burst = {"burst_load": 1.0, "burst_start_h": 1.0, "burst_hours": 1.5,
             "burst_user": "burst-tenant"}
    generate(root / "plain", "google2011", **args)
    generate(root / "burst", "google2011", **args, **burst)
    generate(root / "again", "google2011", **args, **burst)
    return {name: root / name for name in ("plain", "burst", "again")}


def test_the_burst_user_submits_only_inside_the_burst(traces: dict[str, Path]) -> None:
    subs = submits_by_user(traces["burst"])
    mine = subs.filter(pl.col("user") == "burst-tenant")
    assert mine.height > 10
    assert mine["t_s"].min() >= 3600.0 and mine["t_s"].max() < 2.5 * 3600.0
    assert "burst-tenant" not in set(submits_by_user(traces["plain"])["user"])


def test_the_burst_offers_the_load_it_says(traces: dict[str, Path]) -> None:
    """Submissions per hour inside the burst are well above the plain trace's."""
    plain, burst = submits_by_user(traces["plain"]), submits_by_user(traces["burst"])
    inside = (pl.col("t_s") >= 3600.0) & (pl.col("t_s") < 2.5 * 3600.0)
    assert burst.filter(inside).height > 1.5 * plain.filter(inside).height
    outside = ~inside & (pl.col("t_s") < HOURS * 3600)
    assert burst.filter(outside).height == plain.filter(outside).height  # the rest unchanged


def test_a_burst_trace_is_deterministic(traces: dict[str, Path]) -> None:
    for path in sorted(traces["burst"].rglob("*.gz")):
        twin = traces["again"] / path.relative_to(traces["burst"])
        assert path.read_bytes() == twin.read_bytes(), path


@pytest.mark.parametrize(("options", "field"), [
    ({"burst_load": -0.5}, "--burst-*"), ({"burst_load": 0.5, "burst_hours": 0}, "--burst-*"),
    ({"burst_load": 0.5, "burst_start_h": 9.0}, "--burst-start-h"),
])
def test_impossible_bursts_are_usage_errors(tmp_path: Path, options: dict, field: str) -> None:
    with pytest.raises(UsageError) as err:
        generate(tmp_path / "x", "google2011", machines=5, hours=HOURS, **options)
    assert err.value.field == field and not (tmp_path / "x").exists()
