"""Writing a run directory: per-task records joined with task identities, node intervals,
metrics and ``run.json``.

While the core runs, its per-task records (completion order) go to scratch Parquet files
bucketed by trace row range, so memory stays bounded.  ``task_runs.parquet`` is then built
by streaming the trace's tasks again (row order) beside each bucket's records sorted by row:
every trace row has exactly one record, so the two line up without a join.  Outputs are
written by pyarrow with a fixed layout, so the same run gives byte-identical files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.replay.records import RecordStore
from pipeline.sim.tasks import (
    EXTRA_NAMES,
    LOCALITIES,
    N_EXTRA,
    OUTCOMES,
    S_COPIES,
    S_INSTANCE,
    S_RUN_S,
    S_START,
    S_WASTED_S,
    S_WON,
    X_MEASURED,
    X_OPP,
    X_USED_CPU_S,
)

TASK_RUNS = "task_runs.parquet"
NODE_INTERVALS = "node_intervals.parquet"
METRICS = "metrics.parquet"
RUN_JSON = "run.json"
PROVENANCE_JSON = "provenance.json"
QUEUES = "queues.parquet"


def _dictionary(codes: np.ndarray, names: list[str] | tuple[str, ...]) -> pa.Array:
    """String column from integer codes (-1 = null), dictionary-encoded."""
    mask = codes < 0
    indices = pa.array(np.where(mask, 0, codes).astype(np.int32), mask=mask)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(names), pa.string()))


def _nullable(values: np.ndarray) -> pa.Array:
    return pa.array(values, from_pandas=True)


def task_runs_batches(identities: Iterator[tuple[int, pa.Table]], store: RecordStore,
                      machine_ids: list[str], job_user: np.ndarray,
                      job_queues: Callable[[], tuple[np.ndarray, tuple[str, ...]]],
                      users: tuple[str, ...], run_id: str,
                      growing: bool = False) -> Iterator[pa.Table]:
    """``task_runs`` in trace row order, one table per identity batch, each as soon as the
    store holds its records (a task still running when the replay stopped waits for the
    stop: its run's end is then the store's ``end_s``).

    ``growing``: ``machine_ids`` grows while the replay runs (an elastic cluster's nodes);
    a batch's machine names are then the ones up to the last its records name, so the
    file does not depend on how far the replay had got when the batch was written.
    ``job_queues``: each job's queue code and the queue names, asked for once the first
    records are in (a policy with queues of its own knows them from its setup on)."""
    job_queue: np.ndarray | None = None
    for offset, ident in identities:
        n = ident.num_rows
        rec = store.rows(offset, offset + n)
        if job_queue is None:
            job_queue, queues = job_queues()
            no_queue = np.array([q == "" for q in queues] or [True])
        running = np.isnan(rec["end"]) & ~np.isnan(rec["start"])
        end_s = store.end_at_stop() if running.any() else np.inf
        names = machine_ids
        if growing:
            used = max(int(rec["instance"].max(initial=-1)), int(rec["spec"][:, S_INSTANCE].max(
                initial=-1)) if "spec" in rec else -1)
            names = machine_ids[:used + 1]
        job = rec["job"]
        queue = np.where(no_queue[job_queue[job]], -1, job_queue[job])
        yield pa.table({
            "run_id": _dictionary(np.zeros(n, np.int32), [run_id]),
            "task_id": ident["task_id"], "job_id": ident["job_id"],
            "user": _dictionary(job_user[job], users), "queue": _dictionary(queue, queues),
            "machine_id": _dictionary(rec["instance"], names),
            "submit_s": ident["submit_s"], "ready_s": _nullable(rec["ready"]),
            "first_start_s": _nullable(rec["first_start"]), "start_s": _nullable(rec["start"]),
            "end_s": _nullable(rec["end"]), "outcome": _dictionary(rec["outcome"], OUTCOMES),
            "attempts": rec["attempts"], "locality": _dictionary(rec["locality"], LOCALITIES),
            "duration_s": ident["duration_s"], "cpu": ident["cpu"], "mem": ident["mem"],
            "gpu": ident["gpu"], "cpu_used": ident["cpu_used"], "mem_used": ident["mem_used"],
            "preemptions": rec["preemptions"], "evictions": rec["evictions"],
            "wasted_s": rec["wasted"], "remaining_s": _nullable(rec["remaining"]),
            "censored": pc.fill_null(pc.equal(ident["end_event"], "censored"), False),
            "read_rack_mb": rec["read"][:, 0], "read_core_mb": rec["read"][:, 1],
            **_extra_columns(rec, ident, end_s),
            **_spec_columns(rec.get("spec"), n, names),
        }, schema=WRITE_SCHEMA)


def _spec_columns(spec: np.ndarray | None, n: int, machine_ids: list[str]) -> dict[str, Any]:
    """The speculative-copy figures of the records (pipeline.sim.speculation; ``None``: no
    task of these records had a copy)."""
    if spec is None:
        return {"spec_copies": np.zeros(n, np.int32), "spec_won": np.zeros(n, np.bool_),
                "spec_machine_id": pa.nulls(n, _DICT), "spec_start_s": pa.nulls(n, pa.float64()),
                "spec_run_s": np.zeros(n), "spec_wasted_s": np.zeros(n)}
    return {
        "spec_copies": spec[:, S_COPIES].astype(np.int32), "spec_won": spec[:, S_WON] > 0,
        "spec_machine_id": _dictionary(spec[:, S_INSTANCE].astype(np.int64), machine_ids),
        "spec_start_s": _nullable(spec[:, S_START]), "spec_run_s": spec[:, S_RUN_S],
        "spec_wasted_s": spec[:, S_WASTED_S],
    }


def _extra_columns(rec: dict[str, np.ndarray], ident: pa.Table, end_s: float
                   ) -> dict[str, Any]:
    """The opportunistic-container counts and the usage integrals of the records.

    A task the core tracked (:data:`pipeline.sim.tasks.TRACKED`) brings its own usage
    integral; any other used its mean (``cpu_used``/``mem_used``) for all its run time: the
    last run (to ``end_s`` if still running) plus the run time earlier attempts lost."""
    extra = (rec["extra"].astype(np.float64) if "extra" in rec
             else np.zeros((len(rec["row"]), N_EXTRA)))
    kept = extra[:, X_MEASURED] > 0
    cols: dict[str, Any] = {"opportunistic": extra[:, X_OPP] > 0}
    for name in ("opp_starts", "opp_kills", "opp_pauses", "opp_shed"):
        cols[name] = extra[:, EXTRA_NAMES.index(name)].astype(np.int32)
    for name in ("opp_queue_s", "opp_wasted_s"):
        cols[name] = extra[:, EXTRA_NAMES.index(name)]
    start = rec["start"]
    last = np.where(np.isnan(start), 0.0,
                    np.minimum(np.where(np.isnan(rec["end"]), end_s, rec["end"]), end_s) - start)
    busy = np.nan_to_num(last) + rec["wasted"]
    for k, (name, mean) in enumerate((("used_cpu_s", "cpu_used"), ("used_mem_s", "mem_used"))):
        mean_used = np.asarray(pc.fill_null(ident[mean], np.nan).to_numpy(
            zero_copy_only=False), np.float64)
        value = np.where(kept, extra[:, X_USED_CPU_S + k], mean_used * busy)
        cols[name] = pa.array(value, mask=~kept & np.isnan(mean_used))
    return cols


def write_task_runs(batches: Iterator[pa.Table], out: Path,
                    failed: Callable[[BaseException], None] | None = None) -> int:
    """Write ``task_runs.parquet`` (strings read back as plain strings); return its rows.

    Each batch is encoded and compressed on a thread of its own while the next one is
    built (pyarrow lets go of the GIL to encode): at a replay's end, when the last row
    ranges all complete at once, building and writing them one after the other took
    about a fifth of a 1 M-task bench.  The batches still go to the file one at a time and
    in order, so the file is the same, byte for byte.  An encoding error is handed to
    ``failed`` as soon as it happens (the replay stops at once, without waiting for the
    next batch to be built), and raised here at the next batch or the end.
    """
    writer = pq.ParquetWriter(out, WRITE_SCHEMA, compression="zstd", store_schema=False,
                              use_dictionary=DICTIONARY_COLUMNS)

    def done(future: Future[None]) -> None:
        error = future.exception()
        if error is not None and failed is not None:
            failed(error)

    rows = 0
    with ThreadPoolExecutor(1, thread_name_prefix="task_runs-encode") as encoder:
        writing: Future[None] | None = None
        for table in batches:
            if writing is not None:
                writing.result()  # (raises the previous write's error)
            writing = encoder.submit(writer.write_table, table)
            writing.add_done_callback(done)
            rows += table.num_rows
        if writing is not None:
            writing.result()
    writer.close()
    return rows


TASK_RUNS_SCHEMA = pa.schema(
    [(name, pa.string()) for name in ("run_id", "task_id", "job_id", "user", "queue",
                                      "machine_id")]
    + [(name, pa.float64()) for name in ("submit_s", "ready_s", "first_start_s", "start_s",
                                         "end_s")]
    + [("outcome", pa.string()), ("attempts", pa.int32()), ("locality", pa.string())]
    + [(name, pa.float64()) for name in ("duration_s", "cpu", "mem", "gpu", "cpu_used",
                                         "mem_used")]
    + [("preemptions", pa.int32()), ("evictions", pa.int32()), ("wasted_s", pa.float64()),
       ("remaining_s", pa.float64()), ("censored", pa.bool_()),
       # MiB the task's attempts read from another node of their rack / across racks
       ("read_rack_mb", pa.float64()), ("read_core_mb", pa.float64()),
       # opportunistic containers (pipeline.sim.nodemanager): whether the last run was
       # one, starts, kills, pauses, sheds, NM queueing seconds, run time lost to kills
       ("opportunistic", pa.bool_()), ("opp_starts", pa.int32()), ("opp_kills", pa.int32()),
       ("opp_pauses", pa.int32()), ("opp_shed", pa.int32()), ("opp_queue_s", pa.float64()),
       ("opp_wasted_s", pa.float64()),
       # usage x wall time over all the task's runs (null: usage not measured)
       ("used_cpu_s", pa.float64()), ("used_mem_s", pa.float64()),
       # speculative copies (pipeline.sim.speculation): copies launched, whether one gave
       # the result, where and when the last started, the copies' run time, the losers'
       ("spec_copies", pa.int32()), ("spec_won", pa.bool_()), ("spec_machine_id", pa.string()),
       ("spec_start_s", pa.float64()), ("spec_run_s", pa.float64()),
       ("spec_wasted_s", pa.float64())]
)

_DICT = pa.dictionary(pa.int32(), pa.string())
# Columns worth Parquet dictionary pages (few distinct values); the rest are plain.
DICTIONARY_COLUMNS = ["run_id", "job_id", "user", "queue", "machine_id", "outcome", "locality",
                      "spec_machine_id"]
WRITE_SCHEMA = pa.schema([
    pa.field(f.name, _DICT) if f.name in ("run_id", "user", "queue", "machine_id", "outcome",
                                          "locality", "spec_machine_id") else f
    for f in TASK_RUNS_SCHEMA
])

NODE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("machine_id", pa.string()), ("up_s", pa.float64()),
    ("down_s", pa.float64()), ("ready_s", pa.float64()), ("cpu", pa.float64()),
    ("mem", pa.float64()), ("gpu", pa.float64()), ("price_per_hour", pa.float64()),
    ("billing_s", pa.float64()), ("instance_type", pa.string()),
])


def node_intervals_table(rows: list[list[float]], machine_ids: list[str], cap: np.ndarray,
                         price_per_hour: np.ndarray, billing_s: float, run_id: str,
                         instance_types: list[str] | None = None) -> pa.Table:
    """When each node was provisioned, with its capacity and price (one row per interval;
    ``cap``, ``price_per_hour`` and ``instance_types`` per instance; no instance types: a
    cluster of one price, ``instance_type`` null)."""
    arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
    inst = arr[:, 0].astype(np.int64)
    n = len(arr)
    return pa.table({
        "run_id": pa.array([run_id] * n, pa.string()),
        "machine_id": pa.array([machine_ids[i] for i in inst], pa.string()),
        "up_s": arr[:, 1], "down_s": arr[:, 3], "ready_s": arr[:, 2],
        "cpu": cap[inst, 0] if n else np.zeros(0), "mem": cap[inst, 1] if n else np.zeros(0),
        "gpu": cap[inst, 2] if n else np.zeros(0),
        "price_per_hour": np.asarray(price_per_hour, np.float64)[inst] if n else np.zeros(0),
        "billing_s": np.full(n, billing_s),
        "instance_type": pa.array([instance_types[i] for i in inst] if instance_types
                                  else [None] * n, pa.string()),
    }, schema=NODE_SCHEMA)


def write_table(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd")


def write_json(data: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


QUEUES_SCHEMA = pa.schema(
    [("run_id", pa.string()), ("queue", pa.string()), ("parent", pa.string()),
     ("leaf", pa.bool_()), ("depth", pa.int32()), ("weight", pa.float64()),
     ("guaranteed_share", pa.float64()), ("max_share", pa.float64())]
    + [(f"{kind}_{r}", pa.float64()) for r in ("cpu", "mem", "gpu")
       for kind in ("guaranteed", "max")]
)


def queues_table(rows: dict[str, list[Any]], run_id: str) -> pa.Table:
    """``queues.parquet``: the run's queue configuration (fixed columns, then the policy's)."""
    n = len(rows["queue"])
    fixed = {"run_id": [run_id] * n, **{k: rows[k] for k in QUEUES_SCHEMA.names[1:]}}
    table = pa.table(fixed, schema=QUEUES_SCHEMA)
    for key, values in rows.items():
        if key not in QUEUES_SCHEMA.names:
            table = table.append_column(key, pa.array(values))
    return table
