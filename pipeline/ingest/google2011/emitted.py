"""Emitted Google 2011 tasks, spilled to disk and read back in submit order in bounded memory.

The fold (:mod:`.taskstate`) emits a task when its history closes, not in submit order, and a
task's incarnation number (its ``.N`` suffix) counts the earlier emitted incarnations of the
same (job, index).  Both are whole-trace questions: an in-memory sort or map of every task
grows with the trace (it did: ~150 MB per trace day).  Here instead:

- each emitted record is appended, fixed-width, to the file of its submit-time bucket
  (``bucket_s`` seconds of submit time), and its key (job, index), emission number ``seq``
  and bucket to one of ``PARTITIONS`` key files chosen by job id;
- :meth:`EmittedSpill.resolve` reads one key file at a time (every incarnation of a job is
  in one file, in emission order), numbers the incarnations in compiled code, and sends
  those above 0, with the task's mean usage where the trace has it, back to their bucket as
  side rows;
- :meth:`EmittedSpill.buckets` reads the buckets in time order, each sorted by (submit_s,
  job, index, incarnation): the canonical task order.

Incarnations of a key are numbered in emission order, which is also (submit_s, seq) order:
a new incarnation opens only after the previous one closed.  Peak memory is one part's
records, one key file and one bucket, whatever the trace's length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numba
import numpy as np
import polars as pl

from pipeline.ingest.google2011.taskstate import MAX_TASK_INDEX
from pipeline.ingest.inthash import IntMap, find, insert_at

BUCKET_S = 4 * 3600.0  # submit-time span of one bucket (a few 100k tasks in the real trace)
_JOB_LIMIT = (1 << 62) // MAX_TASK_INDEX  # |job id| below it: job * MAX + index fits
PARTITIONS = 16  # key files (a 29-day trace: ~2.3 M keys, ~55 MB each)

RECORD = np.dtype([
    ("submit_s", "f8"), ("duration_s", "f8"), ("cpu", "f8"), ("mem", "f8"),
    ("trace_lost_s", "f8"), ("recorded_start_s", "f8"), ("job_id", "i8"), ("task_index", "i8"),
    ("priority", "i8"), ("sched_class", "i8"), ("end_code", "i8"), ("trace_attempts", "i8"),
    ("recorded_machine", "i8"), ("seq", "i8"),
])
KEY = np.dtype([("key", "i8"), ("seq", "i8"), ("bucket", "i8")])
assert all(d.itemsize == 8 * len(d.names) for d in (RECORD, KEY))  # (see _gathered)
# Per task with an incarnation above 0 or measured usage (NaN: none).
SIDE = np.dtype([("seq", "i8"), ("incarnation", "i8"), ("cpu_used", "f8"), ("mem_used", "f8")])

# Usage partial sums of one key file: (job_id, task_index, cpu_s, mem_s, cpu_dt, mem_dt).
UsageSums = Callable[[int], pl.DataFrame | None]


class EmittedSpill:
    """Emitted task records on disk under ``root``, by submit bucket and by job partition."""

    def __init__(self, root: Path, bucket_s: float = BUCKET_S,
                 partitions: int = PARTITIONS) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.bucket_s = bucket_s
        self.partitions = partitions
        self.emitted = 0
        self.bucket_ids: set[int] = set()

    def add(self, records: dict[str, np.ndarray]) -> None:
        """Append emitted records (in emission order), numbering them from ``emitted``."""
        n = len(records["submit_s"])
        if not n:
            return
        seq = np.arange(self.emitted, self.emitted + n, dtype=np.int64)
        self.emitted += n
        bucket = (records["submit_s"] // self.bucket_s).astype(np.int64)
        self.bucket_ids.update(append_grouped(
            *_gathered(RECORD, {**records, "seq": seq}, bucket), self._bucket_path))
        job = records["job_id"]
        append_grouped(*_gathered(KEY, {"key": job * MAX_TASK_INDEX + records["task_index"],
                                        "seq": seq, "bucket": bucket}, job % self.partitions),
                       self._key_path)

    def resolve(self, usage_sums: UsageSums | None = None) -> int:
        """Number incarnations and attach mean usage, as side rows per bucket.

        ``usage_sums(p)``: the usage partial sums of key file ``p``'s jobs (None: no usage).
        Returns the number of incarnations above 0 (re-submissions after an end).
        """
        resubmitted = 0
        for p in range(self.partitions):
            path = self._key_path(p)
            if not path.exists():
                continue
            keys = np.fromfile(path, KEY)
            path.unlink()
            incarnation = _incarnations(keys["key"])
            resubmitted += int((incarnation > 0).sum())
            side, kept = _side_rows(keys, incarnation, usage_sums(p) if usage_sums else None)
            append_grouped(side, keys["bucket"][kept], self._side_path)
        return resubmitted

    def buckets(self) -> Iterator[pl.DataFrame]:
        """Per bucket in time order: the records with ``incarnation``, ``cpu_used`` and
        ``mem_used`` (NaN: none), sorted by (submit_s, job_id, task_index, incarnation)."""
        for b in sorted(self.bucket_ids):
            rec = np.fromfile(self._bucket_path(b), RECORD)
            incarnation = np.zeros(len(rec), np.int64)
            used = np.full((2, len(rec)), np.nan)
            side_path = self._side_path(b)
            if side_path.exists():
                side = np.fromfile(side_path, SIDE)
                at = np.searchsorted(rec["seq"], side["seq"])  # a bucket is in seq order
                incarnation[at] = side["incarnation"]
                used[0, at], used[1, at] = side["cpu_used"], side["mem_used"]
            order = submit_order(rec["submit_s"], rec["job_id"], rec["task_index"],
                                 incarnation)
            columns = {name: rec[name][order] for name in RECORD.names}
            columns.update(incarnation=incarnation[order], cpu_used=used[0][order],
                           mem_used=used[1][order])
            yield pl.DataFrame(columns)

    def _bucket_path(self, b: int) -> Path:
        return self.root / f"bucket-{b:06d}.rec"

    def _side_path(self, b: int) -> Path:
        return self.root / f"bucket-{b:06d}.side"

    def _key_path(self, p: int) -> Path:
        return self.root / f"keys-{p:03d}.key"


def submit_order(submit_s: np.ndarray, job_id: np.ndarray, task_index: np.ndarray,
                 incarnation: np.ndarray) -> np.ndarray:
    """The permutation sorting rows by (submit_s, job_id, task_index, incarnation).

    Stable sorts from the last key to the first (the (job, index) pair as one integer, as
    in the key files, when it fits), column by column: cheaper than a multi-column sort of
    the whole frame and a gather of whole records.  Ties on every key keep their order.
    """
    order = np.arange(len(submit_s))
    if np.any(incarnation):
        order = np.argsort(incarnation, kind="stable")
    job, index = job_id[order], task_index[order]
    if len(job) and job.min() > -_JOB_LIMIT and job.max() < _JOB_LIMIT:
        order = order[np.argsort(job * MAX_TASK_INDEX + index, kind="stable")]
    else:  # the pair does not fit one integer: one pass per key
        order = order[np.argsort(index, kind="stable")]
        order = order[np.argsort(job_id[order], kind="stable")]
    return order[np.argsort(submit_s[order], kind="stable")]


def _gathered(dtype: np.dtype, columns: dict[str, np.ndarray], group: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``dtype`` (8-byte fields only) from ``columns`` and their groups, stably
    ordered by ``group``.

    The columns are stacked as 64-bit patterns and each row is gathered whole in compiled
    code (one pass over the output instead of one strided pass per field); small group
    numbers are sorted as 16-bit integers, which numpy's stable sort does by radix.
    """
    order = np.argsort(_narrow(group), kind="stable")
    stacked = np.stack([np.asarray(columns[name], dtype[name]).view(np.int64)
                        for name in dtype.names])
    rows = np.empty((len(order), len(dtype.names)), np.int64)
    _gather_rows(stacked, order, rows)
    return rows.view(dtype).reshape(len(order)), group[order]


def _narrow(group: np.ndarray) -> np.ndarray:
    """``group`` as int16 when its values fit (same order, cheaper to sort stably)."""
    if len(group) and group.min() >= 0 and group.max() < 1 << 15:
        return group.astype(np.int16)
    return group


@numba.njit(cache=True)
def _gather_rows(stacked, order, rows):  # pragma: no cover - compiled
    for r in range(order.size):
        src = order[r]
        for j in range(stacked.shape[0]):
            rows[r, j] = stacked[j, src]


def append_grouped(rows: np.ndarray, group: np.ndarray, path_of: Callable[[int], Path]
                   ) -> list[int]:
    """Append each group's rows (order kept) to its file; return the groups written.

    ``rows`` may come ordered by ``group`` (:func:`_gathered`): then they are not gathered.
    """
    if not len(rows):
        return []
    if np.any(group[1:] < group[:-1]):
        order = np.argsort(group, kind="stable")
        rows, group = rows[order], group[order]
    else:
        rows = np.ascontiguousarray(rows)
    cuts = np.flatnonzero(group[1:] != group[:-1]) + 1
    written = []
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(rows)], strict=True):
        g = int(group[lo])
        with path_of(g).open("ab") as fh:
            fh.write(memoryview(rows[lo:hi]).cast("B"))
        written.append(g)
    return written


def _side_rows(keys: np.ndarray, incarnation: np.ndarray, sums: pl.DataFrame | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Side rows (seq, incarnation, mean usage) of the keys with either, and which keys."""
    side = np.empty(len(keys), SIDE)
    side["seq"], side["incarnation"] = keys["seq"], incarnation
    side["cpu_used"] = side["mem_used"] = np.nan
    keep = incarnation > 0
    if sums is not None and sums.height:
        means = sums.group_by("job_id", "task_index").agg(pl.all().sum()).select(
            key=pl.col("job_id") * MAX_TASK_INDEX + pl.col("task_index"),
            cpu_used=pl.when(pl.col("cpu_dt") != 0).then(pl.col("cpu_s") / pl.col("cpu_dt")),
            mem_used=pl.when(pl.col("mem_dt") != 0).then(pl.col("mem_s") / pl.col("mem_dt")),
        )
        joined = pl.DataFrame({"key": keys["key"]}).join(
            means, on="key", how="left", maintain_order="left")
        side["cpu_used"] = joined["cpu_used"].fill_null(np.nan).to_numpy()
        side["mem_used"] = joined["mem_used"].fill_null(np.nan).to_numpy()
        keep |= ~(np.isnan(side["cpu_used"]) & np.isnan(side["mem_used"]))
    return side[keep], keep


def _incarnations(keys: np.ndarray) -> np.ndarray:
    """For each key (in emission order), how many times it occurred before."""
    counts = IntMap(2 * len(keys))
    return _count_before(keys, counts.keys, counts.values, counts.count)


@numba.njit(cache=True)
def _count_before(keys, map_keys, map_values, count):  # pragma: no cover - compiled
    out = np.zeros(keys.size, np.int64)
    for r in range(keys.size):
        p = find(map_keys, keys[r])
        if p >= 0:
            out[r] = map_values[p]
            map_values[p] += 1
        else:
            insert_at(map_keys, map_values, count, -1 - p, keys[r], 1)
    return out
