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
``...queue-mappings``, ``...queue-mappings-override.enable`` (false); preemption from the
``yarn.resourcemanager.monitor.capacity.preemption.*`` names (normally in yarn-site.xml,
accepted here too) and ``yarn.resourcemanager.scheduler.monitor.enable``.

Not modelled (a UsageError names the property): absolute-resource capacities
(``[memory=...]``) and node-label capacities (``accessible-node-labels.<label>.*``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies.capacity.formulas import DEFAULT, DOMINANT
from pipeline.policies.capacity.preemption import PreemptionSettings
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
CALCULATORS = {
    "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator": DEFAULT,
    "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator": DOMINANT,
    DEFAULT: DEFAULT, DOMINANT: DOMINANT,
}
LEAF_ORDERING = ("fifo", "fair")
PARENT_ORDERING = ("utilization", "priority-utilization")


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


def read_properties(path: Path) -> dict[str, str]:
    """``name -> value`` of a Hadoop ``<configuration>`` file (UsageError if unreadable)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise UsageError(f"{path}: cannot read Hadoop configuration ({exc})") from None
    props = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name is None:
            raise UsageError(f"{path}: a <property> has no <name>")
        props[name.strip()] = (value or "").strip()
    return props


class _Reader:
    """Typed access to properties with errors naming the file and property."""

    def __init__(self, props: dict[str, str], source: str) -> None:
        self.props, self.source = props, source

    def fail(self, name: str, why: str) -> UsageError:
        return UsageError(f"{self.source}: property '{name}': {why}")

    def number(self, name: str, default: float, low: float | None = None,
               high: float | None = None) -> float:
        if name not in self.props:
            return default
        try:
            value = float(self.props[name])
        except ValueError:
            raise self.fail(name, f"{self.props[name]!r} is not a number") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.fail(name, f"{value:g} is outside [{low}, {high}]")
        return value

    def flag(self, name: str, default: bool) -> bool:
        text = self.props.get(name, str(default)).lower()
        if text not in ("true", "false"):
            raise self.fail(name, f"{text!r} is not true or false")
        return text == "true"

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.props.get(name, default)
        if value not in choices:
            raise self.fail(name, f"{value!r} is not one of {', '.join(choices)}")
        return value


def from_xml(path: Path | str) -> CapacityConfig:
    """Parse a ``capacity-scheduler.xml`` (see module doc for what is read)."""
    path = Path(path)
    r = _Reader(read_properties(path), str(path))
    for name in r.props:
        if ".accessible-node-labels." in name and name.endswith("capacity"):
            raise r.fail(name, "node-label capacities are not modelled by tracereplay")
    if P + "root.queues" not in r.props:
        raise r.fail(P + "root.queues", "missing (the root queue needs children)")
    configs = _queue_configs(r, "root")
    tree = QueueTree(configs, source=str(path))
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
        max_applications=int(r.number(P + "maximum-applications", 10000, 0)),
        max_am_percent=r.number(P + "maximum-am-resource-percent", 0.1, 0, 1),
        preemption=_preemption(r),
    )


def _preemption(r: _Reader) -> PreemptionSettings:
    return PreemptionSettings(
        enabled=r.flag("yarn.resourcemanager.scheduler.monitor.enable", False),
        observe_only=r.flag(PRE + "observe_only", False),
        interval_s=r.number(PRE + "monitoring_interval", 3000, 1) / 1000.0,
        wait_before_kill_s=r.number(PRE + "max_wait_before_kill", 15000, 0) / 1000.0,
        per_round=r.number(PRE + "total_preemption_per_round", 0.1, 0, 1),
        dead_zone=r.number(PRE + "max_ignored_over_capacity", 0.1, 0),
        natural_termination=r.number(PRE + "natural_termination_factor", 0.2, 0, 1),
    )


def _queue_configs(r: _Reader, path: str) -> list[QueueConfig]:
    """This queue's config and its descendants' (depth first)."""
    key = f"{P}{path}."
    kids = [k.strip() for k in r.props.get(key + "queues", "").split(",") if k.strip()]
    cap_text = r.props.get(key + "capacity", "100" if path == "root" else "")
    if not cap_text:
        raise r.fail(key + "capacity", "missing")
    if cap_text.startswith("["):
        raise r.fail(key + "capacity", "absolute resources are not modelled by tracereplay")
    mode = WEIGHT if cap_text.lower().endswith("w") else PERCENT
    try:
        capacity = float(cap_text[:-1] if mode == WEIGHT else cap_text)
    except ValueError:
        raise r.fail(key + "capacity", f"{cap_text!r} is not a number") from None
    max_cap = r.number(key + "maximum-capacity", 100.0, -1, 100)
    props = _queue_props(r, key, leaf=not kids)
    own = QueueConfig(path, capacity, mode, 100.0 if max_cap == -1 else max_cap, props)
    return [own] + [c for kid in kids for c in _queue_configs(r, f"{path}.{kid}")]


def _queue_props(r: _Reader, key: str, *, leaf: bool) -> dict[str, Any]:
    props: dict[str, Any] = {
        "user_limit_factor": r.number(key + "user-limit-factor", 1.0, -1),
        "minimum_user_limit_percent": r.number(key + "minimum-user-limit-percent", 100, 0, 100),
        "priority": int(r.number(key + "priority", 0)),
        "ordering": r.choice(key + "ordering-policy", "fifo" if leaf else "utilization",
                             LEAF_ORDERING if leaf else PARENT_ORDERING),
        "size_based_weight": r.flag(key + "ordering-policy.fair.enable-size-based-weight",
                                    False),
    }
    if key + "maximum-applications" in r.props:
        props["maximum_applications"] = int(r.number(key + "maximum-applications", 0, 0))
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
                max_applications: int = 10000) -> CapacityConfig:
    """The quick form: ``queues="a:50,b:50"`` with the same settings on every leaf."""
    base = parse_inline(queues, source="capacity-scheduler parameter 'queues'")
    configs = [QueueConfig(c.path, c.capacity, c.mode, c.max_capacity, {
        "user_limit_factor": user_limit_factor,
        "minimum_user_limit_percent": minimum_user_limit_percent,
        "priority": 0, "ordering": ordering if base.is_leaf[i] else "utilization",
        "size_based_weight": False, "user_weights": {},
    }) for i, c in enumerate(base.configs)]
    tree = QueueTree(configs, source="capacity-scheduler parameter 'queues'")
    rules = parse_mappings(mappings, source="capacity-scheduler parameter 'mappings'")
    return CapacityConfig(tree=tree, mappings=rules, calculator=calculator,
                          max_am_percent=max_am_percent, max_applications=max_applications,
                          preemption=PreemptionSettings(enabled=preemption))
