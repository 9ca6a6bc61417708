"""SWIM Facebook MapReduce workloads (FB-2009, FB-2010) -> canonical trace.

Source: SWIMProjectUCB/SWIM ``workloadSuite/`` (README, ``GenerateReplayScript.java``) and the
SWIM wiki "Workloads repository".  A workload file is tab-separated, one job per row, no
header: ``job id``, ``submit_time_seconds`` (from the workload start), ``inter_job_submit_gap
_seconds``, ``map_input_bytes``, ``shuffle_bytes``, ``reduce_output_bytes`` and, in
``..._withInputPaths_...`` files, ``anonymized_input_path`` (the published FB-2010 file ends
every row with two more, empty, tab fields).  Each file is one day synthesized by SWIM from 24
randomly sampled hours of the real Facebook job history.

Mapping decisions (what, why):

- files: every ``*.tsv`` (or ``*.tsv.gz``) directly under the source directory is a workload,
  and exactly one is read: two files are two different days (and FB-2009 and FB-2010 two
  different clusters), so mixing them into one window would describe no real cluster.  Put
  one workload per directory.
- rows: a row has 6 fields, or 7 with the input path; fields after the 7th must be empty (the
  FB-2010 file's trailing tabs).  A file carries input paths when most of its rows do; then a
  row without one is rejected (``missing_value:input_path``), and in a file without paths a
  row with a 7th field is ``wrong_column_count``.  Like every adapter
  (:mod:`pipeline.ingest.csvparts`), bad rows are rejected and counted by reason with file and
  line (``wrong_column_count``, ``missing_value:F``, ``bad_number:F`` for a value that is not
  a whole number, ``negative_value:F``, ``not_utf8``, ``duplicate_job_id`` for a repeated job
  id after its first row); the ingest goes on, and stops with a one-line error only when no
  row is usable.  ``submit_time_seconds`` decides when a job arrives; a gap that disagrees
  with it is counted (repair ``jobs: gap_disagrees_with_submit_time``), never used.
- jobs: users are not published, so each job is its own user (user = job id, as the Alibaba
  adapters do); queue null.  Jobs are ordered by submit time (then file line).
- tasks: maps and reduces as SWIM's replay derives them, with compute durations
  (:mod:`pipeline.ingest.swim_tasks`: block size, caps, rates and their sources).  Map ids
  ``JOB/mK``, reduce ids ``JOB/rK``; ``task_kind`` ``map``/``reduce``; maps carry ``input_mb``
  and ``input_file`` = the job's anonymized input path (jobs reading the same path share one
  file; null for FB-2009, which publishes none: the dfs model then gives each job its own
  file).  Every reduce depends on all maps of its job: listed directly when a job has at most
  ``direct_limit`` maps, else through one synthetic barrier task ``JOB/barrier`` (cpu 0, mem 0,
  ``synthetic`` true) that depends on all the maps, the convention of
  :mod:`pipeline.ingest.fuxi_sql`, so edges grow as maps + reduces, not their product.
- machines: SWIM publishes none.  The adapter builds the replay cluster: ``machines`` (default:
  the source cluster) machines of 8 cores and 16 GiB, one rack per ``machines_per_rack`` (40:
  YARN's ``node-locality-delay`` default of 40 is documented as "approximately number of nodes
  in one rack").  Source cluster: 600 machines for FB-2009 and 3,000 for FB-2010 (SWIM wiki and
  README; the delay-scheduling paper's 600-node Facebook cluster); chosen from
  ``generated.json`` (a generated workload states its machines), else the file name
  (``FB-2009``/``FB-2010``), else 3,000 when the file has input paths (only FB-2010 has
  them) and 600 otherwise (SWIM's first ``samples_24_times_1hr_*.tsv`` are FB-2009).  With a
  smaller (or larger) replay cluster the bytes scale as SWIM scales them.
- resources: a task is one Hadoop slot, 1 core and 2 GiB, so a machine runs 8 tasks at once
  ([M] Facebook's Hadoop nodes of the time had 8 cores, Hadoop wiki PoweredBy; the
  delay-scheduling analysis takes L = 8 slots per node).
- window: 0 to one day (86,400 s: 24 samples of an hour), extended to the last submission when
  that is later (the published FB-2009 and FB-2010 files end at 86,404 s and 86,407 s);
  ``generated.json`` states a generated workload's own window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.errors import TraceError, UsageError
from pipeline.ingest import swim_tasks as st
from pipeline.ingest.base import require_tables, single_file
from pipeline.ingest.csvparts import BLOCK_BYTES, INT, STR, Column, RawTable
from pipeline.ingest.fuxi_sql import DIRECT_LIMIT
from pipeline.ingest.rawfile import stored_blocks
from pipeline.ingest.window import GENERATED, set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest, SourceFile

DAY_S = 86_400.0
FB2009_MACHINES = 600
FB2010_MACHINES = 3000
MACHINES_PER_RACK = 40
MACHINE_CORES, MACHINE_MEM_GIB = 8.0, 16.0

WORKLOAD = RawTable("workload", "*.tsv*", (
    Column("job_id", STR, True), Column("submit_time_s", INT, True, True),
    Column("inter_job_gap_s", INT, True, True), Column("map_input_bytes", INT, True, True),
    Column("shuffle_bytes", INT, True, True), Column("reduce_output_bytes", INT, True, True),
    Column("input_path", STR),
))
NUMBERS = [c.name for c in WORKLOAD.columns if c.dtype == INT]
NOTES = {
    "users": "not published: each job is its own user (user = job_id), queue null",
    "durations": "TASK_OVERHEAD_S + bytes x rates (pipeline.ingest.swim_tasks), a node-local "
                 "read of input_mb included; the replay adds the extra of a remote read",
    "not_published": "task counts, durations, users, queues, machines: derived as documented",
}


class Swim:
    """SWIM workload files (FB-2009, FB-2010): one job per row; maps and reduces derived."""

    name: ClassVar[str] = "swim"
    summary: ClassVar[str] = ("SWIM Facebook MapReduce workloads (FB-2009: 600 machines, "
                              "FB-2010: 3,000; one synthesized day)")
    tables: ClassVar[tuple[RawTable, ...]] = (WORKLOAD,)

    def __init__(self, machines: int | None = None, source_machines: int | None = None,
                 machines_per_rack: int = MACHINES_PER_RACK, block_mib: int = st.BLOCK_MIB,
                 direct_limit: int = DIRECT_LIMIT) -> None:
        self.machines = machines
        self.source_machines = source_machines
        self.machines_per_rack = machines_per_rack
        self.block_mib = block_mib
        self.direct_limit = direct_limit

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read the one workload file under ``src``; write canonical tables into ``out``."""
        self._check_options()
        require_tables(src, self.tables, manifest)
        path = one_workload(src)
        rows, has_paths = read_workload(src, path, ledger, manifest.sources)
        source, why = self.source_machines, "given (source_machines option)"
        if source is None:
            source, why = source_cluster(src, path, has_paths)
        machines = self.machines or source
        end_s = max(DAY_S, float(rows["submit_time_s"].max() or 0))
        set_window(manifest, src, 0.0, end_s, "one synthesized day (24 one-hour samples), to "
                   "the last submission when later")
        write_table(out, "machines", machine_table(machines, self.machines_per_rack).to_arrow())
        write_table(out, "jobs", rows.select(
            "job_id", pl.col("job_id").alias("user"), pl.lit(None, pl.String).alias("queue"),
            pl.col("submit_time_s").cast(pl.Float64).alias("submit_s"),
        ).to_arrow())
        shapes = st.job_shapes(rows["map_input_bytes"].to_numpy(),
                               rows["shuffle_bytes"].to_numpy(),
                               rows["reduce_output_bytes"].to_numpy(), machines, source,
                               self.block_mib)
        counts = st.write_tasks(out, rows, shapes, self.block_mib, self.direct_limit)
        self._describe(manifest, machines, source, why, shapes, counts, rows)

    def _check_options(self) -> None:
        for name in ("machines", "source_machines", "machines_per_rack", "block_mib"):
            value = getattr(self, name)
            if value is not None and (int(value) != value or value < 1):
                raise UsageError(f"must be a whole number >= 1, got {value}", field=name)

    def _describe(self, manifest: Manifest, machines: int, source: int, why: str,
                  shapes: st.JobShapes, counts: dict[str, int], rows: pl.DataFrame) -> None:
        manifest.units = {
            "cpu": "cores (a task is one slot: 1 core; machines have 8)",
            "mem": "GiB (a task is one slot: 2 GiB; machines have 16)", "gpu": "none",
            "time": "s", "input_mb": "MiB (map input, bytes scaled to the replay cluster)",
        }
        manifest.time_origin = ("start of the synthesized SWIM workload (submit_time_seconds "
                                "0); the dates of the sampled hours are not published")
        paths = rows["input_path"].drop_nulls()
        manifest.notes = {
            **NOTES,
            "cluster": f"{machines} machines x {MACHINE_CORES:g} cores / {MACHINE_MEM_GIB:g} "
                       f"GiB, {self.machines_per_rack} per rack; source cluster {source} "
                       f"machines: {why}",
            "scaling": f"bytes x {machines}/{source} (SWIM GenerateReplayScript)",
            "maps": f"{counts['map']} maps: one per {self.block_mib} MiB of input, at least 1; "
                    f"more for {int(shapes.maps_for_output.sum())} jobs so that no map writes "
                    f"over {st.MAP_OUTPUT_MAX_MIB} MiB",
            "reduces": f"{counts['reduce']} reduces: round((shuffle + output) / "
                       f"{self.block_mib} MiB), at least 1; over {machines} -> "
                       f"{max(1, machines // st.REDUCE_CAP_DIVISOR)} (SWIM's cap, applied to "
                       f"{int(shapes.reduce_capped.sum())} jobs); "
                       f"{int((shapes.reduces == 0).sum())} map-only jobs (shuffle 0)",
            "depends_on": f"reduces depend on all maps of their job; {counts['barrier']} "
                          f"jobs over {self.direct_limit} maps through a synthetic JOB/barrier",
            "input_file": (f"the job's input path ({paths.n_unique()} distinct paths)"
                           if paths.len() else "null: the workload publishes no input paths"),
        }


def one_workload(src: Path) -> Path:
    """The workload file under ``src``; two or more are an error naming them."""
    return single_file(src, WORKLOAD, "SWIM workload files",
                       "each is its own day and cluster; put one workload per directory")


def source_cluster(src: Path, path: Path, has_paths: bool) -> tuple[int, str]:
    """Machines of the cluster the workload came from, and why that number."""
    stated = Path(src) / GENERATED
    if stated.is_file():
        try:
            machines = int(json.loads(stated.read_text())["machines"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TraceError(f"unreadable machines ({exc})", stated) from exc
        if machines < 1:
            raise TraceError(f"machines must be >= 1, got {machines}", stated)
        return machines, f"stated by {GENERATED} (a generated workload)"
    if "FB-2010" in path.name:
        return FB2010_MACHINES, "FB-2010 in the file name (Facebook, Oct-Nov 2010; SWIM wiki)"
    if "FB-2009" in path.name:
        return FB2009_MACHINES, "FB-2009 in the file name (Facebook, May-Oct 2009; SWIM wiki)"
    if has_paths:
        return FB2010_MACHINES, "input paths are published for FB-2010 only"
    return FB2009_MACHINES, "no FB-2010 mark: SWIM's first samples_*.tsv files are FB-2009"


def machine_table(machines: int, per_rack: int) -> pl.DataFrame:
    """``machines`` identical machines, ``per_rack`` to a rack, all there for the whole trace."""
    width = max(4, len(str(machines - 1)))
    return pl.DataFrame({
        "machine_id": [f"m{k:0{width}d}" for k in range(machines)],
        "cpu": np.full(machines, MACHINE_CORES), "mem": np.full(machines, MACHINE_MEM_GIB),
        "gpu": np.zeros(machines), "rack": [f"rack{k // per_rack:03d}" for k in range(machines)],
        "speed": np.ones(machines), "added_s": np.zeros(machines),
        "removed_s": pl.Series([None] * machines, dtype=pl.Float64),
    })


# -- reading ------------------------------------------------------------------------------------


def read_workload(src: Path, path: Path, ledger: Ledger, sources: list[SourceFile]
                  ) -> tuple[pl.DataFrame, bool]:
    """The usable rows of one workload file (typed, ``_line`` kept), and whether it has paths.

    Every non-empty line is counted in ``ledger`` as read, then used or rejected by reason.
    """
    rel = str(path.relative_to(src)) if path.is_relative_to(src) else str(path)
    reader, blocks = stored_blocks(path, BLOCK_BYTES)
    numbers: list[int] = []
    texts: list[str | None] = []
    line = 0
    for data in blocks:
        for raw in data.split(b"\n")[:-1]:  # every block ends with a newline
            line += 1
            raw = raw.removesuffix(b"\r")
            if raw:
                numbers.append(line)
                texts.append(_decoded(raw))
    ledger.read(WORKLOAD.name, len(texts))
    frame = pl.DataFrame({"_line": pl.Series(numbers, dtype=pl.Int64),
                          "text": pl.Series(texts, dtype=pl.String)})
    frame = _reject(frame, [pl.col("text").is_null().alias("not_utf8")], ledger, rel)
    frame, has_paths = _fields(frame, ledger, rel)
    frame = _typed(frame, ledger, rel)
    first = frame["job_id"].is_first_distinct()
    frame = _reject(frame, [(~first).alias("duplicate_job_id")], ledger, rel)
    ledger.use(WORKLOAD.name, frame.height)
    previous = pl.col("submit_time_s").shift(1, fill_value=0)
    disagree = frame.select((pl.col("inter_job_gap_s") != pl.col("submit_time_s") - previous)
                            .sum()).item()
    ledger.repair("jobs", "gap_disagrees_with_submit_time", int(disagree or 0))
    sources.append(SourceFile(path=rel, table=WORKLOAD.name, bytes=reader.size,
                              sha256=reader.digest.hexdigest(), rows=len(texts)))
    return frame.sort("submit_time_s", "_line"), has_paths


def _decoded(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _fields(frame: pl.DataFrame, ledger: Ledger, rel: str) -> tuple[pl.DataFrame, bool]:
    """Split rows into fields; reject rows of the wrong shape; decide if the file has paths."""
    fields = pl.col("text").str.split("\t")
    path = fields.list.get(6, null_on_oob=True).str.strip_chars()
    frame = frame.with_columns(
        fields.list.len().alias("_n"),
        fields.list.slice(7).list.eval(pl.element() != "").list.any().fill_null(False)
        .alias("_extra"),
        pl.when(path != "").then(path).alias("input_path"),
        *(fields.list.get(k, null_on_oob=True).str.strip_chars().alias(c.name)
          for k, c in enumerate(WORKLOAD.columns[:6])),
    )
    shaped = (pl.col("_n") >= 6) & ~pl.col("_extra")
    counts = frame.select(shaped.sum().alias("rows"),
                          (shaped & pl.col("input_path").is_not_null()).sum().alias("paths"))
    has_paths = bool(counts["paths"][0] * 2 > counts["rows"][0])
    if not has_paths:
        shaped = shaped & pl.col("input_path").is_null()
    bad = frame.filter(~shaped)
    if bad.height:
        n = int(bad["_n"][0])
        expected = "7" if has_paths else "6"
        ledger.reject(WORKLOAD.name, "wrong_column_count", bad.height, path=rel,
                      line=int(bad["_line"][0]), field_name=f"{n} fields, expected {expected}")
        frame = frame.filter(shaped)
    if has_paths:
        frame = _reject(frame, [pl.col("input_path").is_null().alias("missing_value:input_path")],
                        ledger, rel)
    return frame.drop("text", "_n", "_extra"), has_paths


def _typed(frame: pl.DataFrame, ledger: Ledger, rel: str) -> pl.DataFrame:
    """Whole numbers for the numeric fields (``1e+06`` and ``12.0`` accepted, as csvparts)."""
    flags = [(pl.col("job_id").is_null() | (pl.col("job_id") == "")).alias("missing_value:job_id")]
    for name in NUMBERS:
        raw = pl.col(name)
        missing = raw.is_null() | (raw == "")
        flags.append(missing.alias(f"missing_value:{name}"))
        flags.append((~missing & _whole(raw).is_null()).alias(f"bad_number:{name}"))
    flags += [(_whole(pl.col(n)) < 0).fill_null(False).alias(f"negative_value:{n}")
              for n in NUMBERS]
    frame = _reject(frame, flags, ledger, rel)
    return frame.with_columns(_whole(pl.col(n)).alias(n) for n in NUMBERS)


def _whole(raw: pl.Expr) -> pl.Expr:
    as_float = raw.cast(pl.Float64, strict=False)
    whole = as_float.is_finite() & (as_float == as_float.floor()) & (as_float.abs() < 2**53)
    return pl.coalesce(raw.cast(pl.Int64, strict=False),
                       pl.when(whole).then(as_float.cast(pl.Int64)))


def _reject(frame: pl.DataFrame, flags: list[pl.Expr], ledger: Ledger, rel: str
            ) -> pl.DataFrame:
    """Drop rows hit by a flag, each counted once under its first flag (with an example)."""
    if frame.is_empty():
        return frame
    hits = frame.select(flags)
    taken = np.zeros(frame.height, dtype=bool)
    for reason in hits.columns:
        hit = hits[reason].fill_null(False).to_numpy() & ~taken
        if hit.any():
            line = int(frame["_line"].to_numpy()[hit][0])
            field = reason.split(":", 1)[1] if ":" in reason else None
            ledger.reject(WORKLOAD.name, reason, int(hit.sum()), path=rel, line=line,
                          field_name=field)
            taken |= hit
    return frame.filter(pl.Series(~taken)) if taken.any() else frame
