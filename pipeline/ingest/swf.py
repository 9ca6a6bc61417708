"""Parallel Workloads Archive logs in the Standard Workload Format (SWF 2.2) -> canonical trace.

Source: https://www.cs.huji.ac.il/labs/parallel/workload/swf.html .  A log is one text file
(``.swf`` or ``.swf.gz``): ``;`` comment lines (the header: ``MaxProcs``, ``MaxNodes``,
``UnixStartTime``, ``TimeZoneString``, ``Queue``, ``Partition``, ``Note`` ...), then one job per
line, 18 whitespace-separated numbers, -1 where unknown.  Parsing is vectorized (polars); only
header lines are handled one by one.

Mapping decisions (what, why):

- files: exactly one ``*.swf`` / ``*.swf.gz`` directly under the source directory: two logs
  are two machines and periods, so mixing them would describe no real system (``tracereplay
  fetch swf`` puts each log in its own ``l_NAME/`` directory).
- machines: one machine ``pool`` with ``cpu`` = the header's ``MaxProcs`` processors (usable:
  a whole number as its first word, at most 10^8; a log without a usable one: the largest
  job size, noted, and counted as repair ``max_procs_unreadable_largest_job_used`` when the
  header has one that is not usable), ``mem`` 1.0 (normalized: the memory
  fields are -1 in most logs, so memory is not modeled and every task asks 0), ``gpu`` 0.
  Space-shared HPC machines allocate processors, not nodes' shares, so one pool of processors
  is what their schedulers (EASY, backfilling) saw.
- jobs and tasks: one task per job, ``task_id`` = ``job_id`` = the job number.  Task ``cpu``
  (job size, processors) follows the adapter option ``size``: ``requested`` (default) takes
  field 8, or field 5 where field 8 is -1 (repair ``processors_from_allocated``); ``allocated``
  takes field 5, or field 8 where it is -1 (``processors_from_requested``).  A size <= 0 in
  both is rejected (``no_processors``).  Times beyond 30 years and sizes beyond 10^8
  processors are no trace's (``above_physical_limit:<field>``, :mod:`pipeline.ingest.limits`).
  ``duration_s`` = run time (field 4); -1 (a job that
  never ran, mostly cancelled in the queue) is dropped (``run_time_missing``, tasks and
  jobs); 0 (the log rounds runs under 0.5 s to 0) becomes ``ZERO_RUN_TIME_S`` = 1 s, one tick
  of the logs' clock (repair ``zero_run_time``), since the contract needs ``duration_s`` > 0.
- ``submit_s`` = field 2 (already seconds from the log start).  ``requested_s`` = field 9 (the
  user's run-time limit; in a few logs CPU time per processor), null when -1; a 0 is read as
  null too (repair ``requested_time_not_positive``: the extension needs > 0).
- ``recorded_start_s`` = submit + wait (field 3) where the wait is >= 0 (the log's own
  schedule, for the ``recorded`` reference replay), ``recorded_machine_id`` = ``pool``.
- ``end_event`` from status (field 11): 1 finished, 0 failed, 5 killed (cancelled); -1 and
  any other value null.  The raw status is kept as ``tasks.swf_status``.  Status 2/3/4 lines
  are partial executions (checkpoint/swap) that SWF follows a job's summary line with: rejected
  (``partial_execution_record``), the summary line stands for the job.
- ``cpu_used`` = min(average CPU time (field 6) / run time, 1) x allocated processors (field 5,
  else the size): mean processors busy; null where either is unknown; above 1 is clipped
  (repair ``cpu_time_above_run_time_clipped``).  Used and requested memory (fields 7, 10) are
  not read (memory not modeled).
- jobs: ``user`` = ``u<field 12>`` (``unknown`` when -1, repair ``user_missing``), ``queue`` =
  field 15 as a string (null when -1; header queue names in ``manifest.notes``), ``name`` =
  ``app<field 14>`` (the executable number; null when -1), ``swf_group`` (field 13) and
  ``swf_partition`` (field 16) int32 columns, null when -1.
- ``depends_on`` = [field 17] (preceding job) where it names an earlier emitted job; other
  values >= 0 are ignored (repair ``preceding_job_ignored``).  Think time (field 18) not used.
- a task larger than the pool is kept unchanged (a replay reports it unschedulable) and
  counted in ``repaired["tasks"]["larger_than_pool_kept"]``: ``repaired`` counts emitted
  records, ``dropped`` records not emitted.
- window: 0 (the log start) to the last recorded end (submit + wait + duration; submit +
  duration without a wait), so every job ends inside it; the header's ``EndTime`` is local
  date text and not read.  ``generated.json`` states a generated log's own window.
- rejected lines (counted by reason with file and line): ``wrong_column_count`` (not 18
  fields), ``bad_number:FIELD`` (not a finite number, or not a whole one in an id or count
  field), ``negative_value:submit_time``, ``negative_value:job_number``,
  ``partial_execution_record``, ``duplicate_job_number`` (after its first line),
  ``no_processors``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import polars as pl

from pipeline.errors import TraceError, UsageError
from pipeline.ingest import limits
from pipeline.ingest.base import require_tables, single_file
from pipeline.ingest.csvparts import BLOCK_BYTES, FLOAT, Column, RawTable
from pipeline.ingest.limits import MAX_PROCESSORS, MAX_SPAN_S
from pipeline.ingest.rawfile import stored_blocks
from pipeline.ingest.swf_nodes import node_machines, node_shape, spread_over_nodes
from pipeline.ingest.window import set_window
from pipeline.trace.io import write_table
from pipeline.trace.manifest import Ledger, Manifest, SourceFile
from pipeline.trace.schema import conform

FIELDS = (
    "job_number", "submit_time", "wait_time", "run_time", "allocated_processors",
    "average_cpu_time", "used_memory", "requested_processors", "requested_time",
    "requested_memory", "status", "user_id", "group_id", "executable", "queue", "partition",
    "preceding_job", "think_time",
)
SWF_LOG = RawTable("swf", "*.swf*", tuple(Column(name, FLOAT) for name in FIELDS))
SIZES = ("requested", "allocated")
POOL = "pool"
ZERO_RUN_TIME_S = 1.0  # one tick of the logs' 1 s clock (SWF rounds runs under 0.5 s to 0)
# Fields that count or name things: a value that is not a whole number is a bad number.
# times and processor counts no machine can have (pipeline.ingest.limits): rejected
SPAN_FIELDS = ("submit_time", "wait_time", "run_time", "average_cpu_time", "requested_time",
               "think_time")
PROCESSOR_FIELDS = ("allocated_processors", "requested_processors")
WHOLE = ("job_number", "allocated_processors", "requested_processors", "status", "user_id",
         "group_id", "executable", "queue", "partition", "preceding_job")
END_EVENT = {1: "finished", 0: "failed", 5: "killed"}
PARTIAL = (2, 3, 4)  # partial-execution records following a job's summary line
_HEADER_LINE = re.compile(r"^;\s{0,2}([A-Za-z]+)\s*:(.*)$")
_WHOLE_WORD = re.compile(r"^\s*(\d+)(?:\s|$)")  # a whole number, then a comment or nothing
HEADER_KEPT = ("Version", "Computer", "Installation", "MaxJobs", "MaxRecords", "MaxNodes",
               "MaxProcs", "UnixStartTime", "TimeZoneString", "StartTime", "EndTime")


@dataclass
class Header:
    """The ``; Key: value`` comment lines of a log: first value per key, and lists of the
    repeated ``Queue`` and ``Partition`` lines."""

    values: dict[str, str] = field(default_factory=dict)
    queues: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        """Take one comment line (lines that are not ``; Key: value`` are prose, skipped)."""
        match = _HEADER_LINE.match(line.rstrip())
        if not match:
            return
        key, value = match.group(1), match.group(2).strip()
        if key == "Queue":
            self.queues.append(" ".join(value.split()))
        elif key == "Partition":
            self.partitions.append(" ".join(value.split()))
        else:
            self.values.setdefault(key, value)

    def whole(self, key: str, high: int | None = None) -> int | None:
        """Header ``key`` as a whole number: its first word must be one (``338 (batch
        partition)`` -> 338; ``12abc``, ``1e30``, ``2.5`` -> None: not read by leading
        digits), and no more than ``high``."""
        match = _WHOLE_WORD.match(self.values.get(key, ""))
        if not match or (high is not None and int(match.group(1)) > high):
            return None
        return int(match.group(1))


class Swf:
    """A Parallel Workloads Archive log in SWF: one pool of processors, one task per job."""

    name: ClassVar[str] = "swf"
    summary: ClassVar[str] = ("Parallel Workloads Archive logs, Standard Workload Format "
                              "(HPC machines: one processor pool, rigid jobs)")
    tables: ClassVar[tuple[RawTable, ...]] = (SWF_LOG,)
    options: ClassVar[dict[str, str]] = {
        "size": "job size in processors: requested (field 8, else allocated; default) or "
                "allocated (field 5, else requested)",
        "machine": "pool (one machine of MaxProcs processors; default) or nodes (MaxNodes "
                   "nodes, each job a gang of tasks over the nodes it needs)",
    }

    def __init__(self, size: str = "requested", machine: str = "pool",
                 block_bytes: int = BLOCK_BYTES) -> None:
        self.size = size
        self.machine = machine
        self.block_bytes = block_bytes

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read the one log under ``src``; write canonical tables into ``out``."""
        if self.size not in SIZES:
            raise UsageError(f"must be one of: {', '.join(SIZES)} (got '{self.size}')",
                             field="--set size")
        if self.machine not in ("pool", "nodes"):
            raise UsageError(f"must be one of: pool, nodes (got '{self.machine}')",
                             field="--set machine")
        require_tables(src, self.tables, manifest)
        path = one_log(src)
        rel = str(path.relative_to(src))
        header, raw = read_log(src, path, ledger, manifest.sources, self.block_bytes)
        rows = reject_bad_rows(raw, ledger, SWF_LOG.name, rel, self.size)
        require_rows(rows, ledger, path)
        ledger.use(SWF_LOG.name, rows.height)
        jobs, tasks = emit(rows, ledger, self.size, POOL)
        pool_cpu, pool_source = pool_processors(header, tasks)
        if "MaxProcs" in header.values and header.whole("MaxProcs", MAX_PROCESSORS) is None:
            ledger.repair("machines", "max_procs_unreadable_largest_job_used", 1)
        ledger.repair("tasks", "larger_than_pool_kept", int((tasks["cpu"] > pool_cpu).sum()))
        machines = machine_table(pool_cpu)
        if self.machine == "nodes":
            ppn = node_shape(header.whole("MaxNodes", MAX_PROCESSORS), pool_cpu, path)
            machines = node_machines(int(pool_cpu / ppn), ppn)
            tasks = spread_over_nodes(tasks, ppn, ledger)
        write_table(out, "machines", conform(machines.to_arrow(), "machines"))
        write_table(out, "jobs", conform(jobs.to_arrow(), "jobs"))
        write_table(out, "tasks", conform(tasks.to_arrow(), "tasks"))
        end_s = float(tasks.select(
            (pl.coalesce("recorded_start_s", "submit_s") + pl.col("duration_s")).max()
        ).item() or 0.0)
        set_window(manifest, src, 0.0, max(end_s, 1.0),
                   "the log start (time 0) to the last recorded job end")
        self._describe(manifest, header, pool_cpu, pool_source, rows)

    def _describe(self, manifest: Manifest, header: Header, pool_cpu: float, pool_source: str,
                  rows: pl.DataFrame) -> None:
        manifest.units = {
            "cpu": "processors (pool: MaxProcs; tasks: the job size)",
            "mem": "normalized: the pool has 1.0, tasks ask 0 (SWF memory fields are mostly "
                   "-1: memory not modeled)",
            "gpu": "none", "time": "s",
        }
        manifest.time_origin = time_origin(header)
        statuses = rows["status"].value_counts().sort("status").iter_rows()
        kept = {k: header.values[k] for k in HEADER_KEPT if k in header.values}
        manifest.notes = {
            "machines": (f"one pool of {pool_cpu:g} processors ({pool_source}), mem 1.0"
                         if self.machine == "pool" else
                         f"{pool_cpu:g} processors ({pool_source}) as MaxNodes nodes; each "
                         "job a gang of tasks over the nodes it needs "
                         "(pipeline.ingest.swf_nodes)"),
            "size": (f"size={self.size}: task cpu = " + (
                "requested processors (field 8), allocated (field 5) where -1"
                if self.size == "requested" else
                "allocated processors (field 5), requested (field 8) where -1")),
            "zero_run_time": "a run time of 0 (under 0.5 s, rounded) becomes 1 s, the log's tick",
            "end_event": "status 1 finished, 0 failed, 5 killed (cancelled), other null; raw "
                         "value in tasks.swf_status; status 2/3/4 lines (partial executions) "
                         "rejected, the job's summary line stands for it",
            "status_counts": "usable lines by status: " + ", ".join(
                f"{int(s)}: {n}" for s, n in statuses),
            "requested_s": "field 9 (the user's run-time limit), null when -1; 0 read as null",
            "depends_on": "[preceding job (field 17)] where it names an earlier job",
            "cpu_used": "min(avg cpu time / run time, 1) x allocated processors",
            "recorded": "recorded_start_s = submit + wait (wait >= 0), machine 'pool'",
            "jobs": "user u<field 12>, queue = field 15, name app<field 14>, swf_group and "
                    "swf_partition = fields 13, 16",
            "not_read": "used/requested memory (fields 7, 10), think time (field 18); header "
                        "EndTime (local date text)",
            "oversize": "tasks larger than the pool are kept (unschedulable in a replay), "
                        "counted in repaired.tasks.larger_than_pool_kept",
            "swf_header": "; ".join(f"{k}: {v}" for k, v in kept.items()),
        }
        if header.queues:
            manifest.notes["queues"] = "; ".join(header.queues)
        if header.partitions:
            manifest.notes["partitions"] = "; ".join(header.partitions)


def one_log(src: Path) -> Path:
    """The log file under ``src``; two or more are an error naming them."""
    return single_file(src, SWF_LOG, "SWF logs",
                       "each is its own machine and period; put one log per directory")


def read_log(src: Path, path: Path, ledger: Ledger, sources: list[SourceFile],
             block_bytes: int = BLOCK_BYTES) -> tuple[Header, pl.DataFrame]:
    """The header and the job lines of one log, split into 18 float fields (``_line``: line
    number in the file).  Lines without 18 fields are rejected here; the values are checked
    by :func:`reject_bad_rows`."""
    rel = str(path.relative_to(src))
    header, frames, lines = Header(), [], 0
    reader, blocks = stored_blocks(path, block_bytes)
    for data in blocks:
        text = pl.DataFrame({"text": data.decode("utf-8", errors="replace").split("\n")[:-1]})
        text = text.with_row_index("_line", offset=lines + 1)
        lines += text.height
        stripped = pl.col("text").str.strip_chars()
        comment = stripped.str.starts_with(";")
        for line in text.filter(comment)["text"]:
            header.add(line.strip())
        frames.append(split_fields(text.filter(~comment & (stripped != "")), ledger, rel))
    sources.append(SourceFile(path=rel, table=SWF_LOG.name, bytes=reader.size,
                              sha256=reader.digest.hexdigest(),
                              rows=ledger.input_rows[SWF_LOG.name]))
    if not ledger.input_rows[SWF_LOG.name]:
        raise TraceError("no job lines (only ';' comments or blank lines): not an SWF log, "
                         "or an empty one", path)
    return header, pl.concat(frames)


def split_fields(text: pl.DataFrame, ledger: Ledger, rel: str) -> pl.DataFrame:
    """Job lines -> 18 raw string fields (as published) and ``_line``; other counts rejected."""
    ledger.read(SWF_LOG.name, text.height)
    tokens = text.select("_line", pl.col("text").str.extract_all(r"\S+").alias("tokens"))
    count = pl.col("tokens").list.len()
    wrong = tokens.filter(count != len(FIELDS))
    if wrong.height:
        first = wrong.row(0, named=True)
        ledger.reject(SWF_LOG.name, "wrong_column_count", wrong.height, path=rel,
                      line=int(first["_line"]),
                      field_name=f"{len(first['tokens'])} fields, expected {len(FIELDS)}")
    return tokens.filter(count == len(FIELDS)).select(
        "_line", *(pl.col("tokens").list.get(i).alias(name) for i, name in enumerate(FIELDS)),
    )


def require_rows(rows: pl.DataFrame, ledger: Ledger, path: Path) -> None:
    """Fail with one line naming the file when not one job line is usable."""
    if rows.height:
        return
    reasons = ledger.rows_rejected[SWF_LOG.name]
    top = ", ".join(f"{reason}: {n}" for reason, n in reasons.most_common(3))
    example = next((e for e in ledger.examples if e["table"] == SWF_LOG.name), None)
    raise TraceError(f"no usable job lines: all {ledger.input_rows[SWF_LOG.name]} rejected "
                     f"({top}); not an SWF log?", path,
                     line=example["line"] if example else None,
                     field=example["field"] if example else None)


def pool_processors(header: Header, tasks: pl.DataFrame) -> tuple[float, str]:
    """Processors of the pool, and where the number came from."""
    stated = header.whole("MaxProcs", MAX_PROCESSORS)  # (no machine has more)
    if stated:
        return float(stated), "header MaxProcs"
    largest = float(tasks["cpu"].max() or 1.0)
    nodes = header.whole("MaxNodes", MAX_PROCESSORS)
    also = f"; MaxNodes {nodes}" if nodes else ""
    return largest, f"no usable MaxProcs header: the largest job size{also}"


def machine_table(cpu: float) -> pl.DataFrame:
    """The one machine: the pool of ``cpu`` processors, in service for the whole log."""
    return pl.DataFrame({
        "machine_id": [POOL], "cpu": [cpu], "mem": [1.0], "gpu": [0.0],
        "rack": pl.Series([None], dtype=pl.String), "speed": [1.0], "added_s": [0.0],
        "removed_s": pl.Series([None], dtype=pl.Float64),
    })


def time_origin(header: Header) -> str:
    """Time 0 of the log in words: its UnixStartTime as a UTC date, and its time zone."""
    start = header.whole("UnixStartTime")
    zone = header.values.get("TimeZoneString", "not stated")
    if start is None:
        return f"the log's time 0 (no UnixStartTime header; time zone {zone})"
    date = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"UnixStartTime {start} ({date}), time zone {zone}: the log's time 0"


def reject_bad_rows(raw: pl.DataFrame, ledger: Ledger, table: str, rel: str,
                    size: str) -> pl.DataFrame:
    """Typed job lines (float fields), without those rejected (each counted once, under its
    first reason, in the order of the module docstring)."""
    rows = raw.select("_line", *(pl.col(n).cast(pl.Float64, strict=False) for n in FIELDS))
    bad = [(pl.col(n).is_null() | ~pl.col(n).is_finite()
            | (_not_whole(n) if n in WHOLE else pl.lit(False))
            ).fill_null(True).alias(f"bad_number:{n}") for n in FIELDS]
    rows = _reject(rows, bad, ledger, table, rel).cast({n: pl.Int64 for n in WHOLE})
    primary, fallback = _size_fields(size)
    rows = _reject(rows, [
        (pl.col("submit_time") < 0).alias("negative_value:submit_time"),
        (pl.col("job_number") < 0).alias("negative_value:job_number"),
        pl.col("status").is_in(PARTIAL).alias("partial_execution_record"),
        *((pl.col(n) > MAX_SPAN_S).alias(limits.reason(n)) for n in SPAN_FIELDS),
        *((pl.col(n) > MAX_PROCESSORS).alias(limits.reason(n)) for n in PROCESSOR_FIELDS),
    ], ledger, table, rel)
    return _reject(rows, [
        (~pl.col("job_number").is_first_distinct()).alias("duplicate_job_number"),
        ((pl.col(primary) <= 0) & (pl.col(fallback) <= 0)).alias("no_processors"),
    ], ledger, table, rel)


def _not_whole(column: str) -> pl.Expr:
    """True where ``column`` is no whole number an Int64 holds exactly."""
    value = pl.col(column)
    return (value != value.floor()) | (value.abs() >= 2**53)


def _reject(rows: pl.DataFrame, checks: list[pl.Expr], ledger: Ledger, table: str,
            rel: str) -> pl.DataFrame:
    """Count rows flagged by ``checks`` (each once, under its first flag); the others."""
    if rows.is_empty():
        return rows
    flags = rows.select("_line", *checks)
    hit_any = pl.select(pl.repeat(False, rows.height)).to_series()
    for reason in flags.columns[1:]:
        hit = flags[reason] & ~hit_any
        if hit.any():
            ledger.reject(table, reason, int(hit.sum()), path=rel,
                          line=int(flags["_line"].filter(hit)[0]),
                          field_name=reason.split(":", 1)[-1])
            hit_any = hit_any | hit
    return rows.filter(~hit_any)


def _size_fields(size: str) -> tuple[str, str]:
    """The processor field the ``size`` option reads first, and its fallback."""
    if size == "allocated":
        return "allocated_processors", "requested_processors"
    return "requested_processors", "allocated_processors"


def _id(column: str, prefix: str = "") -> pl.Expr:
    """Field ``column`` as a string id (``prefix`` + the whole number), null where < 0."""
    text = pl.col(column).cast(pl.Int64).cast(pl.String)
    return pl.when(pl.col(column) >= 0).then(pl.lit(prefix) + text)


def emit(rows: pl.DataFrame, ledger: Ledger, size: str, pool: str
         ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Canonical jobs and tasks (one each per usable job line that ran), repairs counted."""
    never_ran = pl.col("run_time") < 0
    for table in ("tasks", "jobs"):
        ledger.drop(table, "run_time_missing", int(rows.select(never_ran.sum()).item()))
    rows = rows.filter(~never_ran).sort("submit_time", "_line")
    primary, fallback = _size_fields(size)
    cpu = pl.when(pl.col(primary) > 0).then(primary).otherwise(fallback)
    run = pl.col("run_time")
    ratio = pl.when((pl.col("average_cpu_time") >= 0) & (run > 0)).then(
        pl.col("average_cpu_time") / run)
    allocated = pl.when(pl.col("allocated_processors") > 0).then("allocated_processors")
    counts = rows.select(
        (pl.col(primary) <= 0).sum().alias(f"processors_from_{fallback.split('_')[0]}"),
        (run == 0).sum().alias("zero_run_time"),
        ((pl.col("requested_time") <= 0) & (pl.col("requested_time") != -1)).sum()
        .alias("requested_time_not_positive"),
        (ratio > 1).sum().alias("cpu_time_above_run_time_clipped"),
    ).row(0, named=True)
    for reason, n in counts.items():
        ledger.repair("tasks", reason, int(n))
    ledger.repair("jobs", "user_missing", int((rows["user_id"] < 0).sum()))
    job_id = _id("job_number")
    jobs = rows.select(
        job_id.alias("job_id"), pl.coalesce(_id("user_id", "u"), pl.lit("unknown")).alias("user"),
        _id("queue").alias("queue"), pl.col("submit_time").alias("submit_s"),
        pl.lit(None, pl.Int32).alias("priority"), _id("executable", "app").alias("name"),
        pl.when(pl.col("group_id") >= 0).then("group_id").cast(pl.Int32).alias("swf_group"),
        pl.when(pl.col("partition") >= 0).then("partition").cast(pl.Int32)
        .alias("swf_partition"),
    )
    tasks = rows.select(
        job_id.alias("task_id"), job_id.alias("job_id"), pl.col("submit_time").alias("submit_s"),
        pl.when(run > 0).then(run).otherwise(ZERO_RUN_TIME_S).alias("duration_s"),
        cpu.alias("cpu"), pl.lit(0.0).alias("mem"), pl.lit(0.0).alias("gpu"),
        (ratio.clip(upper_bound=1.0) * pl.coalesce(allocated, cpu)).alias("cpu_used"),
        _depends_on(rows, ledger).alias("depends_on"),
        pl.col("status").replace_strict(END_EVENT, default=None, return_dtype=pl.String)
        .alias("end_event"),
        pl.lit(pool).alias("recorded_machine_id"),
        pl.when(pl.col("wait_time") >= 0).then(pl.col("submit_time") + pl.col("wait_time"))
        .alias("recorded_start_s"),
        pl.when(pl.col("requested_time") > 0).then("requested_time").alias("requested_s"),
        pl.col("status").cast(pl.Int32).alias("swf_status"),
    )
    return jobs, tasks


def _depends_on(rows: pl.DataFrame, ledger: Ledger) -> pl.Expr:
    """``[preceding job]`` where field 17 names an earlier job of ``rows`` (job numbers are
    given in submit order, so this can form no cycle); other values >= 0 counted, ignored."""
    before = pl.col("preceding_job")
    known = before.is_in(rows["job_number"].implode()) & (before < pl.col("job_number"))
    ignored = rows.select(((before >= 0) & ~known).sum()).item()
    ledger.repair("tasks", "preceding_job_ignored", int(ignored))
    return pl.when(known).then(pl.concat_list(_id("preceding_job")))
