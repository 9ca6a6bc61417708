"""A scheduler profile from a ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``)
as users write it, or the default profile (Kubernetes v1.31).

Read: ``percentageOfNodesToScore`` (top level, or the profile's, which wins); the first
profile, or the one named ``default-scheduler`` when there are several; its score plugins'
weights (``plugins.score`` or ``plugins.multiPoint``, ``enabled``/``disabled`` with
``'*'``); ``NodeResourcesFit``'s ``scoringStrategy`` (``type``, ``resources`` with weights,
``requestedToCapacityRatio.shape``) and ``NodeResourcesBalancedAllocation``'s
``resources``; ``DefaultPreemption`` on or off (``plugins.postFilter`` or ``multiPoint``)
and its ``minCandidateNodesPercentage``/``minCandidateNodesAbsolute``.  Defaults where the
file is silent are the v1.31 defaults: ``LeastAllocated`` on cpu and memory with weight 1,
BalancedAllocation on cpu and memory, both plugins with weight 1, adaptive
``percentageOfNodesToScore``, preemption on with 10% and 100.  Other plugins score nothing
that differs between nodes for pods without affinity, tolerations, images or spread
constraints (the traces have none), so they are read and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pipeline.errors import UsageError
from pipeline.policies.kubernetes.kernel import Profile
from pipeline.policies.kubernetes.preemption import Args
from pipeline.policies.kubernetes.scoring import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_NODE_SCORE,
    RESOURCES,
    STRATEGIES,
)

FIT, BALANCED = "NodeResourcesFit", "NodeResourcesBalancedAllocation"
PREEMPTION = "DefaultPreemption"
DEFAULT_WEIGHTS = {FIT: 1, BALANCED: 1}  # v1.31 default profile's score weights
DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
# a RequestedToCapacityRatio chosen with no shape: bin packing (the docs' example)
PACKING_SHAPE = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]


@dataclass(frozen=True)
class Settings:
    """What the policy runs with: the compiled :class:`~.kernel.Profile` and the
    ``percentageOfNodesToScore`` (0: adaptive); ``preemption``: DefaultPreemption's
    arguments, None when the profile disables it."""

    profile: Profile
    percentage: int
    preemption: Args | None = Args()  # noqa: RUF009 (a NamedTuple: immutable)


def settings(path: str | None, strategy: str | None, percentage: int | None,
             max_pods: int, preemption: bool | None = None) -> Settings:
    """The profile of ``path`` (None: the default profile), with ``strategy``,
    ``percentage`` and ``preemption`` overriding the file's when given.  A field of the
    wrong kind is a one-line :class:`UsageError` naming the file and the field."""
    doc = _read(path) if path else {}
    where = path or "default profile"
    prof = _profile(doc, where)
    args = _plugin_args(prof, where)
    fit = _mapping(_mapping(args.get(FIT), where, f"{FIT} args").get("scoringStrategy"),
                   where, "scoringStrategy")
    kind = strategy or fit.get("type", "LeastAllocated")
    if kind not in STRATEGIES:
        raise UsageError(f"{where}: scoringStrategy.type {kind!r} is not one of "
                         f"{', '.join(STRATEGIES)}")
    ratio = _mapping(fit.get("requestedToCapacityRatio"), where, "requestedToCapacityRatio")
    shape_u, shape_s = _shape(ratio.get("shape") or PACKING_SHAPE, where)
    bal = _mapping(args.get(BALANCED), where, f"{BALANCED} args").get("resources")
    weights = _score_weights(prof, where)
    if percentage is None:
        given = prof.get("percentageOfNodesToScore", doc.get("percentageOfNodesToScore"))
        percentage = _count(given or 0, where, "percentageOfNodesToScore")
    if not 0 <= percentage <= 100:
        raise UsageError(f"{where}: percentageOfNodesToScore {percentage} is not in 0..100")
    profile = Profile(_resource_weights(fit.get("resources") or DEFAULT_RESOURCES, where),
                      _resource_weights(bal or DEFAULT_RESOURCES, where) > 0, shape_u,
                      shape_s, STRATEGIES[kind], weights[FIT], weights[BALANCED], max_pods)
    on = preemption_enabled(prof, where) if preemption is None else preemption
    return Settings(profile, percentage, _preemption_args(args, where) if on else None)


def preemption_enabled(prof: dict[str, Any], where: str) -> bool:
    """Whether the profile keeps ``DefaultPreemption`` (``disabled`` then ``enabled``, in
    multiPoint then postFilter, as the framework merges them)."""
    on = True
    plugins = _mapping(prof.get("plugins"), where, "plugins")
    for point in ("multiPoint", "postFilter"):
        sets = _mapping(plugins.get(point), where, f"plugins.{point}")
        for item in _entries(sets.get("disabled"), where, f"plugins.{point}.disabled"):
            on = on and item.get("name") not in ("*", PREEMPTION)
        for item in _entries(sets.get("enabled"), where, f"plugins.{point}.enabled"):
            on = on or item.get("name") == PREEMPTION
    return on


def file_preemption(path: str) -> bool:
    """Whether configuration file ``path`` keeps DefaultPreemption on."""
    return preemption_enabled(_profile(_read(path), path), path)


def _preemption_args(args: dict[str, Any], where: str) -> Args:
    given = _mapping(args.get(PREEMPTION), where, f"{PREEMPTION} args")
    pct = _count(given.get("minCandidateNodesPercentage", Args().min_percentage), where,
                 "minCandidateNodesPercentage")
    least = _count(given.get("minCandidateNodesAbsolute", Args().min_absolute), where,
                   "minCandidateNodesAbsolute")
    if pct > 100 or pct == least == 0:
        raise UsageError(f"{where}: {PREEMPTION} args: minCandidateNodesPercentage must be in "
                         "0..100 and not 0 with minCandidateNodesAbsolute 0")
    return Args(pct, least)


def file_strategy(path: str) -> tuple[str, bool]:
    """The scoring strategy configuration file ``path`` sets, and whether it sets one
    (False: the scheduler's default, LeastAllocated)."""
    prof = _profile(_read(path), path)
    fit = _mapping(_mapping(_plugin_args(prof, path).get(FIT), path, f"{FIT} args").get(
        "scoringStrategy"), path, "scoringStrategy")
    return str(fit.get("type", "LeastAllocated")), "type" in fit


def _mapping(value: Any, where: str, field: str) -> dict[str, Any]:
    """``value`` as a mapping (absent: empty), else an error naming ``field``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: {field} must be a mapping, got {value!r}")
    return value


def _entries(value: Any, where: str, field: str) -> list[dict[str, Any]]:
    """``value`` as a list of mappings (absent: empty), else an error naming ``field``."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise UsageError(f"{where}: {field} must be a list of mappings, got {value!r}")
    return value


def _count(value: Any, where: str, field: str) -> int:
    """``value`` as a non-negative integer (YAML's booleans are not), else an error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{where}: {field} {value!r} is not a non-negative integer")
    return value


def _read(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such KubeSchedulerConfiguration file")
    try:
        doc = yaml.safe_load(file.read_text())
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(doc, dict) or doc.get("kind") != "KubeSchedulerConfiguration":
        raise UsageError(f"{path}: not a KubeSchedulerConfiguration (kind is missing or "
                         "another kind)")
    return doc


def _profile(doc: dict[str, Any], where: str) -> dict[str, Any]:
    profiles = _entries(doc.get("profiles"), where, "profiles") or [{}]
    named = [p for p in profiles if p.get("schedulerName", "default-scheduler")
             == "default-scheduler"]
    return (named or profiles)[0]


def _plugin_args(prof: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in _entries(prof.get("pluginConfig"), where, "pluginConfig"):
        if "name" not in item:
            raise UsageError(f"{where}: each pluginConfig entry needs a name")
        out[item["name"]] = item.get("args")
    return out


def _score_weights(prof: dict[str, Any], where: str) -> dict[str, int]:
    """The two plugins' weights after the profile's ``disabled`` then ``enabled`` lists
    (score, then multiPoint, as the framework merges them)."""
    weights = dict(DEFAULT_WEIGHTS)
    plugins = _mapping(prof.get("plugins"), where, "plugins")
    for point in ("multiPoint", "score"):
        sets = _mapping(plugins.get(point), where, f"plugins.{point}")
        for item in _entries(sets.get("disabled"), where, f"plugins.{point}.disabled"):
            name = item.get("name")
            for key in weights:
                if name in ("*", key):
                    weights[key] = 0
        for item in _entries(sets.get("enabled"), where, f"plugins.{point}.enabled"):
            name = item.get("name")
            if name in weights:
                w = _count(item.get("weight", 0), where, f"plugin {name} weight")
                weights[name] = w or DEFAULT_WEIGHTS[name]  # 0: the default weight
    return weights


def _resource_weights(items: Any, where: str) -> np.ndarray:
    out = np.zeros(3, dtype=np.int64)
    for item in _entries(items, where, "resources"):
        name = item.get("name")
        if name not in RESOURCES:
            raise UsageError(f"{where}: resource {name!r} is not one the traces have "
                             f"({', '.join(RESOURCES)})")
        out[RESOURCES.index(name)] = _count(item.get("weight", 1), where,
                                            f"resource {name} weight")
    return out


def _shape(points: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The shape's utilizations and scores (scaled from 0..10 to 0..100), in order."""
    try:
        u = np.array([int(p["utilization"]) for p in points], dtype=np.int64)
        s = np.array([int(p["score"]) for p in points], dtype=np.int64)
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{where}: each shape point needs integer utilization and "
                         "score") from None
    if (len(u) == 0 or np.any(np.diff(u) <= 0) or u.min() < 0 or u.max() > 100
            or s.min() < 0 or s.max() > MAX_CUSTOM_PRIORITY_SCORE):
        raise UsageError(f"{where}: shape utilizations must increase within 0..100 and "
                         "scores lie in 0..10")
    return u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)
