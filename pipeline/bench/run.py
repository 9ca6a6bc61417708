"""``bench``: time the replay on a synthetic canonical workload and report throughput.

The workload is written to a temporary directory first (not timed), then a tiny replay of
the same policy warms up the process (loading numba's compiled kernels from its cache costs
about a second once per process; reported as ``startup_s``).  The timed part is one whole
:func:`pipeline.replay.replay` call (reading the trace, the core, writing the run directory
and its metrics), so ``tasks_per_s`` is what a user gets end to end.  ``sim_s`` and
``sim_tasks_per_s`` isolate the core loop (arrivals, policy calls, completions).  The replay
drains (runs until every task ends), so every figure covers the whole workload.  Peak RSS
is the process's high-water mark (``ru_maxrss``), workload generation included.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pipeline.bench.workload import synthetic_workload
from pipeline.policies import policy_class
from pipeline.replay import replay
from pipeline.replay.options import CLUSTER_PARAMS


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB (Linux reports KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024 if sys.platform != "darwin" else kib / 2**20


def warm_up(policy: str, params: dict[str, Any], seed: int, cluster: str,
            cluster_options: dict[str, Any], workdir: Path, gpu: bool = False) -> float:
    """Replay a tiny workload once (numba loads its compiled kernels from the cache once per
    process), with GPUs when the measured one has them (GPU policies need GPU machines);
    return the seconds it took."""
    started = time.perf_counter()
    tiny = synthetic_workload(workdir / "tiny", 20, 200, seed, gpu=gpu)
    replay(tiny, policy, params, seed, workdir / "tiny-run", cluster=cluster,
           cluster_options=cluster_options, drain=True)
    return time.perf_counter() - started


def bench(policy: str, machines: int = 12_500, tasks: int = 1_000_000, seed: int = 0,
          params: dict[str, Any] | None = None, cluster: str = "fixed",
          workdir: Path | None = None, gpu: bool = False) -> dict[str, Any]:
    """Replay a synthetic workload of ``tasks`` tasks on ``machines`` nodes; return figures."""
    policy_class(policy)  # fail fast on an unknown name
    given = dict(params or {})
    cluster_options = {k: given.pop(k) for k in list(given) if k in CLUSTER_PARAMS}
    params = given
    with tempfile.TemporaryDirectory(dir=workdir, prefix="tracereplay-bench-") as tmp:
        trace = synthetic_workload(Path(tmp) / "trace", machines, tasks, seed, gpu=gpu)
        startup = warm_up(policy, params, seed, cluster, cluster_options, Path(tmp), gpu)
        started = time.perf_counter()
        result = replay(trace, policy, params, seed, Path(tmp) / "run", cluster=cluster,
                        cluster_options=cluster_options, drain=True)
        wall = time.perf_counter() - started
    summary = result.run["summary"]
    return {
        "policy": policy, "machines": machines, "tasks": tasks, "cluster": cluster,
        **({"gpu": True, "gpu_held": summary.get("gpu_held", 0)} if gpu else {}),
        **({"settings": {**params, **cluster_options}} if params or cluster_options else {}),
        "wall_s": round(wall, 3), "startup_s": round(startup, 3),
        "tasks_per_s": round(tasks / wall, 1),
        **(_replay_figures(summary, result.run["sim_s"], tasks, wall) if "events" in summary
           else _inflation_figures(summary, wall)),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "util_alloc_cpu": result.metrics.get("util_alloc_cpu"),
        "tasks_finished": result.metrics.get("tasks_finished"),
        "locality_node": result.metrics.get("locality_node"),
        # the policy's own wall-clock figures (e.g. quincy's solver and round ms)
        **result.run.get("policy_timings", {}),
    }


def _replay_figures(summary: dict[str, Any], sim_s: float, tasks: int,
                    wall: float) -> dict[str, Any]:
    """The event-driven replay's figures: events and the simulation core's own time."""
    return {"events_per_s": round(summary["events"] / wall, 1), "sim_s": round(sim_s, 3),
            "sim_tasks_per_s": round(tasks / max(sim_s, 1e-9), 1),
            "events": summary["events"], "scheduling_points": summary["scheduling_points"]}


def _inflation_figures(summary: dict[str, Any], wall: float) -> dict[str, Any]:
    """A GPU placement policy's run is the FGD inflation experiment (pods arrive one by one
    and never leave, time is ignored): its figures are pods, not events."""
    pods = summary["pods"] + summary["copies"]
    return {"experiment": "inflation", "pods": pods, "pods_per_s": round(pods / wall, 1),
            "pods_placed": summary["placed"], "pods_dropped": summary["dropped"]}


def main() -> None:
    """``python -m pipeline.bench.run POLICY [MACHINES] [TASKS]``: print one JSON line."""
    args = sys.argv[1:]
    policy = args[0] if args else "yarn-uniform"
    machines = int(args[1]) if len(args) > 1 else 12_500
    tasks = int(args[2]) if len(args) > 2 else 1_000_000
    print(json.dumps(bench(policy, machines, tasks)))


if __name__ == "__main__":
    main()
