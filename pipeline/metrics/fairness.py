"""``jain_fairness``: Jain's index over users' dominant shares, time-weighted.

Jain, Chiu and Hawe, "A Quantitative Measure of Fairness and Discrimination for Resource
Allocation in Shared Computer Systems", DEC TR-301, 1984: for allocations x_1..x_n,
``J = (sum x)^2 / (n * sum x^2)``, 1 when all are equal, 1/n when one user holds everything.

Definition used here (computed from ``task_runs`` alone):

- a user is *active* while some task of theirs is pending or running: from its ``ready_s``
  to its ``end_s`` (or the end of the replay);
- a user's allocation is the sum of the requests of their running tasks (each task's last
  attempt, ``start_s`` to ``end_s``);
- x_u = the user's dominant share (DRF, Ghodsi et al. NSDI 2011): the largest over cpu, mem
  and gpu of allocation / reference capacity, divided by the user's entitlement.  All users
  are entitled equally for now, and J is scale-invariant, so the reference capacity only
  fixes the exchange rate between resources: the cluster's time-averaged capacity vector;
- between consecutive events, J is taken over the n active users (an active user holding
  nothing counts as 0); intervals where no one holds resources are skipped;
- the result is the time-weighted average of J over the remaining intervals (None if none).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

_RES = ("cpu", "mem", "gpu")


def reference_capacity(node_intervals: pl.DataFrame) -> dict[str, float]:
    """Capacity x provisioned time per resource (proportional to the mean capacity vector)."""
    dur = (pl.col("down_s") - pl.col("up_s")).clip(lower_bound=0.0)
    row = node_intervals.select([(pl.col(r) * dur).sum().alias(r) for r in _RES]).row(0)
    return {r: float(v or 0.0) for r, v in zip(_RES, row, strict=True)}


def _events(task_runs: pl.DataFrame, ref: dict[str, float], end_s: float) -> pl.DataFrame:
    """One row per change in time order: user code, d_active, d_running, resource deltas."""
    used = [r for r in _RES if ref[r] > 0]
    t = task_runs.filter(pl.col("ready_s").is_not_null()).select(
        pl.col("user").cast(pl.Categorical).to_physical().alias("u"),
        "ready_s", "start_s", pl.col("end_s").fill_null(end_s),
        *[(pl.col(r) / ref[r]).alias(r) for r in used])
    ran = pl.col("start_s").is_not_null()
    zero = [pl.lit(0.0).alias(r) for r in used]
    frames = [
        t.select("u", pl.col("ready_s").alias("t"), pl.lit(1, pl.Int8).alias("da"),
                 pl.lit(0, pl.Int8).alias("dr"), *zero),
        t.filter(ran).select("u", pl.col("start_s").alias("t"), pl.lit(0, pl.Int8).alias("da"),
                             pl.lit(1, pl.Int8).alias("dr"), *used),
        t.select("u", pl.col("end_s").alias("t"), pl.lit(-1, pl.Int8).alias("da"),
                 (-ran.cast(pl.Int8)).alias("dr"),
                 *[pl.when(ran).then(-pl.col(r)).otherwise(0.0).alias(r) for r in used]),
    ]
    return pl.concat(frames).sort("t", maintain_order=True)


@njit(cache=True)
def _jain_scan(t, user, d_active, d_running, d_res, n_users, end_s):
    """Scan events in time order; return (integral of J dt, total dt) over valid intervals."""
    active = np.zeros(n_users, np.int64)
    running = np.zeros(n_users, np.int64)
    alloc = np.zeros((n_users, d_res.shape[1]))
    x = np.zeros(n_users)
    s1 = s2 = acc = total = 0.0
    n = holders = 0
    for i in range(t.shape[0]):
        u = user[i]
        was_active, was_running = active[u] > 0, running[u] > 0
        active[u] += d_active[i]
        running[u] += d_running[i]
        share = 0.0
        if running[u] > 0:
            for k in range(d_res.shape[1]):
                alloc[u, k] += d_res[i, k]
                share = max(share, alloc[u, k])
        else:
            alloc[u, :] = 0.0  # nothing held: clear float drift
        s1 += share - x[u]
        s2 += share * share - x[u] * x[u]
        x[u] = share
        n += (active[u] > 0) - was_active
        holders += (running[u] > 0) - was_running
        dt = (t[i + 1] if i + 1 < t.shape[0] else end_s) - t[i]
        if dt > 0 and n > 0 and holders > 0 and s2 > 0:
            acc += min(1.0, s1 * s1 / (n * s2)) * dt
            total += dt
    return acc, total


def jain_fairness(task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                  end_s: float) -> float | None:
    """Time-weighted Jain's index of active users' dominant shares (see module docstring)."""
    ref = reference_capacity(node_intervals)
    if task_runs.height == 0 or not any(ref.values()):
        return None
    ev = _events(task_runs, ref, end_s)
    if ev.height == 0:
        return None
    used = [r for r in _RES if ref[r] > 0]
    codes = ev["u"].to_numpy().astype(np.int64)
    acc, total = _jain_scan(
        ev["t"].to_numpy(), codes, ev["da"].to_numpy().astype(np.int64),
        ev["dr"].to_numpy().astype(np.int64), np.ascontiguousarray(ev.select(used).to_numpy()),
        int(codes.max()) + 1, float(end_s))
    return acc / total if total > 0 else None
