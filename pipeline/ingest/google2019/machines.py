"""Google 2019 ``machine_events`` -> canonical ``machines`` and ``machine_downtime``.

- ``added_s``: the machine's first ADD (0 for machines present before the window; the first
  event's time when it has no ADD, repair ``no_add_event``).
- ``cpu``/``mem``: the largest capacity any ADD/UPDATE reported (normalized: 1.0 = the
  largest machine of all v3 traces); the canonical model has one capacity per machine.  A
  machine never given a positive capacity is dropped (``no_capacity``).
- ``rack``: ``switch_id`` (the top-of-rack switch, the failure domain the trace has);
  ``platform``: ``platform_id`` (latest).
- REMOVE followed by ADD is a ``machine_downtime`` interval; a final REMOVE is ``removed_s``.
- Rejected rows: ``unknown_event_type``, ``after_window`` (stamped 2^63-1), and a capacity
  above 1.0 (``above_physical_limit:capacity_*``: 1.0 is the largest machine of all traces).
"""

from __future__ import annotations

import polars as pl

from pipeline.ingest import limits
from pipeline.ingest.google2019.ndjson import reject_rows
from pipeline.ingest.google2019.tables import (
    ADD,
    REMOVE,
    TIME_AFTER_WINDOW,
    UPDATE,
    inside_offset,
    seconds,
)
from pipeline.ingest.limits import MAX_NORMALIZED
from pipeline.trace.manifest import Ledger

TABLE = "machine_events"


def machine_rows(frames: list[pl.DataFrame], ledger: Ledger) -> pl.DataFrame:
    """The usable machine events of all parts, in (time, file, line) order."""
    frame = pl.concat(frames, how="vertical_relaxed")
    frame = reject_rows(frame, TABLE, ledger, [
        ("unknown_event_type", ~pl.col("type").is_in([ADD, REMOVE, UPDATE])),
        ("after_window", pl.col("time") == TIME_AFTER_WINDOW),
        # capacities are fractions of the largest machine of all the traces: above 1.0 is
        # no machine (pipeline.ingest.limits)
        *((limits.reason(c), pl.col(c) > MAX_NORMALIZED)
          for c in ("capacity_cpus", "capacity_memory")),
    ])
    ledger.repair(TABLE, "time_inside_offset_read_as_before_window",
                  int(frame.select(inside_offset(pl.col("time")).sum()).item()))
    return frame.with_columns(t=seconds(pl.col("time"))).sort("time", "_file", "_line")


def machine_tables(events: pl.DataFrame, ledger: Ledger) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Canonical machines and machine_downtime from ordered machine events."""
    ordered = events.with_columns(
        next_type=pl.col("type").shift(-1).over("machine_id"),
        next_t=pl.col("t").shift(-1).over("machine_id"),
    )
    capacity = pl.col("type").is_in([ADD, UPDATE])
    per = ordered.group_by("machine_id", maintain_order=True).agg(
        first_add=pl.col("t").filter(pl.col("type") == ADD).min(),
        first_t=pl.col("t").min(),
        cpu=pl.col("capacity_cpus").filter(capacity).max(),
        mem=pl.col("capacity_memory").filter(capacity).max(),
        rack=pl.col("switch_id").drop_nulls().last(),
        platform=pl.col("platform_id").drop_nulls().last(),
        last_type=pl.col("type").last(), last_t=pl.col("t").last(),
    )
    ledger.repair("machines", "no_add_event", int(per["first_add"].null_count()))
    usable = ((pl.col("cpu") > 0) & (pl.col("mem") > 0)).fill_null(False)
    ledger.drop("machines", "no_capacity", per.filter(~usable).height)
    per = per.filter(usable)
    machines = per.select(
        pl.col("machine_id").cast(pl.String), "cpu", "mem", gpu=pl.lit(0.0), rack="rack",
        speed=pl.lit(1.0), added_s=pl.coalesce("first_add", "first_t"),
        removed_s=pl.when(pl.col("last_type") == REMOVE).then(pl.col("last_t")),
        platform="platform",
    ).sort("machine_id")
    downtime = ordered.filter(
        (pl.col("type") == REMOVE) & (pl.col("next_type") == ADD)
        & pl.col("machine_id").is_in(per["machine_id"].implode())
    ).select(pl.col("machine_id").cast(pl.String), down_s="t", up_s="next_t")
    return machines, downtime.sort("machine_id", "down_s")
