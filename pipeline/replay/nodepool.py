"""A Karpenter NodePool (``karpenter.sh/v1``), as users write it, read against the catalog.

Read: ``spec.template.spec.requirements`` (which catalog types the pool may launch),
``spec.limits`` (``cpu``, ``memory``: the most the pool may hold), and ``spec.disruption``
(``consolidationPolicy``: ``WhenEmpty``, ``WhenEmptyOrUnderutilized`` (default) or
``Balanced``; ``consolidateAfter``: a Go duration or ``Never``, default ``0s``; ``budgets``:
``nodes`` as a count or a percent, optional ``reasons``; default one budget of ``10%``).

Requirement keys that select instance types: ``node.kubernetes.io/instance-type``,
``karpenter.sh/capacity-type``, and the AWS provider's ``karpenter.k8s.aws/instance-family``
(``m5``), ``-category`` (``m``), ``-generation`` (``5``), ``-cpu``, ``-memory`` (MiB) and
``-gpu-count``; operators ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``.
Keys every catalog type satisfies here (``kubernetes.io/arch``, ``kubernetes.io/os``,
``topology.kubernetes.io/zone``, the pool's own labels) select nothing out.  Budgets with a
``schedule`` are refused (the trace's clock has no calendar).  A mistake is a one-line error
naming the file and the field.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pipeline.errors import UsageError
from pipeline.replay.autoscaler_flags import parse_duration
from pipeline.replay.catalog import Catalog, InstanceType
from pipeline.sim.kubernetes.settings import POLICIES, REASONS, Budget, NodePool

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
AWS = "karpenter.k8s.aws/"
_QUANTITY = re.compile(r"^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_SCALE = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2.0**10,
          "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def read_nodepool(path: str | None, catalog: Catalog) -> NodePool:
    """The NodePool of ``path`` (None or empty: the default pool, every catalog type)."""
    if not path:
        return NodePool("default", np.ones(len(catalog.types), dtype=np.bool_))
    p = Path(path)
    if not p.is_file():
        raise UsageError("no such NodePool file", p, field="nodepool")
    try:
        docs = [d for d in yaml.safe_load_all(p.read_text()) if d is not None]
    except yaml.YAMLError as exc:
        raise UsageError(f"not valid YAML ({getattr(exc, 'problem', exc)})", p) from None
    pools = [d for d in docs if isinstance(d, dict) and d.get("kind") == "NodePool"]
    if len(pools) != 1:
        raise UsageError(f"expected one NodePool (kind: NodePool), found {len(pools)}", p)
    doc = pools[0]
    spec = _mapping(doc.get("spec"), p, "spec")
    template = _mapping(_mapping(spec.get("template"), p, "spec.template").get("spec"), p,
                        "spec.template.spec")
    allowed = np.ones(len(catalog.types), dtype=np.bool_)
    for i, req in enumerate(_list(template.get("requirements"), p,
                                  "spec.template.spec.requirements")):
        allowed &= _requirement(req, catalog, p, f"spec.template.spec.requirements[{i}]")
    if not allowed.any():
        raise UsageError("the requirements leave no instance type of the catalog", p,
                         field="spec.template.spec.requirements")
    limits = _mapping(spec.get("limits"), p, "spec.limits")
    disruption = _mapping(spec.get("disruption"), p, "spec.disruption")
    policy = str(disruption.get("consolidationPolicy", "WhenEmptyOrUnderutilized"))
    if policy not in POLICIES:
        raise UsageError(f"must be one of {', '.join(POLICIES)} (got {policy!r})", p,
                         field="spec.disruption.consolidationPolicy")
    after = str(disruption.get("consolidateAfter", "0s"))
    try:
        after_s = math.inf if after == "Never" else parse_duration(after, "consolidateAfter")
    except UsageError:
        raise UsageError(f"not a duration or Never (got {after!r}; e.g. 0s, 5m, 1h)", p,
                         field="spec.disruption.consolidateAfter") from None
    budgets = tuple(_budget(b, p, f"spec.disruption.budgets[{i}]") for i, b in enumerate(
        _list(disruption.get("budgets", [{"nodes": "10%"}]), p, "spec.disruption.budgets")))
    name = str(_mapping(doc.get("metadata"), p, "metadata").get("name", "default"))
    return NodePool(name, allowed,
                    _quantity(limits.get("cpu"), p, "spec.limits.cpu"),
                    _quantity(limits.get("memory"), p, "spec.limits.memory") / 2.0**30,
                    policy, after_s, budgets)


def _requirement(req: Any, catalog: Catalog, p: Path, field: str) -> np.ndarray:
    """Which catalog types satisfy one requirement."""
    req = _mapping(req, p, field)
    key, op = str(req.get("key", "")), str(req.get("operator", ""))
    if op not in OPERATORS:
        raise UsageError(f"operator must be one of {', '.join(OPERATORS)} (got {op!r})", p,
                         field=f"{field}.operator")
    values = [str(v) for v in _list(req.get("values"), p, f"{field}.values")]
    labels = [_label(t, key) for t in catalog.types]
    if all(v is None for v in labels) and key != "karpenter.sh/capacity-type":
        return np.ones(len(labels), dtype=np.bool_)  # not a label of instance types here
    out = []
    for value in labels:
        has = value is not None
        if op == "In":
            out.append(has and value in values)
        elif op == "NotIn":
            out.append(not has or value not in values)
        elif op == "Exists":
            out.append(has)
        elif op == "DoesNotExist":
            out.append(not has)
        else:
            if len(values) != 1 or not values[0].lstrip("-").isdigit():
                raise UsageError(f"{op} takes one integer value", p, field=f"{field}.values")
            ok = has and value.isdigit()
            bound = int(values[0])
            out.append(ok and (int(value) > bound if op == "Gt" else int(value) < bound))
    return np.array(out, dtype=np.bool_)


def _label(t: InstanceType, key: str) -> str | None:
    """Instance type ``t``'s value of well-known label ``key`` (None: it has none)."""
    family, _, _size = t.name.partition(".")
    found = re.match(r"^([a-z]+)(\d+)", family)
    values = {
        "node.kubernetes.io/instance-type": t.name,
        "karpenter.sh/capacity-type": t.capacity_type,
        AWS + "instance-family": family,
        AWS + "instance-category": found.group(1) if found else None,
        AWS + "instance-generation": found.group(2) if found else None,
        AWS + "instance-cpu": f"{t.cpu:g}",
        AWS + "instance-memory": f"{t.memory_gib * 1024:g}",
        AWS + "instance-gpu-count": f"{t.gpu:g}",
    }
    return values.get(key)


def _budget(raw: Any, p: Path, field: str) -> Budget:
    b = _mapping(raw, p, field)
    if "schedule" in b or "duration" in b:
        raise UsageError("budgets with a schedule are not modelled (the trace's clock has "
                         "no calendar)", p, field=f"{field}.schedule")
    nodes = str(b.get("nodes", "10%")).strip()
    percent = nodes.endswith("%")
    try:
        value = float(nodes[:-1] if percent else nodes)
    except ValueError:
        value = -1.0
    if value < 0 or (not percent and not value.is_integer()):
        raise UsageError(f"nodes must be a count or a percent (got {nodes!r})", p,
                         field=f"{field}.nodes")
    reasons = tuple(str(r) for r in _list(b.get("reasons"), p, f"{field}.reasons"))
    bad = [r for r in reasons if r not in REASONS]
    if bad:
        raise UsageError(f"unknown reason {bad[0]!r} (known: {', '.join(REASONS)})", p,
                         field=f"{field}.reasons")
    return Budget(value, percent, reasons)


def _quantity(raw: Any, p: Path, field: str) -> float:
    """A Kubernetes quantity (``1000``, ``500m``, ``1000Gi``) as a number; absent: inf."""
    if raw is None:
        return math.inf
    found = _QUANTITY.match(str(raw).strip())
    if not found:
        raise UsageError(f"not a quantity (got {raw!r}; e.g. 1000, 500m, 1000Gi)", p,
                         field=field)
    return float(found.group(1)) * _SCALE[found.group(2)]


def _mapping(value: Any, p: Path, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"must be a mapping, got {value!r}", p, field=field)
    return value


def _list(value: Any, p: Path, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"must be a list, got {value!r}", p, field=field)
    return value
