"""Running a sweep's replays on Dask: a LocalCluster of worker processes by default, or an
existing ``dask.distributed`` scheduler given by address.

- Each run writes its own directory atomically (the replay stage does), so a finished run is
  whole or absent; a re-run skips runs whose ``run.json`` exists.
- A worker that dies mid-run: the scheduler re-runs its task elsewhere (``allowed-failures``),
  and a run that raised is retried (``retries``); the atomic write means a retried run
  replaces nothing half-written and is never duplicated.
- Results never depend on the order Dask runs things: each run's randomness comes from its own
  specification and seed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.progress import LOG_EVERY_S, Progress
from pipeline.sweep.grid import RunSpec

RETRIES = 2


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Replay one run (in whatever process Dask gives it); skip it if already finished."""
    out = Path(spec.out_dir)
    if (out / "run.json").is_file():
        return {"key": spec.key, "out_dir": spec.out_dir, "skipped": True}
    from pipeline.replay.stage import replay

    started = time.perf_counter()
    result = replay(spec.trace_dir, spec.policy, spec.params, spec.seed, out,
                    cluster=spec.cluster, cluster_options=spec.cluster_options,
                    drain=spec.drain, files_dir=spec.files_dir or None, trace_name=spec.trace)
    return {"key": spec.key, "out_dir": spec.out_dir, "skipped": False,
            "run_id": result.run_id, "wall_s": time.perf_counter() - started}


def run_serial(specs: Sequence[RunSpec], progress: bool = True) -> list[dict[str, Any]]:
    """Run every spec in this process, in order (the reference for parallel runs)."""
    shown = Progress(len(specs), "sweep", "runs", enabled=progress)
    with shown:
        results = []
        for spec in specs:
            results.append(run_one(spec))
            shown.update(len(results))
    return results


def run_dask(specs: Sequence[RunSpec], scheduler: str | None = None, workers: int | None = None,
             progress: bool = True, func: Callable[[RunSpec], dict] = run_one,
             ) -> list[dict[str, Any]]:
    """Run every spec on Dask; results come back in spec order."""
    from dask.distributed import Client, LocalCluster, wait

    cluster = None
    if scheduler is None:
        n = workers or max(1, min(len(specs), os.cpu_count() or 1))
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None,
                               silence_logs=logging.CRITICAL)  # shutdown chatter is noise
        client = Client(cluster)
    else:
        client = Client(scheduler, timeout="30s")
    try:
        futures = {client.submit(func, s, key=f"run-{s.key}", retries=RETRIES, pure=False): i
                   for i, s in enumerate(specs)}
        results: list[dict[str, Any] | None] = [None] * len(specs)
        pending, done = set(futures), 0
        with Progress(len(specs), "sweep", "runs", enabled=progress) as shown:
            while pending:  # waits of at most LOG_EVERY_S: a long last run still shows life
                try:
                    finished, pending = wait(pending, timeout=LOG_EVERY_S,
                                             return_when="FIRST_COMPLETED")
                except TimeoutError:
                    finished = set()
                for future in finished:
                    results[futures[future]] = future.result()
                done += len(finished)
                shown.update(done)
        return [r for r in results if r is not None]
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
