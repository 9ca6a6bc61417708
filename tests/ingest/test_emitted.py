"""Emitted tasks spilled by submit bucket come back in canonical order with their incarnations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.google2011.emitted import RECORD, EmittedSpill, submit_order


def records(submit: np.ndarray, job: np.ndarray, index: np.ndarray) -> dict[str, np.ndarray]:
    """Emitted records with the given keys (other fields: the row number, for tracing)."""
    n = len(submit)
    row = np.arange(n, dtype=np.float64)
    out = {name: np.zeros(n, np.int64) if RECORD[name].kind == "i" else row.copy()
           for name in RECORD.names if name != "seq"}
    out.update(submit_s=submit.astype(float), job_id=job, task_index=index)
    return out


def brute_force(parts: list[dict[str, np.ndarray]], sums: pl.DataFrame | None) -> pl.DataFrame:
    """All records in emission order, incarnation = earlier emissions of the key, sorted."""
    frame = pl.concat([pl.DataFrame(p) for p in parts]).with_row_index("seq")
    frame = frame.with_columns(incarnation=pl.int_range(pl.len()).over(
        "job_id", "task_index", order_by="seq").cast(pl.Int64))
    if sums is not None:
        means = sums.group_by("job_id", "task_index").agg(pl.all().sum()).select(
            "job_id", "task_index", cpu_used=pl.col("cpu_s") / pl.col("cpu_dt"),
            mem_used=pl.col("mem_s") / pl.col("mem_dt"))
        frame = frame.join(means, on=["job_id", "task_index"], how="left")
    return frame.sort("submit_s", "job_id", "task_index", "incarnation")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 6), st.integers(0, 3)),
                min_size=1, max_size=120),
       st.integers(1, 4), st.booleans())
def test_buckets_come_back_sorted_with_incarnations(
    tmp_path_factory: object, rows: list[tuple[int, int, int]], n_parts: int, usage: bool,
) -> None:
    root = Path(tmp_path_factory.mktemp("spill"))  # type: ignore[attr-defined]
    arr = np.array(rows, dtype=np.int64)
    chunks = np.array_split(np.arange(len(arr)), n_parts)
    parts = [records(arr[c, 0], arr[c, 1], arr[c, 2]) for c in chunks]
    spill = EmittedSpill(root, bucket_s=7.0, partitions=3)
    for part in parts:
        spill.add(part)
    sums = pl.DataFrame({"job_id": arr[:, 1], "task_index": arr[:, 2],
                         "cpu_s": arr[:, 0] * 0.5, "mem_s": arr[:, 0] * 0.25,
                         "cpu_dt": np.ones(len(arr)), "mem_dt": np.full(len(arr), 2.0)})
    by_partition = {p: sums.filter(pl.col("job_id") % 3 == p) for p in range(3)}
    resubmitted = spill.resolve(by_partition.get if usage else None)
    got = pl.concat(list(spill.buckets()))
    want = brute_force(parts, sums if usage else None)
    assert resubmitted == int((want["incarnation"] > 0).sum())
    assert got["seq"].to_list() == want["seq"].cast(pl.Int64).to_list()
    assert got["incarnation"].to_list() == want["incarnation"].to_list()
    if usage:
        assert got["cpu_used"].to_list() == want["cpu_used"].to_list()
    else:
        assert got["cpu_used"].is_nan().all()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0, 7, -3, 2**50, -(2**50)]),
                          st.integers(0, 4), st.integers(0, 2)), min_size=0, max_size=80))
def test_submit_order_is_the_multi_column_sort(rows: list[tuple[int, int, int, int]]) -> None:
    """Stable numpy passes give polars' (submit_s, job, index, incarnation) order, also for job
    ids too large to pair with the index in one integer."""
    frame = pl.DataFrame(rows, schema={"submit_s": pl.Float64, "job_id": pl.Int64,
                                       "task_index": pl.Int64, "incarnation": pl.Int64},
                         orient="row").with_row_index("row")
    want = frame.sort("submit_s", "job_id", "task_index", "incarnation", "row")["row"]
    got = submit_order(*(frame[c].to_numpy() for c in
                         ("submit_s", "job_id", "task_index", "incarnation")))
    assert got.tolist() == want.to_list()
