"""The core's per-task records on their way to ``task_runs.parquet``, written while the core
runs.

The core finishes tasks in completion order; ``task_runs`` is in trace row order.  Records go
to scratch files bucketed by trace row range (:class:`RecordStore`), so memory stays bounded
whatever the trace's length.  Every trace row gets exactly one record, so a bucket is
complete when it holds as many records as it has rows: from then on its rows can be written.
:class:`BackgroundWriter` writes ``task_runs`` on a second thread, each identity batch as
soon as the buckets it spans are complete; its Parquet encoding and compression run outside
the GIL, beside the core.  (The core's numba kernels keep the GIL: releasing it at each of
their many short calls let the writer's Python work hold the core up for whole switch
intervals, which made a 1 M-task replay's core 1.7 times slower.)  The file is the same,
byte for byte, as one written after the replay: the same batches go out in the same order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.sim.tasks import N_EXTRA, S_COPIES, SPEC_DEFAULT, RecordChunk

BUCKET_ROWS = 1 << 18  # (as many as an identity batch: pipeline.replay.source)


class CancelledError(Exception):
    """The replay failed: the writer stops without writing the rest."""


class RecordStore:
    """The core's record sink: chunks split by ``row // bucket_rows`` into scratch files.

    ``total_rows``: the trace's task rows (the last bucket holds the rest), so buckets are
    known complete while the core runs; without it, only when the store is closed.
    """

    def __init__(self, scratch: Path, bucket_rows: int | None = None,
                 total_rows: int | None = None) -> None:
        self.scratch = scratch
        self.bucket_rows = bucket_rows or BUCKET_ROWS
        self.total_rows = total_rows
        self._files: dict[int, list[Path]] = {}
        self._cached: tuple[int, dict[str, np.ndarray]] | None = None
        self._counts: dict[int, int] = {}
        self._complete = 0  # rows [0, _complete) all have their record
        self._closed = False
        self._failed = False
        self._end_s = np.inf
        self._changed = threading.Condition()

    def write(self, chunk: RecordChunk) -> None:
        """Store one chunk (raw ``.npy`` columns: scratch needs speed, not compactness; the
        ``extra`` figures only when some task of the chunk has any)."""
        cols = {name: getattr(chunk, name) for name in chunk.__dataclass_fields__}
        del cols["kind"]  # (the trace has it: task_kind)
        if not cols["extra"].any():
            del cols["extra"]
        if not cols["spec"][:, S_COPIES].any():
            del cols["spec"]
        bucket = chunk.row // self.bucket_rows
        for b in np.unique(bucket).tolist():
            sel = bucket == b
            files = self._files.setdefault(b, [])
            path = self.scratch / f"records-{b:06d}-{len(files):06d}.npz"
            np.savez(path, **{k: v[sel] for k, v in cols.items()})
            files.append(path)
            self._counts[b] = self._counts.get(b, 0) + int(np.count_nonzero(sel))
        self._advance()

    def _advance(self) -> None:
        """Move the complete prefix past every bucket that holds all its records."""
        if self.total_rows is None:
            return
        with self._changed:
            while self._complete < self.total_rows:
                b = self._complete // self.bucket_rows
                size = min(self.bucket_rows, self.total_rows - b * self.bucket_rows)
                if self._counts.get(b, 0) < size:
                    break
                self._complete = b * self.bucket_rows + size
            self._changed.notify_all()

    def close(self, end_s: float = np.inf, failed: bool = False) -> None:
        """Every record is in (``end_s``: when the replay stopped), or the replay ``failed``:
        either way nothing more will come."""
        with self._changed:
            self._closed, self._failed, self._end_s = True, failed, float(end_s)
            self._changed.notify_all()

    def _wait(self, ready: Callable[[], bool]) -> None:
        with self._changed:
            self._changed.wait_for(lambda: ready() or self._closed)
            if self._failed:
                raise CancelledError

    def end_at_stop(self) -> float:
        """When the replay stopped (waits for it)."""
        self._wait(lambda: False)
        return self._end_s

    def bucket(self, b: int) -> dict[str, np.ndarray]:
        """Bucket ``b``'s records as numpy columns in row order (empty if none)."""
        files = self._files.get(b, [])
        if not files:
            return {"row": np.zeros(0, dtype=np.int64)}
        parts = [dict(np.load(f)) for f in files]
        # (columns no record of the bucket needs are left out: all zeros / no copies)
        with_extra = any("extra" in part for part in parts)
        with_spec = any("spec" in part for part in parts)
        for part in parts:
            if with_extra and "extra" not in part:
                part["extra"] = np.zeros((len(part["row"]), N_EXTRA), dtype=np.float32)
            if with_spec and "spec" not in part:
                part["spec"] = np.tile(SPEC_DEFAULT, (len(part["row"]), 1))
        data = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        # one record per row: placing each at its row is a sort in O(n); a row recorded
        # twice leaves another missing, which ``rows`` refuses
        at = data["row"] - b * self.bucket_rows
        size = int(at.max()) + 1 if len(at) else 0
        if len(at) != size:
            raise RuntimeError(f"records of trace rows from {b * self.bucket_rows} are not "
                               f"one per row ({len(at)} records for {size} rows)")
        placed = {}
        for k, v in data.items():
            placed[k] = (np.full(size, -1, dtype=v.dtype) if k == "row"
                         else np.empty((size, *v.shape[1:]), dtype=v.dtype))
            placed[k][at] = v
        return placed

    def rows(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Records of trace rows ``lo:hi`` (exactly one per row), in row order; waits until
        the core has recorded them all."""
        self._wait(lambda: self._complete >= hi)
        parts = []
        for b in range(lo // self.bucket_rows, (hi - 1) // self.bucket_rows + 1):
            if self._cached is None or self._cached[0] != b:
                self._cached = (b, self.bucket(b))
                for path in self._files.get(b - 1, []):  # (done with: free the disk)
                    path.unlink(missing_ok=True)
            data = self._cached[1]
            base = b * self.bucket_rows
            a, z = max(lo, base) - base, min(hi, base + self.bucket_rows) - base
            rows = data["row"]
            if len(rows) < z or not np.array_equal(rows[a:z], np.arange(a + base, z + base)):
                raise RuntimeError(f"records of trace rows {lo}..{hi} are incomplete")
            parts.append({k: v[a:z] for k, v in data.items()})
        if any("spec" in p for p in parts):  # (a range across buckets with and without)
            for p in parts:
                p.setdefault("spec", np.tile(SPEC_DEFAULT, (len(p["row"]), 1)))
        if any("extra" in p for p in parts):
            for p in parts:
                p.setdefault("extra", np.zeros((len(p["row"]), N_EXTRA), dtype=np.float32))
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


class BackgroundWriter:
    """Runs ``write(batches, failed=...)`` on a thread; :meth:`join` returns its result or
    raises its error (a :class:`CancelledError` write, after a failed replay, returns None).
    ``write`` may report an error early through ``failed`` (e.g. from a thread of its own),
    so that :meth:`check` raises it while the write still waits for batches."""

    def __init__(self, write: Callable[..., Any], batches: Iterator[pa.Table]) -> None:
        self._result: Any = None
        self._error: BaseException | None = None

        def target() -> None:
            try:
                self._result = write(batches, failed=self.fail)
            except CancelledError:
                pass
            except BaseException as exc:  # handed to the replay's thread by join()
                self.fail(exc)

        self._thread = threading.Thread(target=target, name="task_runs-writer", daemon=True)
        self._thread.start()

    def fail(self, error: BaseException) -> None:
        """Record the write's error (the first one counts)."""
        if self._error is None:
            self._error = error

    def check(self) -> None:
        """Raise the writer's error now, if it failed (the replay need not run on)."""
        if self._error is not None:
            raise self._error

    def join(self) -> Any:
        self._thread.join()
        self.check()
        return self._result
