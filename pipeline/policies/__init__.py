"""Scheduling policies and their registry: ``POLICIES`` maps a name to a class.

``make_policy(name, params)`` is the only place names are turned into objects; the replay
core never sees a name.  ``describe_policies()`` is what ``tracereplay policies`` prints.
The interface every policy implements is documented in :mod:`pipeline.sim.interface`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies.base import Param, PolicyBase, PreemptionProfile, resolve_params
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


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> PolicyBase:
    """A new policy ``name`` with ``params`` checked, typed and defaults filled in."""
    cls = policy_class(name)
    return cls(**resolve_params(cls, params))


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
    ]
