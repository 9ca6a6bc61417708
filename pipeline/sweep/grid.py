"""The sweep grid: traces x policies x parameter grid x clusters x seeds, from params.yaml.

``params.yaml`` section ``sweep``::

    sweep:
      traces: {demo: data/traces/demo}      # name -> canonical trace directory
      runs_dir: data/runs
      seeds: [0]
      policies:                              # name -> params; a list value is a grid axis
        yarn-uniform: [{}, {opp_by: priority}]   # a list of mappings: grids joined
        container-packing: {threshold: [0.6, 0.8]}
      clusters:                              # name -> {kind, options}; a list value is an axis
        fixed: {kind: fixed}
        elastic: {kind: elastic, min_nodes: 0}

A trace may instead be a mapping ``{path: DIR, policies: ..., clusters: ..., seeds: ...,
drain: ...}``: its own ``policies``, ``clusters``, ``seeds`` and ``drain`` replace the shared
ones for that trace (a MapReduce trace swept over delay settings on an HDFS layout, say,
beside a demo swept over the usual policies; the GPU experiment over ten seeds; an HPC log
replayed until every job ends).

A policy that runs on some cluster kinds only (``recorded``, the trace's own placements,
needs the trace's machines) gets runs on those kinds only: its other cells are left out of
the grid rather than failed.

Paths (traces, ``runs_dir``, and file parameters such as capacity-scheduler's ``config``)
are relative to the directory of params.yaml.

Each run's directory is ``runs_dir/<trace>/<policy>/<key>`` where ``key`` hashes the run's
whole specification, the trace's manifest, the contents of the files its file parameters
name (:mod:`pipeline.replay.param_files`) and the replay code (:func:`code_digest`), so a
re-run finds finished runs, while a changed trace, configuration file or code gets new
ones, whatever order the runs execute in.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from pipeline.replay.param_files import file_sha256, param_file_digests
from pipeline.trace.identity import content_digest


@dataclass(frozen=True)
class RunSpec:
    """One replay to do: everything :func:`pipeline.replay.stage.replay` needs."""

    trace: str
    trace_dir: str
    policy: str
    params: dict[str, Any] = field(default_factory=dict)
    cluster: str = "fixed"
    cluster_options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    key: str = ""
    out_dir: str = ""
    files_dir: str = ""  # where relative file parameters are read from ("": current directory)
    drain: bool = False

    def to_json(self) -> str:
        """The specification as canonical JSON (sorted keys)."""
        return json.dumps(asdict(self), sort_keys=True)


def expand(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """All combinations of a mapping whose list values are grid axes (in sorted key order)."""
    keys = sorted(options)
    axes = [options[k] if isinstance(options[k], list) else [options[k]] for k in keys]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes)]


def expand_policy(params: Mapping[str, Any] | list[Mapping[str, Any]] | None
                  ) -> list[dict[str, Any]]:
    """A policy's parameter grid: one mapping (list values are axes), or a list of such
    mappings whose grids are joined (a policy with and without a layer, say); repeated
    combinations are kept once."""
    grids = params if isinstance(params, list) else [params or {}]
    out: list[dict[str, Any]] = []
    for grid in grids:
        if not isinstance(grid, Mapping):
            raise UsageError("a policy's parameters must be a mapping or a list of mappings",
                             field="sweep.policies")
        out += [c for c in expand(grid) if c not in out]
    return out


# The packages whose code decides a run's results (the sweep stage's code deps in dvc.yaml).
REPLAY_CODE = ("sim", "policies", "replay", "metrics", "trace")


def code_digest() -> str:
    """sha256 of the replay code's sources: runs made by other code are not reused."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in REPLAY_CODE:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def trace_digest(trace_dir: Path) -> str:
    """The trace's identity: the digest of its contents (:mod:`pipeline.trace.identity`)."""
    if not (Path(trace_dir) / "manifest.json").is_file():
        raise UsageError(f"not a canonical trace (no manifest.json): {trace_dir}")
    return content_digest(Path(trace_dir))


def build_grid(section: Mapping[str, Any], root: Path = Path("."),
               only: str | None = None) -> list[RunSpec]:
    """Every run of the ``sweep`` section (of trace ``only`` when given), in a stable order,
    with its key and directory."""
    traces = _mapping(section, "traces")
    policies = _mapping(section, "policies")
    clusters = section.get("clusters") or {"fixed": {"kind": "fixed"}}
    seeds = section.get("seeds", [0])
    runs_dir = root / section.get("runs_dir", "data/runs")
    drain = section.get("drain", False)
    _check_seeds(seeds, "sweep.seeds")
    if not isinstance(drain, bool):
        raise UsageError("sweep.drain must be true or false", field="sweep.drain")
    if only is not None and only not in traces:
        raise UsageError(f"trace '{only}' is not in sweep.traces (traces: "
                         f"{', '.join(sorted(traces))})", field="sweep.traces")
    specs = []
    code = code_digest()
    for trace, entry in sorted(traces.items()):
        if only is not None and trace != only:
            continue
        trace_path, own_policies, own_clusters = _trace_entry(trace, entry)
        trace_seeds = _trace_seeds(trace, entry, seeds)
        trace_drain = _trace_drain(trace, entry, drain)
        digest = trace_digest(root / trace_path) + code
        for policy, params in sorted((own_policies or policies).items()):
            kinds = _cluster_kinds(policy)
            for combo in expand_policy(params):
                files = _file_digests(policy, combo, root)
                for cluster_name, cluster in sorted((own_clusters or clusters).items()):
                    for options in expand(cluster or {}):
                        kind = options.pop("kind", cluster_name)
                        _check_kind(kind, trace if own_clusters else None, cluster_name)
                        if kinds is not None and kind not in kinds:
                            continue  # e.g. recorded on an elastic cluster
                        for seed in trace_seeds:
                            specs.append(_spec(trace, str(root / trace_path), digest, policy,
                                               combo, files, kind, options, seed, runs_dir,
                                               root, trace_drain))
    return specs


TRACE_KEYS = ("path", "policies", "clusters", "seeds", "drain")


def _check_kind(kind: Any, trace: str | None, cluster: str) -> None:
    """Refuse an unknown cluster kind where it is written (before a policy that runs on
    some kinds only passes it by: a misspelt kind would drop the cluster's runs)."""
    from pipeline.replay.options import CLUSTER_KINDS

    if kind not in CLUSTER_KINDS:
        where = (f"sweep.traces.{trace}.clusters.{cluster}" if trace is not None
                 else f"sweep.clusters.{cluster}")
        raise UsageError(f"unknown cluster kind {kind!r} (known: {', '.join(CLUSTER_KINDS)})",
                         field=f"{where}.kind")


def _check_seeds(seeds: Any, where: str) -> None:
    if not isinstance(seeds, list) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise UsageError(f"{where} must be a non-empty list of integers", field=where)


def _trace_drain(name: str, entry: Any, drain: bool) -> bool:
    """A trace's own ``drain`` (an HPC log's runs go on until every job ends), else the
    shared one."""
    if not isinstance(entry, Mapping) or "drain" not in entry:
        return drain
    if not isinstance(entry["drain"], bool):
        raise UsageError("must be true or false", field=f"sweep.traces.{name}.drain")
    return entry["drain"]


def _trace_seeds(name: str, entry: Any, seeds: list[int]) -> list[int]:
    """A trace's own ``seeds`` (the GPU experiment's ten, say), else the shared ones."""
    if not isinstance(entry, Mapping) or "seeds" not in entry:
        return seeds
    _check_seeds(entry["seeds"], f"sweep.traces.{name}.seeds")
    return list(entry["seeds"])


def _trace_entry(name: str, entry: Any) -> tuple[str, Mapping[str, Any] | None,
                                                Mapping[str, Any] | None]:
    """A ``sweep.traces`` entry: a directory, or ``{path, policies?, clusters?}``."""
    if isinstance(entry, str):
        return entry, None, None
    where = f"sweep.traces.{name}"
    if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
        raise UsageError("expected a trace directory or {path, policies, clusters}",
                         field=where)
    unknown = sorted(set(entry) - set(TRACE_KEYS))
    if unknown:
        raise UsageError(f"unknown key '{unknown[0]}' (known: {', '.join(TRACE_KEYS)})",
                         field=f"{where}.{unknown[0]}")
    for key in ("policies", "clusters"):
        if key in entry and (not isinstance(entry[key], Mapping) or not entry[key]):
            raise UsageError(f"{key} must be a non-empty mapping", field=f"{where}.{key}")
    return entry["path"], entry.get("policies"), entry.get("clusters")


def trace_dirs(section: Mapping[str, Any]) -> dict[str, str]:
    """Each ``sweep.traces`` name's directory (as written, relative to params.yaml)."""
    return {name: _trace_entry(name, entry)[0]
            for name, entry in _mapping(section, "traces").items()}


def _cluster_kinds(policy: str) -> tuple[str, ...] | None:
    """The cluster kinds ``policy`` runs on (None for an unknown policy: check_specs names it)."""
    from pipeline.policies import ALL_POLICIES

    cls = ALL_POLICIES.get(policy)
    return None if cls is None else cls.clusters


def _file_digests(policy: str, params: dict[str, Any], root: Path) -> dict[str, str]:
    """sha256 of each file the run's file parameters name (a UsageError names a missing one)."""
    try:
        return param_file_digests(policy, params, root)
    except UsageError as exc:
        if exc.field:
            exc.field = f"sweep.policies.{policy}.{exc.field}"
        raise


def _spec(trace: str, trace_dir: str, digest: str, policy: str, params: dict,
          files: dict[str, str], kind: str, options: dict, seed: int, runs_dir: Path,
          root: Path, drain: bool) -> RunSpec:
    what = {"trace": digest, "policy": policy, "params": params, "cluster": kind,
            "options": options, "seed": seed, "drain": drain}
    files = {**files, **_cluster_file_digests(kind, options, root)}
    if files:
        what["files"] = files
    key = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
    out_dir = runs_dir / trace / policy / key
    return RunSpec(trace, trace_dir, policy, params, kind, options, seed, key, str(out_dir),
                   str(root.resolve()), drain)


def _cluster_file_digests(kind: str, options: Mapping[str, Any], root: Path) -> dict[str, str]:
    """sha256 of the files a cluster's options name (the instance catalog, Cluster
    Autoscaler's flags file, Karpenter's NodePool): editing one re-runs the runs that read
    it."""
    if kind not in ("cluster-autoscaler", "karpenter"):
        return {}
    from pipeline.replay.options import CLUSTER_PARAMS

    out = {}
    for key in ("catalog", "autoscaler_flags", "nodepool"):
        value = str(options.get(key, CLUSTER_PARAMS[key].default) or "")
        path = Path(value) if Path(value).is_absolute() else root / value
        if value and not value.lstrip().startswith("-") and path.is_file():
            out[f"cluster.{key}"] = file_sha256(path)
    return out


def check_specs(specs: list[RunSpec]) -> None:
    """Fail before any run starts if a policy, parameter or cluster option is wrong.

    User mistakes are found here, once, in the driver, rather than retried on every worker.
    """
    from pipeline.policies import policy_class, resolve_params
    from pipeline.replay.options import CLUSTER_KINDS, CLUSTER_PARAMS, ELASTIC_ONLY

    for spec in specs:
        resolve_params(policy_class(spec.policy), spec.params)
        if spec.cluster not in CLUSTER_KINDS:
            raise UsageError(f"unknown cluster kind '{spec.cluster}' (known: "
                             f"{', '.join(CLUSTER_KINDS)})", field="sweep.clusters")
        for option in spec.cluster_options:
            if option not in CLUSTER_PARAMS:
                raise UsageError(f"unknown cluster option '{option}' (known: kind, "
                                 f"{', '.join(CLUSTER_PARAMS)})", field="sweep.clusters")
            if spec.cluster == "fixed" and option in ELASTIC_ONLY:
                raise UsageError(f"cluster option '{option}' does not apply to a fixed "
                                 "cluster", field="sweep.clusters")


def _mapping(section: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = section.get(name)
    if not isinstance(value, Mapping) or not value:
        raise UsageError(f"sweep.{name} must be a non-empty mapping", field=f"sweep.{name}")
    return value
