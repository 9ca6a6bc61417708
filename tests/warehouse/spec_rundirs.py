"""Run directories with speculative execution (runs whose ``spec`` parameter names a rule),
built with :mod:`tests.warehouse.rundirs`: one trace, yarn-uniform without speculation
(``spec=none``), with LATE and with Hadoop's rule on seed 0, and with LATE on seed 1 (no run
without speculation there to compare with).

Two jobs of two 2-cpu tasks on two 4-cpu nodes; a2 is a straggler (400 s without
speculation).  Every figure below is worked out by hand from the placements:

- none: jA 400 s, jB 300 s: mean 350, p50 350, p95 395.
- late: a2 copied at 100 s on m1, the copy wins at 250 s (copy 150 s; original 250 s lost);
  b2 copied at 150 s on m0, the original wins at 300 s (copy 150 s lost).  jA 250, jB 300:
  mean 275, p95 297.5; copies 300 s over the tasks' own 850 s: 35.29%.
- hadoop: a2 copied at 200 s on m1, the copy wins at 300 s (copy 100 s; original 300 s
  lost); b1's copy at 100 s on m0 dies at 150 s (50 s lost).  jA 300, jB 300: mean, p50 and
  p95 300; copies 150 s over the tasks' own 900 s: 16.67%.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.warehouse.rundirs import Edit, NodeInterval, TaskRun, write_run, write_trace

SPEC_NODES = [NodeInterval("m0", 0.0, 3600.0), NodeInterval("m1", 0.0, 3600.0)]
# task -> (job, start, end, machine): the original attempt's start and machine, the task's end
PLACEMENTS = {
    "none": {"a1": ("jA", 0.0, 100.0, "m0"), "a2": ("jA", 0.0, 400.0, "m0"),
             "b1": ("jB", 0.0, 200.0, "m1"), "b2": ("jB", 0.0, 300.0, "m1")},
    "late": {"a1": ("jA", 0.0, 100.0, "m0"), "a2": ("jA", 0.0, 250.0, "m0"),
             "b1": ("jB", 0.0, 200.0, "m1"), "b2": ("jB", 0.0, 300.0, "m1")},
    "hadoop": {"a1": ("jA", 0.0, 100.0, "m0"), "a2": ("jA", 0.0, 300.0, "m0"),
               "b1": ("jB", 0.0, 200.0, "m1"), "b2": ("jB", 0.0, 300.0, "m1")},
}
# task -> (spec_copies, spec_won, spec_machine_id, spec_start_s, spec_run_s, spec_wasted_s)
COPIES: dict[str, dict[str, tuple[int, bool, str | None, float | None, float, float]]] = {
    "none": {},
    "late": {"a2": (1, True, "m1", 100.0, 150.0, 250.0),
             "b2": (1, False, "m0", 150.0, 150.0, 150.0)},
    "hadoop": {"a2": (1, True, "m1", 200.0, 100.0, 300.0),
               "b1": (1, False, "m0", 100.0, 50.0, 50.0)},
}
NO_COPY = (0, False, None, None, 0.0, 0.0)
PARAMS: dict[str, dict[str, Any]] = {
    "none": {"spec": "none"},
    "late": {"spec": "late", "spec_cap": 0.1},
    "hadoop": {"spec": "hadoop"},
}
# the metrics the replay would write beside metrics_of's (which has no jct_mean/p95 or spec_*)
METRICS: dict[str, dict[str, float]] = {
    "none": {"jct_mean_s": 350.0, "jct_p50_s": 350.0, "jct_p95_s": 395.0},
    "late": {"jct_mean_s": 275.0, "jct_p50_s": 275.0, "jct_p95_s": 297.5,
             "spec_launched": 2.0, "spec_won": 1.0, "spec_wasted_task_s": 400.0,
             "spec_run_task_s": 300.0, "spec_extra_pct": 100 * 300 / 850},
    "hadoop": {"jct_mean_s": 300.0, "jct_p50_s": 300.0, "jct_p95_s": 300.0,
               "spec_launched": 2.0, "spec_won": 1.0, "spec_wasted_task_s": 350.0,
               "spec_run_task_s": 150.0, "spec_extra_pct": 100 * 150 / 900},
}
SPEC_TYPES = {"spec_copies": pa.int32(), "spec_won": pa.bool_(),
              "spec_machine_id": pa.string(), "spec_start_s": pa.float64(),
              "spec_run_s": pa.float64(), "spec_wasted_s": pa.float64()}


def spec_tasks(rule: str) -> list[TaskRun]:
    return [TaskRun(t, job, "u", 0.0, start, end, machine, "finished", cpu=2.0, mem=2.0)
            for t, (job, start, end, machine) in PLACEMENTS[rule].items()]


def with_spec_columns(rule: str) -> Edit:
    """An ``edit_tasks`` adding the six columns a replay writes since speculation."""
    def edit(table: pa.Table) -> pa.Table:
        rows = [COPIES[rule].get(t, NO_COPY) for t in table["task_id"].to_pylist()]
        for i, (name, kind) in enumerate(SPEC_TYPES.items()):
            table = table.append_column(name, pa.array([r[i] for r in rows], kind))
        return table
    return edit


def spec_run(root: Path, rule: str, seed: int = 0, trace_path: Path | None = None,
             edit: Edit | None = None) -> Path:
    """One run of ``rule`` (``none``, ``late``, ``hadoop``) with its hand-worked metrics."""
    return write_run(root, "yarn-uniform", spec_tasks(rule), SPEC_NODES, seed=seed,
                     trace_path=trace_path, params=PARAMS[rule],
                     edit_tasks=edit or with_spec_columns(rule), metric_overrides=METRICS[rule])


def speculation_runs(root: Path) -> list[Path]:
    """none, late and hadoop on seed 0; late on seed 1 (unpaired)."""
    trace = write_trace(root, tasks=4)
    return [spec_run(root, "none", trace_path=trace), spec_run(root, "late", trace_path=trace),
            spec_run(root, "hadoop", trace_path=trace),
            spec_run(root, "late", seed=1, trace_path=trace)]
