"""CapacityScheduler configuration: a real ``capacity-scheduler.xml`` or inline parameters.

Property names and defaults follow CapacityScheduler.md (Hadoop 3.3) and
``CapacitySchedulerConfiguration``: ``yarn.scheduler.capacity.<queue-path>.queues``,
``.capacity`` (percent, or weight ``2w``), ``.maximum-capacity`` (-1 = 100),
``.user-limit-factor`` (1), ``.minimum-user-limit-percent`` (100),
``.maximum-applications``, ``.maximum-am-resource-percent``, ``.ordering-policy`` (leaf:
``fifo``/``fair``; parent: ``utilization``/``priority-utilization``), ``.priority``,
``.ordering-policy.fair.enable-size-based-weight``, ``.user-settings.<user>.weight``; global
``yarn.scheduler.capacity.maximum-applications`` (10000),
``...maximum-am-resource-percent`` (0.1), ``...resource-calculator``,
``...queue-mappings``, ``...queue-mappings-override.enable`` (false),
``...node-locality-delay`` (40), ``...rack-locality-additional-delay`` (-1),
``...rack-locality-full-reset`` (true); preemption from the
``yarn.resourcemanager.monitor.capacity.preemption.*`` names (normally in yarn-site.xml,
accepted here too) and ``yarn.resourcemanager.scheduler.monitor.enable``.

Node labels and absolute-resource capacities (``capacity=[memory=10240,vcores=12]``) are
read by :mod:`.labels`; the cluster's labels come from the ``node_labels`` parameter or
the tracereplay-specific property ``tracereplay.node-labels`` (:mod:`.partitions`).
Absolute capacities are only read from files (the inline ``queues`` form has no room for
``[...]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.policies.capacity.formulas import DEFAULT, DOMINANT
from pipeline.policies.capacity.labels import absolute_resource, queue_caps
from pipeline.policies.capacity.partitions import LabelSpec, parse_node_labels
from pipeline.policies.capacity.preemption import PreemptionSettings
from pipeline.policies.capacity.reader import Reader, read_properties
from pipeline.policies.capacity.resources import QueueCaps, flat_caps
from pipeline.policies.queues import (
    PERCENT,
    WEIGHT,
    MappingRule,
    QueueConfig,
    QueuePlacement,
    QueueTree,
    parse_inline,
    parse_mappings,
)

P = "yarn.scheduler.capacity."
PRE = "yarn.resourcemanager.monitor.capacity.preemption."
NODE_LABELS = "tracereplay.node-labels"  # tracereplay extension (see partitions.py)
CALCULATORS = {
    "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator": DEFAULT,
    "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator": DOMINANT,
    DEFAULT: DEFAULT, DOMINANT: DOMINANT,
}
LEAF_ORDERING = ("fifo", "fair")
PARENT_ORDERING = ("utilization", "priority-utilization")


@dataclass(frozen=True)
class Locality:
    """Delay scheduling settings (CapacitySchedulerConfiguration defaults)."""

    node_delay: int = 40
    rack_additional_delay: int = -1
    full_reset: bool = True


@dataclass
class CapacityConfig:
    """Everything the policy needs from its configuration (tree props hold per-queue ones)."""

    tree: QueueTree
    mappings: list[MappingRule] = field(default_factory=list)
    override: bool = False
    calculator: str = DEFAULT
    max_applications: int = 10000
    max_am_percent: float = 0.1
    preemption: PreemptionSettings = field(default_factory=PreemptionSettings)
    labels: list[LabelSpec] = field(default_factory=list)
    caps: QueueCaps | None = None
    locality: Locality = field(default_factory=Locality)

    def __post_init__(self) -> None:
        if self.caps is None:  # DEFAULT percentages only: every label 0% (root 100%)
            am = self.tree.leaf_prop("max_am_percent", self.max_am_percent)
            self.caps = flat_caps(self.tree, 1 + len(self.labels),
                                  np.array([True, *(s.exclusive for s in self.labels)]),
                                  np.array(am, dtype=np.float64),
                                  ("", *(s.name for s in self.labels)))


def from_xml(path: Path | str, node_labels: str = "") -> CapacityConfig:
    """Parse a ``capacity-scheduler.xml`` (see module doc for what is read); a non-empty
    ``node_labels`` (the policy parameter) replaces the file's ``tracereplay.node-labels``."""
    path = Path(path)
    r = Reader(read_properties(path), str(path))
    if P + "root.queues" not in r.props:
        raise r.fail(P + "root.queues", "missing (the root queue needs children)")
    configs = _queue_configs(r, "root")
    _check_absolute(r, configs)
    tree = QueueTree(configs, source=str(path))
    labels = (parse_node_labels(node_labels, source="capacity-scheduler parameter "
                                                    "'node_labels'") if node_labels else
              parse_node_labels(r.props.get(NODE_LABELS, ""),
                                source=f"{path}: property '{NODE_LABELS}'"))
    max_am = r.number(P + "maximum-am-resource-percent", 0.1, 0, 1)
    caps = queue_caps(r, tree, labels, tree.leaf_prop("max_am_percent", max_am))
    mappings = parse_mappings(r.props.get(P + "queue-mappings", ""),
                              source=f"{path}: property '{P}queue-mappings'")
    QueuePlacement(tree, mappings)  # a mapping to a queue that is not a leaf fails here
    calc = r.props.get(P + "resource-calculator", DEFAULT)
    if calc not in CALCULATORS:
        raise r.fail(P + "resource-calculator", f"unknown calculator {calc!r}")
    return CapacityConfig(
        tree=tree, mappings=mappings,
        override=r.flag(P + "queue-mappings-override.enable", False),
        calculator=CALCULATORS[calc],
        max_applications=r.integer(P + "maximum-applications", 10000, 0),
        max_am_percent=max_am, preemption=_preemption(r), labels=labels, caps=caps,
        locality=Locality(r.integer(P + "node-locality-delay", 40, -1),
                          r.integer(P + "rack-locality-additional-delay", -1, -1),
                          r.flag(P + "rack-locality-full-reset", True)),
    )


def _preemption(r: Reader) -> PreemptionSettings:
    return PreemptionSettings(
        enabled=r.flag("yarn.resourcemanager.scheduler.monitor.enable", False),
        observe_only=r.flag(PRE + "observe_only", False),
        interval_s=r.number(PRE + "monitoring_interval", 3000, 1) / 1000.0,
        wait_before_kill_s=r.number(PRE + "max_wait_before_kill", 15000, 0) / 1000.0,
        per_round=r.number(PRE + "total_preemption_per_round", 0.1, 0, 1),
        dead_zone=r.number(PRE + "max_ignored_over_capacity", 0.1, 0),
        natural_termination=r.number(PRE + "natural_termination_factor", 0.2, 0, 1),
    )


def _queue_configs(r: Reader, path: str) -> list[QueueConfig]:
    """This queue's config and its descendants' (depth first)."""
    key = f"{P}{path}."
    kids = [k.strip() for k in r.props.get(key + "queues", "").split(",") if k.strip()]
    cap_text = r.props.get(key + "capacity", "100" if path == "root" else "")
    if not cap_text:
        raise r.fail(key + "capacity", "missing")
    props = _queue_props(r, key, leaf=not kids)
    if cap_text.startswith("[") and path != "root":
        own = _absolute_config(r, key, path, props)
    else:
        mode = WEIGHT if cap_text.lower().endswith("w") else PERCENT
        try:
            capacity = float(cap_text[:-1] if mode == WEIGHT else cap_text)
        except ValueError:
            raise r.fail(key + "capacity", f"{cap_text!r} is not a number") from None
        if r.props.get(key + "maximum-capacity", "").startswith("["):
            raise r.fail(key + "maximum-capacity", "an absolute maximum needs the capacity "
                                                   "in absolute resources too")
        max_cap = r.number(key + "maximum-capacity", 100.0, -1, 100)
        own = QueueConfig(path, capacity, mode, 100.0 if max_cap == -1 else max_cap, props)
    return [own] + [c for kid in kids for c in _queue_configs(r, f"{path}.{kid}")]


def _absolute_config(r: Reader, key: str, path: str, props: dict[str, Any]) -> QueueConfig:
    """An absolute-resource queue.  The tree gets a placeholder (a weight equal to the
    configured memory); the effective guarantee is computed per call (resources.py)."""
    props["abs_min"] = absolute_resource(r, key + "capacity")
    props["abs_max"] = None
    max_key = key + "maximum-capacity"
    max_text = r.props.get(max_key, "").strip()
    if max_text.startswith("["):
        props["abs_max"] = absolute_resource(r, max_key, unset=np.nan)
        if (props["abs_min"] > props["abs_max"]).any():
            raise r.fail(key + "capacity", "the minimum is above the maximum-capacity")
    elif max_text not in ("", "-1", "100", "100.0"):
        raise r.fail(max_key, "a queue with an absolute capacity takes an absolute "
                              "maximum-capacity ([memory=...,vcores=...])")
    return QueueConfig(path, float(props["abs_min"][1]), WEIGHT, 100.0, props)


def _check_absolute(r: Reader, configs: list[QueueConfig]) -> None:
    """Absolute queues: siblings and parent/child share the mode; minimums fit the
    parent's, maximums stay under it (per resource)."""
    by_path = {c.path: c for c in configs}
    kids: dict[str, list[QueueConfig]] = {}
    for c in configs:
        if c.parent_path is not None:
            kids.setdefault(c.parent_path, []).append(c)
    for parent, children in kids.items():
        flags = {"abs_min" in c.props for c in children}
        where = f"{P}{children[0].path}.capacity"
        if len(flags) > 1:
            raise r.fail(where, f"children of '{parent}' mix absolute resources and "
                                "percentages/weights")
        up = by_path[parent].props
        if parent != "root" and flags != {"abs_min" in up}:
            raise r.fail(where, f"'{parent}' and its children should use either percentage "
                                "based capacity or absolute resources together")
        if parent == "root" or flags != {True}:
            continue
        if (sum(c.props["abs_min"] for c in children) > up["abs_min"] * (1 + 1e-9)).any():
            raise r.fail(f"{P}{parent}.capacity", "the children's minimum resources add up "
                                                  "to more than the queue's")
        for c in children:
            if up["abs_max"] is not None and c.props["abs_max"] is not None and (
                    c.props["abs_max"] > up["abs_max"] * (1 + 1e-9)).any():
                raise r.fail(f"{P}{c.path}.maximum-capacity", f"above the maximum of "
                                                              f"'{parent}'")


def _queue_props(r: Reader, key: str, *, leaf: bool) -> dict[str, Any]:
    props: dict[str, Any] = {
        "user_limit_factor": r.number(key + "user-limit-factor", 1.0, -1),
        "minimum_user_limit_percent": r.number(key + "minimum-user-limit-percent", 100, 0, 100),
        "priority": r.integer(key + "priority", 0),
        "ordering": r.choice(key + "ordering-policy", "fifo" if leaf else "utilization",
                             LEAF_ORDERING if leaf else PARENT_ORDERING),
        "size_based_weight": r.flag(key + "ordering-policy.fair.enable-size-based-weight",
                                    False),
    }
    if key + "maximum-applications" in r.props:
        props["maximum_applications"] = r.integer(key + "maximum-applications", 0, 0)
    if key + "maximum-am-resource-percent" in r.props:
        props["max_am_percent"] = r.number(key + "maximum-am-resource-percent", 0.1, 0, 1)
    prefix = key + "user-settings."
    weights = {}
    for name in r.props:
        if name.startswith(prefix) and name.endswith(".weight"):
            user = name[len(prefix):-len(".weight")]
            weights[user] = r.number(name, 1.0, 0)
    props["user_weights"] = weights
    return props


def from_inline(queues: str, mappings: str, *, user_limit_factor: float,
                minimum_user_limit_percent: float, ordering: str, calculator: str,
                max_am_percent: float, preemption: bool,
                max_applications: int = 10000, node_labels: str = "",
                locality: Locality | None = None) -> CapacityConfig:
    """The quick form: ``queues="a:50,b:50"`` with the same settings on every leaf.

    With ``node_labels`` every queue can access every label with a label capacity of 0
    (Hadoop's defaults), so labelled nodes only serve DEFAULT requests non-exclusively;
    label capacities need a capacity-scheduler.xml.
    """
    base = parse_inline(queues, source="capacity-scheduler parameter 'queues'")
    configs = [QueueConfig(c.path, c.capacity, c.mode, c.max_capacity, {
        "user_limit_factor": user_limit_factor,
        "minimum_user_limit_percent": minimum_user_limit_percent,
        "priority": 0, "ordering": ordering if base.is_leaf[i] else "utilization",
        "size_based_weight": False, "user_weights": {},
    }) for i, c in enumerate(base.configs)]
    tree = QueueTree(configs, source="capacity-scheduler parameter 'queues'")
    rules = parse_mappings(mappings, source="capacity-scheduler parameter 'mappings'")
    labels = parse_node_labels(node_labels,
                               source="capacity-scheduler parameter 'node_labels'")
    return CapacityConfig(tree=tree, mappings=rules, calculator=calculator,
                          max_am_percent=max_am_percent, max_applications=max_applications,
                          preemption=PreemptionSettings(enabled=preemption), labels=labels,
                          locality=locality or Locality())
