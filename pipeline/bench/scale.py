"""``tracereplay bench --scale``: throughput and peak memory of each stage as the workload grows.

For each task count, a synthetic canonical workload (:func:`.workload.synthetic_workload`:
same cluster, same offered load, so more tasks means a longer trace, not more tasks in
flight) goes through three stages, each in a fresh child process so that its peak RSS is
its own (``os.wait4`` gives the child's ``ru_maxrss``) and no stage inherits another's
memory:

- ``workload``: writing the canonical trace;
- ``replay``: one policy's replay (drained: every task runs to its end) with its run
  directory and metrics, as :func:`pipeline.replay.replay` does it for a user;
- ``load``: loading the run directory into a new DuckDB warehouse, checks included.

Each stage prints one JSON line: task count, stage, wall and CPU seconds, tasks per second
and peak RSS in MiB.  If memory stays flat while the task count grows, memory grows with
tasks in flight and machines, not with the trace's length.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import TraceError, UsageError

STAGES = ("workload", "replay", "load")


def parse_counts(text: str) -> list[int]:
    """Task counts from ``1e6,5e6,40000000`` (each a positive whole number)."""
    counts = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise UsageError(f"--scale takes task counts like 1e6,5e6 (got {part!r})") from None
        if not (value >= 1 and value == int(value)):
            raise UsageError(f"--scale task counts must be whole numbers >= 1 (got {part!r})")
        counts.append(int(value))
    return counts


def scale_bench(counts: list[int], policy: str = "yarn-uniform", machines: int = 12_500,
                seed: int = 0, params: dict[str, Any] | None = None,
                cluster: str = "fixed", workdir: Path | None = None) -> Iterator[dict[str, Any]]:
    """Run every stage at every task count; yield one record per stage as it ends."""
    from pipeline.policies import policy_class, resolve_params
    from pipeline.replay.options import CLUSTER_PARAMS

    # refuse a misspelt policy or parameter now, not after the first workload is written
    resolve_params(policy_class(policy), {k: v for k, v in (params or {}).items()
                                          if k not in CLUSTER_PARAMS})
    for tasks in counts:
        with tempfile.TemporaryDirectory(dir=workdir, prefix="tracereplay-scale-") as tmp:
            job = {"dir": tmp, "tasks": tasks, "machines": machines, "seed": seed,
                   "policy": policy, "params": dict(params or {}), "cluster": cluster}
            for stage in STAGES:
                yield {"tasks": tasks, "stage": stage, **_in_child(stage, job)}


def _in_child(stage: str, job: dict[str, Any]) -> dict[str, Any]:
    """Run one stage in a child process; its figures with wall, CPU time and peak RSS."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.bench.scale", stage,
                             json.dumps(job)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    figures = json.loads(out) if proc.returncode in (0, 1) and out.strip() else {}
    if "error" in figures:  # a user error in the child (e.g. a bad cluster option): one line
        raise UsageError(f"bench --scale, stage {stage}: {figures['error']}")
    if proc.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise RuntimeError(f"bench stage {stage} failed: {last[0]}")
    timed = figures.pop("timed_s", wall)
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_s": round(timed, 3), "tasks_per_s": round(job["tasks"] / max(timed, 1e-9), 1),
            "cpu_s": round(cpu, 3), "process_s": round(wall, 3),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), **figures}


def _stage(stage: str, job: dict[str, Any]) -> dict[str, Any]:
    """The child's side: run ``stage``; ``timed_s`` is the stage's own work (imports and
    numba's cache load excluded; the process's whole life is ``process_s``)."""
    root = Path(job["dir"])
    trace, run, db = root / "trace", root / "run", root / "warehouse.duckdb"
    if stage == "workload":
        from pipeline.bench.workload import synthetic_workload

        started = time.perf_counter()
        synthetic_workload(trace, job["machines"], job["tasks"], job["seed"])
        return {"timed_s": time.perf_counter() - started}
    if stage == "replay":
        from pipeline.bench.run import warm_up
        from pipeline.replay import replay
        from pipeline.replay.options import CLUSTER_PARAMS

        given = dict(job["params"])
        options = {k: given.pop(k) for k in list(given) if k in CLUSTER_PARAMS}
        warm_up(job["policy"], given, job["seed"], job["cluster"], options, root)
        started = time.perf_counter()
        result = replay(trace, job["policy"], given, job["seed"], run, cluster=job["cluster"],
                        cluster_options=options, drain=True)
        return {"timed_s": time.perf_counter() - started, "policy": job["policy"],
                "sim_s": round(result.run["sim_s"], 3),
                "events": result.run["summary"]["events"]}
    from pipeline.warehouse.stage import load

    started = time.perf_counter()
    summary = load([run], db)
    return {"timed_s": time.perf_counter() - started,
            "rows": sum(summary["rows"].values())}


if __name__ == "__main__":
    try:
        print(json.dumps(_stage(sys.argv[1], json.loads(sys.argv[2]))))
    except TraceError as exc:  # the parent reports it as one line
        print(json.dumps({"error": str(exc)}))
        sys.exit(1)
