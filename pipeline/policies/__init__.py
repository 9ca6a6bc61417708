"""Scheduling policies and their registry: ``POLICIES`` maps a name to a class.

``make_policy(name, params)`` is the only place names are turned into objects; the replay
core never sees a name.  ``describe_policies()`` is what ``tracereplay policies`` prints.
The interface every policy implements is documented in :mod:`pipeline.sim.interface`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies.base import Param, PolicyBase, PreemptionProfile
from pipeline.policies.base import resolve_params as _resolve_own
from pipeline.policies.capacity import CapacityScheduler
from pipeline.policies.drf import DominantResourceFairness
from pipeline.policies.fair import FairScheduler
from pipeline.policies.flow import Quincy
from pipeline.policies.gpu.policy import GPU_POLICIES
from pipeline.policies.hpc import EasyBackfill, Fcfs
from pipeline.policies.kubernetes.policy import KubeScheduler
from pipeline.policies.layers import opportunistic as opp_layer
from pipeline.policies.layers import speculation as spec_layer
from pipeline.policies.layers.stack import stack
from pipeline.policies.locality import DelayScheduling
from pipeline.policies.packing import ContainerPacking
from pipeline.policies.reference import RecordedCluster
from pipeline.policies.uniform import YarnUniform

POLICIES: dict[str, type[PolicyBase]] = {
    cls.name: cls for cls in (YarnUniform, ContainerPacking, DominantResourceFairness,
                          FairScheduler, CapacityScheduler, DelayScheduling, RecordedCluster,
                          Quincy, Fcfs, EasyBackfill, KubeScheduler)
}

# Every registered name: the event-replay policies above and the GPU placement policies of
# the workload-inflation experiment (pipeline.policies.gpu.policy; their ``mode`` says so).
ALL_POLICIES: dict[str, type[PolicyBase]] = {**POLICIES, **GPU_POLICIES}

__all__ = ["ALL_POLICIES", "GPU_POLICIES", "POLICIES", "Param", "PolicyBase",
           "PreemptionProfile", "describe_policies", "make_policy", "policy_class",
           "resolve_params"]


def policy_class(name: str) -> type[PolicyBase]:
    """The class registered under ``name`` (UsageError naming the known ones otherwise)."""
    if name not in ALL_POLICIES:
        raise UsageError(f"unknown policy '{name}' (known: {', '.join(sorted(ALL_POLICIES))})")
    return ALL_POLICIES[name]


def resolve_params(cls: type[PolicyBase], raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """``raw`` checked and typed: the policy's own parameters (defaults filled in) and, when
    any is given, the opportunistic layer's ``opp_*`` ones (:mod:`.opportunistic`) and the
    speculation layer's ``spec_*`` ones (:mod:`.speculation`)."""
    rest, opp = opp_layer.split(raw)
    own, spec = spec_layer.split(rest)
    return {**_resolve_own(cls, own), **opp_layer.resolve(cls.name, opp),
            **spec_layer.resolve(cls.name, spec)}


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> Any:
    """A new policy ``name`` with ``params`` checked, typed and defaults filled in; wrapped
    in the opportunistic layer when ``opp_by`` asks for opportunistic containers and in the
    speculation layer when ``spec`` names a rule (both stack:
    :mod:`pipeline.policies.layers.stack`)."""
    cls = policy_class(name)
    resolved = resolve_params(cls, params)
    rest, opp = opp_layer.split(resolved)
    own, spec = spec_layer.split(rest)
    use_opp = bool(opp) and opp.get("opp_by", "none") != "none"
    use_spec = bool(spec) and spec.get("spec", "none") != "none"
    if (use_opp or use_spec) and cls.reference:
        what = "opportunistic containers" if use_opp else "speculative copies"
        raise UsageError(f"policy '{name}' replays the trace's own placements and cannot "
                         f"take {what}")
    layers = {**({"opportunistic": opp} if use_opp else {}),
              **({"speculation": spec} if use_spec else {})}
    return stack(cls(**own), layers)


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
        for name, cls in ALL_POLICIES.items()
    ] + [{
        "name": "opp_* (any policy)",
        "summary": "opportunistic containers and over-allocation layered on the policy",
        "source": "Hadoop 3.3 OpportunisticContainers.md, NodeQueueLoadMonitor, "
                  "ContainerScheduler; YARN-1011 branch (over-allocation)",
        "params": [{"name": key, "default": p.default, "type": p.kind.__name__, "help": p.help}
                   for key, p in opp_layer.OPP_PARAMS.items()],
    }, {
        "name": "spec_* (any policy)",
        "summary": "speculative copies of slow tasks layered on the policy: Hadoop's native "
                   "rule, LATE or the MRv2 speculator",
        "source": "Hadoop 0.20 TaskInProgress; Zaharia et al., OSDI 2008 (LATE); Hadoop 0.21 "
                  "JobInProgress; Hadoop 2/3 DefaultSpeculator, mapred-default.xml",
        "params": [{"name": key, "default": p.default, "type": p.kind.__name__, "help": p.help,
                    **({"choices": list(p.choices)} if p.choices else {})}
                   for key, p in spec_layer.SPEC_PARAMS.items()],
    }]
