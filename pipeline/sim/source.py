"""Tasks as the core receives them: numpy batches in submit order, and a cursor over them.

The core never reads files: the replay stage turns canonical Parquet batches into
:class:`TaskBatch` objects (codes for users, queues and jobs; node slots for inputs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from pipeline.errors import TraceError


@dataclass
class TaskBatch:
    """Consecutive tasks of the trace, sorted by ``submit``; optional fields sparse by row."""

    row: np.ndarray
    submit: np.ndarray
    duration: np.ndarray
    req: np.ndarray
    used: np.ndarray
    user: np.ndarray
    queue: np.ndarray
    job: np.ndarray
    priority: np.ndarray
    censored: np.ndarray | None = None  # bool per row: the trace saw it running at its end
    recorded_node: np.ndarray | None = None  # node slot the trace ran it on (-1: unknown)
    recorded_start: np.ndarray | None = None  # when the trace started it (NaN: unknown)
    requested: np.ndarray | None = None  # run time the user asked for (NaN: not stated)
    gang: np.ndarray | None = None  # int64 gang codes (-1: none; pipeline.sim.gangs)
    allow: np.ndarray | None = None  # int64 GPU model masks (0: any; pipeline.sim.models)
    # node slots holding each task's input, (n, INPUT_WIDTH) int32, -1 padded; has_inputs:
    # whether the task has input data somewhere (on an elastic cluster it is on no node)
    inputs: np.ndarray | None = None
    has_inputs: np.ndarray | None = None
    input_mb: np.ndarray | None = None  # MiB each task reads (NaN: not stated)
    kind: np.ndarray | None = None  # int8 kind codes (pipeline.sim.tasks.KINDS); None: all 0
    deps: dict[int, list[str]] = field(default_factory=dict)
    task_id: dict[int, str] = field(default_factory=dict)
    # measured usage over each task's life (task_usage): ``indptr`` (n + 1) into
    # ``start``/``end`` (work seconds from the task's start), ``cpu``, ``mem``
    usage: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.row)

    def usage_of(self, rows: np.ndarray) -> tuple[np.ndarray, ...] | None:
        """The usage segments of batch positions ``rows`` (in that order), or None."""
        if self.usage is None:
            return None
        indptr, *cols = self.usage
        counts = (indptr[rows + 1] - indptr[rows]).astype(np.int64)
        if not counts.any():
            return None
        out_ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=out_ptr[1:])
        starts = np.repeat(indptr[rows] - out_ptr[:-1], counts)
        take = starts + np.arange(int(out_ptr[-1]))
        return (out_ptr, *(c[take] for c in cols))


class Arrivals:
    """A cursor over a stream of batches: peek the next submit time, take rows up to a time."""

    def __init__(self, batches: Iterable[TaskBatch]) -> None:
        self._it: Iterator[TaskBatch] = iter(batches)
        self._batch: TaskBatch | None = None
        self._pos = 0
        self.last_submit = -np.inf
        self._load()

    def _load(self) -> None:
        while self._batch is None or self._pos >= len(self._batch):
            nxt = next(self._it, None)
            if nxt is None:
                self._batch = None
                return
            if len(nxt) and (np.any(np.diff(nxt.submit) < 0) or nxt.submit[0] < self.last_submit):
                raise TraceError(f"tasks are not in submit order near row {int(nxt.row[0])}",
                                 field="submit_s")
            if len(nxt):
                self.last_submit = float(nxt.submit[-1])
            self._batch, self._pos = nxt, 0

    @property
    def exhausted(self) -> bool:
        return self._batch is None

    def next_time(self) -> float:
        """Submit time of the next task not yet taken, or +inf."""
        return np.inf if self._batch is None else float(self._batch.submit[self._pos])

    def take(self, t: float) -> Iterator[tuple[TaskBatch, int, int]]:
        """Yield ``(batch, lo, hi)`` slices of the tasks submitted at or before ``t``."""
        while self._batch is not None:
            b, lo = self._batch, self._pos
            hi = int(np.searchsorted(b.submit, t, side="right"))
            if hi <= lo:
                return
            self._pos = hi
            yield b, lo, hi
            if hi < len(b):
                return
            self._load()

    def rest(self) -> Iterator[tuple[TaskBatch, int, int]]:
        """Yield every task not yet taken."""
        yield from self.take(np.inf)
