"""Sets of task ids at trace scale: distinct strings, and repeated ids via 64-bit hashes.

Traces hold up to billions of tasks, so neither keeps Python objects per id: distinct
strings stay in Arrow arrays, and repeats are found among 8-byte hashes that spill to
partition files beyond a limit (callers verify candidate repeats against the ids).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

SPILL_HASHES = 1 << 24  # hashes kept in memory (128 MiB) before spilling to partitions
SPILL_PARTS = 64


def id_hashes(ids: pa.Array, seed: int = 0) -> np.ndarray:
    """A 64-bit hash per id (polars' hash: stable within a process, which is all we need)."""
    return pl.Series(ids).hash(seed=seed).to_numpy()


class UniqueStrings:
    """Distinct strings of many arrays, deduplicated in Arrow as they come (no Python objects).

    Memory stays within about twice the distinct values: the pending arrays are merged
    whenever they outgrow what is already distinct.
    """

    def __init__(self) -> None:
        self._distinct = pa.array([], pa.string())
        self._pending: list[pa.Array] = []
        self._pending_rows = 0

    def add(self, values: pa.Array) -> None:
        values = pc.unique(values.cast(pa.string()))
        self._pending.append(values)
        self._pending_rows += len(values)
        if self._pending_rows > max(len(self._distinct), 1 << 20):
            self._merge()

    def _merge(self) -> None:
        if self._pending:
            merged = pa.concat_arrays([self._distinct, *self._pending])
            self._distinct = pc.unique(merged)
            self._pending, self._pending_rows = [], 0

    def result(self) -> pa.Array:
        self._merge()
        return self._distinct


class HashSpool:
    """64-bit hashes of every task id: in memory up to a limit, then in partition files.

    Partitions split by the hash's top bits, so equal hashes share a partition and each
    partition is sorted on its own: memory stays at ``limit`` hashes or one partition.
    """

    def __init__(self, limit: int = SPILL_HASHES, parts: int = SPILL_PARTS) -> None:
        self.limit, self.parts = limit, parts
        self._chunks: list[np.ndarray] = []
        self._held = 0
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def add(self, hashes: np.ndarray) -> None:
        self._chunks.append(hashes)
        self._held += hashes.size
        if self._held > self.limit:
            self._spill()

    def _spill(self) -> None:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="tracereplay-ids-")
        data = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.uint64)
        self._chunks, self._held = [], 0
        part = (data >> np.uint64(64 - int(np.log2(self.parts)))).astype(np.int64)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(self.parts + 1))
        for k in range(self.parts):
            with open(self._part_path(k), "ab") as fh:
                fh.write(data[order[bounds[k]:bounds[k + 1]]].tobytes())

    def _part_path(self, k: int) -> Path:
        assert self._dir is not None
        return Path(self._dir.name) / f"part-{k:03d}.u64"

    def duplicates(self) -> np.ndarray:
        """Hash values seen more than once."""
        if self._dir is None:
            return _repeated(np.concatenate(self._chunks) if self._chunks
                             else np.zeros(0, np.uint64))
        self._spill()
        found = [_repeated(np.fromfile(self._part_path(k), dtype=np.uint64))
                 for k in range(self.parts)]
        return np.concatenate(found)

    def close(self) -> None:
        self._chunks = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _repeated(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    return np.unique(values[1:][values[1:] == values[:-1]])
