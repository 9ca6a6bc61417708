# ruff: noqa: SIM109  (numba: chained == compiles to plain compares)
"""Task life histories of Google 2011 ``task_events``, folded event by event in compiled code.

A task's life is SUBMIT -> SCHEDULE -> (EVICT | FAIL | KILL | LOST | FINISH), with re-SUBMITs
after EVICT and FAIL (the v2 schema document, section "task and job life cycles").  The fold
keeps one slot per task in flight, so memory grows with tasks in flight, not trace length;
state survives across parts because parts are split by time.

Mapping to canonical tasks (one per *incarnation*):
- An attempt runs from SCHEDULE to its EVICT/FAIL/KILL/LOST/FINISH.  ``duration_s`` is the run
  time of the attempt that FINISHed; when none did, of the last attempt that ran, with
  ``end_event`` saying how it ended (``failed``, ``killed``, ``evicted``, ``lost``) or
  ``censored`` if it was still running when the window closed (duration up to the window end).
- Earlier attempts (evicted or failed, then re-submitted) are counted in ``trace_attempts``
  and their run time in ``trace_lost_s``: work the real cluster lost.
- FINISH, KILL and LOST end an incarnation; a later SUBMIT of the same (job, index) starts a
  new one, whose task id gets the suffix ``.N`` (numbered when the adapter reduces the
  emitted tasks, so no memory of ended tasks is kept here).
- ``submit_s`` is the incarnation's first SUBMIT.  Events stamped 0 happened before the
  window; a SUBMIT stamped 0 that already names a machine is a task running when the window
  opened, so it starts at 0 (the trace's snapshot rows).
- A task that never ran is not emitted: it is counted as dropped (never scheduled).
- Requests come from the latest SUBMIT/UPDATE that carries them.
- Where and when the recorded attempt ran (``recorded_machine_id``, ``recorded_start_s``): the
  machine and time of the SCHEDULE that started it (time 0 and the machine its time-0 SUBMIT
  names, for a task running when the window opened), for the ``recorded`` reference replay.

The compiled fold takes three named groups of arrays and reads them by field:
:class:`FoldState` (the slots kept between parts), :class:`Events` (one part's rows) and
:class:`Emitted` (the records of tasks whose history closed).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from pipeline.ingest.inthash import EMPTY, IntMap, delete_at, find, insert_at

SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)

# end_event codes in emitted records (index into END_NAMES)
END_NAMES = ("finished", "failed", "killed", "evicted", "lost", "censored")
E_FINISHED, E_FAILED, E_KILLED, E_EVICTED, E_LOST, E_CENSORED = range(6)
_END_OF_EVENT = np.array([-1, -1, E_EVICTED, E_FAILED, E_FINISHED, E_KILLED, E_LOST, -1, -1],
                         dtype=np.int64)

# Per-row outcome codes: 0 = used; others are counted reasons.
ROW_REASONS = (
    "used", "unknown_event_type", "event_for_unknown_task", "task_index_out_of_range",
)
# Repairs and drops counted per task (index into these names).
TASK_NOTES = (
    "started_before_window",      # repair: running at window start, started at 0
    "censored_at_window_end",     # repair: still running at window end
    "schedule_without_submit",    # repair: SCHEDULE for a task never submitted
    "duplicate_schedule",         # repair: SCHEDULE while already running, ignored
    "terminal_while_pending",     # repair: EVICT/FAIL/LOST while not running
    "never_scheduled",            # drop: ended or window closed before it ever ran
    "zero_duration",              # drop: attempt of zero length
    "no_resource_request",        # drop: no cpu/mem request ever given
)
N_STARTED_BEFORE, N_CENSORED, N_SCHED_NO_SUBMIT, N_DUP_SCHED, N_TERM_PENDING, \
    N_NEVER, N_ZERO, N_NOREQ = range(len(TASK_NOTES))

MAX_TASK_INDEX = 1 << 22
NEVER = -1.0


class FoldState(NamedTuple):
    """What the compiled fold reads and keeps between events: a :class:`TaskState`'s arrays.

    - ``keys``, ``values``, ``count``: the IntMap from a task's key (:func:`_key` of its job
      and index) to its slot (:mod:`pipeline.ingest.inthash`);
    - ``free``: the free slots (a stack, its top ``n_free[0]`` entries);
    - ``f``: (slots, len(FLOAT_FIELDS)) float fields of each slot (s, or requests; columns
      ``_SUBMIT`` ... ``_LAST_START``); ``i``: (slots, len(INT_FIELDS)) int fields
      (``_PRIO`` ... ``_LAST_MACHINE``);
    - ``notes``: (len(TASK_NOTES),) repairs and drops counted per task.
    """

    keys: np.ndarray
    values: np.ndarray
    count: np.ndarray
    free: np.ndarray
    n_free: np.ndarray
    f: np.ndarray
    i: np.ndarray
    notes: np.ndarray


class Events(NamedTuple):
    """One part's ``task_events`` rows in time order, as arrays (absent ints -1, floats NaN):
    ``time`` (s), ``job_id``, ``task_index``, ``machine_id``, ``event_type`` (``SUBMIT``
    ... ``UPDATE_RUNNING``), ``priority``, ``sched_class``, ``cpu`` and ``mem`` requests."""

    time: np.ndarray
    job_id: np.ndarray
    task_index: np.ndarray
    machine_id: np.ndarray
    event_type: np.ndarray
    priority: np.ndarray
    sched_class: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray


class Emitted(NamedTuple):
    """Emitted task records, one column each (see :func:`_records`): ``f`` (N_OUT_F, n)
    submit, duration, cpu, mem, lost run time, recorded start; ``i`` (N_OUT_I, n) job,
    index, priority, class, end code | attempts << 8, recorded machine."""

    f: np.ndarray
    i: np.ndarray


class TaskState:
    """Slots for tasks in flight, grown on demand; an IntMap maps (job, index) to a slot."""

    FLOAT_FIELDS = ("submit", "start", "cpu", "mem", "last_run", "lost", "last_start")
    INT_FIELDS = ("priority", "sched_class", "attempts", "last_end", "flags", "job", "index",
                  "machine", "last_machine")

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.slots = IntMap(2 * capacity)
        self.free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
        self.n_free = np.array([capacity], dtype=np.int64)
        # One row per slot: a slot's fields share cache lines (slots are hit at random).
        self.f = np.full((capacity, len(self.FLOAT_FIELDS)), np.nan)
        self.i = np.zeros((capacity, len(self.INT_FIELDS)), dtype=np.int64)
        self.notes = np.zeros(len(TASK_NOTES), dtype=np.int64)

    @property
    def capacity(self) -> int:
        """Slots allocated (free or in use)."""
        return int(self.f.shape[0])

    def reserve(self, extra: int) -> None:
        """Make sure ``extra`` more slots are free (one event opens at most one slot)."""
        self.slots.reserve(extra)
        if self.n_free[0] >= extra:
            return
        old = self.capacity
        new = max(2 * old, old + extra)
        f = np.full((new, self.f.shape[1]), np.nan)
        f[:old] = self.f
        i = np.zeros((new, self.i.shape[1]), dtype=np.int64)
        i[:old] = self.i
        # The free stack must hold every slot: all of them can be closed again later.
        n_free = int(self.n_free[0])
        free = np.empty(new, dtype=np.int64)
        free[:n_free] = self.free[:n_free]
        free[n_free:n_free + new - old] = np.arange(new - 1, old - 1, -1, dtype=np.int64)
        self.f, self.i, self.free = f, i, free
        self.n_free[0] = n_free + new - old

    def fold_state(self) -> FoldState:
        """The arrays the compiled fold takes (read after :meth:`reserve`, which may grow them)."""
        m = self.slots
        return FoldState(m.keys, m.values, m.count, self.free, self.n_free, self.f, self.i,
                         self.notes)


def fold_part(state: TaskState, events: dict[str, np.ndarray]) -> tuple[np.ndarray, dict]:
    """Apply one part's events (in time order); return per-row reason codes and emitted tasks."""
    n = len(events["time"])
    state.reserve(n)
    out = Emitted(np.empty((N_OUT_F, n)), np.empty((N_OUT_I, n), dtype=np.int64))
    reasons = np.zeros(n, dtype=np.int64)
    rows = Events(*(events[name] for name in Events._fields))
    emitted = _fold(state.fold_state(), rows, reasons, out)
    return reasons, _records(out.f[:, :emitted], out.i[:, :emitted])


def flush(state: TaskState, window_end: float) -> dict:
    """Close every task still in flight at the window end; return the emitted tasks."""
    n = len(state.slots)
    out = Emitted(np.empty((N_OUT_F, n)), np.empty((N_OUT_I, n), dtype=np.int64))
    emitted = _flush(state.fold_state(), window_end, out)
    state.slots = IntMap()
    return _records(out.f[:, :emitted], out.i[:, :emitted])


def _records(out_f: np.ndarray, out_i: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "submit_s": out_f[0], "duration_s": out_f[1], "cpu": out_f[2], "mem": out_f[3],
        "trace_lost_s": out_f[4], "recorded_start_s": out_f[5], "job_id": out_i[0],
        "task_index": out_i[1], "priority": out_i[2], "sched_class": out_i[3],
        "end_code": out_i[4] & 0xFF, "trace_attempts": out_i[4] >> 8,
        "recorded_machine": out_i[5],
    }


# Rows of emitted records (float, int).
N_OUT_F, N_OUT_I = 6, 6
# Field rows of TaskState.f / TaskState.i (kept in step with FLOAT_FIELDS / INT_FIELDS).
_SUBMIT, _START, _CPU, _MEM, _LAST_RUN, _LOST, _LAST_START = range(7)
_PRIO, _CLASS, _ATTEMPTS, _LAST_END, _FLAGS, _JOB, _INDEX, _MACHINE, _LAST_MACHINE = range(9)
_FLAG_BEFORE = 1


@numba.njit(cache=True)
def _key(job: np.int64, index: np.int64) -> np.int64:  # pragma: no cover - compiled
    return job * MAX_TASK_INDEX + index


@numba.njit(cache=True)
def _open(state, job, index, key, p, t):  # pragma: no cover - compiled
    """Take a free slot for task ``key`` (submitted at ``t``), inserted at map position
    ``p``; return the slot."""
    f, i = state.f, state.i
    state.n_free[0] -= 1
    s = state.free[state.n_free[0]]
    insert_at(state.keys, state.values, state.count, p, key, s)
    f[s, :] = np.nan
    f[s, _SUBMIT] = t
    f[s, _START] = NEVER
    f[s, _LAST_RUN] = 0.0
    f[s, _LOST] = 0.0
    i[s, :] = 0
    i[s, _LAST_END] = -1
    i[s, _MACHINE] = -1
    i[s, _LAST_MACHINE] = -1
    i[s, _JOB] = job
    i[s, _INDEX] = index
    return s


@numba.njit(cache=True)
def _emit(state, s, out, k, end_code, run):  # pragma: no cover - compiled
    """Write slot ``s`` as emitted record ``k`` if it ran; return the new record count."""
    f, i, notes = state.f, state.i, state.notes
    if end_code < 0 or run <= 0.0:
        notes[N_NEVER if end_code < 0 else N_ZERO] += 1
        return k
    if np.isnan(f[s, _CPU]) or np.isnan(f[s, _MEM]):
        notes[N_NOREQ] += 1
        return k
    out_f, out_i = out.f, out.i
    out_f[0, k], out_f[1, k] = f[s, _SUBMIT], run
    out_f[2, k], out_f[3, k], out_f[4, k] = f[s, _CPU], f[s, _MEM], f[s, _LOST]
    out_f[5, k] = f[s, _LAST_START]
    out_i[0, k], out_i[1, k] = i[s, _JOB], i[s, _INDEX]
    out_i[2, k], out_i[3, k] = i[s, _PRIO], i[s, _CLASS]
    out_i[4, k] = end_code | (i[s, _ATTEMPTS] << 8)
    out_i[5, k] = i[s, _LAST_MACHINE]
    return k + 1


@numba.njit(cache=True)
def _close(state, p, s):  # pragma: no cover - compiled
    """Free slot ``s``, its task's key removed from map position ``p``."""
    delete_at(state.keys, state.values, state.count, p)
    state.free[state.n_free[0]] = s
    state.n_free[0] += 1


@numba.njit(cache=True)
def _end_attempt(f, i, s, t, code):  # pragma: no cover - compiled
    """End the running attempt of slot ``s`` at ``t``; earlier ran attempts become lost work."""
    if i[s, _LAST_END] >= 0:
        f[s, _LOST] += f[s, _LAST_RUN]
        i[s, _ATTEMPTS] += 1
    f[s, _LAST_RUN] = t - f[s, _START]
    f[s, _LAST_START] = f[s, _START]
    i[s, _LAST_MACHINE] = i[s, _MACHINE]
    i[s, _LAST_END] = code
    f[s, _START] = NEVER


@numba.njit(cache=True)
def _fold(state, ev, reasons, out):  # pragma: no cover - compiled
    """Apply events ``ev`` (:class:`Events`) to ``state`` (:class:`FoldState`) row by row;
    ``reasons`` gets each row's code (``ROW_REASONS``), ``out`` (:class:`Emitted`) the
    tasks whose history closed; return how many were emitted."""
    k = 0
    for r in range(ev.time.size):
        e, t = ev.event_type[r], ev.time[r]
        if e < 0 or e > UPDATE_RUNNING:
            reasons[r] = 1
            continue
        if ev.task_index[r] < 0 or ev.task_index[r] >= MAX_TASK_INDEX:
            reasons[r] = 3
            continue
        key = _key(ev.job_id[r], ev.task_index[r])
        p = find(state.keys, key)
        if p >= 0:
            s = state.values[p]
        elif e == SUBMIT or e == SCHEDULE or e == UPDATE_PENDING:
            p = -1 - p
            s = _open(state, ev.job_id[r], ev.task_index[r], key, p, t)
            if e == SCHEDULE:
                state.notes[N_SCHED_NO_SUBMIT] += 1
        else:
            reasons[r] = 2
            continue
        _take_request(state, s, ev, r)
        k = _apply(state, s, p, e, t, ev.machine_id[r], out, k)
    return k


@numba.njit(cache=True)
def _take_request(state, s, ev, r):  # pragma: no cover - compiled
    """Row ``r``'s requests, priority and class, where it gives them, into slot ``s``."""
    if not np.isnan(ev.cpu[r]):
        state.f[s, _CPU] = ev.cpu[r]
    if not np.isnan(ev.mem[r]):
        state.f[s, _MEM] = ev.mem[r]
    state.i[s, _PRIO] = ev.priority[r]
    if ev.sched_class[r] >= 0:
        state.i[s, _CLASS] = ev.sched_class[r]


@numba.njit(cache=True)
def _apply(state, s, p, e, t, machine, out, k):  # pragma: no cover - compiled
    """Event ``e`` at ``t`` (on ``machine``) to slot ``s`` (at map position ``p``): start or
    end an attempt, emit and close the task when its incarnation ends; return the record
    count."""
    f, i, notes = state.f, state.i, state.notes
    running = f[s, _START] >= 0.0
    if e == SUBMIT:
        if t == 0.0 and machine >= 0 and not running:
            f[s, _START] = 0.0
            i[s, _MACHINE] = machine
            i[s, _FLAGS] |= _FLAG_BEFORE
            notes[N_STARTED_BEFORE] += 1
    elif e == SCHEDULE:
        if running:
            if not (i[s, _FLAGS] & _FLAG_BEFORE and f[s, _START] == 0.0 and t == 0.0):
                notes[N_DUP_SCHED] += 1
        else:
            f[s, _START] = t
            i[s, _MACHINE] = machine
    elif e == EVICT or e == FAIL or e == FINISH or e == KILL or e == LOST:
        code = _END_OF_EVENT[e]
        if running:
            _end_attempt(f, i, s, t, code)
        elif e == EVICT or e == FAIL or e == LOST:
            notes[N_TERM_PENDING] += 1
        if e == FINISH or e == KILL or e == LOST:
            # The record describes the last attempt that ran (none: never scheduled).
            k = _emit(state, s, out, k, i[s, _LAST_END], f[s, _LAST_RUN])
            _close(state, p, s)
    return k


@numba.njit(cache=True)
def _flush(state, window_end, out):  # pragma: no cover - compiled
    """Close every task in ``state`` at ``window_end`` (a running attempt is censored);
    return how many were emitted into ``out``."""
    k = 0
    f, i = state.f, state.i
    for p in range(state.keys.size):
        if state.keys[p] == EMPTY:
            continue
        s = state.values[p]
        if f[s, _START] >= 0.0:
            _end_attempt(f, i, s, window_end, E_CENSORED)
            state.notes[N_CENSORED] += 1
        k = _emit(state, s, out, k, i[s, _LAST_END], f[s, _LAST_RUN])
    return k
