"""Reading a trace's optional ``task_usage`` table beside its tasks, batch by batch.

``task_usage`` rows are ordered by their task's row in ``tasks``, then by ``start_s``
(the canonical format's rule), so the replay streams them in step with the task batches:
each batch takes the rows of its own tasks from the front of the stream, and memory holds
one batch of usage rows at a time, never the whole table.  Rows out of that order, or of a
task the trace does not have, are a one-line error naming the row.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import TraceError
from pipeline.trace.io import has_table, part_files

USAGE_COLUMNS = ("task_id", "start_s", "end_s", "cpu", "mem")
BATCH_ROWS = 1 << 18
Segments = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class UsageStream:
    """A cursor over ``task_usage`` in task order (empty when the trace has none)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.present = has_table(self.dir, "task_usage")
        self._batches = self._read() if self.present else iter(())
        self._buffer: pa.Table | None = None
        self._row = 0  # usage rows consumed so far

    def _read(self) -> Iterator[pa.Table]:
        for f in part_files(self.dir, "task_usage"):
            try:
                pf = pq.ParquetFile(f)
                for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=list(USAGE_COLUMNS)):
                    yield pa.Table.from_batches([batch])
            except (OSError, pa.ArrowInvalid, KeyError) as exc:
                raise TraceError(f"unreadable task_usage ({exc})", f) from exc

    def _fill(self) -> bool:
        """Make the buffer non-empty; False when the table is exhausted."""
        while self._buffer is None or self._buffer.num_rows == 0:
            nxt = next(self._batches, None)
            if nxt is None:
                return False
            self._buffer = nxt
        return True

    def take(self, task_ids: pa.Array) -> Segments | None:
        """The segments of the batch's tasks ``task_ids`` (in batch order) as
        ``(indptr, start, end, cpu, mem)``, or None when they have none."""
        if not self.present:
            return None
        parts: list[pa.Table] = []
        positions: list[np.ndarray] = []
        while self._fill():
            assert self._buffer is not None
            found = pc.index_in(self._buffer["task_id"], value_set=task_ids)
            pos = np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), np.int64)
            k = int(np.argmax(pos < 0)) if np.any(pos < 0) else len(pos)
            parts.append(self._buffer.slice(0, k))
            positions.append(pos[:k])
            self._buffer = self._buffer.slice(k)
            if self._buffer.num_rows:
                break  # the next row belongs to a later batch
        if not parts:
            return None
        pos = np.concatenate(positions)
        table = pa.concat_tables(parts)
        if len(pos) and np.any(np.diff(pos) < 0):
            bad = int(np.argmax(np.diff(pos) < 0)) + 1
            raise TraceError(f"task_usage row {self._row + bad}: rows are not in the order of "
                             "their tasks in tasks.parquet", self.dir, field="task_id")
        self._row += len(pos)
        if len(pos) == 0:
            return None
        indptr = np.searchsorted(pos, np.arange(len(task_ids) + 1), side="left").astype(
            np.int64)
        cols = [np.asarray(pc.fill_null(table[c], np.nan).to_numpy(zero_copy_only=False),
                           np.float64) for c in USAGE_COLUMNS[1:]]
        return (indptr, *cols)

    def finish(self) -> None:
        """Every usage row must have been taken by some batch of tasks."""
        if self._fill():
            assert self._buffer is not None
            tid = self._buffer["task_id"][0].as_py()
            raise TraceError(f"task_usage row {self._row}: task_id {tid!r} is not a task of "
                             "the trace, or its rows are not in task order", self.dir,
                             field="task_id")
