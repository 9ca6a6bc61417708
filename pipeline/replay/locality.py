"""Where each task's input data lives in a replay, and how much it reads.

Two sources, per task:

- the trace's own ``inputs`` (machine ids holding the data: Rumen/SLS split locations, or a
  user's trace), which always win: recorded locations are better than a model;
- with the cluster option ``dfs=hdfs``, the HDFS model of :mod:`pipeline.replay.dfs`
  for every other map-like task (``task_kind`` ``map`` or null): each job's input laid out
  as a file of blocks (a shared file where the trace names one, ``input_file``), one block
  per map, replicas placed rack-aware, deterministic by the run's seed.  Such a task reads
  its ``input_mb``, or one block (``block_mb``) when the trace gives no size.

Racks: the trace's; with ``dfs=hdfs`` machines without one are grouped into racks of
``rack_size`` (:func:`pipeline.replay.dfs.rack_codes`).  On an elastic cluster the trace's
machines do not exist and booted nodes hold no data: a task with input data reads it
remotely (locality ``any``, at the off-rack rate), as from cloud storage.

The layout is computed once before the replay from three task columns (codes per task: a
few bytes per task, not per task in flight; noted for the full-trace scale work).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.replay.dfs import DfsModel, lay_out, rack_codes
from pipeline.sim.cluster import ClusterSpec
from pipeline.sim.tasks import INPUT_WIDTH

Stream = Callable[[tuple[str, ...]], object]


class InputLayout:
    """Per-batch input locations and sizes for one replay (see the module docstring)."""

    def __init__(self, spec: ClusterSpec, machine_ids: pa.Array, machine_racks: pa.Array,
                 stream: Stream, seed: int) -> None:
        self.dfs = spec.dfs == "hdfs"
        self.block_mb = float(spec.block_mb)
        self.fixed = spec.kind == "fixed"
        self._ids = machine_ids
        if self.dfs:
            self.racks, _ = rack_codes(machine_racks, spec.rack_size)
            model = DfsModel(spec.block_mb, spec.replication, spec.rack_size)
            self._ptr, self._where = self._lay_out(stream, model, seed)
        else:
            enc = pc.dictionary_encode(machine_racks).combine_chunks()
            self.racks = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(
                zero_copy_only=False), np.int32)
            self._ptr = self._where = None

    def _lay_out(self, stream: Stream, model: DfsModel,
                 seed: int) -> tuple[np.ndarray, np.ndarray]:
        """The HDFS layout of every task (CSR over trace rows, machine indices)."""
        jobs, files, maps = [], [], []
        job_codes: dict[str, int] = {}
        file_codes: dict[str, int] = {}
        for _, t in stream(("job_id", "task_kind", "input_file", "inputs")):  # type: ignore[attr-defined]
            jobs.append(_codes(t["job_id"], job_codes))
            f = t["input_file"]
            files.append(np.where(pc.is_null(f).to_numpy(zero_copy_only=False), -1,
                                  _codes(pc.fill_null(f, ""), file_codes)))
            kind = pc.fill_null(t["task_kind"], "map")
            recorded = pc.fill_null(pc.list_value_length(t["inputs"]), 0)
            maps.append(np.asarray(pc.and_(pc.equal(kind, "map"),
                                           pc.equal(recorded, 0)).to_numpy(
                zero_copy_only=False), dtype=np.bool_))
        if not jobs:
            return np.zeros(1, np.int64), np.zeros(0, np.int32)
        return lay_out(np.concatenate(jobs), np.concatenate(files).astype(np.int64),
                       np.concatenate(maps), self.racks, model, seed)

    def batch(self, offset: int, t: pa.Table) -> tuple[np.ndarray | None, np.ndarray | None,
                                                     np.ndarray | None]:
        """``(inputs, has_inputs, input_mb)`` of the rows ``offset..`` of ``t`` (columns
        ``inputs``, ``input_mb``, ``task_kind``); ``None`` for what no row has."""
        n = t.num_rows
        inputs, has = self._recorded(t["inputs"])
        mb = np.asarray(pc.fill_null(t["input_mb"], np.nan).to_numpy(zero_copy_only=False),
                        dtype=np.float64)
        if self.dfs and self._ptr is not None:
            lo, hi = self._ptr[offset], self._ptr[offset + n]
            counts = np.diff(self._ptr[offset:offset + n + 1])
            modelled = (counts > 0) & ~has
            if modelled.any():
                if inputs is None:
                    inputs = np.full((n, INPUT_WIDTH), -1, dtype=np.int32)
                rows = np.repeat(np.arange(n), counts)
                col = np.arange(hi - lo) - np.repeat(self._ptr[offset:offset + n] - lo, counts)
                keep = modelled[rows] & (col < INPUT_WIDTH)
                slots = self._where[lo:hi] if self.fixed else np.full(hi - lo, -1, np.int32)
                inputs[rows[keep], col[keep]] = slots[keep]
                has = has | modelled
                mb = np.where(modelled & np.isnan(mb), self.block_mb, mb)
        any_mb = bool(np.any(mb > 0))
        return (inputs if has.any() else None, has if has.any() else None,
                mb if any_mb else None)

    def _recorded(self, col: pa.ChunkedArray) -> tuple[np.ndarray | None, np.ndarray]:
        """The trace's own input locations as node slots (-1 padded), and which rows have
        any (on an elastic cluster: none of them is a node here)."""
        n = len(col)
        lengths = np.asarray(pc.fill_null(pc.list_value_length(col), 0).to_numpy(
            zero_copy_only=False), dtype=np.int64)
        has = lengths > 0
        if not has.any():
            return None, has
        out = np.full((n, INPUT_WIDTH), -1, dtype=np.int32)
        if not self.fixed:
            return out, has
        flat = pc.list_flatten(col)
        found = pc.index_in(flat, value_set=self._ids)
        slot = np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), np.int32)
        rows = np.repeat(np.arange(n), lengths)
        col_pos = np.arange(len(slot)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        keep = col_pos < INPUT_WIDTH
        out[rows[keep], col_pos[keep]] = slot[keep]
        return out, has


def _codes(values: pa.ChunkedArray | pa.Array, table: dict[str, int]) -> np.ndarray:
    """Stable integer codes of string ``values`` (first seen, first coded) across batches."""
    enc = pc.dictionary_encode(values).combine_chunks() if isinstance(
        values, pa.ChunkedArray) else pc.dictionary_encode(values)
    names = enc.dictionary.to_pylist()
    remap = np.array([table.setdefault(v, len(table)) for v in names], dtype=np.int64)
    idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return remap[idx] if len(remap) else idx
