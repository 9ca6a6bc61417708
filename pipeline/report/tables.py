"""Tables as people read them: human column names with units, numbers rounded for reading.

``readable(frame, columns)`` picks ``columns`` (warehouse names) and renders each with its
``COLUMNS`` entry: a title that says the unit, and a format (counts with thousands
separators, dollars, percentages, durations in s/min/h, indices to 2 decimals).  Values are
rounded for the eye only; the exact figures are in the warehouse and the CSV files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import polars as pl

from pipeline.humanize import duration
from pipeline.humanize import number as _num

Format = Callable[[object], str]
MISSING = "\u2013"  # an en dash: not measured


def count(value: object) -> str:
    return f"{float(value):,.0f}"  # type: ignore[arg-type]


def usd(value: object) -> str:
    v = float(value)  # type: ignore[arg-type]
    return f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.2f}"


def pct(value: object) -> str:
    v = float(value)  # type: ignore[arg-type]
    return "0%" if abs(v) < 0.05 else f"{v:+.1f}%"


def share(value: object) -> str:
    return f"{100 * float(value):.1f}%"  # type: ignore[arg-type]


def index(value: object) -> str:
    return f"{float(value):.2f}"  # type: ignore[arg-type]


def task_hours(value: object) -> str:
    return f"{float(value) / 3600:,.0f}"  # type: ignore[arg-type]


def gib(value: object) -> str:
    """GiB as people read it: 4,637, 812 or 3.2 (no unit: titles and sentences say it)."""
    v = float(value)  # type: ignore[arg-type]
    return f"{v:,.0f}" if abs(v) >= 100 else _num(v, 2)


def points(value: object) -> str:
    """Percentage points, signed: +12.3 pts."""
    return f"{float(value):+.1f} pts"  # type: ignore[arg-type]


def times(value: object) -> str:
    """A ratio as a multiple: 1.25 followed by a multiplication sign."""
    return f"{float(value):.2f}\u00d7"  # type: ignore[arg-type]


def text(value: object) -> str:
    return str(value)


def check(value: object) -> str:
    return "yes" if value else "no"


# warehouse column -> (title with unit, format)
COLUMNS: dict[str, tuple[str, Format]] = {
    "label": ("Setting", text),
    "policy": ("Policy", text),
    "cluster_mode": ("Cluster", text),
    "seed": ("Seed", text),
    "seeds": ("Seeds", count),
    "node_hours": ("Node-hours", count),
    "cost_usd": ("Cost", usd),
    "cost_saved_pct": ("Saved vs status quo", pct),
    "cost_saved_usd": ("Saved", usd),
    "saved_usd_per_day": ("Saved per day", usd),
    "node_hours_saved": ("Node-hours saved", count),
    "jct_p50_s": ("Job time p50", duration),
    "jct_p95_s": ("Job time p95", duration),
    "jct_p99_s": ("Job time p99", duration),
    "jct_p95_change_pct": ("Job time p95 change", pct),
    "wait_p50_s": ("Wait p50", duration),
    "wait_p95_s": ("Wait p95", duration),
    "wait_max_s": ("Wait max", duration),
    "jain_fairness": ("Fairness (1 = fair)", index),
    "jain_equal_share": ("Equal-share index", index),
    "backlog_task_s": ("Work left (task-h)", task_hours),
    "backlog_tasks": ("Tasks waiting at end", count),
    "tasks_unfinished": ("Tasks unfinished", count),
    "tasks_finished": ("Tasks finished", count),
    "tasks_unschedulable": ("Tasks that fit nowhere", count),
    "tasks_censored": ("Still running in the trace", count),
    "tasks_killed": ("Tasks killed", count),
    "tasks": ("Tasks", count),
    "started": ("Tasks started", count),
    "qualifies": ("Within tolerance", check),
    "util_alloc_cpu": ("CPU allocated", share),
    "util_alloc_mem": ("Memory allocated", share),
    "util_used_cpu": ("CPU used", share),
    "util_used_mem": ("Memory used", share),
    "preemptions": ("Preemptions", count),
    "tasks_preempted": ("Tasks preempted", count),
    "preemptions_per_task_max": ("Most preemptions of one task", count),
    "wasted_task_s": ("Work lost (task-h)", task_hours),
    "preemption_wasted_task_s": ("Lost to preemption (task-h)", task_hours),
    "evictions": ("Evictions (machine failures)", count),
    "peak_nodes": ("Peak nodes", count),
    "mean_nodes": ("Mean nodes", lambda v: _num(v)),
    "setting": ("Setting", text),
    "queue": ("Queue", text),
    "mean_dominant_share": ("Mean share", share),
    "peak_dominant_share": ("Peak share", share),
    "dominant_share_of_guarantee": ("Share / guarantee", index),
    "mean_mem_share": ("Mean memory share", share),
    "job_start_wait_mean_s": ("Job start wait (mean)", duration),
    "jain_users_usage": ("Users' usage evenness", index),
    "guaranteed_share": ("Guarantee", share),
    "min_share_of_guarantee": ("Lowest queue vs guarantee", index),
    "max_share_of_guarantee": ("Highest queue vs guarantee", index),
    "jain_queues": ("Queue fairness (1 = fair)", index),
    "locality_node": ("Node-local", share),
    "locality_rack": ("Rack-local", share),
    "locality_any": ("Off-rack", share),
    "data_read_core_gb": ("Read across racks (GiB)", gib),
    "data_read_rack_gb": ("Read via rack switch (GiB)", gib),
    "solver_ms_p50": ("Solver time p50 (ms)", lambda v: _num(v)),
    "solver_ms_p99": ("Solver time p99 (ms)", lambda v: _num(v)),
    "solver_rounds": ("Flow rounds", count),
    "solver_arcs_p50": ("Arcs per round (p50)", count),
    "bin": ("Job size (tasks with input)", text),
    "jobs": ("Jobs", count),
    "tasks_with_inputs": ("Tasks with input", count),
    "opp_settings": ("Opportunistic settings", text),
    "setting_no": ("#", text),
    "util_used_cpu_change": ("CPU used, before → after", text),
    "util_used_mem_change": ("Memory used, before → after", text),
    "util_used_cpu_gain_pts": ("CPU used gain", points),
    "util_used_mem_gain_pts": ("Memory used gain", points),
    "opp_started": ("Opportunistic started", count),
    "opp_killed": ("Killed", count),
    "opp_paused": ("Paused", count),
    "opp_wasted_task_s": ("Work lost (task-h)", task_hours),
    "opp_wasted_share": ("Work lost (% of work)", share),
    # the GPU workload-inflation experiment (pipeline.report.gpu)
    "util_alloc_gpu": ("GPU allocated at 100% arrived", share),
    "gpu_fragmentation": ("Fragmentation at 100% arrived (% of idle GPU)", share),
    "util_alloc_gpu_end": ("GPU allocated at the end", share),
    "gpu_fragmentation_end": ("Fragmentation at the end (% of idle GPU)", share),
    "gpu_unallocated_first_fail": ("GPUs unallocated at the first failure", count),
    "gpu_arrived_first_fail": ("Arrived at the first failure", share),
    "gpu_tasks_unschedulable": ("GPU pods dropped", count),
    # HPC batch jobs (pipeline.report.hpc)
    "size_class": ("Job size (processors)", text),
    "wait_mean_s": ("Wait (mean)", duration),
    "job_wait_mean_s": ("Job wait (mean)", duration),
    "bsld_mean": ("Bounded slowdown (mean)", index),
    "bsld_p95": ("Bounded slowdown (p95)", index),
    "makespan_s": ("Makespan", duration),
    "guaranteed_slowdown_mean": ("Guaranteed slowdown (mean)", times),
    "guaranteed_slowdown_p95": ("Guaranteed slowdown (p95)", times),
    "opp_queue_p50_s": ("NM queue wait p50", duration),
    "opp_queue_p95_s": ("NM queue wait p95", duration),
    # Kubernetes (pipeline.report.kubernetes)
    "scoring": ("Scoring", text),
    "cluster_label": ("Autoscaler", text),
    "k8s_saved_pct": ("Saved vs Kubernetes status quo", pct),
    "pods_evicted": ("Pods evicted by the autoscaler", count),
    "pods_preempted": ("Pods preempted", count),
    "instance_type": ("Instance type", text),
    "instances": ("Instances", count),
    "cost_share": ("Share of cost", share),
    "run_id": ("Run", text),
    "params_text": ("Settings used", text),
}


def title(column: str) -> str:
    """The human title of a warehouse column (the column name itself when unknown)."""
    return COLUMNS[column][0] if column in COLUMNS else column


def cell(column: str, value: object) -> str:
    """One value as text for people (``MISSING`` when missing or not a number)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    fmt = COLUMNS[column][1] if column in COLUMNS else text
    try:
        return fmt(value)
    except (TypeError, ValueError):
        return str(value)


def readable(frame: pl.DataFrame, columns: Sequence[str]) -> pl.DataFrame:
    """``columns`` of ``frame`` (those present) as text, under their human titles."""
    present = [c for c in columns if c in frame.columns]
    data = {title(c): [cell(c, v) for v in frame[c].to_list()] for c in present}
    return pl.DataFrame(data, schema={title(c): pl.String for c in present})
