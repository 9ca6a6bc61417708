"""SWIM jobs -> MapReduce tasks: how many maps and reduces, what each reads and how long it runs.

Pure functions over numpy arrays (one element per job), shared by the SWIM adapter
(:mod:`pipeline.ingest.swim`) and the SWIM generator (:mod:`pipeline.generate.swim`), which
sizes its job rate by the work this mapping gives.

Task counts follow SWIM's own replay (SWIMProjectUCB/SWIM ``workloadSuite/
GenerateReplayScript.java`` and its README, read at commit 15dd80c):

- bytes are first scaled by ``machines / source_machines`` (its ``clusterSizeWorkload /
  clusterSizeRaw``; integer arithmetic, rounded down), so a smaller replay cluster gets the same
  jobs with proportionally less data;
- maps: one per input partition of ``BLOCK_MIB`` (the README: "roughly the same as HDFS block
  size, e.g., 67108864"); SWIM raises every input to one partition, so a job has
  ``max(1, ceil(input / block))`` maps.  One departure: a map writes at most
  ``MAP_OUTPUT_MAX_MIB`` (1 GiB) of map output, so a job gets ``ceil(map output / 1 GiB)``
  maps when that is more.  SWIM would have one map write it all, but the jobs concerned are
  the trace's data loads (KB of HDFS input, because they read from outside HDFS, and up to TB
  of output: 635 of FB-2009's 5,894 jobs, all but 4 map-only), which ran on several maps
  ([M] Chen et al. below: FB-2009 "load data" classes kept several maps busy for hours); one
  map would run for days.
- reduces: ``round((shuffle + output) / BLOCK_MIB)``, at least 1, and a job asking more than
  the replay cluster has machines gets ``machines // 5`` (SWIM's cap; at least 1 here, where
  SWIM would give 0 on fewer than 5 machines).  The cap is SWIM's: it is not monotone (a job
  of ``machines`` reduces keeps them, one of ``machines + 1`` gets a fifth).  SWIM has no map
  cap (its input data set must hold the largest job), and neither has this mapping.
- a job with ``shuffle_bytes = 0`` is map-only (the SWIM wiki: the trace had no reduce phase);
  SWIM's scripts would still start one reduce over its 1 KiB floor, this mapping starts none.

Each map reads its block of the job's input (the last map the remainder; ``input_mb`` in MiB,
the trace's bytes, not SWIM's 64 MiB floor) and writes an equal share of the job's map output
(the shuffle, or for a map-only job the job's output).  Each reduce fetches, merges and writes
an equal share of ``shuffle + output``; shuffle is not modelled as a read (``input_mb`` null).

Durations (``duration_s``, on a speed-1.0 machine) are the canonical format's: the run time
of a task that reads its ``input_mb`` from its own node's disk (the task-seconds per MB below
were measured on a cluster where most maps read locally, so they include such a read); the
replay's locality model adds the extra time of a rack-local or off-rack read
(:func:`pipeline.sim.kernels.run_time`).  Rates per task slot:

- ``TASK_OVERHEAD_S`` = 5 s per task, also the minimum duration: [A] Hadoop 0.20 starts a JVM
  per task (about 1-2 s) and a slot is reported free at the TaskTracker's next heartbeat (every
  3 s or more in 0.20, longer on large clusters); FB-2009's smallest jobs (KB of input) still
  took tens of task-seconds (Chen, Alspaugh, Katz, "Interactive Analytical Processing in Big
  Data Systems", VLDB 2012, FB-2009 job classes [M]).
- ``MAP_S_PER_MIB`` = 0.4 s per MiB of input (2.5 MiB/s) and ``MAP_OUTPUT_S_PER_MIB`` = 0.3 s per
  MiB of map output: [M] the same paper's FB-2009 classes give about 0.45-0.65 map
  task-seconds per MB of input for read-heavy classes (aggregate, summary), reading from a
  local disk being a small part of it, and about 0.3-0.35 s per MB of map output for
  shuffle-heavy ones (expand-and-aggregate, transform); Hive on compressed tables is
  CPU-bound.
- ``REDUCE_S_PER_MIB`` = 0.4 s per MiB of shuffle + output: [M] same classes, about 0.4 reduce
  task-seconds per MB (shuffle fetch folded in).

A full 64 MiB map with as much shuffle as input then runs 5 + 25.6 + 19.2 = 50 s, a map-only
one about 31 s; tasks of a few KB run 5 s.  On the published days this offers a load of 0.07
(FB-2009 on 600 machines) and 0.46 (FB-2010 on 3,000) of 8 slots per machine.

Tags: [A] our assumption; [M] recalled from the source, not re-read here (the paper's tables
were not at hand): check them before relying on the exact values.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.ingest.fuxi_sql import BARRIER, BARRIER_DURATION_S, DIRECT_LIMIT
from pipeline.trace.io import PartWriter

MIB = 1024 * 1024
BLOCK_MIB = 64  # SWIM README: input partition and data per reduce, "e.g., 67108864"
REDUCE_CAP_DIVISOR = 5  # GenerateReplayScript: reduces > machines -> machines / 5
MAP_OUTPUT_MAX_MIB = 1024  # [A] most map output one map writes (see the docstring)
TASK_OVERHEAD_S = 5.0
MAP_S_PER_MIB = 0.4
MAP_OUTPUT_S_PER_MIB = 0.3
REDUCE_S_PER_MIB = 0.4
SLOTS_PER_MACHINE = 8  # cores per machine / cores per task (see pipeline.ingest.swim)
TASK_CORES, TASK_MEM_GIB = 1.0, 2.0  # one Hadoop slot
CHUNK_TASKS = 1_000_000  # tasks built and written at once (bounds memory)
MAP, BARRIER_RANK, REDUCE = 0, 1, 2  # order of a job's tasks in the table


@dataclass(frozen=True)
class JobShapes:
    """Per job (arrays): scaled bytes, task counts, and which caps applied."""

    input_bytes: np.ndarray
    shuffle_bytes: np.ndarray
    output_bytes: np.ndarray
    maps: np.ndarray
    reduces: np.ndarray
    reduce_capped: np.ndarray  # SWIM's reduce cap gave the job machines // 5 reduces
    maps_for_output: np.ndarray  # the job has more maps than input blocks (map output cap)

    def part(self, lo: int, hi: int) -> JobShapes:
        """The shapes of jobs ``lo`` to ``hi`` (exclusive)."""
        return JobShapes(*(getattr(self, f.name)[lo:hi] for f in fields(self)))


def scaled(raw_bytes: np.ndarray, machines: int, source_machines: int) -> np.ndarray:
    """SWIM's scaling to the replay cluster: ``bytes * machines // source_machines``."""
    raw = np.asarray(raw_bytes, dtype=np.int64)
    if machines == source_machines:
        return raw
    # (the product overflows int64 only above 9e18 bytes x machines; a float keeps the scale)
    return np.floor(raw.astype(np.float64) * machines / source_machines).astype(np.int64)


def job_shapes(input_bytes: np.ndarray, shuffle_bytes: np.ndarray, output_bytes: np.ndarray,
               machines: int, source_machines: int, block_mib: int = BLOCK_MIB) -> JobShapes:
    """Scale each job's bytes to ``machines`` and derive its map and reduce counts."""
    block = block_mib * MIB
    inp = scaled(input_bytes, machines, source_machines)
    shuffle = scaled(shuffle_bytes, machines, source_machines)
    out = scaled(output_bytes, machines, source_machines)
    map_only = np.asarray(shuffle_bytes) == 0  # the trace's zero, not a scaled-down one
    for_input = np.maximum(1, -(-inp // block))
    written = np.where(map_only, out, shuffle)
    maps = np.maximum(for_input, -(-written // (MAP_OUTPUT_MAX_MIB * MIB)))
    wanted = np.maximum(1, np.floor((shuffle + out) / block + 0.5).astype(np.int64))
    capped = wanted > machines
    reduces = np.where(capped, max(1, machines // REDUCE_CAP_DIVISOR), wanted)
    reduces = np.where(map_only, 0, reduces)
    return JobShapes(inp, shuffle, out, maps, reduces, capped & ~map_only, maps > for_input)


def map_output_bytes(shapes: JobShapes) -> np.ndarray:
    """Bytes the maps of each job write: its shuffle, or its output when map-only."""
    return np.where(shapes.reduces == 0, shapes.output_bytes, shapes.shuffle_bytes)


def map_input_mib(shapes: JobShapes, job: np.ndarray, k: np.ndarray,
                  block_mib: int = BLOCK_MIB) -> np.ndarray:
    """MiB map ``k`` of job ``job`` reads: a whole block, the last map the remainder."""
    block = block_mib * MIB
    left = shapes.input_bytes[job] - k * block
    return np.clip(left, 0, block) / MIB


def map_durations(shapes: JobShapes, job: np.ndarray, input_mib: np.ndarray) -> np.ndarray:
    """Seconds of each map, reading ``input_mib`` from its own node included."""
    out_mib = map_output_bytes(shapes)[job] / shapes.maps[job] / MIB
    return TASK_OVERHEAD_S + input_mib * MAP_S_PER_MIB + out_mib * MAP_OUTPUT_S_PER_MIB


def reduce_durations(shapes: JobShapes) -> np.ndarray:
    """Seconds of one reduce of each job (its share of shuffle + output)."""
    share_mib = (shapes.shuffle_bytes + shapes.output_bytes) / np.maximum(shapes.reduces, 1) / MIB
    return TASK_OVERHEAD_S + share_mib * REDUCE_S_PER_MIB


def job_work_s(shapes: JobShapes) -> np.ndarray:
    """Slot-seconds of compute per job: all its maps and reduces (the sums are linear)."""
    maps = (shapes.maps * TASK_OVERHEAD_S + shapes.input_bytes / MIB * MAP_S_PER_MIB
            + map_output_bytes(shapes) / MIB * MAP_OUTPUT_S_PER_MIB)
    reduces = np.where(shapes.reduces > 0, shapes.reduces * reduce_durations(shapes), 0.0)
    return maps + reduces


def expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For counts per job: the job of each task and the task's index within its job."""
    counts = np.asarray(counts, dtype=np.int64)
    job = np.repeat(np.arange(counts.size), counts)
    starts = np.cumsum(counts) - counts
    return job, np.arange(job.size, dtype=np.int64) - starts[job]


def write_tasks(out: Path, jobs: pl.DataFrame, shapes: JobShapes, block_mib: int = BLOCK_MIB,
                direct_limit: int = DIRECT_LIMIT) -> dict[str, int]:
    """Write the tasks of ``jobs`` (in their order) as table ``tasks`` of ``out``, in parts.

    ``jobs`` has ``job_id``, ``submit_time_s`` and ``input_path``; jobs are taken a chunk of
    about ``CHUNK_TASKS`` tasks at a time, so memory follows the chunk, not the workload.
    Returns the number of maps, reduces and barrier tasks.
    """
    barrier = (shapes.reduces > 0) & (shapes.maps > direct_limit)
    per_job = shapes.maps + shapes.reduces + barrier
    ends = np.cumsum(per_job)
    writer = PartWriter(out, "tasks")
    lo = 0
    while lo < jobs.height:
        before = int(ends[lo] - per_job[lo])
        hi = max(lo + 1, int(np.searchsorted(ends, before + CHUNK_TASKS, side="right")))
        frame = job_tasks(jobs.slice(lo, hi - lo), shapes.part(lo, hi), block_mib, direct_limit)
        writer.write(frame.to_arrow())
        lo = hi
    writer.close()
    return {"map": int(shapes.maps.sum()), "reduce": int(shapes.reduces.sum()),
            "barrier": int(barrier.sum())}


def job_tasks(jobs: pl.DataFrame, shapes: JobShapes, block_mib: int = BLOCK_MIB,
              direct_limit: int = DIRECT_LIMIT) -> pl.DataFrame:
    """Maps, barriers and reduces of ``jobs``: job by job, in that order within a job."""
    head = jobs.select("job_id", pl.col("submit_time_s").cast(pl.Float64).alias("submit_s"),
                       pl.col("input_path").alias("input_file")).with_row_index("_j")
    mj, mk = expand(shapes.maps)
    in_mib = map_input_mib(shapes, mj, mk, block_mib)
    maps = _rows(head, mj, mk, MAP, "m").with_columns(
        pl.Series("duration_s", map_durations(shapes, mj, in_mib)),
        pl.Series("input_mb", in_mib), pl.lit("map").alias("task_kind"),
    )
    needs = np.flatnonzero(shapes.reduces > 0)
    lists = (maps.filter(pl.col("_j").is_in(pl.Series(needs, dtype=pl.UInt32).implode()))
             .group_by("_j", maintain_order=True).agg(pl.col("task_id").alias("depends_on")))
    big = pl.Series(np.flatnonzero(shapes.maps > direct_limit), dtype=pl.UInt32).implode()
    barriers = lists.filter(pl.col("_j").is_in(big)).join(head, on="_j").select(
        "_j", pl.lit(BARRIER_RANK).alias("_rank"), pl.lit(0, pl.Int64).alias("_k"),
        pl.format("{}/{}", "job_id", pl.lit(BARRIER)).alias("task_id"), "job_id", "submit_s",
        pl.lit(BARRIER_DURATION_S).alias("duration_s"), pl.lit(0.0).alias("cpu"),
        pl.lit(0.0).alias("mem"), "depends_on", pl.lit(True).alias("synthetic"),
    )
    deps = pl.concat([
        lists.filter(~pl.col("_j").is_in(big)),
        barriers.select("_j", pl.concat_list("task_id").alias("depends_on")),
    ])
    rj, rk = expand(shapes.reduces)
    reduces = _rows(head, rj, rk, REDUCE, "r").with_columns(
        pl.Series("duration_s", reduce_durations(shapes)[rj]), pl.lit("reduce").alias("task_kind"),
        pl.lit(None, pl.String).alias("input_file"),
    ).join(deps, on="_j", how="left")
    tasks = pl.concat([maps, barriers, reduces], how="diagonal_relaxed")
    return tasks.sort("_j", "_rank", "_k").drop("_j", "_rank", "_k")


def _rows(head: pl.DataFrame, job: np.ndarray, k: np.ndarray, rank: int, letter: str
          ) -> pl.DataFrame:
    """One row per task: ids, job, submit time, one slot, the job's input file."""
    frame = pl.DataFrame({"_j": pl.Series(job, dtype=pl.UInt32), "_k": k})
    return frame.join(head, on="_j", how="left", maintain_order="left").select(
        "_j", pl.lit(rank).alias("_rank"), "_k",
        pl.format("{}/{}{}", "job_id", pl.lit(letter), "_k").alias("task_id"), "job_id",
        "submit_s", pl.lit(TASK_CORES).alias("cpu"), pl.lit(TASK_MEM_GIB).alias("mem"),
        "input_file", pl.lit(False).alias("synthetic"),
    )
