"""Scheduling policies and their registry: ``POLICIES`` maps a name to a class.

``make_policy(name, params)`` is the only place names are turned into objects; the replay
core never sees a name.  ``describe_policies()`` is what ``tracereplay policies`` prints.
The interface every policy implements is documented in :mod:`pipeline.sim.interface`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies import opportunistic as opp_layer
from pipeline.policies.base import Param, PolicyBase, PreemptionProfile
from pipeline.policies.base import resolve_params as _resolve_own
from pipeline.policies.capacity import CapacityScheduler
from pipeline.policies.drf import DominantResourceFairness
from pipeline.policies.fair import FairScheduler
from pipeline.policies.flow import Quincy
from pipeline.policies.locality import DelayScheduling
from pipeline.policies.packing import ContainerPacking
from pipeline.policies.reference import RecordedCluster
from pipeline.policies.uniform import YarnUniform

POLICIES: dict[str, type[PolicyBase]] = {
    cls.name: cls for cls in (YarnUniform, ContainerPacking, DominantResourceFairness,
                          FairScheduler, CapacityScheduler, DelayScheduling, RecordedCluster,
                          Quincy)
}

__all__ = ["POLICIES", "Param", "PolicyBase", "PreemptionProfile", "describe_policies",
           "make_policy", "policy_class", "resolve_params"]


def policy_class(name: str) -> type[PolicyBase]:
    """The class registered under ``name`` (UsageError naming the known ones otherwise)."""
    if name not in POLICIES:
        raise UsageError(f"unknown policy '{name}' (known: {', '.join(sorted(POLICIES))})")
    return POLICIES[name]


def resolve_params(cls: type[PolicyBase], raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """``raw`` checked and typed: the policy's own parameters (defaults filled in) and, when
    any is given, the opportunistic layer's ``opp_*`` ones (:mod:`.opportunistic`)."""
    own, layer = opp_layer.split(raw)
    return {**_resolve_own(cls, own), **opp_layer.resolve(cls.name, layer)}


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> Any:
    """A new policy ``name`` with ``params`` checked, typed and defaults filled in; wrapped
    in the opportunistic layer when ``opp_by`` asks for opportunistic containers."""
    cls = policy_class(name)
    resolved = resolve_params(cls, params)
    own, layer = opp_layer.split(resolved)
    policy = cls(**own)
    if layer and layer.get("opp_by", "none") != "none":
        if cls.reference:
            raise UsageError(f"policy '{name}' replays the trace's own placements and cannot "
                             "take opportunistic containers")
        return opp_layer.Opportunistic(policy, layer)
    return policy


def describe_policies() -> list[dict[str, Any]]:
    """Every policy with its one-line summary, source and parameters (default, type, help)."""
    return [
        {
            "name": name, "summary": cls.summary, "source": cls.source,
            "params": [
                {"name": key, "default": p.default, "type": p.kind.__name__, "help": p.help,
                 **({"choices": list(p.choices)} if p.choices else {}),
                 **({"min": p.low} if p.low is not None else {}),
                 **({"max": p.high} if p.high is not None else {})}
                for key, p in cls.PARAMS.items()
            ],
        }
        for name, cls in POLICIES.items()
    ] + [{
        "name": "opp_* (any policy)",
        "summary": "opportunistic containers and over-allocation layered on the policy",
        "source": "Hadoop 3.3 OpportunisticContainers.md, NodeQueueLoadMonitor, "
                  "ContainerScheduler; YARN-1011 branch (over-allocation)",
        "params": [{"name": key, "default": p.default, "type": p.kind.__name__, "help": p.help}
                   for key, p in opp_layer.OPP_PARAMS.items()],
    }]
