"""What the quincy policy remembers between rounds: the running tasks' inputs and waits, the
run time each restarted task had before, and per-round solver figures.

The core's running view has no input columns or ready times, so the policy keeps, for each
task it placed (by trace row), the replica slots, the MiB it reads and the time it had
waited (Quincy's nu, frozen while it runs); the rows no longer running are dropped each
round, so the store holds the running tasks only.  Quincy's nu and theta accumulate across
restarts (Isard et al., SOSP 2009, section 4.2): the run time of a task this policy
preempts is added to ``prior_run_s`` and taken off its later waits.  A task evicted by a
node failure is not seen stopping; its lost run time counts as waiting (the core's ready
time does not move on a restart).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class RunningStore:
    """Inputs (node slots), MiB read and nu of the tasks the policy placed, by trace row."""

    def __init__(self, width: int) -> None:
        self.rows = np.zeros(0, np.int64)
        self.inputs = np.full((0, width), -1, np.int64)
        self.input_mb = np.zeros(0)
        self.nu_s = np.zeros(0)

    def find(self, rows: np.ndarray) -> np.ndarray:
        """Position of each of ``rows`` in the store (-1: not there)."""
        if len(self.rows) == 0:
            return np.full(len(rows), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
        return np.where(self.rows[pos] == rows, pos, -1)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inputs, MiB and nu of ``rows`` (a row not stored: no inputs, NaN MiB, nu 0)."""
        pos = self.find(rows)
        have = pos >= 0
        inputs = np.full((len(rows), self.inputs.shape[1]), -1, np.int64)
        mb, nu = np.full(len(rows), np.nan), np.zeros(len(rows))
        inputs[have], mb[have], nu[have] = (self.inputs[pos[have]], self.input_mb[pos[have]],
                                            self.nu_s[pos[have]])
        return inputs, mb, nu

    def update(self, running_rows: np.ndarray, rows: np.ndarray, inputs: np.ndarray,
               input_mb: np.ndarray, nu_s: np.ndarray) -> None:
        """Keep the entries still running, add the tasks just placed (``rows`` ...)."""
        keep = np.isin(self.rows, running_rows)
        width = self.inputs.shape[1]
        inputs = np.asarray(inputs, np.int64).reshape(len(rows), width)
        all_rows = np.concatenate([self.rows[keep], rows])
        order = np.argsort(all_rows, kind="stable")
        self.rows = all_rows[order]
        self.inputs = np.concatenate([self.inputs[keep], inputs])[order]
        self.input_mb = np.concatenate([self.input_mb[keep], input_mb])[order]
        self.nu_s = np.concatenate([self.nu_s[keep], nu_s])[order]


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
