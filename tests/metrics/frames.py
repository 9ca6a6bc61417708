"""Tiny hand-made run tables (``task_runs``, ``node_intervals``) for metric tests."""

from __future__ import annotations

from typing import Any

import polars as pl


def nodes(rows: list[tuple[float, ...]], cpu: float = 4.0, mem: float = 4.0,
          price: float = 1.0, billing_s: float = 1.0, gpu: float = 0.0) -> pl.DataFrame:
    """Node intervals ``(up_s, down_s)`` or ``(up_s, down_s, ready_s)`` of one node shape."""
    return pl.DataFrame({
        "machine_id": [f"m{i}" for i in range(len(rows))],
        "up_s": [r[0] for r in rows], "down_s": [r[1] for r in rows],
        "ready_s": [r[2] if len(r) > 2 else r[0] for r in rows],
        "cpu": [cpu] * len(rows), "mem": [mem] * len(rows), "gpu": [gpu] * len(rows),
        "price_per_hour": [price] * len(rows), "billing_s": [billing_s] * len(rows)})


def tasks(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Task runs from partial rows (defaults: user ``u``, 1 cpu, 1 mem, ready at 0)."""
    base = {"task_id": "t", "job_id": "j", "user": "u", "submit_s": 0.0, "ready_s": 0.0,
            "first_start_s": None, "start_s": None, "end_s": None, "outcome": "finished",
            "cpu": 1.0, "mem": 1.0, "gpu": 0.0, "cpu_used": None, "mem_used": None,
            "wasted_s": 0.0, "preemptions": 0, "evictions": 0, "locality": None,
            "remaining_s": 0.0, "censored": False}
    full = [{**base, "first_start_s": r.get("start_s"), **r} for r in rows]
    return pl.DataFrame(full, schema_overrides={
        "first_start_s": pl.Float64, "start_s": pl.Float64, "end_s": pl.Float64,
        "cpu_used": pl.Float64, "mem_used": pl.Float64, "ready_s": pl.Float64,
        "locality": pl.String, "remaining_s": pl.Float64})


OPP_DEFAULTS: dict[str, Any] = {"opportunistic": False, "opp_starts": 0, "opp_kills": 0,
                                "opp_pauses": 0, "opp_shed": 0, "opp_queue_s": 0.0,
                                "opp_wasted_s": 0.0, "used_cpu_s": None, "used_mem_s": None}


def opp_tasks(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Task runs with the opportunistic-container columns a replay writes since the layer
    (defaults: a guaranteed task, no usage measured)."""
    frame = tasks([{**OPP_DEFAULTS, **r} for r in rows])
    return frame.with_columns(
        pl.col("opp_starts", "opp_kills", "opp_pauses", "opp_shed").cast(pl.Int32),
        pl.col("opp_queue_s", "opp_wasted_s", "used_cpu_s", "used_mem_s").cast(pl.Float64))
