"""Cluster-level metrics from ``node_intervals`` (and ``task_runs``): node-hours, cost and
time-weighted utilization.

Every figure is measured over the run's measurement window ``[start_s, end_s]``: the trace's
observation window, or the whole run when it drained past it (``--drain``).  Provisioned
capacity is every node interval inside the window, booting time included (a booting node is
billed).  Allocated work counts each task's last attempt (``start_s`` to ``end_s``, or to the
end of the window when it was still running), clipped to the window, plus the run time its
earlier attempts lost (``wasted_s``), at the task's requested resources.  Used work is the
sum of each task's measured usage integral (``used_cpu_s``/``used_mem_s``, written by replays
since opportunistic containers; not clipped to the window) or, in older run directories, the
same as allocated work with the measured mean ``cpu_used``/``mem_used``, over the tasks where
the trace measured them.
"""

from __future__ import annotations

import math

import polars as pl


def provisioned_s(start_s: float = -math.inf, end_s: float = math.inf) -> pl.Expr:
    """Provisioned seconds of each node interval inside ``[start_s, end_s]``."""
    return (pl.min_horizontal(pl.col("down_s"), pl.lit(end_s))
            - pl.max_horizontal(pl.col("up_s"), pl.lit(start_s))).clip(lower_bound=0.0)


def node_hours(node_intervals: pl.DataFrame, start_s: float = -math.inf,
               end_s: float = math.inf) -> float:
    """Total provisioned node time inside the window, in hours."""
    value = node_intervals.select(provisioned_s(start_s, end_s).sum()).item()
    return float(value or 0.0) / 3600


def cost_usd(node_intervals: pl.DataFrame, start_s: float = -math.inf,
             end_s: float = math.inf) -> float:
    """Price of the provisioned time, each interval rounded up to its billing granularity."""
    billed_s = (provisioned_s(start_s, end_s) / pl.col("billing_s")).ceil() * pl.col(
        "billing_s")
    value = node_intervals.select((billed_s / 3600 * pl.col("price_per_hour")).sum()).item()
    return float(value or 0.0)


def provisioned(node_intervals: pl.DataFrame, resource: str, start_s: float = -math.inf,
                end_s: float = math.inf) -> float:
    """Capacity x time provisioned for ``resource`` (e.g. cpu-seconds) inside the window."""
    value = node_intervals.select(
        (pl.col(resource) * provisioned_s(start_s, end_s)).sum()).item()
    return float(value or 0.0)


def task_busy_s(end_s: float, start_s: float = -math.inf) -> pl.Expr:
    """Seconds each task held its resources inside the window: last attempt (to ``end_s``
    if still running) + the run time its earlier attempts lost."""
    last = pl.when(pl.col("start_s").is_null()).then(0.0).otherwise(
        (pl.min_horizontal(pl.col("end_s").fill_null(end_s), pl.lit(end_s))
         - pl.max_horizontal(pl.col("start_s"), pl.lit(start_s))).clip(lower_bound=0.0))
    return last + pl.col("wasted_s").fill_null(0.0)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def allocated(task_runs: pl.DataFrame, resource: str, end_s: float,
              start_s: float = -math.inf) -> float:
    """Requested ``resource`` x the time each task held it inside the window."""
    return float(task_runs.select(
        (pl.col(resource) * task_busy_s(end_s, start_s)).sum()).item() or 0.0)


def util_alloc(task_runs: pl.DataFrame, node_intervals: pl.DataFrame, resource: str,
               end_s: float, start_s: float = -math.inf) -> float | None:
    """Allocated / provisioned ``resource``, time-weighted over the window."""
    return _ratio(allocated(task_runs, resource, end_s, start_s),
                  provisioned(node_intervals, resource, start_s, end_s))


def used_work(task_runs: pl.DataFrame, resource: str, end_s: float,
              start_s: float = -math.inf) -> tuple[float, int]:
    """Measured usage x time of the tasks whose usage is known, and how many they are.

    Replays that write ``used_<resource>_s`` (the integral of each task's measured usage over
    its run time, which with over-allocation differs from a mean usage times the time it
    held its request) are measured by it; older run directories by the mean
    ``<resource>_used`` times the time each task held its request.
    """
    integral = f"used_{resource}_s"
    if integral in task_runs.columns:
        known, value = pl.col(integral).is_not_null(), pl.col(integral)
    else:
        mean = f"{resource}_used"
        known, value = pl.col(mean).is_not_null(), pl.col(mean) * task_busy_s(end_s, start_s)
    used, count = task_runs.select(value.filter(known).sum().alias("used"),
                                   known.sum().alias("known")).row(0)
    return float(used or 0.0), int(count or 0)


def util_used(task_runs: pl.DataFrame, node_intervals: pl.DataFrame, resource: str,
              end_s: float, start_s: float = -math.inf) -> float | None:
    """Measured usage / provisioned ``resource`` (:func:`used_work`); None when the trace
    measured no usage."""
    used, known = used_work(task_runs, resource, end_s, start_s)
    return _ratio(used, provisioned(node_intervals, resource, start_s, end_s)) if known else None


def util_alloc_cpu(task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                   end_s: float, start_s: float = -math.inf) -> float | None:
    return util_alloc(task_runs, node_intervals, "cpu", end_s, start_s)


def util_alloc_mem(task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                   end_s: float, start_s: float = -math.inf) -> float | None:
    return util_alloc(task_runs, node_intervals, "mem", end_s, start_s)


def util_used_cpu(task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                  end_s: float, start_s: float = -math.inf) -> float | None:
    return util_used(task_runs, node_intervals, "cpu", end_s, start_s)


def util_used_mem(task_runs: pl.DataFrame, node_intervals: pl.DataFrame,
                  end_s: float, start_s: float = -math.inf) -> float | None:
    return util_used(task_runs, node_intervals, "mem", end_s, start_s)
