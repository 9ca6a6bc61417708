"""Speculative copies in the core: a policy may launch a second attempt of a running task on
another node; the first attempt to finish wins and the other is killed.

As in Hadoop MapReduce (``TaskInProgress``: a task is done when any attempt succeeds; the
other attempts are killed), both attempts hold their resources while they run, and the
loser's run time is lost.  A copy is a task slot of its own (its own node, start, end and
heap entry) linked to the original by ``twin``; both carry the ``SPEC`` flag, so the
completion kernel hands their completions back here.  ``task_runs`` keeps one row per task:
``machine_id``/``start_s`` are the original attempt's, ``end_s`` the winner's, and the
``spec`` figures (:data:`pipeline.sim.tasks.SPEC_NAMES`) say how many copies ran, whether
one won, where and when the last one started, the copies' run time and the losers'.

What happens to the pair when something else stops one attempt:

- a copy preempted, evicted (its node goes down) or killed: the copy dies, the original
  runs on; its run time counts as lost (``wasted_s`` of the speculation);
- the original preempted or evicted while its copy runs: the copy carries the task on (the
  task is not re-queued): ``machine_id``/``start_s`` become the copy's and the copy wins;
  the original's lost run counts in ``wasted_s`` like any preemption or eviction;
- the original killed, or stopped at the trace's window end or the replay's horizon: the
  copy dies with it.

The core holds one :class:`Speculation` as ``sim.speculation`` and calls it at named points:
:meth:`~Speculation.launch` (a policy's copies), :meth:`~Speculation.settle_due` (after each
completion step), :meth:`~Speculation.split_stops` (runs stopped early) and
:meth:`~Speculation.drop_running` (the replay's end).  A replay without copies pays a length
check at each of those points and nothing else (no flag is ever ``SPEC``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim import kernels
from pipeline.sim.cluster import UP
from pipeline.sim.decisions import gpu_checked
from pipeline.sim.heap import heap_push
from pipeline.sim.interface import PolicyError
from pipeline.sim.tasks import (
    CENSORED,
    FINISHED,
    HAS_INPUTS,
    IS_PARENT,
    N_DONE,
    OPPORTUNISTIC,
    PENDING,
    RUNNING,
    S_COPIES,
    S_INSTANCE,
    S_RUN_S,
    S_START,
    S_WASTED_S,
    S_WON,
    SPEC,
    X_MEASURED,
    is_copy,
)

if TYPE_CHECKING:
    from pipeline.sim.context import SimContext


# completions of speculated tasks the completion kernel can list per call (it stops early
# when the list is full; the core calls it again)
DUE_ROOM = 4096


class Speculation:
    """Speculative copies of the simulation ``sim``: launched, settled, handed over and
    dropped (typed against :class:`pipeline.sim.context.SimContext`, the core's declared
    shape).  The copy links and figures are task-table fields (``twin``, ``spec``,
    ``spec_end``, which the completion kernel reads); this component owns the list of
    completions the kernel hands back to settle."""

    def __init__(self, sim: SimContext) -> None:
        self.sim = sim
        # completions of SPEC attempts the kernel listed: slots, ends, and (1,) how many
        self.due_slot = np.zeros(DUE_ROOM, dtype=np.int64)
        self.due_end = np.zeros(DUE_ROOM)
        self.n_due = np.zeros(1, dtype=np.int64)

    def is_copy(self, slots: np.ndarray) -> np.ndarray:
        """Whether each of ``slots`` is a speculative copy (only copies have ``spec_end``)."""
        return is_copy(self.sim.tasks, slots)

    # -- launching ------------------------------------------------------------------------
    def launch(self, at: float, run_idx: np.ndarray, node: np.ndarray) -> None:
        """Check and start the copies a policy asked for (``run_idx`` into its running view)."""
        sim = self.sim
        running = sim.views.running_slots
        name = sim.policy_name
        if running is None or np.any((run_idx < 0) | (run_idx >= len(running))):
            raise PolicyError(f"policy '{name}' asked for a copy of a container outside "
                              "view.running (return Needs(running=True) from setup)")
        if len(np.unique(run_idx)) != len(run_idx):
            raise PolicyError(f"policy '{name}' asked for two copies of one task at t={at:g}s")
        n = sim.cluster.nodes
        if np.any((node < 0) | (node >= len(n.state))):
            raise PolicyError(f"policy '{name}' sent a copy to a node out of range")
        sim.tasks.enable_extras()
        orig = running[run_idx]
        self._check_originals(at, orig, node)
        copies = self._copy_slots(orig)
        t = sim.tasks  # (the table may have grown)
        kept, _, bound = gpu_checked(sim, np.arange(len(copies)), node, copies)
        if len(kept) < len(copies):  # held back: the node's GPU model or devices cannot
            t.release(np.delete(copies, kept))
            orig, copies, node = orig[kept], copies[kept], node[kept]
        h = sim.heap
        h.reserve(int(t.counters[kernels.HEAP_N]), len(copies))
        bad_i, _code = kernels.apply_placements(
            at, np.arange(len(copies), dtype=np.int64), node, copies, h, t, n,
            sim.open_flag, sim._read_rate)
        if bad_i >= 0:
            s = int(orig[bad_i])
            raise PolicyError(f"policy '{name}' copy {bad_i} rejected at t={at:g}s: task "
                              f"(trace row {int(t.row[s])}) on node {int(node[bad_i])}: "
                              "it does not fit the node's free capacity")
        if bound:
            assert sim.gpus is not None
            sim.gpus.commit(bound, t)
        self._link(at, orig, copies, node)
        if sim.nm is not None:  # a copy is a guaranteed container: it may need room
            sim.nm.make_room(sim, at, copies, node)

    def _check_originals(self, at: float, orig: np.ndarray, node: np.ndarray) -> None:
        """The policy's error if a copy of ``orig`` on ``node`` cannot start."""
        sim = self.sim
        t, n = sim.tasks, sim.cluster.nodes
        opp = (t.flags[orig] & OPPORTUNISTIC) != 0
        bad = np.flatnonzero(self.is_copy(orig) | (t.twin[orig] >= 0) | (t.node[orig] == node)
                             | (n.state[node] != UP) | (t.state[orig] != RUNNING) | opp)
        if len(bad) == 0:
            return
        i = int(bad[0])
        s = int(orig[i])
        why = ("was stopped in the same call" if t.state[s] != RUNNING
               else "is itself a copy" if self.is_copy(orig[i:i + 1])[0]
               else "already has a running copy" if t.twin[s] >= 0
               else "would run on the original's node" if t.node[s] == node[i]
               else "is opportunistic (copies are of guaranteed containers)" if opp[i]
               else "targets a node that is not up")
        raise PolicyError(f"policy '{sim.policy_name}' copy {i} rejected at t={at:g}s: task "
                          f"(trace row {int(t.row[s])}) {why}")

    def _copy_slots(self, orig: np.ndarray) -> np.ndarray:
        """New slots holding copies of tasks ``orig`` (pending, ready to be placed)."""
        t = self.sim.tasks
        copies = t.alloc(len(orig))
        for name in ("row", "submit", "ready", "duration", "req", "used", "user", "queue",
                     "job", "priority", "kind", "inp", "input_mb", "requested", "allow"):
            arr = getattr(t, name)
            arr[copies] = arr[orig]
        t.gang[copies] = -1  # a copy starts alone
        t.flags[copies] = (t.flags[orig] & np.int8(HAS_INPUTS | CENSORED)) | np.int8(SPEC)
        t.used[copies] = np.where(np.isnan(t.used[orig]), t.req[orig, :2], t.used[orig])
        t.state[copies] = PENDING
        return copies

    def _link(self, at: float, orig: np.ndarray, copies: np.ndarray, node: np.ndarray
              ) -> None:
        """Pair the started ``copies`` (on ``node``) with their originals ``orig``."""
        sim = self.sim
        t, n = sim.tasks, sim.cluster.nodes
        t.twin[orig] = copies
        t.twin[copies] = orig
        t.flags[orig] |= np.int8(SPEC)
        t.spec[orig, S_COPIES] += 1
        t.spec[orig, S_INSTANCE] = n.instance[node]
        t.spec[orig, S_START] = at
        t.spec_end[copies] = t.run_end[copies]  # (marks them as copies)
        sim.events += len(copies)
        sim.last_s = max(sim.last_s, at)

    # -- settling -------------------------------------------------------------------------
    def settle_due(self) -> None:
        """Settle the completions the completion kernel just listed (if any)."""
        ns = int(self.n_due[0])
        if ns:  # attempts of speculated tasks: the first of each to finish wins
            self.n_due[0] = 0
            self.settle(self.due_slot[:ns].copy(), self.due_end[:ns].copy())

    def settle(self, slots: np.ndarray, ends: np.ndarray) -> None:
        """Attempts ``slots`` (flagged SPEC) finished at ``ends`` (in that order): each task's
        first attempt to finish wins and the other is killed then; the tasks are recorded.
        Vectorized: a replay with many copies settles them in batches, not one by one."""
        sim = self.sim
        t, n = sim.tasks, sim.cluster.nodes
        k = len(slots)
        partner = t.twin[slots]
        sorter = np.argsort(slots, kind="stable")
        where = sorter[np.minimum(np.searchsorted(slots, partner, sorter=sorter), k - 1)]
        # an attempt whose other attempt finished earlier in the batch was killed then
        keep = ~((partner >= 0) & (slots[where] == partner) & (where < np.arange(k)))
        win, end = slots[keep], ends[keep]
        copy = self.is_copy(win)
        orig = np.where(copy, t.twin[win], win)
        lose = np.where(copy, orig, t.twin[win])  # the other attempt, still running (-1: none)
        has = lose >= 0
        loser, at = lose[has], end[has]
        lost = at - t.start[loser]
        t.spec[orig[has], S_WASTED_S] += lost
        loser_copy = ~copy[has]
        t.spec[orig[has][loser_copy], S_RUN_S] += lost[loser_copy]
        t.spec[orig[copy], S_RUN_S] += end[copy] - t.start[win[copy]]
        t.spec[orig[copy], S_WON] = 1.0
        copies = np.concatenate([win[copy], loser[loser_copy]])
        t.read[t.twin[copies]] += t.read[copies]
        run_s = end - t.start[win]
        node = t.node[win]
        self._release_at(np.concatenate([win, loser]), np.concatenate([end, at]))
        np.add.at(n.done, node, 1)
        np.add.at(n.done_s, node, run_s)
        if sim.job_stats is not None:
            sim.job_stats.finish(t.job[orig].astype(np.int64), t.kind[orig].astype(np.int64),
                                 run_s)
        t.twin[orig] = -1
        sim.records.write_slots(t.counters, t, orig, FINISHED, end, n.instance[t.node[orig]])
        t.counters[N_DONE] += len(orig)
        t.release(copies)
        parent = (t.flags[orig] & IS_PARENT) != 0
        if parent.any():
            sim._release_children(orig[parent], end[parent])
        t.release(orig[~parent])

    def _release_at(self, slots: np.ndarray, at: np.ndarray) -> None:
        """The runs of ``slots`` end at times ``at``: ``sim.runs.release`` with a time per
        run (the usage integral settled one by one, only for tasks with measured usage)."""
        sim = self.sim
        t = sim.tasks
        if t.extras_on:
            for i in np.flatnonzero(t.extra[slots, X_MEASURED] > 0).tolist():
                sim.usage.stop(t, float(at[i]), slots[i:i + 1], sim.cluster.nodes.speed)
        sim.runs.free(slots, at)

    # -- stopping -------------------------------------------------------------------------
    def _drop(self, at: float, copies: np.ndarray) -> None:
        """Copies ``copies`` stop at ``at`` without winning: their run time is lost."""
        if len(copies) == 0:
            return
        sim = self.sim
        t = sim.tasks
        orig = t.twin[copies]
        sim.runs.release(at, copies)
        run = at - t.start[copies]
        t.spec[orig, S_RUN_S] += run
        t.spec[orig, S_WASTED_S] += run
        t.read[orig] += t.read[copies]
        t.twin[orig] = -1
        t.release(copies)

    def _hand_over(self, at: float, orig: np.ndarray, evicted: bool) -> None:
        """The originals ``orig`` lose their run (preempted or evicted); each one's running
        copy carries the task on from where the copy is, and will give its result."""
        sim = self.sim
        t, h = sim.tasks, sim.heap
        copies = t.twin[orig]
        sim.runs.release(at, orig)  # the originals' nodes get their room back
        t.wasted[orig] += at - t.start[orig]
        (t.evictions if evicted else t.preemptions)[orig] += 1
        t.spec[orig, S_WON] = 1.0  # (the copy's run so far is the task's run from now on)
        for name in ("node", "start", "locality", "used", "run_end", "seg_t", "seg_share"):
            arr = getattr(t, name)
            arr[orig] = arr[copies]
        t.read[orig] += t.read[copies]
        t.attempts[orig] += 1
        t.twin[orig] = -1
        h.reserve(int(t.counters[kernels.HEAP_N]), len(orig))
        for o, c in zip(orig.tolist(), copies.tolist(), strict=True):
            heap_push(h.time, h.seq, h.slot, h.epoch, t.counters,
                      float(t.spec_end[c]), o, int(t.epoch[o]))
        t.epoch[copies] += 1  # the copies' own completions go stale; their room is the task's
        t.release(copies)

    def split_stops(self, at: float, slots: np.ndarray, requeue: bool,
                    evicted: bool) -> np.ndarray:
        """Settle the speculation side of stopping ``slots``; return those the usual stop
        path still handles (originals, whose copies are gone or carry them on)."""
        t = self.sim.tasks
        copy = self.is_copy(slots)
        self._drop(at, slots[copy])
        orig = slots[~copy]
        paired = t.twin[orig] >= 0
        if not paired.any():
            return orig
        if requeue:
            self._hand_over(at, orig[paired], evicted)
            return orig[~paired]
        self._drop(at, t.twin[orig[paired]])
        return orig

    def drop_running(self, at: float) -> None:
        """At the replay's end: copies still running die (their run time counts as lost)."""
        t = self.sim.tasks
        if t.extras_on:
            self._drop(at, np.flatnonzero(~np.isnan(t.spec_end)))
