"""The replay core's options and summary: the knobs that are not the policy's, and what
the core counted (:class:`pipeline.sim.core.Simulation`)."""

from __future__ import annotations

from dataclasses import dataclass

# MiB/s a task reads its input at: node-local (one disk), rack-local (through the top-of-rack
# switch), off-rack (through the oversubscribed core).  Chosen so that a task that only reads
# runs twice as fast node-local as off-rack, as the delay-scheduling paper measured for
# IO-heavy work (Zaharia et al., EuroSys 2010, section 5: "up to 2x"); a 128 MiB HDFS block
# takes 1 s, 1.33 s and 2 s.
READ_MB_S = (128.0, 96.0, 64.0)


@dataclass(frozen=True)
class SimOptions:
    """Knobs of the core that are not the policy's: batching grid, horizon and censoring.

    ``horizon_s``: the replay stops there (the trace window's end, by default): tasks still
    running or waiting end ``unfinished`` and every node still provisioned is released
    there, so a fixed cluster is measured over exactly the window.  ``None`` drains: the
    replay runs until every task is accounted for.
    ``censor_at_s``: tasks the trace records as still running at its window's end
    (``censored``) have no known end: they run until this time and are then stopped
    (``unfinished``), never restarted beyond it.  ``None`` runs them for their recorded
    duration like any other task.
    """

    sched_interval_s: float = 1.0
    horizon_s: float | None = None
    censor_at_s: float | None = None
    read_mb_s: tuple[float, float, float] = READ_MB_S


@dataclass
class SimSummary:
    """What the core counted while running (the records carry the rest)."""

    end_s: float
    tasks: int
    events: int
    scheduling_points: int
    policy_calls: int
    placements: int
    sim_s: float = 0.0
    # placements held back because their gang was not placed whole (pipeline.sim.gangs)
    gang_held: int = 0
    # placements held back because their GPU request fit no device (pipeline.sim.gpus)
    gpu_held: int = 0
    # placements held back: the node's GPU model is not one the task allows
    # (pipeline.sim.models)
    gpu_model_held: int = 0
