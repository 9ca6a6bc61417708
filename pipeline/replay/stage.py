"""The replay stage: one canonical trace x one policy (+ params, seed, cluster) -> a run directory.

The run directory is written atomically (a temporary directory renamed into place) and
holds ``task_runs.parquet``, ``node_intervals.parquet``, ``metrics.parquet``, ``run.json``
(what the run is: identical for the same run on any machine) and ``provenance.json`` (where,
when and how long: wall time, code version, the trace's absolute path).  ``run_id`` is a
stable hash of the trace's content digest, the policy, its resolved parameters, the contents
of the files its file parameters name (a scheduler configuration: :mod:`.param_files`), the
seed, the cluster and the core options; the run's random generator is seeded from the same
hash, so the same inputs give byte-identical tables.

On an elastic cluster the trace's machines do not exist, so a task's ``inputs`` can never be
local: tasks with inputs get locality ``any``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.errors import UsageError
from pipeline.metrics import metrics_table
from pipeline.metrics.speculation import spec_rule
from pipeline.policies import make_policy, policy_class, resolve_params
from pipeline.progress import Progress
from pipeline.replay import output as out
from pipeline.replay.locality import InputLayout
from pipeline.replay.options import CLUSTER_KINDS, cluster_spec
from pipeline.replay.param_files import file_sha256, param_files
from pipeline.replay.records import BackgroundWriter, RecordStore
from pipeline.replay.source import TraceInput, Window
from pipeline.replay.speeds import contention_changes, machine_speeds
from pipeline.replay.version import code_version
from pipeline.sim import ClusterSpec, ElasticCluster, FixedCluster, SimOptions, Simulation
from pipeline.sim.cluster import KUBE_KINDS
from pipeline.sim.contention import SpeedChanges
from pipeline.sim.core import READ_MB_S
from pipeline.sim.tasks import RecordChunk
from pipeline.trace.io import atomic_dir


@dataclass
class RunResult:
    """Where a run was written, its run.json content and its metrics by name."""

    run_id: str
    out_dir: Path
    run: dict[str, Any]
    metrics: dict[str, float | None]


def run_identity(trace_digest: str, policy: str, params: Mapping[str, Any], seed: int,
                 spec: ClusterSpec, options: SimOptions,
                 files: Mapping[str, str] | None = None) -> str:
    """The stable id of a run (64 hex digits; run_id is the first 16).

    ``files``: parameter name -> sha256 of the file it names; runs without such files keep
    the ids they had before file contents were hashed.
    """
    key = {"trace": trace_digest, "policy": policy, "params": dict(params), "seed": seed,
           "cluster": spec.to_dict(), "sim": asdict(options)}
    if files:
        key["files"] = dict(files)
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def sim_options(sched_interval_s: float, window: Window, drain: bool = False,
                horizon_s: float | None = None,
                read_mb_s: tuple[float, float, float] = READ_MB_S) -> SimOptions:
    """The core's options for a replay of a trace with observation ``window``.

    By default the replay stops at the window's end (or at ``horizon_s`` when given) and is
    measured over the window; ``drain`` runs on until every task is accounted for.  Either
    way, censored tasks run until the window's end and no further.
    """
    if not (np.isfinite(sched_interval_s) and sched_interval_s >= 0):
        raise UsageError(f"sched_interval_s must be >= 0 (got {sched_interval_s})")
    if horizon_s is not None and not (np.isfinite(horizon_s) and horizon_s >= 0):
        raise UsageError(f"horizon_s must be >= 0 (got {horizon_s})")
    if drain and horizon_s is not None:
        raise UsageError("--drain runs until every task ends: it takes no horizon")
    horizon = None if drain else (window.end_s if horizon_s is None else float(horizon_s))
    return SimOptions(float(sched_interval_s), horizon, window.end_s, read_mb_s)


def build_cluster(spec: ClusterSpec, trace: TraceInput, racks: np.ndarray | None = None,
                  seed: int = 0) -> FixedCluster | ElasticCluster:
    """The fixed cluster of the trace's machines, or an elastic one from the template
    (``racks``: rack codes per machine, default the trace's), with the machine speeds the
    run asks for (:mod:`pipeline.replay.speeds`; ``seed`` picks the slowed machines)."""
    if spec.kind in KUBE_KINDS:
        from pipeline.replay.kube_options import build

        return build(spec, np.random.default_rng(np.random.SeedSequence([seed, 41])))
    if spec.kind == "elastic":
        elastic = ElasticCluster(spec)
        n = len(elastic.nodes)
        elastic.nodes.speed[:] = machine_speeds(spec, np.ones(n), None, seed)
        return elastic
    m = trace.machines
    base = np.asarray(m["speed"].fill_null(1.0).to_numpy(), dtype=np.float64)
    platforms = m["platform"].to_pylist() if "platform" in m.column_names else None
    speed = machine_speeds(spec, base, platforms, seed)
    return FixedCluster(spec, m["machine_id"].to_pylist(), trace.machine_cap(), speed,
                        trace.racks() if racks is None else racks, trace.machine_periods())


def replay(trace_dir: Path | str, policy: str, params: Mapping[str, Any] | None = None,
           seed: int = 0, out_dir: Path | str = "run", *, cluster: str = "fixed",
           cluster_options: Mapping[str, Any] | None = None, sched_interval_s: float = 1.0,
           horizon_s: float | None = None, drain: bool = False,
           files_dir: Path | str | None = None, progress: bool = False,
           trace_name: str | None = None) -> RunResult:
    """Replay one canonical trace through one policy into the run directory ``out_dir``.

    The replay stops at the trace's observation window's end and measures cost and
    utilization over the window (``horizon_s`` stops it earlier or later); ``drain`` runs on
    until every task is accounted for and measures the whole run.
    ``files_dir``: where relative paths in file parameters (``config=...``) are read from
    (default: the current directory); ``run.json`` keeps the paths as given.
    ``progress``: show how far the replay got in simulated time (:mod:`pipeline.progress`).
    ``trace_name``: the name runs are grouped under (a sweep's trace key; by default the
    trace directory's name): one trace directory may be studied under several names, e.g.
    on its own machines and on machines with stragglers.
    """
    started = time.perf_counter()
    cls = policy_class(policy)
    if getattr(cls, "mode", "replay") == "inflation":
        return _inflation(trace_dir, policy, params, seed, Path(out_dir), cluster,
                          cluster_options, trace_name)
    resolved = resolve_params(cls, params)
    if cluster in CLUSTER_KINDS and cluster not in cls.clusters:  # e.g. recorded: fixed only
        raise UsageError(f"policy '{policy}' needs the {' or '.join(cls.clusters)} cluster, "
                         f"not {cluster}")
    files = param_files(policy, resolved, files_dir)
    file_digests = {name: file_sha256(path) for name, path in files.items()}
    trace = TraceInput(Path(trace_dir))
    window = trace.window()
    spec = cluster_spec(cluster, cluster_options, trace.machine_cap(), trace.units)
    options = sim_options(sched_interval_s, window, drain, horizon_s, spec.read_mb_s)
    digest = trace.digest()
    identity = run_identity(digest, policy, resolved, int(seed), spec, options, file_digests)
    run_id = identity[:16]
    rng = np.random.default_rng(np.random.SeedSequence(int(identity, 16)))
    opened = {**resolved, **{name: str(path) for name, path in files.items()}}
    shown = Progress(options.horizon_s or window.end_s, f"replay {policy}", "s simulated",
                     enabled=progress)
    with shown, atomic_dir(Path(out_dir)) as tmp:
        summary, sim = _simulate(trace, policy, opened, spec, options, rng, run_id, tmp,
                                 shown.update if progress else None, int(seed))
        cluster_obj = sim.cluster
        n_inst = len(cluster_obj.machine_ids)
        types = None  # one price for every node, no instance types
        if spec.kind == "fixed":
            cap, price = trace.machine_cap(), np.full(n_inst, spec.price_per_hour)
        elif spec.kind == "elastic":
            cap = np.tile(cluster_obj.template, (n_inst, 1))
            price = np.full(n_inst, spec.price_per_hour)
        else:  # priced instance types
            cap, types = cluster_obj.instance_caps(), cluster_obj.instance_types()
            price = np.array([cluster_obj.price_per_hour(i) for i in range(n_inst)])
        nodes = out.node_intervals_table(cluster_obj.intervals.rows, cluster_obj.machine_ids,
                                         cap, price, spec.billing_s, run_id, types)
        out.write_table(nodes, tmp / out.NODE_INTERVALS)
        measured = {"from_s": window.start_s, "to_s": summary.end_s,
                    "drained": options.horizon_s is None}
        nm = sim.nm.counts if sim.nm is not None else {}
        extra = {**sim.policy.run_metrics(),
                 **(sim.cluster.run_metrics() if spec.kind in KUBE_KINDS else {}),
                 **({"opp_rejected": (float(nm["rejected"]), "count"),
                     "nm_utilization_checks": (float(nm["checks"]), "count"),
                     "opp_reclaims_guaranteed": (float(nm["killed_guaranteed"]
                                                       + nm["paused_guaranteed"]), "count"),
                     "opp_reclaims_utilization": (float(nm["killed_overalloc"]
                                                        + nm["paused_overalloc"]), "count"),
                     } if nm else {})}
        metrics = _write_metrics(tmp, run_id, measured["from_s"], measured["to_s"], extra,
                                 opportunistic=sim.nm is not None,
                                 speculation=spec_rule(resolved) is not None)
        counts = asdict(summary)
        settings = _settings(sim.policy, params or {}, opened, resolved)
        unenforced = _unenforced(trace, spec, sim)
        run = {
            "run_id": run_id, "trace": trace_name or trace.dir.name,
            "trace_digest": digest, "trace_validated": trace.validated,
            "trace_facts": trace.facts(), "window": asdict(window), "measured": measured,
            "policy": policy,
            "params": resolved, "settings": settings, "seed": int(seed),
            "cluster": spec.to_dict(),
            "sim": asdict(options),
            **({"param_files": {name: {"path": resolved[name], "sha256": sha}
                                for name, sha in file_digests.items()}} if files else {}),
            "summary": {k: v for k, v in counts.items() if k != "sim_s"},
            **({"unenforced": unenforced} if unenforced else {}),
        }
        provenance = {
            "trace_path": str(trace.dir.resolve()), "sim_s": counts["sim_s"],
            "wall_s": round(time.perf_counter() - started, 3), "code_version": code_version(),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            **({"policy_timings": timings} if (timings := sim.policy.run_timings()) else {}),
        }
        out.write_json(run, tmp / out.RUN_JSON)
        out.write_json(provenance, tmp / out.PROVENANCE_JSON)
    return RunResult(run_id, Path(out_dir), {**run, **provenance}, metrics)


def _inflation(trace_dir: Path | str, policy: str, params: Mapping[str, Any] | None,
               seed: int, out_dir: Path, cluster: str,
               cluster_options: Mapping[str, Any] | None, trace_name: str | None) -> RunResult:
    """A GPU placement policy's run: the workload-inflation experiment on the trace's nodes."""
    from pipeline.replay.inflation import replay_inflation

    if cluster != "fixed" or cluster_options:
        raise UsageError(f"policy '{policy}' runs the workload-inflation experiment on the "
                         "trace's own nodes: it takes no cluster or cluster options")

    def identity(digest: str, resolved: Mapping[str, Any]) -> str:
        key = {"trace": digest, "policy": policy, "params": dict(resolved), "seed": int(seed),
               "mode": "inflation"}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    run_id, run, metrics = replay_inflation(Path(trace_dir), policy, params, int(seed),
                                            out_dir, trace_name, identity)
    return RunResult(run_id, out_dir, run, metrics)


def _unenforced(trace: TraceInput, spec: ClusterSpec, sim: Simulation) -> dict[str, int]:
    """What the trace asks that this replay cannot enforce, said once (stderr) and kept in
    run.json, so a result is never silently wrong about it: GPU models, where the nodes
    name none (an elastic cluster's template, or machines without ``gpu_model``)."""
    if sim.models is not None:
        return {}
    named = trace.gpu_spec_tasks()
    if not named:
        return {}
    where = ("an elastic cluster's nodes name no GPU model" if spec.kind != "fixed"
             else "no machine names its GPU model (gpu_model)")
    warnings.warn(f"{named} tasks name the GPU models they may use (gpu_spec), but {where}: "
                  "they may run on any GPU", stacklevel=3)
    return {"gpu_spec_tasks": named}


def _settings(policy: Any, given: Mapping[str, Any], opened: Mapping[str, Any],
              resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The settings the run used and their sources, naming files as the user gave them."""
    settings = policy.effective_settings(set(given))
    for name, value in resolved.items():
        if opened.get(name) != value:  # a file parameter, opened from another directory
            for entry in settings.values():
                entry["source"] = entry["source"].replace(str(opened[name]), str(value))
            settings[name]["value"] = value
    return settings


def _simulate(trace: TraceInput, policy: str, params: dict[str, Any], spec: ClusterSpec,
              options: SimOptions, rng: np.random.Generator, run_id: str, tmp: Path,
              on_progress: Any = None, seed: int = 0) -> tuple[Any, Simulation]:
    """Run the core with records going to scratch files while ``task_runs`` is written from
    them on a second thread (:mod:`pipeline.replay.records`)."""
    scratch = tmp / ".scratch"
    scratch.mkdir()
    store = RecordStore(scratch, total_rows=trace.task_rows())
    m = trace.machines
    layout = InputLayout(spec, m["machine_id"].combine_chunks(), m["rack"], trace.stream,
                         seed)
    cluster = build_cluster(spec, trace, layout.racks, seed)
    node_of = ({mid: i for i, mid in enumerate(cluster.machine_ids)}
               if spec.kind == "fixed" else None)
    refs = trace.dependency_refs()
    policy_obj = make_policy(policy, params)
    until = options.horizon_s if options.horizon_s is not None else options.censor_at_s
    changes = contention_changes(spec, cluster.nodes.speed, seed, float(until or 0.0))
    if changes is not None and str((params or {}).get("opp_by", "none")) != "none":
        raise UsageError("cluster option 'contention_share' does not combine with "
                         "opportunistic containers yet")
    writers: list[BackgroundWriter] = []

    def sink(chunk: RecordChunk) -> None:  # (a failed writer stops the replay at once)
        for writer in writers:
            writer.check()
        store.write(chunk)

    models, model_of = _gpu_models(spec, trace)
    sim = Simulation(
        cluster, policy_obj, trace.batches(node_of, set(refs), layout, models), sink,
        users=trace.users, queues=trace.queues, dep_refs=refs, options=options, rng=rng,
        units=trace.units, on_progress=on_progress,
        speed_changes=SpeedChanges(*changes) if changes is not None else None,
        gang_sizes=trace.gang_sizes(),
        gpu_devices=_gpu_devices(spec, trace, cluster), gpu_models=model_of,
    )

    def job_queues() -> tuple[np.ndarray, tuple[str, ...]]:
        assigned = policy_obj.assigned_queues(trace.job_user, trace.job_queue)
        if assigned is None:
            return trace.job_queue, trace.queues
        return np.asarray(assigned[0], np.int32), tuple(assigned[1])

    batches = out.task_runs_batches(trace.identities(), store, cluster.machine_ids,
                                    trace.job_user, job_queues, trace.users, run_id,
                                    growing=spec.kind != "fixed")
    writer = BackgroundWriter(partial(out.write_task_runs, out=tmp / out.TASK_RUNS), batches)
    writers.append(writer)
    try:
        summary = sim.run()
    except BaseException:
        store.close(failed=True)
        writer.join()
        raise
    store.close(summary.end_s)
    writer.join()
    rows = policy_obj.queue_rows(_cluster_total(spec, trace, cluster))
    if rows is not None:
        out.write_table(out.queues_table(rows, run_id), tmp / out.QUEUES)
    shutil.rmtree(scratch)
    return summary, sim


def _gpu_devices(spec: ClusterSpec, trace: TraceInput,
                 cluster: FixedCluster | ElasticCluster) -> np.ndarray | None:
    """GPU devices per node slot: the trace's machines' counts, or the elastic template's."""
    if spec.kind == "fixed":
        counts = trace.machine_cap()[:, 2]
    elif spec.kind in KUBE_KINDS:
        return None  # GPUs counted per node, not per device, on typed nodes (for now)
    else:
        counts = np.full(len(cluster.machine_ids), float(cluster.template[2]))
    return np.floor(counts).astype(np.int64) if np.any(counts > 0) else None


def _gpu_models(spec: ClusterSpec, trace: TraceInput
                ) -> tuple[tuple[str, ...] | None, np.ndarray | None]:
    """The machines' GPU model names and each node slot's model bit, when the replay
    enforces ``gpu_spec``: on a fixed cluster whose machines name their models (an elastic
    cluster's template names none)."""
    if spec.kind != "fixed":
        return None, None
    names, bits = trace.gpu_models()
    return (names, bits) if names else (None, None)


def _cluster_total(spec: ClusterSpec, trace: TraceInput,
                   cluster: FixedCluster | ElasticCluster) -> np.ndarray:
    """The cluster's (cpu, mem, gpu) for queue shares: all machines, or max_nodes templates."""
    if spec.kind == "fixed":
        return trace.machine_cap().sum(axis=0)
    if spec.kind in KUBE_KINDS:
        return np.asarray(cluster.shapes.max(axis=0)) * float(cluster.max_nodes or 0)
    return np.asarray(cluster.template, dtype=np.float64) * float(cluster.max_nodes or 0)


def _write_metrics(tmp: Path, run_id: str, start_s: float, end_s: float,
                   extra: Mapping[str, tuple[float | None, str]] | None = None,
                   opportunistic: bool = False, speculation: bool = False
                   ) -> dict[str, float | None]:
    """Write ``metrics.parquet``: the metrics of the run's tables, then ``extra`` (the
    policy's own, :meth:`PolicyBase.run_metrics`)."""
    nodes = pl.read_parquet(tmp / out.NODE_INTERVALS)
    table = metrics_table(run_id, tmp / out.TASK_RUNS, nodes, end_s, start_s,
                          opportunistic=opportunistic, speculation=speculation)
    if extra:
        rows = [(run_id, name, None if v is None else float(v), unit)
                for name, (v, unit) in extra.items()]
        table = pl.concat([table, pl.DataFrame(rows, schema=table.schema, orient="row")])
    out.write_table(table.to_arrow(), tmp / out.METRICS)
    return dict(zip(table["metric"].to_list(), table["value"].to_list(), strict=True))
