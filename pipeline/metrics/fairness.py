"""Fairness across users: ``jain_fairness`` (against each user's demand-aware fair share) and
``jain_equal_share`` (against an equal share), both time-weighted Jain indices.

Jain, Chiu and Hawe, "A Quantitative Measure of Fairness and Discrimination for Resource
Allocation in Shared Computer Systems", DEC TR-301, 1984: for parties with x_i = measured
allocation / fair (optimal) allocation, ``J = (sum x)^2 / (n * sum x^2)``; 1 when every party
gets the same multiple of its fair allocation, k/n when k parties get it and the rest get
nothing.  Both indices are computed from ``task_runs`` and ``node_intervals`` alone:

- a task *demands* its requests (cpu, mem, gpu) from ``ready_s`` until ``end_s`` (or the end
  of the replay) and *holds* them from ``start_s`` (its last attempt) until the same end;
  earlier attempts of a preempted or evicted task are not in ``task_runs`` (only their
  total, ``wasted_s``), so between its first and last start it counts as waiting;
- a user is *active* while it demands anything; its demand is the sum of its tasks'
  demands, its allocation the sum of what its tasks hold;
- *capacity* at time t is what the nodes that are up and ready at t offer (node intervals
  from ``ready_s`` to ``down_s``; on an elastic cluster, what is provisioned at t, booting
  nodes excluded), raised to what is actually allocated where a policy over-commits.  The
  scheduler is judged on how it divides what it has; how fast the cluster grows is what
  waits and node-hours measure;
- a *dominant share* is the largest, over resources, of an amount / capacity (DRF);
- ``jain_fairness``: each active user's fair share is its DRF max-min fair allocation of the
  capacity given every active user's demand (:mod:`pipeline.metrics.drf`: progressive
  filling, capped at demand; every user entitled equally, whatever its queue or the
  weights a policy was given); x_u = dominant share held / fair dominant
  share, over users with a positive fair share.  When everything demanded fits, each fair
  share is the user's whole demand, so a cluster where every ready task runs scores 1;
  a user starved while a fair scheduler would serve it drives it down;
- ``jain_equal_share``: x_u = dominant share held, over all active users, i.e. everyone is
  entitled to the same share whatever it asks for (the index this project reported as
  ``jain_fairness`` before; it measures how skewed the workload and its service are);
- J(t) is undefined (and its time skipped) while no user it covers holds anything (0/0);
  the result is the time-weighted mean of J(t) over the rest of the replay, None if none.

J(t) is piecewise constant between events.  Runs with at most ``MAX_EVALUATIONS`` distinct
event times get it exactly (each piece weighted by its length); longer runs evaluate J(t)
at the midpoints of ``MAX_EVALUATIONS`` equal slices of [first event, end] (midpoint rule),
which keeps the cost bounded (each evaluation is O(n log n) in the active users); on 1M-task
benchmark runs 10,000 and 200,000 slices agreed to 2e-5.  Capacity is pooled: a task that
would fit in the cluster's total free room but on no single node counts as held back.
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import numpy as np
import polars as pl

from pipeline.metrics.fairness_scan import weighted_jain

RESOURCES = ("cpu", "mem", "gpu")
MAX_EVALUATIONS = 10_000


class FairnessIndices(NamedTuple):
    """Both user-fairness indices of a run (None where undefined)."""

    jain_fairness: float | None
    jain_equal_share: float | None


class _Events(NamedTuple):
    """Event streams (see :mod:`.fairness_scan`) and the task and node rows they refer to."""

    times: np.ndarray
    refs: np.ndarray
    bounds: np.ndarray
    task_user: np.ndarray
    task_req: np.ndarray
    task_ran: np.ndarray
    node_cap: np.ndarray
    n_users: int


def _tasks(task_runs: pl.DataFrame, end_s: float) -> pl.DataFrame:
    """Tasks that became ready: user code, requests, and ready <= start <= end (clipped to
    ``end_s``; a task holds only while it demands, so its events come in that order)."""
    start = pl.col("start_s").fill_nan(None)
    return task_runs.filter(pl.col("ready_s").fill_nan(None).is_not_null()).select(
        pl.col("user").cast(pl.String).fill_null("").cast(pl.Categorical).to_physical()
        .alias("u"),
        pl.min_horizontal("ready_s", start).clip(upper_bound=end_s),
        start.clip(upper_bound=end_s),
        pl.max_horizontal(pl.col("end_s").fill_nan(None).fill_null(end_s), start, "ready_s")
        .clip(upper_bound=end_s),
        *[pl.col(r).fill_null(0.0).clip(lower_bound=0.0) for r in RESOURCES])


def _nodes(node_intervals: pl.DataFrame, end_s: float) -> pl.DataFrame:
    """Node intervals while usable: from ``ready_s`` (``up_s`` if absent) to ``down_s``."""
    ready = "ready_s" if "ready_s" in node_intervals.columns else "up_s"
    return node_intervals.select(
        pl.col(ready).fill_null(pl.col("up_s")).alias("ready_s"),
        pl.col("down_s").fill_null(end_s).clip(upper_bound=end_s),
        *[pl.col(r).fill_null(0.0) for r in RESOURCES],
    ).filter(pl.col("ready_s") < pl.col("down_s"))


def _dense(codes: np.ndarray) -> np.ndarray:
    """Category codes renumbered 0..n-1 in order (codes may have gaps)."""
    if len(codes) == 0:
        return codes.astype(np.int64)
    present = np.zeros(int(codes.max()) + 1, np.int64)
    present[codes] = 1
    return (np.cumsum(present) - 1)[codes]


def _events(task_runs: pl.DataFrame, node_intervals: pl.DataFrame, end_s: float) -> _Events:
    """The five event streams up to ``end_s``, each sorted by time (stable)."""
    t, n = _tasks(task_runs, end_s), _nodes(node_intervals, end_s)
    start = t["start_s"].to_numpy()
    ran = ~np.isnan(start)
    rows = np.arange(t.height)
    streams = [(t["ready_s"].to_numpy(), rows), (start[ran], rows[ran]),
               (t["end_s"].to_numpy(), rows), (n["ready_s"].to_numpy(), np.arange(n.height)),
               (n["down_s"].to_numpy(), np.arange(n.height))]
    times, refs = [], []
    for time, ref in streams:
        order = np.argsort(time, kind="stable")
        times.append(time[order])
        refs.append(ref[order])
    bounds = np.cumsum([0] + [len(x) for x in times])
    user = _dense(t["u"].to_numpy())
    return _Events(np.concatenate(times), np.concatenate(refs).astype(np.int64), bounds,
                   user, np.ascontiguousarray(t.select(RESOURCES).to_numpy(), np.float64),
                   ran, np.ascontiguousarray(n.select(RESOURCES).to_numpy(), np.float64),
                   int(user.max()) + 1 if len(user) else 0)


def _distinct(times: np.ndarray, bounds: np.ndarray, limit: int) -> np.ndarray | None:
    """The distinct event times in order, or None when there are more than ``limit``."""
    parts = []
    for lo, hi in pairwise(bounds):
        part = times[lo:hi]
        part = part[np.r_[True, part[1:] != part[:-1]]] if len(part) else part
        if len(part) > limit:
            return None
        parts.append(part)
    union = np.unique(np.concatenate(parts))
    return union if len(union) <= limit else None


def _evaluation_times(ev: _Events, end_s: float,
                      max_evaluations: int) -> tuple[np.ndarray, np.ndarray]:
    """Where J(t) is evaluated and the seconds each evaluation stands for: every distinct
    event time (exact), or the midpoints of ``max_evaluations`` equal slices."""
    distinct = _distinct(ev.times, ev.bounds, max_evaluations)
    if distinct is not None:
        distinct = distinct[distinct < end_s]
        return distinct, np.diff(np.r_[distinct, end_s])
    first = min(ev.times[lo] for lo, hi in pairwise(ev.bounds) if hi > lo)
    step = (end_s - first) / max_evaluations
    return first + step * (np.arange(max_evaluations) + 0.5), np.full(max_evaluations, step)


def fairness_indices(task_runs: pl.DataFrame, node_intervals: pl.DataFrame, end_s: float,
                     max_evaluations: int = MAX_EVALUATIONS) -> FairnessIndices:
    """``jain_fairness`` and ``jain_equal_share`` of a run (see the module docstring)."""
    if task_runs.height == 0 or node_intervals.height == 0:
        return FairnessIndices(None, None)
    ev = _events(task_runs, node_intervals, float(end_s))
    if ev.n_users == 0:
        return FairnessIndices(None, None)
    at, weight = _evaluation_times(ev, float(end_s), max_evaluations)
    sums = weighted_jain(ev.times, ev.refs, ev.bounds, ev.task_user, ev.task_req, ev.task_ran,
                         ev.node_cap, ev.n_users, at, weight)
    fair = float(sums[0] / sums[1]) if sums[1] > 0 else None
    equal = float(sums[2] / sums[3]) if sums[3] > 0 else None
    return FairnessIndices(fair, equal)


def jain_fairness(task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                  end_s: float) -> float | None:
    """Time-weighted Jain index of users' allocations over their DRF fair shares."""
    return fairness_indices(task_runs, node_intervals, end_s).jain_fairness


def jain_equal_share(task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                     end_s: float) -> float | None:
    """Time-weighted Jain index of active users' dominant shares (equal entitlement)."""
    return fairness_indices(task_runs, node_intervals, end_s).jain_equal_share
