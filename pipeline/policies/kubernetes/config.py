"""A scheduler profile from a ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``)
as users write it, or the default profile (Kubernetes v1.31).

Read: ``percentageOfNodesToScore`` (top level, or the profile's, which wins); the first
profile, or the one named ``default-scheduler`` when there are several; its score plugins'
weights (``plugins.score`` or ``plugins.multiPoint``, ``enabled``/``disabled`` with
``'*'``); ``NodeResourcesFit``'s ``scoringStrategy`` (``type``, ``resources`` with weights,
``requestedToCapacityRatio.shape``) and ``NodeResourcesBalancedAllocation``'s
``resources``.  Defaults where the file is silent are the v1.31 defaults: ``LeastAllocated``
on cpu and memory with weight 1, BalancedAllocation on cpu and memory, both plugins with
weight 1, adaptive ``percentageOfNodesToScore``.  Other plugins score nothing that differs
between nodes for pods without affinity, tolerations, images or spread constraints (the
traces have none), so they are read and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pipeline.errors import UsageError
from pipeline.policies.kubernetes.kernel import Profile
from pipeline.policies.kubernetes.scoring import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_NODE_SCORE,
    RESOURCES,
    STRATEGIES,
)

FIT, BALANCED = "NodeResourcesFit", "NodeResourcesBalancedAllocation"
DEFAULT_WEIGHTS = {FIT: 1, BALANCED: 1}  # v1.31 default profile's score weights
DEFAULT_RESOURCES = ({"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1})
# a RequestedToCapacityRatio chosen with no shape: bin packing (the docs' example)
PACKING_SHAPE = ({"utilization": 0, "score": 0}, {"utilization": 100, "score": 10})


@dataclass(frozen=True)
class Settings:
    """What the policy runs with: the compiled :class:`~.kernel.Profile` and the
    ``percentageOfNodesToScore`` (0: adaptive)."""

    profile: Profile
    percentage: int


def settings(path: str | None, strategy: str | None, percentage: int | None,
             max_pods: int) -> Settings:
    """The profile of ``path`` (None: the default profile), with ``strategy`` and
    ``percentage`` overriding the file's when given."""
    doc = _read(path) if path else {}
    where = path or "default profile"
    prof = _profile(doc, where)
    args = _plugin_args(prof, where)
    fit = args.get(FIT, {}).get("scoringStrategy") or {}
    kind = strategy or fit.get("type", "LeastAllocated")
    if kind not in STRATEGIES:
        raise UsageError(f"{where}: scoringStrategy.type {kind!r} is not one of "
                         f"{', '.join(STRATEGIES)}")
    shape = (fit.get("requestedToCapacityRatio") or {}).get("shape") or PACKING_SHAPE
    shape_u, shape_s = _shape(shape, where)
    bal = args.get(BALANCED, {}).get("resources") or DEFAULT_RESOURCES
    weights = _score_weights(prof, where)
    pct = percentage if percentage is not None else int(
        prof.get("percentageOfNodesToScore", doc.get("percentageOfNodesToScore")) or 0)
    if not 0 <= pct <= 100:
        raise UsageError(f"{where}: percentageOfNodesToScore {pct} is not in 0..100")
    profile = Profile(_resource_weights(fit.get("resources") or DEFAULT_RESOURCES, where),
                      _resource_weights(bal, where) > 0, shape_u, shape_s, STRATEGIES[kind],
                      weights[FIT], weights[BALANCED], max_pods)
    return Settings(profile, pct)


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
    profiles = doc.get("profiles") or [{}]
    if not isinstance(profiles, list) or not all(isinstance(p, dict) for p in profiles):
        raise UsageError(f"{where}: profiles must be a list of mappings")
    named = [p for p in profiles if p.get("schedulerName", "default-scheduler")
             == "default-scheduler"]
    return (named or profiles)[0]


def _plugin_args(prof: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in prof.get("pluginConfig") or []:
        if not isinstance(item, dict) or "name" not in item:
            raise UsageError(f"{where}: each pluginConfig entry needs a name")
        out[item["name"]] = item.get("args") or {}
    return out


def _score_weights(prof: dict[str, Any], where: str) -> dict[str, int]:
    """The two plugins' weights after the profile's ``disabled`` then ``enabled`` lists
    (score, then multiPoint, as the framework merges them)."""
    weights = dict(DEFAULT_WEIGHTS)
    plugins = prof.get("plugins") or {}
    for point in ("multiPoint", "score"):
        sets = plugins.get(point) or {}
        for item in sets.get("disabled") or []:
            name = item.get("name")
            for key in weights:
                if name in ("*", key):
                    weights[key] = 0
        for item in sets.get("enabled") or []:
            name = item.get("name")
            if name in weights:
                w = item.get("weight", DEFAULT_WEIGHTS[name]) or DEFAULT_WEIGHTS[name]
                if not isinstance(w, int) or w < 0:
                    raise UsageError(f"{where}: plugin {name} weight {w!r} is not a "
                                     "non-negative integer")
                weights[name] = w
    return weights


def _resource_weights(items: Any, where: str) -> np.ndarray:
    out = np.zeros(3, dtype=np.int64)
    for item in items:
        name, w = item.get("name"), item.get("weight", 1)
        if name not in RESOURCES:
            raise UsageError(f"{where}: resource {name!r} is not one the traces have "
                             f"({', '.join(RESOURCES)})")
        if not isinstance(w, int) or w < 0:
            raise UsageError(f"{where}: resource {name} weight {w!r} is not a "
                             "non-negative integer")
        out[RESOURCES.index(name)] = w
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
