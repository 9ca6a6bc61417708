"""Array-shaped state of tasks in flight, the completion heap, and the per-task record buffer.

Memory grows with the tasks in flight (slots are reused through a free stack), never with
the trace length: finished tasks leave a record in :class:`Records`, which the core hands to
its sink in chunks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Slot states.  NM_QUEUED: an opportunistic container sent to a node, waiting in that node's
# NodeManager queue (or paused there); it is neither pending at the RM nor running.
FREE, BLOCKED, PENDING, RUNNING, DONE, NM_QUEUED = 0, 1, 2, 3, 4, 5
# Outcome codes (index into OUTCOMES) and locality codes (index into LOCALITIES, -1 = null).
OUTCOMES = ("finished", "preempted", "killed", "unschedulable", "unfinished")
FINISHED, PREEMPTED, KILLED, UNSCHEDULABLE, UNFINISHED = range(5)
LOCALITIES = ("node", "rack", "any")
# Task kinds (the trace's ``task_kind``): one phase (neither map nor reduce), map, reduce.
KINDS = ("", "map", "reduce")
KIND_ONE, KIND_MAP, KIND_REDUCE = range(3)
# Most machines a task's input lists (the first ones are kept; HDFS replication is 3).
INPUT_WIDTH = 8
# Indices into the int64 ``counters`` array shared with the kernels.
HEAP_N, HEAP_SEQ, REC_N, FREE_TOP, N_DONE = range(5)

# Columns of ``spec`` (a task's speculative copies, recorded with the task): copies launched,
# whether a copy gave the task's result, where (node instance, -1: none) and when the last
# copy started, the copies' run time, and the run time of attempts that lost.
SPEC_NAMES = ("copies", "won", "instance", "start", "run_s", "wasted_s")
S_COPIES, S_WON, S_INSTANCE, S_START, S_RUN_S, S_WASTED_S = range(len(SPEC_NAMES))
SPEC_DEFAULT = np.array([0.0, 0.0, -1.0, np.nan, 0.0, 0.0])

_TASK_FIELDS: dict[str, tuple[type, tuple[int, ...], float | np.ndarray]] = {
    "row": (np.int64, (), -1), "submit": (np.float64, (), np.nan),
    "ready": (np.float64, (), np.nan), "duration": (np.float64, (), np.nan),
    "req": (np.float64, (3,), 0.0), "used": (np.float64, (2,), np.nan),
    "user": (np.int32, (), 0), "queue": (np.int32, (), 0), "job": (np.int32, (), 0),
    "priority": (np.int32, (), 0), "kind": (np.int8, (), KIND_ONE),
    "state": (np.int8, (), FREE),
    "node": (np.int32, (), -1), "start": (np.float64, (), np.nan),
    # when the current run will end (inf: a censored task, stopped at the window's end)
    "run_end": (np.float64, (), np.nan),
    "first_start": (np.float64, (), np.nan), "attempts": (np.int32, (), 0),
    "preemptions": (np.int32, (), 0), "evictions": (np.int32, (), 0),
    "wasted": (np.float64, (), 0.0), "epoch": (np.int64, (), 0),
    "flags": (np.int8, (), 0), "locality": (np.int8, (), -1),
    "last_preempted": (np.bool_, (), False),
    # where and when the trace ran the task (-1 / NaN: not recorded), for the reference replay
    "recorded_node": (np.int32, (), -1), "recorded_start": (np.float64, (), np.nan),
    # the run time the user asked for (HPC wall-time limits: what backfilling plans with)
    "requested": (np.float64, (), np.nan),
    # the task's gang (tasks that start in one scheduling round or not at all; -1: none)
    "gang": (np.int64, (), -1),
    # the GPU models the task may use, as node model bits (0: any; pipeline.sim.models)
    "allow": (np.int64, (), 0),
    # ``used``: the measured usage in force (a task's mean, NaN where unmeasured, or the
    # piece of its usage profile it is in; pipeline.sim.usage)
    # node slots holding the task's input (-1 padded), MiB it reads, MiB read (rack, core)
    "inp": (np.int32, (INPUT_WIDTH,), -1), "input_mb": (np.float64, (), np.nan),
    "read": (np.float64, (2,), 0.0),
    # per-task figures that travel into the record unchanged (see EXTRA_NAMES)
    "extra": (np.float32, (10,), 0.0),
    # measured usage over the task's life (:mod:`pipeline.sim.usage`): its profile's range
    # in the usage pool (-1: none), the profile piece now in force, and the work (s on a
    # speed-1.0 machine) done before the current run started (a paused container resumes)
    "useg_lo": (np.int64, (), -1), "useg_hi": (np.int64, (), -1),
    "useg_cur": (np.int64, (), -1), "work0": (np.float64, (), 0.0),
    # a run's identity (unique over the replay): usage events of other runs are stale
    "run_seq": (np.int64, (), -1), "nmq_since": (np.float64, (), np.nan),
    # times the task joined the RM's queue: 1 for its first request, one more each time it
    # is asked for again (killed, preempted, evicted, or given back by a NodeManager)
    "asks": (np.int32, (), 0),
    # speculative copies (pipeline.sim.speculation): the other attempt's slot (-1: none),
    # the task's speculation figures (SPEC_NAMES), and when a running copy will end
    "twin": (np.int64, (), -1), "spec": (np.float64, (6,), SPEC_DEFAULT),
    "spec_end": (np.float64, (), np.nan),
    # a run's last speed change (pipeline.sim.contention): when, and the share of the run
    # done then (a seg_t not after the run's start belongs to an earlier run: ignored)
    "seg_t": (np.float64, (), np.nan), "seg_share": (np.float64, (), 0.0),
}
# Fields only opportunistic containers and usage profiles need: allocated (at full capacity)
# when a replay first needs them (``TaskTable.enable_extras``), empty until then, so a replay
# without either carries none of them.
LAZY_FIELDS = frozenset({"extra", "useg_lo", "useg_hi", "useg_cur", "work0", "run_seq",
                         "nmq_since", "asks", "twin", "spec", "spec_end", "seg_t", "seg_share"})
# Columns of ``extra``, copied into the record of a TRACKED task (zeros for the others; a
# free slot's row is all zeros): float32 (counts are whole numbers; seconds and usage
# integrals need no more than 7 significant digits).  ``used_measured``: the usage integral
# ``used_*_s`` is kept in the core (the task's usage is measured and it is TRACKED).
EXTRA_NAMES = ("opportunistic", "opp_starts", "opp_kills", "opp_pauses", "opp_shed",
               "opp_queue_s", "opp_wasted_s", "used_measured", "used_cpu_s", "used_mem_s")
(X_OPP, X_OPP_STARTS, X_OPP_KILLS, X_OPP_PAUSES, X_OPP_SHED, X_OPP_QUEUE_S, X_OPP_WASTED,
 X_MEASURED, X_USED_CPU_S, X_USED_MEM_S) = range(len(EXTRA_NAMES))
N_EXTRA = len(EXTRA_NAMES)
# Bits of ``flags``.  CENSORED: the trace records the task still running at its window's
# end, so its recorded duration is a lower bound and it runs until the core stops it there.
# OPPORTUNISTIC: its current container is opportunistic (allocated outside the RM's
# accounting, on the node's ``opp_alloc``); PAUSED: a paused opportunistic container.
# TRACKED: the core keeps the task's ``extra`` figures (it has a usage profile, or a
# NodeManager ran it); the records of other tasks get zeros there, and their usage integral
# is their mean usage x run time, computed when the run is written (pipeline.replay.output).
# SPEC: the task has or had a speculative copy, or is one: its completion and stops go
# through pipeline.sim.speculation (the first attempt to finish wins).
HAS_INPUTS, IS_PARENT, CENSORED, OPPORTUNISTIC, PAUSED, TRACKED, SPEC = 1, 2, 4, 8, 16, 32, 64


class TaskTable:
    """Struct-of-arrays for tasks in flight (blocked, pending or running), by slot."""

    req: np.ndarray
    used: np.ndarray
    state: np.ndarray

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = 0
        self.extras_on = False
        self.inputs_on = False  # some task of the run said where its input is
        for name, (dtype, shape, fill) in _TASK_FIELDS.items():
            setattr(self, name, np.full((0, *shape), fill, dtype=dtype))
        self.free_stack = np.zeros(0, dtype=np.int64)
        self.counters = np.zeros(8, dtype=np.int64)
        self.grow(capacity)

    def grow(self, capacity: int) -> None:
        """Make room for at least ``capacity`` slots (doubling; existing slots keep their data)."""
        if capacity <= self.capacity:
            return
        new = max(capacity, 2 * self.capacity)
        for name, (dtype, shape, fill) in _TASK_FIELDS.items():
            if name in LAZY_FIELDS and not self.extras_on:
                continue
            old = getattr(self, name)
            arr = np.full((new, *shape), fill, dtype=dtype)
            arr[: len(old)] = old
            setattr(self, name, arr)
        top = int(self.counters[FREE_TOP])
        stack = np.zeros(new, dtype=np.int64)
        stack[:top] = self.free_stack[:top]
        fresh = np.arange(new - 1, self.capacity - 1, -1, dtype=np.int64)
        stack[top : top + len(fresh)] = fresh
        self.free_stack = stack
        self.counters[FREE_TOP] = top + len(fresh)
        self.capacity = new

    def enable_extras(self) -> None:
        """Allocate the LAZY_FIELDS (every slot at its reset value)."""
        if self.extras_on:
            return
        self.extras_on = True
        for name in LAZY_FIELDS:
            dtype, shape, fill = _TASK_FIELDS[name]
            setattr(self, name, np.full((self.capacity, *shape), fill, dtype=dtype))

    def alloc(self, k: int) -> np.ndarray:
        """Take ``k`` free slots (lowest numbers first when the table is fresh)."""
        if k > int(self.counters[FREE_TOP]):
            self.grow(self.capacity - int(self.counters[FREE_TOP]) + k)
        top = int(self.counters[FREE_TOP])
        slots = self.free_stack[top - k : top][::-1].copy()
        self.counters[FREE_TOP] = top - k
        return slots

    def clear(self, slots: np.ndarray) -> None:
        """Reset every field of ``slots`` but the epoch (stale heap entries stay stale)."""
        for name, (_dtype, _shape, fill) in _TASK_FIELDS.items():
            if name != "epoch" and (self.extras_on or name not in LAZY_FIELDS):
                getattr(self, name)[slots] = fill

    def release(self, slots: np.ndarray) -> None:
        """Return ``slots`` to the free stack (their data is reset)."""
        self.clear(slots)
        top = int(self.counters[FREE_TOP])
        self.free_stack[top : top + len(slots)] = slots
        self.counters[FREE_TOP] = top + len(slots)

    def in_state(self, state: int) -> np.ndarray:
        """Slots currently in ``state``, in slot order."""
        return np.flatnonzero(self.state == state)


class Heap:
    """Completion heap arrays ``(end_s, seq, slot, epoch)``; the kernels push and pop."""

    def __init__(self, capacity: int = 1024) -> None:
        self.time = np.zeros(capacity)
        self.seq = np.zeros(capacity, dtype=np.int64)
        self.slot = np.zeros(capacity, dtype=np.int64)
        self.epoch = np.zeros(capacity, dtype=np.int64)

    def reserve(self, size: int, extra: int) -> None:
        """Ensure room for ``extra`` more entries above ``size``."""
        need = size + extra
        if need <= len(self.time):
            return
        new = max(need, 2 * len(self.time))
        for name in ("time", "seq", "slot", "epoch"):
            old = getattr(self, name)
            arr = np.zeros(new, dtype=old.dtype)
            arr[:size] = old[:size]
            setattr(self, name, arr)


@dataclass
class RecordChunk:
    """One flushed chunk of per-task records (numpy columns, one row per task)."""

    row: np.ndarray
    instance: np.ndarray
    job: np.ndarray
    ready: np.ndarray
    first_start: np.ndarray
    start: np.ndarray
    end: np.ndarray
    outcome: np.ndarray
    attempts: np.ndarray
    preemptions: np.ndarray
    evictions: np.ndarray
    wasted: np.ndarray
    locality: np.ndarray
    remaining: np.ndarray
    read: np.ndarray  # (n, 2) MiB read from another node of the rack, and across racks
    extra: np.ndarray  # (n, N_EXTRA) the task's ``extra`` figures (EXTRA_NAMES)
    kind: np.ndarray  # the task's kind (KINDS)
    spec: np.ndarray  # (n, 6) its speculative copies (SPEC_NAMES; SPEC_DEFAULT: none)


RecordSink = Callable[[RecordChunk], None]
_REC_FIELDS = {
    "row": np.int64, "instance": np.int64, "job": np.int32, "ready": np.float64,
    "first_start": np.float64, "start": np.float64, "end": np.float64, "outcome": np.int8,
    "attempts": np.int32,
    "preemptions": np.int32, "evictions": np.int32, "wasted": np.float64, "locality": np.int8,
    "remaining": np.float64, "read": np.float64, "extra": np.float32, "kind": np.int8,
    "spec": np.float64,
}
_REC_SHAPES = {"read": (2,), "extra": (N_EXTRA,), "spec": (len(SPEC_NAMES),)}


class Records:
    """Preallocated per-task record columns, flushed to a sink when full.

    ``remaining`` is the work (seconds on a speed-1.0 machine) a task still had to do when
    the replay stopped; the completion kernel leaves it at its reset value 0 (finished
    tasks have none left), and NaN means not measured (tasks submitted after the end).
    """

    def __init__(self, sink: RecordSink, capacity: int = 1 << 17) -> None:
        self.sink = sink
        self.capacity = capacity
        for name, dtype in _REC_FIELDS.items():
            setattr(self, name, np.zeros((capacity, *_REC_SHAPES.get(name, ())), dtype=dtype))
        self.spec[:] = SPEC_DEFAULT  # the kernel never writes it: rows it fills read "none"
        self.flushed = 0

    def flush(self, counters: np.ndarray) -> None:
        """Hand the filled part to the sink and start over."""
        n = int(counters[REC_N])
        if n:
            self.sink(RecordChunk(**{k: getattr(self, k)[:n].copy() for k in _REC_FIELDS}))
            self.flushed += n
            self.remaining[:n] = 0.0  # rows the kernel fills next must read "none left"
            self.spec[:n] = SPEC_DEFAULT
        counters[REC_N] = 0

    def room(self, counters: np.ndarray, k: int) -> int:
        """Flush if fewer than ``k`` rows are free; return the first free row."""
        if int(counters[REC_N]) + k > self.capacity:
            self.flush(counters)
        return int(counters[REC_N])

    def write_slots(self, counters: np.ndarray, t: TaskTable, slots: np.ndarray,
                    outcome: np.ndarray | int, end: np.ndarray | float,
                    instance: np.ndarray, remaining: np.ndarray | float = 0.0) -> None:
        """Record tasks still held in slots (vectorized; used for the end and for kills)."""
        for lo in range(0, len(slots), self.capacity):
            part = slots[lo : lo + self.capacity]
            i = self.room(counters, len(part))
            j = i + len(part)
            self.row[i:j] = t.row[part]
            self.instance[i:j] = instance[lo : lo + len(part)]
            self.job[i:j] = t.job[part]
            self.ready[i:j] = t.ready[part]
            self.first_start[i:j] = t.first_start[part]
            self.start[i:j] = t.start[part]
            self.end[i:j] = end if np.isscalar(end) else end[lo : lo + len(part)]
            self.outcome[i:j] = outcome if np.isscalar(outcome) else outcome[lo : lo + len(part)]
            self.attempts[i:j] = t.attempts[part]
            self.preemptions[i:j] = t.preemptions[part]
            self.evictions[i:j] = t.evictions[part]
            self.wasted[i:j] = t.wasted[part]
            self.locality[i:j] = t.locality[part]
            self.read[i:j] = t.read[part]
            self.extra[i:j] = t.extra[part] if t.extras_on else 0.0
            self.kind[i:j] = t.kind[part]
            self.spec[i:j] = t.spec[part] if t.extras_on else SPEC_DEFAULT
            self.remaining[i:j] = (remaining if np.isscalar(remaining)
                                   else remaining[lo : lo + len(part)])
            counters[REC_N] = j

    def write_rows(self, counters: np.ndarray, rows: np.ndarray, job: np.ndarray,
                   outcome: int, remaining: np.ndarray | float = 0.0) -> None:
        """Record tasks that never held a slot (unschedulable, after the horizon)."""
        for lo in range(0, len(rows), self.capacity):
            part = rows[lo : lo + self.capacity]
            i = self.room(counters, len(part))
            j = i + len(part)
            self.row[i:j] = part
            self.instance[i:j] = -1
            self.job[i:j] = job[lo : lo + len(part)]
            for name in ("ready", "first_start", "start", "end"):
                getattr(self, name)[i:j] = np.nan
            self.outcome[i:j] = outcome
            self.attempts[i:j] = 0
            self.preemptions[i:j] = 0
            self.evictions[i:j] = 0
            self.wasted[i:j] = 0.0
            self.locality[i:j] = -1
            self.read[i:j] = 0.0
            self.extra[i:j] = 0.0
            self.kind[i:j] = KIND_ONE  # (not needed: these never ran)
            self.spec[i:j] = SPEC_DEFAULT
            self.remaining[i:j] = (remaining if np.isscalar(remaining)
                                   else remaining[lo : lo + len(part)])
            counters[REC_N] = j


def run_share(t: TaskTable, slots: np.ndarray, at: float) -> np.ndarray:
    """Share of each running slot's run done at ``at`` (from its last speed change, if any
    came after its start, else from its start), by its current end ``run_end``."""
    start = t.start[slots]
    end = t.run_end[slots]
    if t.extras_on:
        seg = t.seg_t[slots] > start  # (a stale seg_t of an earlier run is never after)
        s0 = np.where(seg, t.seg_t[slots], start)
        b0 = np.where(seg, t.seg_share[slots], 0.0)
    else:
        s0, b0 = start, 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        share = b0 + (at - s0) / (end - s0) * (1.0 - b0)
    return np.where(np.isfinite(end) & (end > s0), np.clip(share, 0.0, 1.0), np.nan)


def is_copy(t: TaskTable, slots: np.ndarray) -> np.ndarray:
    """Whether each of ``slots`` is a speculative copy (only copies have ``spec_end``)."""
    if not t.extras_on:
        return np.zeros(len(slots), dtype=np.bool_)
    return ~np.isnan(t.spec_end[slots])
