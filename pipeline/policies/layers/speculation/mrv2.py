"""MapReduce v2's speculator (Hadoop 2/3 MapReduce ApplicationMaster: ``DefaultSpeculator``
with ``LegacyTaskRuntimeEstimator``; defaults from mapred-default.xml / MRJobConfig).

Each job's AM runs passes: every ``mapreduce.job.speculative.retry-after-no-speculate``
(1000 ms), or ``retry-after-speculate`` (15000 ms) after a pass that launched a copy.  In a
pass, per task kind (``maybeScheduleASpeculation``):

- skip the kind while the job still waits for containers of it (``containerNeeds`` > 0:
  here, tasks of that kind admitted but neither finished nor running);
- allowed = max(``minimum-allowed-tasks`` 10, ``speculative-cap-total-tasks`` 0.01 x tasks
  of that kind, ``speculative-cap-running-tasks`` 0.1 x running tasks of that kind), each
  product truncated to an int as Java's ``(int)`` cast does;
- each running task's value (``speculationValue``): estimated end = start + elapsed / PS
  (the legacy estimator; no estimate at PS 0), replacement end = now + mean run time of the
  kind's finished tasks (``estimatedNewAttemptRuntime``), available only with at least 1
  finished and at least 5% of the kind's tasks finished (``thresholdRuntime``:
  MINIMUM_COMPLETE_NUMBER_TO_SPECULATE, MINIMUM_COMPLETE_PROPORTION_TO_SPECULATE); no value
  if the estimated end is already past or the replacement would not finish first; value =
  estimated end - replacement end;
- a task with a copy running counts as already speculating; if fewer than allowed are,
  the task of highest value gets a copy (ties: lowest row).

The AM asks the RM for the copy's container with the task's input hosts and racks; the
replay puts it on a node holding the input if one has room, else on a node in the rack of
one, else on the least loaded up node with room (largest free share: the smallest free
fraction over its resources), lowest slot on ties.  Passes happen at the scheduling points
the core offers, so a pass due at t runs at the first call at or after t.
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.layers.speculation.groups import N_KINDS, lookup
from pipeline.policies.layers.speculation.placement import CopyPlacer
from pipeline.policies.layers.speculation.running import RunningTasks
from pipeline.policies.models import task_allow
from pipeline.sim.interface import SchedView

MINIMUM_COMPLETE_NUMBER_TO_SPECULATE = 1
MINIMUM_COMPLETE_PROPORTION_TO_SPECULATE = 0.05
EMPTY = np.zeros(0, dtype=np.int64)


def mrv2_allowed(total: np.ndarray, running: np.ndarray, minimum: int = 10,
                 cap_total: float = 0.01, cap_running: float = 0.1) -> np.ndarray:
    """Speculations allowed per job kind (DefaultSpeculator's numberAllowedSpeculativeTasks)."""
    first = np.maximum(minimum, cap_total * np.asarray(total, dtype=np.float64))
    first = np.trunc(first).astype(np.int64)
    return np.trunc(np.maximum(first, cap_running * np.asarray(running, dtype=np.float64))
                    ).astype(np.int64)


def mrv2_estimates_ok(finished: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Whether a job kind has finished enough tasks to estimate (thresholdRuntime)."""
    finished = np.asarray(finished, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    share = np.zeros(len(total))
    np.divide(finished, total, out=share, where=total > 0)
    return ((finished >= MINIMUM_COMPLETE_NUMBER_TO_SPECULATE)
            & (share >= MINIMUM_COMPLETE_PROPORTION_TO_SPECULATE))


def mrv2_value(now: float, start_s: np.ndarray, ps: np.ndarray,
               mean_run_s: np.ndarray) -> np.ndarray:
    """Each running attempt's speculation value in seconds (NaN: none, so no copy)."""
    start = np.asarray(start_s, dtype=np.float64)
    ps = np.asarray(ps, dtype=np.float64)
    end = np.full(len(ps), np.nan)
    np.divide(now - start, ps, out=end, where=ps > 0)
    end += start
    value = end - (now + np.asarray(mean_run_s, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        value[~(end >= now) | ~(value > 0)] = np.nan
    return value


def mrv2_picks(group: np.ndarray, value: np.ndarray, row: np.ndarray,
               may: np.ndarray) -> np.ndarray:
    """Per group (where ``may`` is true), the position of the highest value (ties: lowest
    row); positions with NaN values never."""
    ok = ~np.isnan(value) & np.asarray(may)[group]
    pos = np.flatnonzero(ok)
    if len(pos) == 0:
        return EMPTY
    order = pos[np.argsort(np.asarray(row)[pos], kind="stable")]
    order = order[np.argsort(-value[order], kind="stable")]
    order = order[np.argsort(group[order], kind="stable")]
    g = group[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    return order[first]


class Mrv2Rule:
    """Per-job speculator passes over the running originals of one call."""

    def __init__(self, retry_no_s: float, retry_spec_s: float, minimum: int,
                 cap_total: float, cap_running: float) -> None:
        self.retry_no_s, self.retry_spec_s = retry_no_s, retry_spec_s
        self.minimum, self.cap_total, self.cap_running = minimum, cap_total, cap_running
        self.next_pass_s = np.zeros(0, dtype=np.float64)  # by job code; 0: due

    def next_wake(self, tasks: RunningTasks) -> float:
        """The earliest next pass of a job with running tasks."""
        jobs = tasks.groups.keys // N_KINDS
        self._grow(int(jobs.max()) + 1 if len(jobs) else 0)
        due = self.next_pass_s[jobs]
        return float(max(due.min(), tasks.now)) if len(due) else np.inf

    def _grow(self, n: int) -> None:
        if n > len(self.next_pass_s):
            grown = np.zeros(max(n, 2 * len(self.next_pass_s)), dtype=np.float64)
            grown[: len(self.next_pass_s)] = self.next_pass_s
            self.next_pass_s = grown

    def launch(self, view: SchedView, tasks: RunningTasks, room: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Positions (into ``tasks``) of the originals to copy, and their nodes."""
        groups = tasks.groups
        job, kind = groups.keys // N_KINDS, groups.keys % N_KINDS
        self._grow(int(job.max()) + 1 if len(job) else 0)
        due = self.next_pass_s[job] <= tasks.now
        self.next_pass_s[job[due]] = tasks.now + self.retry_no_s
        stats = getattr(view, "jobs", None)
        if not due.any() or stats is None:
            return EMPTY, EMPTY
        finished = lookup(stats.finished, job, kind)
        total = np.maximum(lookup(stats.arrived, job, kind), groups.counts)
        may = (due & (total - finished - groups.counts <= 0)
               & mrv2_estimates_ok(finished, total))
        if not may.any():
            return EMPTY, EMPTY
        speculating = groups.count(tasks.has_copy)
        allowed = mrv2_allowed(total, groups.counts, self.minimum, self.cap_total,
                               self.cap_running)
        may &= speculating < allowed
        mean_run_s = np.zeros(groups.n)
        np.divide(lookup(stats.run_s_sum, job, kind), finished, out=mean_run_s,
                  where=finished > 0)
        rows = np.flatnonzero(may[groups.inverse])
        ps, start_s = tasks.score_at(rows)
        value = mrv2_value(tasks.now, start_s, ps, mean_run_s[groups.inverse[rows]])
        # most tasks are on schedule: sort only the others
        worth = ~np.isnan(value) & tasks.open_at(rows, ps)
        rows, value = rows[worth], value[worth]
        sub_row = np.asarray(tasks.at(rows).row)
        pos = rows[mrv2_picks(groups.inverse[rows], value, sub_row, may)]
        if len(pos) == 0:
            return EMPTY, EMPTY
        return self._place(view, tasks, room, pos)

    def _place(self, view: SchedView, tasks: RunningTasks, room: np.ndarray,
               pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sub = tasks.at(pos)
        req = np.asarray(sub.req, dtype=np.float64)
        cap = np.asarray(view.nodes.cap, dtype=np.float64)
        share = np.full(cap.shape, np.inf)
        np.divide(room, cap, out=share, where=cap > 0)
        free_share = share.min(axis=1)
        placer = CopyPlacer(room, view.nodes.rack, req.min(axis=0), prefer=free_share,
                            models=view.nodes.gpu_model)
        order = np.argsort(np.asarray(sub.row), kind="stable")
        took, nodes = placer.place(order, req, tasks.node[pos], inputs=np.asarray(sub.inputs),
                                   allow=task_allow(view, sub))
        launched = pos[took]
        if len(launched):  # a pass that speculated waits longer for its job's next pass
            self.next_pass_s[np.unique(tasks.job[launched])] = tasks.now + self.retry_spec_s
        return launched, nodes
