"""Cheap checks when a replay opens a trace, so ``replay`` refuses what ``validate`` refuses.

:func:`quick_check` is not a second validation: the small tables (machines, jobs, machine
downtime) are checked whole, and the tasks are streamed once, reading only ``task_id``,
``submit_s`` and, where present, ``inputs`` and ``depends_on`` (a trace with dependencies
has its ``depends_on`` column read once before, to learn which ids are named).  It refuses,
with one line naming the file, its row (1-based, within that Parquet file) and the field:

- a tasks file that is not Parquet;
- machines with a missing or repeated id, ``cpu``/``mem`` not > 0, ``gpu`` < 0, ``speed``
  not > 0 (or any of them not finite), ``removed_s`` before ``added_s``; jobs with a missing
  or repeated id or user; downtime of unknown machines or ending before it starts;
- tasks with a missing or repeated ``task_id``, a ``submit_s`` that is not finite and >= 0
  or smaller than the row before (the replay streams tasks in submit order), ``depends_on``
  naming an unknown task or the task itself, ``inputs`` naming an unknown machine (unless
  the trace has no machines at all: a workload for an elastic cluster, where no input can be
  local anyway), and dependency cycles (tasks that could never start);
- a ``task_usage`` table breaking a rule of :mod:`pipeline.trace.usagecheck` (unknown task,
  times outside the task's run, negative or non-finite usage, memory above the request, cpu
  above the largest machine, overlaps, wrong order), checked in DuckDB (bounded memory).

Memory: the ids named in ``depends_on`` and the dependency edges of those tasks (only they
can be in a cycle), the machine ids, and 8 bytes per task for duplicate ids (a 64-bit hash
per task, spilled to partition files beyond a limit: :mod:`pipeline.trace.idsets`); equal
hashes are verified against the ids themselves, so a collision is never reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import TraceError
from pipeline.trace.cycles import find_cycles
from pipeline.trace.idsets import HashSpool, UniqueStrings, id_hashes
from pipeline.trace.io import has_table, part_files, read_table, table_path
from pipeline.trace.usagecheck import (
    check_connection,
    first_violation,
    missing_columns,
    usage_rows,
)

BATCH_ROWS = 1 << 18


def quick_check(directory: Path) -> None:
    """Raise :class:`TraceError` at the first thing ``validate`` would refuse (see module)."""
    directory = Path(directory)
    machine_ids = _check_machines(directory)
    _check_jobs(directory)
    if has_table(directory, "machine_downtime"):
        _check_downtime(directory, machine_ids)
    files = part_files(directory, "tasks")
    _check_tasks(files, _dependency_refs(files), machine_ids)
    if has_table(directory, "task_usage"):
        _check_usage(directory, files)


# -- small tables -----------------------------------------------------------------------------


def _first(mask: pa.Array | np.ndarray) -> int | None:
    """Index of the first true value, or None."""
    hits = np.flatnonzero(np.asarray(mask, dtype=bool))
    return int(hits[0]) if hits.size else None


def _frame(directory: Path, name: str) -> pl.DataFrame:
    return pl.from_arrow(read_table(directory, name))  # type: ignore[return-value]


def _refuse(frame: pl.DataFrame, checks: list[tuple[str, pl.Expr, str]], path: Path) -> None:
    """Raise on the first row of ``frame`` where one of ``(field, bad, reason)`` holds."""
    for field, bad, reason in checks:
        row = _first(frame.select(bad.fill_null(True)).to_series().to_numpy())
        if row is not None:
            raise TraceError(reason, path, line=row + 1, field=field)


def _ids_unique(frame: pl.DataFrame, column: str, path: Path) -> None:
    repeated = frame[column].is_duplicated()
    row = _first(repeated.to_numpy())
    if row is not None:
        raise TraceError(f"{frame[column][row]!r} appears more than once (ids are unique)",
                         path, line=row + 1, field=column)


def _positive(column: str) -> pl.Expr:
    return ~((pl.col(column) > 0) & pl.col(column).is_finite())


def _check_machines(directory: Path) -> pl.Series:
    machines, path = _frame(directory, "machines"), table_path(directory, "machines")
    _refuse(machines, [
        ("machine_id", pl.col("machine_id").is_null(), "machine_id is missing"),
        ("cpu", _positive("cpu"), "cpu must be finite and > 0"),
        ("mem", _positive("mem"), "mem must be finite and > 0"),
        ("gpu", ~((pl.col("gpu").fill_null(0) >= 0) & pl.col("gpu").fill_null(0).is_finite()),
         "gpu must be finite and >= 0"),
        ("speed", _positive("speed").fill_null(False), "speed must be finite and > 0"),
        ("added_s", ~pl.col("added_s").fill_null(0).is_finite(), "added_s must be finite"),
        ("removed_s", (pl.col("removed_s") < pl.col("added_s").fill_null(0)).fill_null(False),
         "removed_s is before added_s"),
    ], path)
    _ids_unique(machines, "machine_id", path)
    return machines["machine_id"]


def _check_jobs(directory: Path) -> None:
    jobs, path = _frame(directory, "jobs"), table_path(directory, "jobs")
    submit = pl.col("submit_s")
    _refuse(jobs, [
        ("job_id", pl.col("job_id").is_null(), "job_id is missing"),
        ("user", pl.col("user").is_null(), "user is missing"),
        ("submit_s", ~(submit.is_finite() & (submit >= 0)), "submit_s must be finite and >= 0"),
    ], path)
    _ids_unique(jobs, "job_id", path)


def _check_downtime(directory: Path, machine_ids: pl.Series) -> None:
    downtime = _frame(directory, "machine_downtime")
    _refuse(downtime, [
        ("machine_id", ~pl.col("machine_id").is_in(machine_ids.implode()),
         "names a machine that is not in machines"),
        ("up_s", (pl.col("up_s") < pl.col("down_s")).fill_null(False), "up_s is before down_s"),
    ], table_path(directory, "machine_downtime"))


def _check_usage(directory: Path, task_files: list[Path]) -> None:
    """Raise at the first ``task_usage`` row breaking one of its rules."""
    usage_files = part_files(directory, "task_usage")
    con = check_connection()
    try:
        try:
            missing = missing_columns(con, usage_files)
            if missing:
                raise TraceError(f"missing required column {missing[0]}",
                                 table_path(directory, "task_usage"), field=missing[0])
            usage_rows(con, usage_files, task_files, part_files(directory, "machines"))
        except duckdb.Error as exc:
            raise TraceError(f"unreadable task_usage ({exc})".splitlines()[0],
                             table_path(directory, "task_usage")) from None
        found = first_violation(con)
    finally:
        con.close()
    if found is not None:
        rule, path, line, task_id = found
        raise TraceError(f"{rule.reason} (task_id {task_id})", path, line=line, field=rule.field)


# -- tasks ------------------------------------------------------------------------------------


def _batches(files: list[Path], columns: tuple[str, ...]
             ) -> Iterator[tuple[Path, int, pa.Table]]:
    """``(file, first row in that file, table)`` over the tasks, with the columns present."""
    for path in files:
        try:
            reader = pq.ParquetFile(path)
            present = [c for c in columns if c in reader.schema_arrow.names]
            row = 0
            for batch in reader.iter_batches(batch_size=BATCH_ROWS, columns=present):
                yield path, row, pa.Table.from_batches([batch])
                row += batch.num_rows
        except (OSError, pa.ArrowInvalid) as exc:
            raise TraceError(f"not a readable Parquet file ({exc})".splitlines()[0],
                             path) from None


def _dependency_refs(files: list[Path]) -> DependencyIndex:
    """Every task id named in some ``depends_on`` (none when the column is absent)."""
    unique = UniqueStrings()
    for path, row, table in _batches(files, ("depends_on",)):
        if "depends_on" not in table.column_names or table["depends_on"].null_count == len(table):
            continue
        lists = table["depends_on"].combine_chunks()
        flat = pc.list_flatten(lists)
        if flat.null_count:
            k = _first(pc.is_null(flat).to_numpy(zero_copy_only=False))
            owner = int(pc.list_parent_indices(lists)[k].as_py())
            raise TraceError("depends_on holds a missing (null) task id", path,
                             line=row + owner + 1, field="depends_on")
        unique.add(flat)
    return DependencyIndex(unique.result())


def _check_tasks(files: list[Path], deps: DependencyIndex, machine_ids: pl.Series) -> None:
    """One pass over the tasks: ids, submit order, dependencies and inputs."""
    columns = ("task_id", "submit_s", "inputs") + (("depends_on",) if deps.size else ())
    spool = HashSpool()
    previous = -np.inf
    machines = pa.array(machine_ids.to_list(), pa.string())
    try:
        for path, row, table in _batches(files, columns):
            ids = _task_ids(table, path, row)
            previous = _check_submit(table, path, row, previous)
            if deps.size:
                deps.visit(ids, table["depends_on"].combine_chunks(), path, row)
            if "inputs" in table.column_names and len(machines):
                _check_inputs(table["inputs"], machines, path, row)
            spool.add(id_hashes(ids))
        _refuse_duplicates(files, spool.duplicates())
    finally:
        spool.close()
    unknown = deps.unknown()
    if unknown:
        _refuse_unknown_dependency(files, unknown)
    cycle = deps.cycle()
    if cycle:
        raise TraceError(f"dependency cycle: {cycle} (such tasks can never start)",
                         files[0].parent if len(files) > 1 else files[0], field="depends_on")


class DependencyIndex:
    """The task ids named in ``depends_on``, coded ``0..R-1``, and the edges between them.

    Only a task that is itself named as a dependency can be in a cycle, so the edges kept are
    those of named tasks: the graph of :func:`~pipeline.trace.cycles.find_cycles`.  Ids are
    matched by 64-bit hash (vectorized) and confirmed by comparing the ids themselves.
    """

    def __init__(self, names: pa.Array) -> None:
        for seed in range(16):  # a seed under which the named ids' hashes are all distinct
            hashes = id_hashes(names, seed)
            order = np.argsort(hashes)
            hashes = hashes[order]
            if not np.any(hashes[1:] == hashes[:-1]):
                break
        self.seed, self.hashes, self.names = seed, hashes, names.take(pa.array(order))
        self.size = len(names)
        self.found = np.zeros(self.size, bool)
        self._edges: list[tuple[np.ndarray, np.ndarray]] = []

    def codes(self, ids: pa.Array) -> np.ndarray:
        """The code of each id, or -1 for ids not named in any ``depends_on``."""
        h = id_hashes(ids, self.seed)
        pos = np.minimum(np.searchsorted(self.hashes, h), self.size - 1)
        match = self.hashes[pos] == h
        if match.any():
            same = pc.fill_null(pc.equal(pc.filter(ids, pa.array(match)), self.names.take(
                pa.array(pos[match]))), False).to_numpy(zero_copy_only=False)
            match[np.flatnonzero(match)[~same]] = False
        return np.where(match, pos, -1)

    def visit(self, ids: pa.Array, depends_on: pa.Array, path: Path, row: int) -> None:
        """Mark named tasks found; keep their edges; refuse a task depending on itself."""
        child = self.codes(ids)
        named = child >= 0
        self.found[child[named]] = True
        lists = pc.filter(depends_on, pa.array(named))
        if not len(lists) or lists.null_count == len(lists):
            return
        parent = self.codes(pc.list_flatten(lists))
        owner = np.flatnonzero(named)[pc.list_parent_indices(lists).to_numpy()]
        kids = child[owner]
        loop = _first(parent == kids)
        if loop is not None:
            raise TraceError("the task depends on itself", path, line=row + int(owner[loop]) + 1,
                             field="depends_on")
        self._edges.append((parent, kids))

    def unknown(self) -> set[str]:
        """Named ids that are not task ids."""
        return set(self.names.filter(pa.array(~self.found)).to_pylist())

    def cycle(self) -> str:
        """One dependency cycle as ``a -> b -> a`` (empty when there is none)."""
        if not self._edges:
            return ""
        parent = np.concatenate([p for p, _ in self._edges])
        child = np.concatenate([c for _, c in self._edges])
        found = find_cycles(self.size, parent, child)
        if found is None:
            return ""
        names = [self.names[k].as_py() for k in found.cycle[:12]]
        return " -> ".join(names) + (" -> ..." if len(found.cycle) > 12 else "")


def _task_ids(table: pa.Table, path: Path, row: int) -> pa.Array:
    if "task_id" not in table.column_names:
        raise TraceError("missing required column task_id", path, field="task_id")
    ids = table["task_id"].combine_chunks().cast(pa.string())
    bad = _first(pc.is_null(ids).to_numpy(zero_copy_only=False))
    if bad is not None:
        raise TraceError("task_id is missing", path, line=row + bad + 1, field="task_id")
    return ids


def _check_submit(table: pa.Table, path: Path, row: int, previous: float) -> float:
    """Raise unless ``submit_s`` is finite, >= 0 and sorted; the batch's last value."""
    if "submit_s" not in table.column_names:
        raise TraceError("missing required column submit_s", path, field="submit_s")
    submit = np.asarray(pc.fill_null(table["submit_s"].cast(pa.float64()), np.nan)
                        .to_numpy(), np.float64)
    if not submit.size:
        return previous
    bad = _first(~(np.isfinite(submit) & (submit >= 0)))
    if bad is not None:
        raise TraceError(f"submit_s must be finite and >= 0 (got {submit[bad]})", path,
                         line=row + bad + 1, field="submit_s")
    before = np.concatenate([[previous], submit[:-1]])
    bad = _first(submit < before)
    if bad is not None:
        raise TraceError(f"{submit[bad]} is before {before[bad]} on the row above: tasks must "
                         "be sorted by submit_s (the replay streams them in that order)", path,
                         line=row + bad + 1, field="submit_s")
    return float(submit[-1])


def _check_inputs(inputs: pa.ChunkedArray, machines: pa.Array, path: Path, row: int) -> None:
    if inputs.null_count == len(inputs):
        return
    lists = inputs.combine_chunks()
    flat = pc.list_flatten(lists)
    unknown = pc.fill_null(pc.invert(pc.is_in(flat, value_set=machines)), True)
    if pc.any(unknown).as_py():
        k = _first(unknown.to_numpy(zero_copy_only=False))
        owner = int(pc.list_parent_indices(lists)[k].as_py())
        raise TraceError(f"inputs name machine {flat[k].as_py()!r}, which is not in machines",
                         path, line=row + owner + 1, field="inputs")


def _refuse_duplicates(files: list[Path], candidates: np.ndarray) -> None:
    """Verify equal hashes against the ids themselves; raise at the first real repeat."""
    if not candidates.size:
        return
    seen: dict[str, tuple[Path, int]] = {}
    for path, row, table in _batches(files, ("task_id",)):
        ids = table["task_id"].combine_chunks().cast(pa.string())
        for k in np.flatnonzero(np.isin(id_hashes(ids), candidates)).tolist():
            task_id = ids[k].as_py()
            if task_id in seen:
                first, first_row = seen[task_id]
                raise TraceError(f"task_id {task_id!r} appears again (first at {first}:"
                                 f"{first_row})", path, line=row + k + 1, field="task_id")
            seen[task_id] = (path, row + k + 1)


def _refuse_unknown_dependency(files: list[Path], unknown: set[str]) -> None:
    """Find the first row naming an unknown task in ``depends_on`` and raise there."""
    value_set = pa.array(sorted(unknown), pa.string())
    for path, row, table in _batches(files, ("depends_on",)):
        lists = table["depends_on"].combine_chunks()
        flat = pc.list_flatten(lists)
        hits = pc.is_in(flat, value_set=value_set)
        if pc.any(hits).as_py():
            k = _first(hits.to_numpy(zero_copy_only=False))
            owner = int(pc.list_parent_indices(lists)[k].as_py())
            raise TraceError(
                f"depends_on names task {flat[k].as_py()!r}, which is not in tasks "
                f"({len(unknown)} unknown task id(s) in all)", path, line=row + owner + 1,
                field="depends_on")
