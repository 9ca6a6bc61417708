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
"""

from __future__ import annotations

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


def fold_part(state: TaskState, events: dict[str, np.ndarray]) -> tuple[np.ndarray, dict]:
    """Apply one part's events (in time order); return per-row reason codes and emitted tasks."""
    n = len(events["time"])
    state.reserve(n)
    out_f = np.empty((N_OUT_F, n))
    out_i = np.empty((N_OUT_I, n), dtype=np.int64)
    reasons = np.zeros(n, dtype=np.int64)
    m = state.slots
    emitted = _fold(
        m.keys, m.values, m.count, state.free, state.n_free, state.f, state.i, state.notes,
        events["time"], events["job_id"], events["task_index"], events["machine_id"],
        events["event_type"], events["priority"], events["sched_class"], events["cpu"],
        events["mem"], reasons, out_f, out_i,
    )
    return reasons, _records(out_f[:, :emitted], out_i[:, :emitted])


def flush(state: TaskState, window_end: float) -> dict:
    """Close every task still in flight at the window end; return the emitted tasks."""
    n = len(state.slots)
    out_f = np.empty((N_OUT_F, n))
    out_i = np.empty((N_OUT_I, n), dtype=np.int64)
    emitted = _flush(state.slots.keys, state.slots.values, state.f, state.i, state.notes,
                     window_end, out_f, out_i)
    state.slots = IntMap()
    return _records(out_f[:, :emitted], out_i[:, :emitted])


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
def _open(keys, values, count, free, n_free, f, i, job, index, key, p, t):  # pragma: no cover
    n_free[0] -= 1
    s = free[n_free[0]]
    insert_at(keys, values, count, p, key, s)
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
def _emit(f, i, s, notes, out_f, out_i, k, end_code, run):  # pragma: no cover - compiled
    """Write slot ``s`` as emitted record ``k`` if it ran; return the new record count."""
    if end_code < 0 or run <= 0.0:
        notes[N_NEVER if end_code < 0 else N_ZERO] += 1
        return k
    if np.isnan(f[s, _CPU]) or np.isnan(f[s, _MEM]):
        notes[N_NOREQ] += 1
        return k
    out_f[0, k], out_f[1, k] = f[s, _SUBMIT], run
    out_f[2, k], out_f[3, k], out_f[4, k] = f[s, _CPU], f[s, _MEM], f[s, _LOST]
    out_f[5, k] = f[s, _LAST_START]
    out_i[0, k], out_i[1, k] = i[s, _JOB], i[s, _INDEX]
    out_i[2, k], out_i[3, k] = i[s, _PRIO], i[s, _CLASS]
    out_i[4, k] = end_code | (i[s, _ATTEMPTS] << 8)
    out_i[5, k] = i[s, _LAST_MACHINE]
    return k + 1


@numba.njit(cache=True)
def _close(keys, values, count, free, n_free, p, s):  # pragma: no cover - compiled
    delete_at(keys, values, count, p)
    free[n_free[0]] = s
    n_free[0] += 1


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
def _fold(keys, values, count, free, n_free, f, i, notes, time, job, index, machine, etype,
          prio, sclass, cpu, mem, reasons, out_f, out_i):  # pragma: no cover - compiled
    k = 0
    for r in range(time.size):
        e, t = etype[r], time[r]
        if e < 0 or e > UPDATE_RUNNING:
            reasons[r] = 1
            continue
        if index[r] < 0 or index[r] >= MAX_TASK_INDEX:
            reasons[r] = 3
            continue
        key = _key(job[r], index[r])
        p = find(keys, key)
        if p >= 0:
            s = values[p]
        else:
            if e == SUBMIT or e == SCHEDULE or e == UPDATE_PENDING:
                p = -1 - p
                s = _open(keys, values, count, free, n_free, f, i, job[r], index[r], key, p, t)
                if e == SCHEDULE:
                    notes[N_SCHED_NO_SUBMIT] += 1
            else:
                reasons[r] = 2
                continue
        if not np.isnan(cpu[r]):
            f[s, _CPU] = cpu[r]
        if not np.isnan(mem[r]):
            f[s, _MEM] = mem[r]
        i[s, _PRIO] = prio[r]
        if sclass[r] >= 0:
            i[s, _CLASS] = sclass[r]
        running = f[s, _START] >= 0.0
        if e == SUBMIT:
            if t == 0.0 and machine[r] >= 0 and not running:
                f[s, _START] = 0.0
                i[s, _MACHINE] = machine[r]
                i[s, _FLAGS] |= _FLAG_BEFORE
                notes[N_STARTED_BEFORE] += 1
        elif e == SCHEDULE:
            if running:
                if not (i[s, _FLAGS] & _FLAG_BEFORE and f[s, _START] == 0.0 and t == 0.0):
                    notes[N_DUP_SCHED] += 1
            else:
                f[s, _START] = t
                i[s, _MACHINE] = machine[r]
        elif e == EVICT or e == FAIL or e == FINISH or e == KILL or e == LOST:
            code = _END_OF_EVENT[e]
            if running:
                _end_attempt(f, i, s, t, code)
            elif e == EVICT or e == FAIL or e == LOST:
                notes[N_TERM_PENDING] += 1
            if e == FINISH or e == KILL or e == LOST:
                # The record describes the last attempt that ran (none: never scheduled).
                k = _emit(f, i, s, notes, out_f, out_i, k, i[s, _LAST_END], f[s, _LAST_RUN])
                _close(keys, values, count, free, n_free, p, s)
    return k


@numba.njit(cache=True)
def _flush(keys, values, f, i, notes, window_end, out_f, out_i):  # pragma: no cover - compiled
    k = 0
    for p in range(keys.size):
        if keys[p] == EMPTY:
            continue
        s = values[p]
        if f[s, _START] >= 0.0:
            _end_attempt(f, i, s, window_end, E_CENSORED)
            notes[N_CENSORED] += 1
        k = _emit(f, i, s, notes, out_f, out_i, k, i[s, _LAST_END], f[s, _LAST_RUN])
    return k
