"""LATE, Longest Approximate Time to End (Zaharia, Konwinski, Joseph, Katz, Stoica, "Improving
MapReduce Performance in Heterogeneous Environments", OSDI 2008, section 4).

When a node asks for work and fewer than SpeculativeCap speculative copies run:

1. ignore the node if its total progress (sum of PS of its finished tasks, 1 each, and of
   its running ones) is below SlowNodeThreshold;
2. rank the running tasks not already speculated by estimated time left, longest first;
3. launch a copy of the highest-ranked task whose progress rate is below
   SlowTaskThreshold.

The paper's values (``spec_thresholds=percentile``): SpeculativeCap = 10% of the task
slots, SlowNodeThreshold = 25th percentile of node progress (over up nodes),
SlowTaskThreshold = 25th percentile of progress rates.  Percentiles use numpy's 'linear'
method (Hyndman and Fan type 7); "below" is strict.  LATE ignores data locality for copies.

``spec_thresholds=stddev`` is Hadoop 0.21's LATE-derived code (JobInProgress
``findSpeculativeTask``, ``atSpeculativeCap``, ``isSlowTracker``, TaskInProgress
``canBeSpeculated``): a task is slow iff its rate < mean - slowtaskthreshold * std of the
rates of its job's running tasks of its kind (threshold clamped at 0); a node is slow iff
the mean run time of the tasks finished on it - the mean run time of all finished tasks >
std of those run times * slownodethreshold; a job's kind is at its cap unless its copies
are fewer than 10 (MIN_SPEC_CAP) or than 0.01 of the task slots (MIN_SLOTS_CAP), or their
share of its running tasks is below speculativecap.  Hadoop keeps the node statistics per
job; the view has them per node over all jobs, so the replay compares a node's mean with
all finished tasks' mean and std (``view.jobs`` summed).

Replay choices, the same in both modes:

- slow-task statistics are per (job, kind) over running originals, as Hadoop 0.21 keeps
  them (progress rates of a job's short and a job's long tasks are not comparable);
- ranking uses Hadoop 0.21's EstimatedTimeLeftComparator, rate / max(1e-4, 1 - PS)
  ascending (= time left, longest first, without dividing by a zero rate); ties by row;
- a task becomes a candidate after ``spec_lag_s`` running (SPECULATIVE_LAG, kept by 0.21's
  ``canBeSpeculated``; a rate right after launch says nothing);
- task slots (for the caps): containers of the median running request that fit the up
  nodes (:func:`pipeline.policies.layers.speculation.placement.task_slots`), refreshed every 60 s;
- a copy goes to the non-slow node with room that has the highest total progress (the
  paper's measure of a fast node), lowest slot on ties.
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.policies.layers.speculation.groups import Groups
from pipeline.policies.layers.speculation.placement import CopyPlacer, task_slots
from pipeline.policies.layers.speculation.running import RunningTasks
from pipeline.policies.models import task_allow
from pipeline.sim.interface import SchedView

MIN_SPEC_CAP = 10
MIN_SLOTS_CAP = 0.01
SLOTS_REFRESH_S = 60.0
EMPTY = np.zeros(0, dtype=np.int64)


def slow_nodes_by_progress(node_progress: np.ndarray, up: np.ndarray, pct: float
                           ) -> np.ndarray:
    """Up nodes whose total progress is below the ``pct`` percentile over up nodes."""
    up = np.asarray(up, dtype=bool)
    if not up.any():
        return np.zeros(len(up), dtype=bool)
    threshold = np.percentile(np.asarray(node_progress)[up], pct, method="linear")
    return up & (np.asarray(node_progress) < threshold)


def slow_nodes_by_duration(done: np.ndarray, done_run_s: np.ndarray, task_mean_s: float,
                           task_std_s: float, threshold: float) -> np.ndarray:
    """Nodes whose finished tasks' mean run time exceeds all tasks' mean by more than
    ``threshold`` standard deviations (Hadoop 0.21 isSlowTracker); none without tasks."""
    done = np.asarray(done, dtype=np.float64)
    mean = np.zeros(len(done))
    np.divide(done_run_s, done, out=mean, where=done > 0)
    return (done > 0) & (mean - task_mean_s > task_std_s * threshold)


def slow_tasks_by_percentile(rate: np.ndarray, groups: Groups, pct: float) -> np.ndarray:
    """Tasks whose rate is below the ``pct`` percentile of their group's rates."""
    return rate < groups.percentile(rate, pct)[groups.inverse]


def slow_tasks_by_stddev(rate: np.ndarray, groups: Groups, threshold: float) -> np.ndarray:
    """Tasks whose rate is below their group's mean - ``threshold`` (>= 0) std."""
    mean, std = groups.mean_std(rate)
    return rate < (mean - max(threshold, 0.0) * std)[groups.inverse]


def late_order(ps: np.ndarray, rate: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Positions by estimated time left, longest first (Hadoop 0.21's comparator:
    rate / max(1e-4, 1 - PS) ascending), ties by row."""
    key = np.asarray(rate) / np.maximum(1e-4, 1.0 - np.asarray(ps))
    by_row = np.argsort(np.asarray(row), kind="stable")
    return by_row[np.argsort(key[by_row], kind="stable")]  # np.lexsort is ~10x slower


def copies_left_paper(copies_running: int, slots: int, cap: float) -> int:
    """Copies that may still start: while fewer than ``cap`` x ``slots`` run."""
    return max(0, math.ceil(cap * slots - copies_running))


def copies_left_hadoop021(spec_count: np.ndarray, running: np.ndarray, slots: int,
                          cap: float) -> np.ndarray:
    """Per group, copies that may still start before Hadoop 0.21's atSpeculativeCap:
    not at cap while count < max(MIN_SPEC_CAP, MIN_SLOTS_CAP x slots, cap x running)."""
    bound = np.maximum(max(MIN_SPEC_CAP, MIN_SLOTS_CAP * slots),
                       cap * np.asarray(running, dtype=np.float64))
    return np.maximum(0, np.ceil(bound).astype(np.int64) - np.asarray(spec_count))


class LateRule:
    """LATE over the running originals of one call (paper thresholds or Hadoop 0.21's)."""

    def __init__(self, cap: float, thresholds: str, slow_node_pct: float,
                 slow_task_pct: float, slow_node_threshold: float,
                 slow_task_threshold: float, lag_s: float) -> None:
        self.cap, self.thresholds, self.lag_s = cap, thresholds, lag_s
        self.slow_node_pct, self.slow_task_pct = slow_node_pct, slow_task_pct
        self.slow_node_threshold = slow_node_threshold
        self.slow_task_threshold = slow_task_threshold
        self._slots = (-math.inf, 0)  # (when computed, value)

    def slots(self, view: SchedView, tasks: RunningTasks) -> int:
        """Task slots of the cluster, recomputed every SLOTS_REFRESH_S."""
        at, value = self._slots
        if tasks.now - at >= SLOTS_REFRESH_S:
            req = np.asarray(tasks.view.req)
            value = task_slots(view.nodes.cap, view.nodes.up, req)
            self._slots = (tasks.now, value)
        return value

    def slow_nodes(self, view: SchedView, progress: np.ndarray) -> np.ndarray:
        nodes = view.nodes
        if self.thresholds == "percentile":
            return slow_nodes_by_progress(progress, nodes.up, self.slow_node_pct)
        jobs = getattr(view, "jobs", None)
        done = getattr(nodes, "done", None)
        if jobs is None or done is None:
            return np.zeros(len(progress), dtype=bool)
        n = float(np.sum(jobs.finished))
        mean = float(np.sum(jobs.run_s_sum)) / n if n else 0.0
        var = float(np.sum(jobs.run_s_sq)) / n - mean * mean if n else 0.0
        return slow_nodes_by_duration(done, nodes.done_run_s, mean, math.sqrt(max(var, 0.0)),
                                      self.slow_node_threshold)

    def launch(self, view: SchedView, tasks: RunningTasks, room: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Positions (into ``tasks``) of the originals to copy, and their nodes."""
        pre = tasks.open & (tasks.elapsed_s >= self.lag_s) & (tasks.elapsed_s > 0)
        if not pre.any():
            return EMPTY, EMPTY
        slots = self.slots(view, tasks)
        limit = None
        if self.thresholds == "percentile":
            limit = copies_left_paper(len(tasks.copy_index), slots, self.cap)
            if limit == 0:
                return EMPTY, EMPTY
        node_progress = tasks.node_progress(getattr(view.nodes, "done", None),
                                            len(view.nodes.state))
        allowed = np.asarray(view.nodes.up) & ~self.slow_nodes(view, node_progress)
        if not np.any(allowed & np.all(room > 0, axis=1)):
            return EMPTY, EMPTY
        groups, rate = tasks.groups, tasks.rate
        if self.thresholds == "percentile":
            slow = slow_tasks_by_percentile(rate, groups, self.slow_task_pct)
        else:
            slow = slow_tasks_by_stddev(rate, groups, self.slow_task_threshold)
        pos = np.flatnonzero(pre & slow)
        if len(pos) == 0:
            return EMPTY, EMPTY
        sub = tasks.at(pos)
        req = np.asarray(sub.req, dtype=np.float64)
        order = late_order(tasks.ps[pos], rate[pos], np.asarray(sub.row))
        placer = CopyPlacer(room, view.nodes.rack, req.min(axis=0), prefer=node_progress,
                            allowed=allowed, models=view.nodes.gpu_model)
        budget = None
        if self.thresholds == "stddev":
            budget = copies_left_hadoop021(groups.count(tasks.has_copy), groups.counts,
                                           slots, self.cap)
        took, nodes = placer.place(order, req, tasks.node[pos], limit=limit,
                                   group=groups.inverse[pos], budget=budget,
                                   allow=task_allow(view, sub))
        return pos[took], nodes
