"""Reading a canonical trace for a replay: machines, jobs, dependency counts, and the task
stream turned into the core's numpy batches (with each batch's identity columns kept aside
for the output)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import TraceError
from pipeline.replay.locality import InputLayout
from pipeline.replay.usage import UsageStream
from pipeline.sim.cluster import up_periods
from pipeline.sim.models import allow_masks, model_bits
from pipeline.sim.source import TaskBatch
from pipeline.sim.tasks import KINDS
from pipeline.trace.identity import content_digest
from pipeline.trace.io import has_table, part_files, read_table
from pipeline.trace.manifest import Manifest
from pipeline.trace.readcheck import quick_check
from pipeline.trace.schema import DEFAULTS, EXTENSIONS, TASKS

BATCH_ROWS = 1 << 18
SIM_COLUMNS = ("task_id", "job_id", "submit_s", "duration_s", "cpu", "mem", "gpu", "cpu_used",
               "mem_used", "inputs", "input_mb", "depends_on", "priority", "end_event",
               "recorded_machine_id", "recorded_start_s", "task_kind", "requested_s",
               "gang_id")
IDENTITY_COLUMNS = ("task_id", "job_id", "submit_s", "duration_s", "cpu", "mem", "gpu",
                    "cpu_used", "mem_used", "end_event")


def _task_field(name: str) -> pa.Field:
    """A canonical task column, or a family column of ``EXTENSIONS`` (``requested_s``)."""
    return TASKS.field(name) if name in TASKS.names else EXTENSIONS["tasks"].field(name)


def _default_column(name: str, n: int) -> pa.Array:
    value = DEFAULTS["tasks"].get(name)
    kind = _task_field(name).type
    return pa.nulls(n, kind) if value is None else pa.array([value] * n, kind)


def censored(end_event: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per task: whether the trace saw it still running when its window closed."""
    return np.asarray(pc.fill_null(pc.equal(end_event, "censored"), False).to_numpy(
        zero_copy_only=False), dtype=np.bool_)


def task_kinds(task_kind: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """Kind codes (pipeline.sim.tasks.KINDS: 0 one phase, 1 map, 2 reduce; other names and
    nulls are one phase), or None when no task of the batch names one."""
    if task_kind.null_count == len(task_kind):
        return None
    code = pc.index_in(task_kind, value_set=pa.array(list(KINDS[1:])))
    return np.asarray(pc.fill_null(pc.add(code, 1), 0).to_numpy(zero_copy_only=False),
                      dtype=np.int8)


def _f64(col: pa.ChunkedArray | pa.Array, fill: float) -> np.ndarray:
    return np.asarray(pc.fill_null(col, fill).to_numpy(zero_copy_only=False), dtype=np.float64)


@dataclass(frozen=True)
class Window:
    """A trace's observation window (seconds from its time origin) and where it came from."""

    start_s: float
    end_s: float
    source: str


class TraceInput:
    """A canonical trace directory opened for replay (small tables read, tasks streamed)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        if not self.dir.is_dir():
            raise TraceError("trace directory not found", self.dir)
        manifest_path = self.dir / "manifest.json"
        try:
            self.manifest = Manifest.read(self.dir) if manifest_path.exists() else None
        except (ValueError, TypeError) as exc:
            raise TraceError(f"unreadable manifest ({exc})", manifest_path) from exc
        self._digest: str | None = None
        self._gangs: tuple[pa.Array, np.ndarray] | None = None
        self._node_keys: pa.Array | None = None
        self._node_vals = np.zeros(0, dtype=np.int32)
        if not self.validated:  # as ingest wrote and validated it: nothing to check again
            quick_check(self.dir)  # refuse what `validate` refuses, cheaply, before replaying
        self.machines = read_table(self.dir, "machines")
        self.jobs = read_table(self.dir, "jobs")
        self.downtime = (read_table(self.dir, "machine_downtime")
                         if has_table(self.dir, "machine_downtime") else None)
        part_files(self.dir, "tasks")  # fail now if absent
        user = pc.dictionary_encode(self.jobs["user"]).combine_chunks()
        queue = pc.dictionary_encode(pc.fill_null(self.jobs["queue"], "")).combine_chunks()
        self.users = tuple(user.dictionary.to_pylist())
        self.queues = tuple(queue.dictionary.to_pylist())
        self.job_user = np.asarray(user.indices.to_numpy(zero_copy_only=False), np.int32)
        self.job_queue = np.asarray(queue.indices.to_numpy(zero_copy_only=False), np.int32)
        self._job_prio = np.asarray(_f64(self.jobs["priority"], 0), np.int32)
        self._job_ids = self.jobs["job_id"].combine_chunks()

    @property
    def units(self) -> dict[str, str]:
        return dict(self.manifest.units) if self.manifest else {}

    def machine_cap(self) -> np.ndarray:
        m = self.machines
        return np.column_stack([_f64(m["cpu"], 0), _f64(m["mem"], 0), _f64(m["gpu"], 0)])

    def machine_periods(self) -> list[tuple[int, float, float]]:
        """Each machine's up periods from ``added_s``/``removed_s`` and ``machine_downtime``."""
        m = self.machines
        index = {mid: i for i, mid in enumerate(m["machine_id"].to_pylist())}
        nodes, lo, hi = [], [], []
        if self.downtime is not None and self.downtime.num_rows:
            for mid, d, u in zip(*(self.downtime[c].to_pylist()
                                   for c in ("machine_id", "down_s", "up_s")), strict=True):
                if mid in index:
                    nodes.append(index[mid])
                    lo.append(d)
                    hi.append(np.nan if u is None else u)
        return up_periods(_f64(m["added_s"], 0), _f64(m["removed_s"], np.nan),
                          np.array(nodes, np.int64), np.array(lo, np.float64),
                          np.array(hi, np.float64))

    def racks(self) -> np.ndarray:
        enc = pc.dictionary_encode(self.machines["rack"]).combine_chunks()
        return np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), np.int32)

    def digest(self) -> str:
        """The trace's identity: a digest of its contents (:mod:`pipeline.trace.identity`)."""
        if self._digest is None:
            self._digest = content_digest(self.dir)
        return self._digest

    @property
    def validated(self) -> bool:
        """Whether the tables are those ingest wrote and validated (same content digest)."""
        return bool(self.manifest and self.manifest.digest
                    and self.manifest.digest == self.digest())

    def task_rows(self) -> int:
        """How many task rows the trace has (from the Parquet footers)."""
        return sum(pq.ParquetFile(f).metadata.num_rows for f in part_files(self.dir, "tasks"))

    def facts(self) -> dict[str, object]:
        """What the trace is, for reports: format, units, time origin and table sizes."""
        m = self.manifest
        return {
            "source_format": m.source_format if m else None,
            "units": dict(m.units) if m else {}, "time_origin": m.time_origin if m else None,
            "machines": self.machines.num_rows, "jobs": self.jobs.num_rows,
            "tasks": self.task_rows(),
            "generated": bool(m and "generated" in (m.window_source or "")),
        }

    def window(self) -> Window:
        """The observation window: from the manifest, else from the tasks themselves."""
        m = self.manifest
        if m is not None and m.window_end_s is not None:
            start = 0.0 if m.window_start_s is None else float(m.window_start_s)
            return Window(start, float(m.window_end_s), m.window_source or "manifest")
        end = 0.0
        for _, table in self._stream(("submit_s", "duration_s")):
            ends = pc.add(table["submit_s"], table["duration_s"])
            if len(ends):
                end = max(end, float(pc.max(ends).as_py() or 0.0))
        return Window(0.0, end, "no window in the manifest: from time 0 to the latest "
                                "submit_s + duration_s of the tasks")

    def gpu_models(self) -> tuple[tuple[str, ...], np.ndarray]:
        """The machines' GPU model names (sorted) and each machine's model bit (0: none
        named; :mod:`pipeline.sim.models`)."""
        m = self.machines
        try:
            return model_bits(m["gpu_model"] if "gpu_model" in m.column_names else None)
        except ValueError as exc:
            raise TraceError(str(exc), self.dir, field="gpu_model") from exc

    def gpu_spec_tasks(self) -> int:
        """How many tasks name the GPU models they may use (``gpu_spec``)."""
        count = 0
        for f in part_files(self.dir, "tasks"):
            if "gpu_spec" in pq.ParquetFile(f).schema_arrow.names:
                specs = pq.read_table(f, columns=["gpu_spec"])["gpu_spec"]
                count += int(pc.sum(pc.fill_null(pc.greater(pc.list_value_length(specs), 0),
                                                 False)).as_py() or 0)
        return count

    def gang_sizes(self) -> np.ndarray | None:
        """Members per gang (``gang_id``, coded in order of first appearance), or None when
        no task names a gang."""
        if self._gangs is None:
            names: dict[str, int] = {}
            for f in part_files(self.dir, "tasks"):
                if "gang_id" not in pq.ParquetFile(f).schema_arrow.names:
                    continue
                for gang in pq.read_table(f, columns=["gang_id"])["gang_id"].to_pylist():
                    if gang is not None:
                        names[gang] = names.get(gang, 0) + 1
            self._gangs = (pa.array(list(names), pa.string()),
                           np.fromiter(names.values(), np.int64, len(names)))
        return self._gangs[1] if len(self._gangs[1]) else None

    def _gang_codes(self, gang_id: pa.ChunkedArray) -> np.ndarray | None:
        if gang_id.null_count == len(gang_id) or self.gang_sizes() is None:
            return None
        assert self._gangs is not None
        codes = pc.index_in(gang_id, value_set=self._gangs[0])
        return np.asarray(pc.fill_null(codes, -1).to_numpy(zero_copy_only=False), np.int64)

    def dependency_refs(self) -> dict[str, int]:
        """How many times each task id is named in some task's ``depends_on``."""
        counts: Counter[str] = Counter()
        for f in part_files(self.dir, "tasks"):
            pf = pq.ParquetFile(f)
            if "depends_on" not in pf.schema_arrow.names:
                continue
            for batch in pf.iter_batches(columns=["depends_on"], batch_size=BATCH_ROWS):
                flat = pc.list_flatten(batch.column(0))
                if len(flat):
                    vc = pc.value_counts(flat)
                    counts.update(dict(zip(vc.field("values").to_pylist(),
                                           vc.field("counts").to_pylist(), strict=True)))
        counts.pop(None, None)
        return dict(counts)

    def _stream(self, columns: tuple[str, ...]) -> Iterator[tuple[int, pa.Table]]:
        """``(first row, table)`` batches of the tasks with ``columns`` (defaults filled)."""
        offset = 0
        for f in part_files(self.dir, "tasks"):
            try:
                pf = pq.ParquetFile(f)
                present = [c for c in columns if c in pf.schema_arrow.names]
                for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=present):
                    table = pa.Table.from_batches([batch])
                    for c in columns:
                        if c not in present:
                            table = table.append_column(c, _default_column(c, batch.num_rows))
                    yield offset, table.select(list(columns)).cast(
                        pa.schema([_task_field(c) for c in columns]))
                    offset += batch.num_rows
            except (OSError, pa.ArrowInvalid) as exc:
                raise TraceError(f"unreadable Parquet ({exc})", f) from exc

    def identities(self) -> Iterator[tuple[int, pa.Table]]:
        """The task columns ``task_runs`` copies, in row order."""
        return self._stream(IDENTITY_COLUMNS)

    def batches(self, node_of: dict[str, int] | None, parents: set[str],
                layout: InputLayout | None = None,
                models: tuple[str, ...] | None = None) -> Iterator[TaskBatch]:
        """The task stream as the core's numpy batches (``layout``: where inputs live), each
        with its tasks' measured usage over time where the trace has ``task_usage``
        (``models``: the machines' GPU model names, to code ``gpu_spec`` against; None: the
        replay does not enforce models)."""
        usage = UsageStream(self.dir)
        columns = SIM_COLUMNS if models is None else (*SIM_COLUMNS, "gpu_spec")
        for offset, table in self._stream(columns):
            batch = self._convert(table, offset, node_of, parents)
            if models is not None:
                batch.allow = allow_masks(table["gpu_spec"], models)
            if layout is not None:
                batch.inputs, batch.has_inputs, batch.input_mb = layout.batch(offset, table)
            batch.usage = usage.take(table["task_id"].combine_chunks())
            yield batch
        usage.finish()

    def stream(self, columns: tuple[str, ...]) -> Iterator[tuple[int, pa.Table]]:
        """``(first row, table)`` batches of the task columns ``columns`` (defaults filled)."""
        return self._stream(columns)

    def _convert(self, t: pa.Table, offset: int, node_of: dict[str, int] | None,
                 parents: set[str]) -> TaskBatch:
        n = t.num_rows
        row = np.arange(offset, offset + n, dtype=np.int64)
        job = pc.index_in(t["job_id"], value_set=self._job_ids).combine_chunks()
        if job.null_count:
            bad = int(pc.index(pc.is_null(job), True).as_py())
            raise TraceError(f"tasks row {offset + bad}: job_id {t['job_id'][bad].as_py()!r} "
                             "is not in jobs", self.dir, field="job_id")
        job_idx = np.asarray(job.to_numpy(zero_copy_only=False), np.int64)
        submit, duration = _f64(t["submit_s"], np.nan), _f64(t["duration_s"], np.nan)
        req = np.column_stack([_f64(t[c], 0) for c in ("cpu", "mem", "gpu")])
        self._check(offset, submit, duration, req)
        prio = np.where(pc.is_null(t["priority"]).to_numpy(zero_copy_only=False),
                        self._job_prio[job_idx], _f64(t["priority"], 0)).astype(np.int32)
        batch = TaskBatch(
            row=row, submit=submit, duration=duration, req=req,
            used=np.column_stack([_f64(t["cpu_used"], np.nan), _f64(t["mem_used"], np.nan)]),
            user=self.job_user[job_idx], queue=self.job_queue[job_idx],
            job=job_idx.astype(np.int32), priority=prio, censored=censored(t["end_event"]),
            recorded_start=_f64(t["recorded_start_s"], np.nan),
            recorded_node=self._nodes_of(t["recorded_machine_id"], node_of),
            kind=task_kinds(t["task_kind"]),
            requested=(None if t["requested_s"].null_count == n
                       else _f64(t["requested_s"], np.nan)),
            gang=self._gang_codes(t["gang_id"]),
        )
        self._sparse(t, batch, node_of, parents)
        return batch

    def _nodes_of(self, machine_ids: pa.ChunkedArray,
                  node_of: dict[str, int] | None) -> np.ndarray:
        """Node slots of machine ids (-1: none, unknown, or a cluster without the trace's
        machines)."""
        n = len(machine_ids)
        if node_of is None or machine_ids.null_count == n:
            return np.full(n, -1, dtype=np.int32)
        if self._node_keys is None:
            self._node_keys = pa.array(list(node_of), pa.string())
            self._node_vals = np.array(list(node_of.values()), dtype=np.int32)
        found = pc.index_in(machine_ids, value_set=self._node_keys).combine_chunks()
        index = np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), np.int64)
        return np.where(index >= 0, self._node_vals[np.maximum(index, 0)], -1).astype(np.int32)

    def _check(self, offset: int, submit: np.ndarray, duration: np.ndarray,
               req: np.ndarray) -> None:
        for name, bad in (("submit_s", ~np.isfinite(submit)),
                          ("duration_s", ~(np.isfinite(duration) & (duration > 0))),
                          ("cpu/mem/gpu", ~np.all(np.isfinite(req) & (req >= 0), axis=1))):
            if bad.any():
                i = int(np.argmax(bad))
                raise TraceError(f"tasks row {offset + i}: {name} is invalid", self.dir,
                                 field=name)

    def _sparse(self, t: pa.Table, b: TaskBatch, node_of: dict[str, int] | None,
                parents: set[str]) -> None:
        """Fill the per-row dependencies and parent ids (rows that have them)."""
        deps = t["depends_on"]
        if deps.null_count < len(deps):
            for i in np.flatnonzero(pc.fill_null(pc.list_value_length(deps), 0).to_numpy()
                                    > 0).tolist():
                b.deps[i] = deps[i].as_py()
        if parents:
            for i, tid in enumerate(t["task_id"].to_pylist()):
                if tid in parents:
                    b.task_id[i] = tid
