"""Google 2011 ``task_usage`` -> per-task mean usage and the canonical ``task_usage`` table.

Each raw row is a measurement window (normally 5 minutes) of one task on one machine:
``start``/``end`` in trace µs, ``cpu_rate`` (cores, normalized) and ``canonical_mem``
(normalized).  Parts are read one at a time; each is reduced to partial sums for the means
(appended to the key partition of their jobs, :mod:`.emitted`, which reduces them) and
written as scratch samples; the whole-table steps run in DuckDB on the scratch files
(:func:`place_samples`, memory limit and spill), so memory does not grow with the trace.

Means (unchanged): ``cpu_used``/``mem_used`` are the time-weighted means over every window
with a positive interval of the (job, task index); all incarnations share them.

Segments: a window belongs to the incarnation of the same (job, task index) whose recorded
run ``[recorded_start_s, recorded_start_s + duration_s]`` it overlaps (the one it overlaps
most, should it touch two); its times become seconds from ``recorded_start_s``.  Counted:

- rejected raw rows: ``nonpositive_interval`` (end <= start, or end after the window),
  ``negative_usage`` (cpu_rate or canonical_mem below 0), ``missing_usage`` (either empty),
  ``unknown_task`` (no emitted task has that job and index), ``outside_task_life`` (no
  recorded run overlaps the window: an earlier, evicted attempt, say),
  ``overlapping_sample`` (wholly inside an earlier window of the same task);
- repairs of emitted rows (``repaired["task_usage"]``): ``clipped_to_task_life`` (window cut
  to the recorded run), ``mem_above_request_clipped`` (memory above the task's request, cut
  to it: a container above its memory limit is killed, so such usage cannot persist),
  ``cpu_above_machine_clipped`` (cpu above the largest machine, cut to it; cpu above the
  request is legitimate and kept), ``overlap_trimmed`` (start moved to the end of the
  earlier overlapping window of the same task: the earlier one is kept).

Rows "used" are those emitted as segments; the means read the rejected ones too, except
those rejected while parsing, ``nonpositive_interval`` and ``negative_usage``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from pipeline.ingest.finalize import write_query
from pipeline.ingest.google2011.emitted import PARTITIONS, append_grouped
from pipeline.ingest.google2011.tables import TIME_AFTER_WINDOW, seconds
from pipeline.trace.manifest import Ledger

MEANS_SCHEMA = {"job_id": pl.Int64, "task_index": pl.Int64, "cpu_s": pl.Float64,
                "mem_s": pl.Float64, "cpu_dt": pl.Float64, "mem_dt": pl.Float64}
SUMS = np.dtype([(name, "i8" if dtype == pl.Int64 else "f8")
                 for name, dtype in MEANS_SCHEMA.items()])
SAMPLES_SCHEMA = {"job_id": pl.Int64, "task_index": pl.Int64, "start_s": pl.Float64,
                  "end_s": pl.Float64, "cpu": pl.Float64, "mem": pl.Float64,
                  "part": pl.Int64, "line": pl.Int64}
NOTE = ("task_usage: one segment per 5-minute window inside the recorded run of its task, "
        "times relative to recorded_start_s; rows_used counts segments emitted, "
        "rows_rejected why the others were not (cpu_used/mem_used still average every window "
        "with a positive interval and non-negative usage of the job and task index)")


def reduce_part(frame: pl.DataFrame, k: int, scratch: Path, ledger: Ledger) -> None:
    """Write part ``k``'s partial sums (means) and its usable windows (samples)."""
    frame = frame.with_columns(dt=(pl.col("end") - pl.col("start")) / 1e6)
    bad = ~(pl.col("dt") > 0) | (pl.col("end") >= TIME_AFTER_WINDOW)
    ledger.reject("task_usage", "nonpositive_interval", int(frame.select(bad.sum()).item()))
    frame = frame.filter(~bad)
    negative = ((pl.col("cpu_rate") < 0) | (pl.col("canonical_mem") < 0)).fill_null(False)
    ledger.reject("task_usage", "negative_usage", int(frame.select(negative.sum()).item()))
    frame = frame.filter(~negative)
    append_sums(frame.group_by("job_id", "task_index").agg(
        cpu_s=(pl.col("cpu_rate") * pl.col("dt")).sum(),
        mem_s=(pl.col("canonical_mem") * pl.col("dt")).sum(),
        cpu_dt=pl.col("dt").filter(pl.col("cpu_rate").is_not_null()).sum(),
        mem_dt=pl.col("dt").filter(pl.col("canonical_mem").is_not_null()).sum(),
    ), scratch / "usage")
    missing = pl.col("cpu_rate").is_null() | pl.col("canonical_mem").is_null()
    ledger.reject("task_usage", "missing_usage", int(frame.select(missing.sum()).item()))
    frame.filter(~missing).select(
        "job_id", "task_index", start_s=seconds(pl.col("start")), end_s=seconds(pl.col("end")),
        cpu=pl.col("cpu_rate"), mem=pl.col("canonical_mem"), part=pl.lit(k, pl.Int64),
        line=pl.col("_line"),
    ).write_parquet(scratch / "samples" / f"samples-{k:05d}.parquet")


def append_sums(sums: pl.DataFrame, root: Path) -> None:
    """Append one part's partial sums to the file of their jobs' key partition."""
    rows = np.empty(sums.height, SUMS)
    for name in MEANS_SCHEMA:
        rows[name] = sums[name].to_numpy()
    append_grouped(rows, rows["job_id"] % PARTITIONS, lambda p: root / f"sums-{p:03d}.bin")


def read_sums(root: Path, p: int) -> pl.DataFrame | None:
    """The partial sums of key partition ``p`` (None: no usage row of its jobs)."""
    path = root / f"sums-{p:03d}.bin"
    if not path.exists():
        return None
    rows = np.fromfile(path, SUMS)
    return pl.DataFrame({name: rows[name] for name in MEANS_SCHEMA})


def ensure_nonempty(scratch: Path) -> None:
    """A typed empty samples file where no part wrote any (keeps the SQL's globs valid)."""
    if not any((scratch / "samples").iterdir()):
        pl.DataFrame(schema=SAMPLES_SCHEMA).write_parquet(scratch / "samples" / "empty.parquet")


# Windows matched to the recorded run they overlap most (needs table ``emitted``).
PLACED_SQL = """
CREATE TEMP TABLE usage_placed AS
SELECT s.job_id, s.task_index, e.incarnation, s.part, s.line,
       greatest(s.start_s - e.recorded_start_s, 0.0) AS start_s,
       least(s.end_s - e.recorded_start_s, e.duration_s) AS end_s,
       s.start_s < e.recorded_start_s OR s.end_s - e.recorded_start_s > e.duration_s
           AS clipped,
       least(s.cpu, {max_cpu}) AS cpu, s.cpu > {max_cpu} AS cpu_clipped,
       least(s.mem, e.mem) AS mem, s.mem > e.mem AS mem_clipped
FROM read_parquet('{samples}/*.parquet') s
JOIN emitted e ON e.job_id = s.job_id AND e.task_index = s.task_index
    AND s.start_s < e.recorded_start_s + e.duration_s AND s.end_s > e.recorded_start_s
QUALIFY row_number() OVER (PARTITION BY s.part, s.line ORDER BY
    least(s.end_s, e.recorded_start_s + e.duration_s) - greatest(s.start_s, e.recorded_start_s)
    DESC, e.incarnation) = 1
"""
UNKNOWN_SQL = """
SELECT count(*) FROM read_parquet('{samples}/*.parquet') s
ANTI JOIN (SELECT DISTINCT job_id, task_index FROM emitted) e USING (job_id, task_index)
"""
# The earlier window of a task is kept; a later one starts where the earlier ones end.
TRIMMED_SQL = """
CREATE TEMP TABLE usage_trimmed AS
SELECT * EXCLUDE (prev_end), greatest(start_s, coalesce(prev_end, start_s)) AS start_s2,
       coalesce(prev_end > start_s, false) AS trimmed
FROM (SELECT *, max(end_s) OVER (PARTITION BY job_id, task_index, incarnation
                                 ORDER BY start_s, part, line
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
      FROM usage_placed)
"""
COUNTS_SQL = """
SELECT count(*) FILTER (start_s2 >= end_s) AS dropped,
       count(*) FILTER (start_s2 < end_s) AS kept,
       count(*) FILTER (start_s2 < end_s AND trimmed) AS trimmed,
       count(*) FILTER (start_s2 < end_s AND clipped) AS clipped,
       count(*) FILTER (start_s2 < end_s AND cpu_clipped) AS cpu_clipped,
       count(*) FILTER (start_s2 < end_s AND mem_clipped) AS mem_clipped
FROM usage_trimmed
"""
# Rows follow the tasks table's order (TASKS_SQL's ORDER BY), then start_s.
OUT_SQL = """
SELECT CAST(t.job_id AS VARCHAR) || '-' || CAST(t.task_index AS VARCHAR)
        || CASE WHEN t.incarnation > 0 THEN '.' || CAST(t.incarnation AS VARCHAR) ELSE '' END
        AS task_id,
       u.start_s2 AS start_s, u.end_s, u.cpu, u.mem
FROM usage_trimmed u JOIN emitted t USING (job_id, task_index, incarnation)
WHERE u.start_s2 < u.end_s
ORDER BY t.submit_s, t.job_id, t.task_index, t.incarnation, u.start_s2
"""


def place_samples(
    con: duckdb.DuckDBPyConnection, samples: Path, out: Path, ledger: Ledger,
    max_cpu: float | None,
) -> None:
    """Write canonical ``task_usage`` from the scratch samples; count every window's fate."""
    cap = "'infinity'::DOUBLE" if max_cpu is None else repr(float(max_cpu))
    total = con.execute(f"SELECT count(*) FROM read_parquet('{samples}/*.parquet')").fetchall()[0]
    unknown = con.execute(UNKNOWN_SQL.format(samples=samples)).fetchall()[0]
    con.execute(PLACED_SQL.format(samples=samples, max_cpu=cap))
    placed = con.execute("SELECT count(*) FROM usage_placed").fetchall()[0]
    con.execute(TRIMMED_SQL)
    dropped, kept, trimmed, clipped, cpu_clipped, mem_clipped = con.execute(
        COUNTS_SQL).fetchall()[0]
    ledger.reject("task_usage", "unknown_task", int(unknown[0]))
    ledger.reject("task_usage", "outside_task_life", int(total[0] - unknown[0] - placed[0]))
    ledger.reject("task_usage", "overlapping_sample", int(dropped))
    ledger.use("task_usage", int(kept))
    for reason, n in (("overlap_trimmed", trimmed), ("clipped_to_task_life", clipped),
                      ("cpu_above_machine_clipped", cpu_clipped),
                      ("mem_above_request_clipped", mem_clipped)):
        ledger.repair("task_usage", reason, int(n))
    write_query(con, OUT_SQL, out, "task_usage")
