"""Per-round solver figures of the quincy policy.

A running task's inputs, MiB read and ready time come from the core's running view, so
its nu (frozen at its start) is derived each round, not stored.  Quincy's nu and theta
accumulate across restarts (Isard et al., SOSP 2009, section 4.2): the run time of a task
the policy preempts is kept in ``Quincy.prior_run_s_`` and taken off its later waits.  A
task evicted by a node failure is not seen stopping; its lost run time counts as waiting
(the core's ready time does not move on a restart).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RoundStats:
    """Per-round solver figures and counters of what the flow decided."""

    solve_ms: list[float] = field(default_factory=list)
    round_ms: list[float] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    arcs: list[int] = field(default_factory=list)
    tasks: list[int] = field(default_factory=list)
    placed: int = 0
    deferred: int = 0
    rerouted: int = 0
    preempted: int = 0
    migrated: int = 0

    def metrics(self) -> dict[str, tuple[float | None, str]]:
        """Deterministic figures of the run (counts and graph sizes, no wall-clock time)."""
        def q(values: list[int], p: float) -> float | None:
            return float(np.quantile(values, p)) if values else None
        return {
            "solver_rounds": (float(len(self.nodes)), "count"),
            "solver_nodes_p50": (q(self.nodes, 0.5), "count"),
            "solver_arcs_p50": (q(self.arcs, 0.5), "count"),
            "solver_arcs_max": (q(self.arcs, 1.0), "count"),
            "solver_tasks_p50": (q(self.tasks, 0.5), "count"),
            "solver_tasks_max": (q(self.tasks, 1.0), "count"),
            "flow_placements_deferred": (float(self.deferred), "count"),
            "flow_placements_rerouted": (float(self.rerouted), "count"),
            "flow_migrations": (float(self.migrated), "count"),
        }

    def timings(self) -> dict[str, float | None]:
        """Wall-clock figures: solver and whole-round milliseconds, median and 99th pct."""
        def q(values: list[float], p: float) -> float | None:
            return round(float(np.quantile(values, p)), 3) if values else None
        return {"solver_ms_p50": q(self.solve_ms, 0.5), "solver_ms_p99": q(self.solve_ms, 0.99),
                "round_ms_p50": q(self.round_ms, 0.5), "round_ms_p99": q(self.round_ms, 0.99)}
