"""Write small Google 2011 raw tables (gz CSV, no header, published column order) for tests."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path

OFFSET_US = 600_000_000
AFTER = 2**63 - 1


def us(seconds: float) -> int:
    """Trace timestamp (µs, with the 600 s offset) of ``seconds`` after the window opens."""
    return OFFSET_US + int(seconds * 1_000_000)


def fmt(value: object) -> str:
    return "" if value is None else str(value)


def write_part(root: Path, table: str, rows: Sequence[Sequence[object]], part: int = 0,
               parts: int = 1) -> Path:
    """Write ``rows`` as ``root/table/part-NNNNN-of-MMMMM.csv.gz``."""
    directory = root / table
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"part-{part:05d}-of-{parts:05d}.csv.gz"
    text = "".join(",".join(fmt(v) for v in row) + "\n" for row in rows)
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return path


def task(t: float | int, job: int, index: int, event: int, machine: int | None = None,
         prio: int = 9, cpu: float | None = 0.125, mem: float | None = 0.0625,
         user: str = "alice=", raw_time: bool = False) -> list[object]:
    """One task_events row (13 fields)."""
    time = t if raw_time else us(t)
    return [time, None, job, index, machine, event, user, 2, prio, cpu, mem, 0.0001, 0]


def job(t: float | int, job_id: int, event: int, user: str = "alice=", raw_time: bool = False
        ) -> list[object]:
    """One job_events row (8 fields)."""
    time = t if raw_time else us(t)
    return [time, None, job_id, event, user, 1, f"name{job_id}=", f"logical{job_id}="]
