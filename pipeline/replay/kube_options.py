"""Cluster options of the Kubernetes cluster models, resolved and checked, and the cluster
they build (:class:`pipeline.sim.kubernetes.cluster_autoscaler.ClusterAutoscaler`,
:class:`pipeline.sim.kubernetes.karpenter.Karpenter`).

Node groups come from the flags' ``--nodes=MIN:MAX:TYPE``, else from ``node_groups`` (each
type 0..``max_nodes``).  ``max_nodes`` (default: the groups' maxima summed) is the number of
node slots.  Trace units: ``vcpu_per_unit``/``gib_per_unit``, by default from the trace's
stated units (cores: 1 vCPU; GiB: 1, MiB: 1/1024); a normalized trace must say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import UsageError
from pipeline.replay.autoscaler_flags import read_flags, settings
from pipeline.replay.catalog import Catalog, capacities, prices, read_catalog
from pipeline.replay.nodepool import read_nodepool
from pipeline.replay.param_files import file_sha256
from pipeline.sim.cluster import ClusterSpec
from pipeline.sim.kubernetes.cluster_autoscaler import ClusterAutoscaler
from pipeline.sim.kubernetes.karpenter import Karpenter
from pipeline.sim.kubernetes.pool import TypedPool
from pipeline.sim.kubernetes.scale_up import Groups
from pipeline.sim.kubernetes.settings import AutoscalerSettings, NodeGroup, NodePool


def _per_unit(given: float | None, text: str | None, table: dict[str, float], key: str) -> float:
    """``given``, else what the trace's stated unit ``text`` says one unit is."""
    if given is not None:
        return float(given)
    low = (text or "").lower()
    value = next((v for word, v in table.items() if word in low), None)
    if value is None or "normal" in low:
        raise UsageError(f"cluster option '{key}' is needed: the trace's units "
                         f"({text or 'none'}) do not say how large one unit is", field=key)
    return value


def resolve(spec: ClusterSpec) -> tuple[Catalog, AutoscalerSettings, tuple[str, ...]]:
    """The catalog, the settings and the flags accepted but not modelled, of ``spec``."""
    catalog = read_catalog(spec.catalog)
    default = tuple(NodeGroup(t.strip(), 0, max(spec.max_nodes, 1))
                    for t in spec.node_groups.split(",") if t.strip())
    ca, ignored = settings(read_flags(spec.autoscaler_flags), default)
    ca = replace(ca, safe_to_evict=spec.safe_to_evict)
    if not ca.groups:
        raise UsageError("no node group: pass --nodes=MIN:MAX:TYPE or node_groups",
                         field="node_groups")
    for g in ca.groups:
        catalog.index(g.name, "autoscaler_flags --nodes / node_groups")
    return catalog, ca, ignored


def kube_fields(kind: str, vals: Mapping[str, Any], units: Mapping[str, str]) -> dict[str, Any]:
    """The ClusterSpec fields of a Kubernetes cluster (``cluster-autoscaler`` or
    ``karpenter``; files read and checked now, so a mistake stops the run before it starts)."""
    fields: dict[str, Any] = {
        "catalog": str(vals["catalog"]), "boot_delay_s": vals["boot_delay_s"],
        "vcpu_per_unit": _per_unit(vals["vcpu_per_unit"], units.get("cpu"),
                                   {"core": 1.0, "vcpu": 1.0}, "vcpu_per_unit"),
        "gib_per_unit": _per_unit(vals["gib_per_unit"], units.get("mem"),
                                  {"gib": 1.0, "gb": 1.0, "mib": 1 / 1024, "mb": 1 / 1024},
                                  "gib_per_unit"),
        "max_nodes": int(vals["max_nodes"] or 1000),
    }
    fields["catalog_sha256"] = file_sha256(Path(fields["catalog"])) if Path(
        fields["catalog"]).is_file() else ""
    if kind == "karpenter":
        path = str(vals["nodepool"] or "")
        pool = read_nodepool(path, read_catalog(fields["catalog"]))
        fields |= {"nodepool": path, "label": karpenter_label(pool),
                   "nodepool_sha256": file_sha256(Path(path)) if path else ""}
        return fields
    flags = str(vals["autoscaler_flags"] or "")
    fields |= {"autoscaler_flags": flags, "node_groups": str(vals["node_groups"]),
               "safe_to_evict": bool(vals["safe_to_evict"])}
    probe = ClusterSpec(kind="cluster-autoscaler", **fields)
    _, ca, _ = resolve(probe)
    fields["label"] = label(ca)
    fields["max_nodes"] = int(vals["max_nodes"] or sum(g.max_size for g in ca.groups))
    if flags and Path(flags).is_file():
        fields["flags_sha256"] = file_sha256(Path(flags))
    return fields


def karpenter_label(pool: NodePool) -> str:
    """``Karpenter 12 types WhenEmptyOrUnderutilized`` (the pool's types and policy)."""
    n = int(pool.allowed.sum())
    return f"Karpenter {n} type{'s' if n != 1 else ''} {pool.policy}"


def label(ca: AutoscalerSettings) -> str:
    """A short name for the cluster: its node groups' type (or how many types), the expander
    chain unless the default, and whether pods block scale-down."""
    types = ca.groups[0].name if len(ca.groups) == 1 else f"{len(ca.groups)} types"
    expanders = "" if ca.expanders == ("random",) else " " + ",".join(ca.expanders)
    return f"CA {types}{expanders}" + ("" if ca.safe_to_evict else ", no eviction")


def build(spec: ClusterSpec, rng: np.random.Generator) -> ClusterAutoscaler | Karpenter:
    """The Kubernetes cluster of ``spec``."""
    if spec.kind == "karpenter":
        catalog = read_catalog(spec.catalog)
        pool = read_nodepool(spec.nodepool, catalog)
        caps = capacities(catalog, spec.vcpu_per_unit, spec.gib_per_unit)
        typed = TypedPool(tuple(t.name for t in catalog.types), caps, prices(catalog),
                          spec.max_nodes)
        return Karpenter(pool, typed, np.array([spec.vcpu_per_unit, spec.gib_per_unit, 1.0]),
                         spec.boot_delay_s)
    catalog, ca, _ = resolve(spec)
    names = tuple(t.name for t in catalog.types)
    caps = capacities(catalog, spec.vcpu_per_unit, spec.gib_per_unit)
    pool = TypedPool(names, caps, prices(catalog), spec.max_nodes)
    types = np.array([catalog.index(g.name, "node_groups") for g in ca.groups], np.int64)
    alloc = np.array([[t.allocatable_cpu, t.allocatable_memory_gib, t.gpu]
                      for t in catalog.types])[types]
    capacity = np.array([[t.cpu, t.memory_gib, t.gpu] for t in catalog.types])[types]
    groups = Groups(alloc, capacity, prices(catalog)[types])
    unit = np.array([spec.vcpu_per_unit, spec.gib_per_unit, 1.0])
    return ClusterAutoscaler(ca, pool, types, groups, unit, spec.boot_delay_s, rng)
