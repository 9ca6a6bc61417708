"""One pass over a run's ``task_runs`` in batches, so metrics take memory that does not grow
with the trace's length.

A full Google 2011 replay writes about 48 M task rows: read whole, the columns the metrics
need would take some 8 GB.  :class:`TaskScan` instead reads ``task_runs.parquet`` a batch of
rows at a time (only the columns asked for) and, per batch, evaluates

- *totals*: functions of a batch whose values add up over batches (counts, sums of
  seconds); they are added in file order;
- *kept* columns: the values a quantile needs (one float per task that has one: the waits,
  the preemption counts of preempted tasks, ...), concatenated;
- *job partials*: per job, whether every task finished, its latest end and earliest submit,
  combined across batches (one row per job, however its tasks spread over batches).

Why not polars' streaming engine: it adds the partial sums of a float column in whatever
order its threads finish, so the same run could give metrics that differ in their last bits
from one replay to the next (measured: 3 distinct sums in 8 runs of one query).  Here every
batch is aggregated eagerly and batches are combined in file order: the same file gives the
same metrics, byte for byte.  A :class:`polars.DataFrame` source (tests, small runs) is one
batch, so its totals are exactly the eager values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from pipeline.metrics.tasks import combine_jobs, job_partials

BATCH_ROWS = 1 << 19

Total = Callable[[pl.DataFrame], Any]  # a number, or a tuple of numbers
Kept = Callable[[pl.DataFrame], pl.Series]


@dataclass
class ScanResult:
    """What one pass gathered: totals by name, kept values by name, job partials."""

    totals: dict[str, np.ndarray]  # float64, shaped as the total's values
    kept: dict[str, np.ndarray]
    jobs: pl.DataFrame  # job_id, done (all finished), end_s (max), submit_s (min)
    touched: pl.DataFrame  # job_id of jobs some task of which matched ``touch``


class TaskScan:
    """``task_runs`` as a Parquet file read in batches, or a DataFrame (one batch)."""

    def __init__(self, source: pl.DataFrame | Path, batch_rows: int | None = None) -> None:
        self.source = source
        self.batch_rows = batch_rows or BATCH_ROWS
        if isinstance(source, pl.DataFrame):
            self.columns = list(source.columns)
        else:
            self.columns = list(pq.read_schema(source).names)

    def lazy(self) -> pl.LazyFrame:
        """The source as a LazyFrame (a Parquet scan: nothing read until collected)."""
        if isinstance(self.source, pl.DataFrame):
            return self.source.lazy()
        return pl.scan_parquet(self.source)

    def batches(self, columns: list[str]) -> Iterator[pl.DataFrame]:
        """The source's ``columns`` (those it has), a batch of rows at a time, in file order."""
        have = [c for c in columns if c in self.columns]
        if isinstance(self.source, pl.DataFrame):
            yield self.source.select(have)
            return
        rows = pq.ParquetFile(self.source).metadata.num_rows
        scan = pl.scan_parquet(self.source).select(have)
        for lo in range(0, rows, self.batch_rows):  # (polars decodes a slice's row groups
            yield scan.slice(lo, self.batch_rows).collect()  # on all cores, in row order)

    def run(self, columns: list[str], totals: Mapping[str, Total],
            kept: Mapping[str, Kept], touch: pl.Expr | None = None) -> ScanResult:
        """Evaluate every total and kept column over all batches, with the job partials."""
        sums: dict[str, Any] = dict.fromkeys(totals, 0.0)
        parts: dict[str, list[np.ndarray]] = {name: [] for name in kept}
        jobs = _JOB_SCHEMA.clear()
        touched = pl.DataFrame(schema={"job_id": pl.String})
        for batch in self.batches(columns):
            for name, fn in totals.items():
                sums[name] = sums[name] + np.asarray(fn(batch), dtype=np.float64)
            for name, fn in kept.items():
                parts[name].append(fn(batch).to_numpy())
            if "job_id" in batch.columns:
                jobs = combine_jobs(pl.concat([jobs, job_partials(batch)]))
                if touch is not None:
                    touched = pl.concat([touched, batch.filter(touch).select(
                        pl.col("job_id").cast(pl.String))]).unique()
        return ScanResult({k: np.asarray(v, np.float64) for k, v in sums.items()},
                          {name: np.concatenate(p) if p else np.zeros(0)
                           for name, p in parts.items()}, jobs, touched)


_JOB_SCHEMA = pl.DataFrame(schema={"job_id": pl.String, "done": pl.Boolean,
                                   "end_s": pl.Float64, "submit_s": pl.Float64,
                                   "first_start_s": pl.Float64, "start_s": pl.Float64})
