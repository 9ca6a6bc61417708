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

Memory is bounded by users, nodes and evaluation points, not by the number of tasks:
``task_runs`` may be a LazyFrame (a scan of ``task_runs.parquet``) and is streamed, in
batches of ``batch_rows`` rows.  A streaming group-by finds the users; a pass over the event
times collects the distinct ones, stopping once there are more than ``max_evaluations``;
then each evaluation point's per-user demand and allocation are running sums of per-point
differences that every task adds to (see :mod:`.fairness_scan`), one block of points at a
time (``block_bytes``: one more pass over the tasks per block, which only many users need).
What is held is about ``block_bytes`` plus a few batches and the streaming engine's
read-ahead (some 100-300 MB), whatever the number of tasks.  Exact runs of at most
``SCAN_ROWS`` tasks are instead replayed event by event, as before the streamed computation;
both ways give the same state at each point (up to the order of float additions) and share
one evaluation routine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import polars as pl

from pipeline.metrics.fairness_scan import block_jain, cumulate, scatter, weighted_jain

RESOURCES = ("cpu", "mem", "gpu")
MAX_EVALUATIONS = 10_000
BATCH_ROWS = 200_000  # task rows read at a time
# Per-point running sums held at a time: 64 bytes per user and point, so 50 users take all
# 10,000 points in one pass over the tasks, 900 users (Google 2011) five passes.
BLOCK_BYTES = 128 * 2**20
SCAN_ROWS = 1_000_000  # exact runs up to this many tasks are replayed event by event

Frame = pl.DataFrame | pl.LazyFrame


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


class _Survey(NamedTuple):
    """What one streaming pass over the tasks tells before any evaluation."""

    tasks: pl.LazyFrame  # as :func:`_tasks`, ``u`` a user number 0 .. n_users - 1
    n_rows: int
    n_users: int
    first_ready: float | None


def _tasks(task_runs: pl.LazyFrame, end_s: float) -> pl.LazyFrame:
    """Tasks that became ready: user (a string), requests, and ready <= start <= end
    (clipped to ``end_s``; a task holds only while it demands, so its events come in that
    order)."""
    start = pl.col("start_s").fill_nan(None)
    return task_runs.filter(pl.col("ready_s").fill_nan(None).is_not_null()).select(
        pl.col("user").cast(pl.String).fill_null("").alias("u"),
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


def _survey(task_runs: pl.LazyFrame, end_s: float) -> _Survey:
    """Users (numbered in name order), row count and first ready time, streamed: memory
    bounded by the users."""
    tasks = _tasks(task_runs, end_s)
    users = tasks.group_by("u").agg(pl.len().alias("n"), pl.col("ready_s").min()).sort(
        "u").collect(engine="streaming")
    names = users["u"].to_list()
    numbered = tasks.with_columns(pl.col("u").cast(pl.Enum(names)).to_physical())
    return _Survey(numbered, int(users["n"].sum()), len(names), users["ready_s"].min())


def _batches(tasks: pl.LazyFrame, batch_rows: int) -> Iterator[pl.DataFrame]:
    """The tasks, ``batch_rows`` rows at a time (the streaming engine reads no further)."""
    yield from tasks.collect_batches(chunk_size=batch_rows, engine="streaming")


def _distinct_times(tasks: pl.LazyFrame, nodes: pl.DataFrame, limit: int,
                    batch_rows: int) -> np.ndarray | None:
    """The distinct event times in order, or None as soon as there are more than ``limit``
    (so at most ``limit`` times and one batch are ever held)."""
    seen = np.unique(np.r_[nodes["ready_s"].to_numpy(), nodes["down_s"].to_numpy()])
    if len(seen) > limit:
        return None
    for batch in _batches(tasks.select("ready_s", "start_s", "end_s"), batch_rows):
        times = np.concatenate([batch[c].to_numpy() for c in batch.columns])
        seen = np.union1d(seen, times[~np.isnan(times)])  # a start is NaN if it never ran
        if len(seen) > limit:
            return None
    return seen


def _events(t: pl.DataFrame, n: pl.DataFrame) -> _Events:
    """The five event streams up to ``end_s``, each sorted by time (stable)."""
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
    return _Events(np.concatenate(times), np.concatenate(refs).astype(np.int64), bounds,
                   t["u"].to_numpy().astype(np.int64),
                   np.ascontiguousarray(t.select(RESOURCES).to_numpy(), np.float64),
                   ran, np.ascontiguousarray(n.select(RESOURCES).to_numpy(), np.float64))


def _scan_sums(survey: _Survey, nodes: pl.DataFrame, at: np.ndarray,
               weight: np.ndarray) -> np.ndarray:
    """Weighted Jain sums by replaying every event in order (materializes the tasks)."""
    ev = _events(survey.tasks.collect(), nodes)
    return weighted_jain(ev.times, ev.refs, ev.bounds, ev.task_user, ev.task_req, ev.task_ran,
                         ev.node_cap, survey.n_users, at, weight)


def _requests(frame: pl.DataFrame) -> np.ndarray:
    return np.ascontiguousarray(frame.select(RESOURCES).to_numpy(), np.float64)


def _slice_sums(survey: _Survey, nodes: pl.DataFrame, at: np.ndarray, weight: np.ndarray,
                batch_rows: int, block_bytes: int) -> np.ndarray:
    """Weighted Jain sums from per-point running sums, the tasks streamed once per block of
    evaluation points.  An event at time t counts from the first point at or after t, as in
    the scan (which applies every event at or before a point)."""
    n_users, n_res = survey.n_users, len(RESOURCES)
    per_point = 2 * n_users * (n_res + 1) * 8 + (n_res + 1) * 8
    block = max(1, block_bytes // per_point)
    node_lo = np.searchsorted(at, nodes["ready_s"].to_numpy())
    node_hi = np.searchsorted(at, nodes["down_s"].to_numpy())
    node_group = np.zeros(nodes.height, np.int64)
    carries = [(np.zeros((g, n_res)), np.zeros(g, np.int64)) for g in (n_users, n_users, 1)]
    sums = np.zeros(4)
    for b0 in range(0, len(at), block):
        n = min(block, len(at) - b0)
        demand, alloc = np.zeros((n, n_users, n_res)), np.zeros((n, n_users, n_res))
        n_demand, n_running = np.zeros((n, n_users), np.int64), np.zeros((n, n_users), np.int64)
        cap, n_up = np.zeros((n, 1, n_res)), np.zeros((n, 1), np.int64)
        scatter(node_lo, node_hi, node_group, _requests(nodes), b0, cap, n_up)
        for batch in _batches(survey.tasks, batch_rows):
            user = batch["u"].to_numpy().astype(np.int64)
            req = _requests(batch)
            ready = np.searchsorted(at, batch["ready_s"].to_numpy())
            end = np.searchsorted(at, batch["end_s"].to_numpy())
            start_s = batch["start_s"].to_numpy()
            start = np.where(np.isnan(start_s), end, np.searchsorted(at, start_s))
            scatter(ready, end, user, req, b0, demand, n_demand)
            scatter(start, end, user, req, b0, alloc, n_running)
        for (diff, count), carry in zip(((demand, n_demand), (alloc, n_running), (cap, n_up)),
                                        carries, strict=True):
            cumulate(diff, count, *carry)
        block_jain(demand, alloc, n_demand, cap, weight[b0:b0 + n], sums)
    return sums


def fairness_indices(task_runs: Frame, node_intervals: Frame, end_s: float,
                     max_evaluations: int = MAX_EVALUATIONS, batch_rows: int = BATCH_ROWS,
                     block_bytes: int = BLOCK_BYTES,
                     scan_rows: int = SCAN_ROWS) -> FairnessIndices:
    """``jain_fairness`` and ``jain_equal_share`` of a run (see the module docstring).

    ``task_runs`` may be lazy (it is streamed, never collected whole unless the run is exact
    and has at most ``scan_rows`` tasks); ``batch_rows``, ``block_bytes`` and ``scan_rows``
    change how it is computed, not the result (beyond float rounding).
    """
    end_s = float(end_s)
    if isinstance(node_intervals, pl.LazyFrame):
        node_intervals = node_intervals.collect()
    if node_intervals.height == 0:
        return FairnessIndices(None, None)
    survey = _survey(task_runs.lazy(), end_s)
    if survey.n_rows == 0:
        return FairnessIndices(None, None)
    nodes = _nodes(node_intervals, end_s)
    distinct = _distinct_times(survey.tasks, nodes, max_evaluations, batch_rows)
    if distinct is not None:  # exact: every piece between events, weighted by its length
        at = distinct[distinct < end_s]
        weight = np.diff(np.r_[at, end_s])
    else:  # midpoints of equal slices of [first event, end]
        first = min(survey.first_ready, nodes["ready_s"].min() if nodes.height else np.inf)
        step = (end_s - first) / max_evaluations
        at = first + step * (np.arange(max_evaluations) + 0.5)
        weight = np.full(max_evaluations, step)
    if distinct is not None and survey.n_rows <= scan_rows:
        sums = _scan_sums(survey, nodes, at, weight)
    else:
        sums = _slice_sums(survey, nodes, at, weight, batch_rows, block_bytes)
    fair = float(sums[0] / sums[1]) if sums[1] > 0 else None
    equal = float(sums[2] / sums[3]) if sums[3] > 0 else None
    return FairnessIndices(fair, equal)


def jain_fairness(task_runs: Frame, node_intervals: Frame, end_s: float) -> float | None:
    """Time-weighted Jain index of users' allocations over their DRF fair shares."""
    return fairness_indices(task_runs, node_intervals, end_s).jain_fairness


def jain_equal_share(task_runs: Frame, node_intervals: Frame, end_s: float) -> float | None:
    """Time-weighted Jain index of active users' dominant shares (equal entitlement)."""
    return fairness_indices(task_runs, node_intervals, end_s).jain_equal_share
