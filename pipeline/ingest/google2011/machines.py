"""Google 2011 ``machine_events`` -> canonical machines and machine_downtime.

- ``added_s``: the machine's first ADD (0 for machines present before the window).
- ``cpu``/``mem``: the largest capacity any ADD/UPDATE reported (normalized: 1.0 = the largest
  machine); the canonical model has one capacity per machine, and UPDATEs are rare.
- A REMOVE followed by an ADD is a ``machine_downtime`` interval; a final REMOVE sets
  ``removed_s``.
- Machines that tasks ran on but ``machine_events`` does not list, or all machines when the
  table is absent (the public sample has none), get the most common configuration of the
  trace, (0.5 CPU, 0.5 memory) held by 53% of machines (Reiss et al., SoCC 2012, Table 1),
  counted as the repair ``capacity_assumed``.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from pipeline.ingest.google2011.tables import count_inside_offset, seconds
from pipeline.trace.manifest import Ledger

ADD, REMOVE, UPDATE = 0, 1, 2
ASSUMED_CPU = 0.5
ASSUMED_MEM = 0.5


def machine_events_frame(frames: Iterable[pl.DataFrame], ledger: Ledger) -> pl.DataFrame:
    """Concatenate machine_events parts, rejecting unknown event types (counted)."""
    frame = pl.concat(list(frames)) if frames else pl.DataFrame()
    if frame.is_empty():
        return frame
    bad = ~frame["event_type"].is_in([ADD, REMOVE, UPDATE])
    if bad.any():
        ledger.reject("machine_events", "unknown_event_type", int(bad.sum()))
    ledger.use("machine_events", int((~bad).sum()))
    frame = frame.filter(~bad)
    count_inside_offset(ledger, "machine_events", frame["time"])
    return frame.with_columns(t=seconds(pl.col("time")))


def machines_from_events(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Canonical machines and machine_downtime from parsed machine events."""
    ordered = events.sort(["machine_id", "time", "_line"]).with_columns(
        next_type=pl.col("event_type").shift(-1).over("machine_id"),
        next_t=pl.col("t").shift(-1).over("machine_id"),
    )
    machines = ordered.group_by("machine_id").agg(
        added_s=pl.col("t").filter(pl.col("event_type") == ADD).min().fill_null(pl.col("t").min()),
        cpu=pl.col("cpu").max(),
        mem=pl.col("mem").max(),
        platform=pl.col("platform").drop_nulls().last(),
        last_type=pl.col("event_type").last(),
        last_t=pl.col("t").last(),
    ).with_columns(
        removed_s=pl.when(pl.col("last_type") == REMOVE).then(pl.col("last_t")),
    ).drop("last_type", "last_t")
    downtime = ordered.filter(
        (pl.col("event_type") == REMOVE) & (pl.col("next_type") == ADD)
    ).select("machine_id", down_s=pl.col("t"), up_s=pl.col("next_t"))
    return machines, downtime


def finish_machines(
    machines: pl.DataFrame | None, seen: set[int], ledger: Ledger
) -> pl.DataFrame:
    """Add machines only seen in task events; fill missing capacities; canonical columns."""
    if machines is None or machines.is_empty():
        machines = pl.DataFrame(schema={"machine_id": pl.Int64, "added_s": pl.Float64,
                                        "cpu": pl.Float64, "mem": pl.Float64,
                                        "platform": pl.String, "removed_s": pl.Float64})
    known = set(machines["machine_id"].to_list())
    extra = sorted(seen - known)
    if extra:
        machines = pl.concat([machines, pl.DataFrame({
            "machine_id": extra, "added_s": [0.0] * len(extra),
        })], how="diagonal_relaxed")
    machines = machines.with_columns(
        cpu=pl.when(pl.col("cpu") > 0).then(pl.col("cpu")),
        mem=pl.when(pl.col("mem") > 0).then(pl.col("mem")),
    )
    missing = machines["cpu"].is_null() | machines["mem"].is_null()
    ledger.repair("machines", "capacity_assumed", int(missing.sum()))
    return machines.with_columns(
        machine_id=pl.col("machine_id").cast(pl.String),
        cpu=pl.col("cpu").fill_null(ASSUMED_CPU),
        mem=pl.col("mem").fill_null(ASSUMED_MEM),
        gpu=pl.lit(0.0), rack=pl.lit(None, pl.String), speed=pl.lit(1.0),
    ).sort("machine_id")
