"""The node model of an SWF log (``ingest swf --set machine=nodes``): ``MaxNodes`` nodes of
``MaxProcs / MaxNodes`` processors, each job spread over the nodes it needs as one gang.

A job of ``p`` processors on nodes of ``ppn`` becomes ``ceil(p / ppn)`` tasks ``JOB/1`` ..
``JOB/k`` (``ppn`` processors each, the last one the remainder) sharing ``gang_id`` = JOB, so
the core starts them in one scheduling round or not at all (:mod:`pipeline.sim.gangs`); a job
that fits one node stays one task ``JOB``.  Where no job depends on node boundaries (one
processor per node, as on the SP2 machines, or every size a multiple of ``ppn``), a replay
gives each job the same start time as the pool model: the tests check it for ``fcfs`` and
``easy-backfill``.
"""

from __future__ import annotations

import math

import polars as pl

from pipeline.errors import TraceError
from pipeline.trace.manifest import Ledger


def node_machines(n_nodes: int, ppn: float) -> pl.DataFrame:
    """``n_nodes`` identical nodes of ``ppn`` processors, in service for the whole log."""
    return pl.DataFrame({
        "machine_id": [f"node{i:05d}" for i in range(n_nodes)], "cpu": [ppn] * n_nodes,
        "mem": [1.0] * n_nodes, "gpu": [0.0] * n_nodes,
        "rack": pl.Series([None] * n_nodes, dtype=pl.String), "speed": [1.0] * n_nodes,
        "added_s": [0.0] * n_nodes, "removed_s": pl.Series([None] * n_nodes, dtype=pl.Float64),
    })


def node_shape(nodes: int | None, procs: float, path: object) -> float:
    """Processors per node from the header's MaxNodes and MaxProcs (a whole number)."""
    if not nodes:
        raise TraceError("machine=nodes needs a MaxNodes header (the log has none)", path)
    ppn = procs / nodes
    if ppn != math.floor(ppn) or ppn < 1:
        raise TraceError(f"machine=nodes needs MaxProcs ({procs:g}) to be a whole multiple "
                         f"of MaxNodes ({nodes})", path)
    return ppn


def spread_over_nodes(tasks: pl.DataFrame, ppn: float, ledger: Ledger) -> pl.DataFrame:
    """Each job's task as the gang of tasks its processors need on nodes of ``ppn``."""
    parts = (pl.col("cpu") / ppn).ceil().clip(lower_bound=1).cast(pl.Int64)
    spread = tasks.with_columns(parts.alias("_parts")).with_columns(
        pl.int_ranges(1, pl.col("_parts") + 1).alias("_k")).explode("_k")
    single = pl.col("_parts") == 1
    last_cpu = pl.col("cpu") - ppn * (pl.col("_parts") - 1)
    ids = (spread.group_by("task_id", maintain_order=True)
           .agg(pl.when(single.first()).then(pl.col("task_id").first())
                .otherwise(pl.format("{}/{}", pl.col("task_id"), pl.col("_k")))
                .alias("members")))
    members = dict(zip(ids["task_id"].to_list(), ids["members"].to_list(), strict=True))
    ledger.repair("tasks", "job_spread_over_nodes", int((tasks["cpu"] > ppn).sum()))
    out = spread.with_columns(
        pl.when(single).then(pl.col("task_id"))
        .otherwise(pl.format("{}/{}", pl.col("task_id"), pl.col("_k"))).alias("task_id"),
        pl.when(single).then(pl.lit(None, pl.String)).otherwise(pl.col("task_id"))
        .alias("gang_id"),
        pl.when(pl.col("_k") < pl.col("_parts")).then(pl.lit(ppn)).otherwise(last_cpu)
        .alias("cpu"),
        pl.lit(None, pl.String).alias("recorded_machine_id"),
    )
    if "depends_on" in out.columns:  # a preceding job means all of its tasks
        out = out.with_columns(pl.col("depends_on").map_elements(
            lambda parents: [m for p in parents for m in members.get(p, [p])],
            return_dtype=pl.List(pl.String)))
    return out.drop("_parts", "_k")
