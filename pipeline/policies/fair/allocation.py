"""Reading a FairScheduler allocation file (``fair-scheduler.xml``, Hadoop 3.3 format).

Source: FairScheduler.md "Allocation file format" and ``AllocationFileLoaderService`` /
``AllocationFileQueueParser`` (apache/hadoop 3.3).  Read here:

- ``<queue name="..." [type="parent"]>`` (nested for hierarchy; a top-level ``<queue
  name="root">`` is the root itself) with ``<weight>``, ``<minResources>``,
  ``<maxResources>``, ``<schedulingPolicy>`` (fifo/fair/drf), ``<fairSharePreemptionTimeout>``
  and ``<minSharePreemptionTimeout>`` (seconds), ``<fairSharePreemptionThreshold>``
  (0..1), ``<allowPreemptionFrom>``;
- top level: ``<defaultQueueSchedulingPolicy>``, ``<defaultFairSharePreemptionTimeout>``,
  ``<defaultMinSharePreemptionTimeout>``, ``<defaultFairSharePreemptionThreshold>``,
  ``<queueMaxResourcesDefault>`` and ``<queuePlacementPolicy>`` with ``<rule name=...>``.

Elements that only matter to a real ResourceManager (ACLs, ``maxRunningApps``,
``maxAMShare``, user limits, reservations) are accepted and ignored (not modeled); any other
element is an error naming the file and the element.  Resources: ``"X mb, Y vcores"``,
``"memory-mb=X, vcores=Y"`` or percentages (``"X%"``, ``"X% memory, Y% cpu"``,
``"memory-mb=X%, vcores=Y%"``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies.queues import WEIGHT, QueueConfig

POLICIES = ("fifo", "fair", "drf")
IGNORED = {"maxRunningApps", "maxAMShare", "aclSubmitApps", "aclAdministerApps",
           "maxChildResources", "maxContainerAllocation", "reservation", "userMaxAppsDefault",
           "queueMaxAppsDefault", "queueMaxAMShareDefault", "user",
           "reservation-agent", "reservation-policy", "reservation-planner",
           "defaultQueueSchedulingMode"}
RULES = ("specified", "user", "primaryGroup", "secondaryGroupExistingQueue", "default",
         "reject")
_ABS = re.compile(r"^\s*([0-9.]+)\s*(mb|vcores)\s*$", re.I)
_PCT = re.compile(r"^\s*([0-9.]+)\s*%\s*(memory|cpu)?\s*$", re.I)
_KV = re.compile(r"^\s*(memory-mb|vcores|yarn\.io/gpu)\s*=\s*([0-9.]+)\s*(%?)\s*$", re.I)
_KEYS = {"memory-mb": 1, "memory": 1, "mb": 1, "vcores": 0, "cpu": 0, "yarn.io/gpu": 2}


@dataclass(frozen=True)
class ResourceSpec:
    """A resource amount: absolute ``(vcores, memory MB, gpus)`` or percentages of the
    cluster (``percent=True``); ``None`` entries are unset (unlimited for a maximum)."""

    values: tuple[float | None, float | None, float | None]
    percent: bool = False


@dataclass
class Allocations:
    """What an allocation file configures."""

    queues: list[QueueConfig]
    default_policy: str = "fair"
    rules: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    source: str = "fair-scheduler.xml"


def parse_resources(text: str, where: str) -> ResourceSpec:
    """A ``ResourceSpec`` from one of the FairScheduler.md resource forms."""
    values: list[float | None] = [None, None, None]
    parts = [p for p in text.split(",") if p.strip()]
    pct = _PCT.match(text)
    if pct and pct.group(2) is None:  # "X%": every resource
        v = float(pct.group(1))
        return ResourceSpec((v, v, v), True)
    percent = None
    for part in parts:
        for regex, key_at, val_at in ((_ABS, 2, 1), (_PCT, 2, 1), (_KV, 1, 2)):
            m = regex.match(part)
            if m and m.group(key_at):
                is_pct = regex is _PCT or (regex is _KV and m.group(3) == "%")
                if percent is not None and percent != is_pct:
                    m = None
                    break
                percent = is_pct
                values[_KEYS[m.group(key_at).lower()]] = float(m.group(val_at))
                break
        else:
            m = None
        if m is None:
            raise UsageError(f"{where}: cannot read resources {text!r} (use 'X mb, Y vcores',"
                             " 'memory-mb=X, vcores=Y' or percentages)")
    if percent and any(v is not None and v > 100 for v in values):
        raise UsageError(f"{where}: percentage above 100 in {text!r}")
    return ResourceSpec((values[0], values[1], values[2]), bool(percent))


def _number(el: ET.Element, where: str, low: float = 0.0, high: float | None = None) -> float:
    try:
        value = float((el.text or "").strip())
    except ValueError:
        value = float("nan")
    if not (value >= low and (high is None or value <= high)):
        bound = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        raise UsageError(f"{where}: <{el.tag}> must be a number {bound}, got {el.text!r}")
    return value


def _policy(el: ET.Element, where: str) -> str:
    value = (el.text or "").strip().lower()
    if value not in POLICIES:
        raise UsageError(f"{where}: <{el.tag}> {el.text!r} is not one of fifo, fair, drf")
    return value


def _queue_props(el: ET.Element, where: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for child in el:
        tag, w = child.tag, f"{where} <{child.tag}>"
        if tag == "queue" or tag in IGNORED:
            continue
        if tag == "weight":
            props["weight"] = _number(child, where)
        elif tag in ("minResources", "maxResources"):
            props[tag] = parse_resources(child.text or "", w)
        elif tag == "schedulingPolicy":
            props["policy"] = _policy(child, where)
        elif tag in ("fairSharePreemptionTimeout", "minSharePreemptionTimeout"):
            props[tag] = _number(child, where)
        elif tag == "fairSharePreemptionThreshold":
            props[tag] = _number(child, where, 0.0, 1.0)
        elif tag == "allowPreemptionFrom":
            props[tag] = (child.text or "").strip().lower() != "false"
        else:
            raise UsageError(f"{where}: unknown element <{tag}>")
    return props


def _queues(el: ET.Element, parent: str, source: str, out: list[QueueConfig]) -> None:
    name = (el.get("name") or "").strip()
    if not name or ("." in name and not name.startswith(parent + ".")):
        raise UsageError(f"{source}: <queue> under '{parent or 'allocations'}' needs a name "
                         f"without dots, got {name!r}")
    path = name if name.startswith(parent + ".") or (not parent and name == "root") else (
        f"{parent}.{name}" if parent else f"root.{name}")
    where = f"{source}: queue '{path}'"
    props = _queue_props(el, where)
    if path != "root":
        out.append(QueueConfig(path, float(props.get("weight", 1.0)), WEIGHT, 100.0, props))
    else:
        out.insert(0, QueueConfig("root", 100.0, WEIGHT, 100.0, props))
    for child in el.findall("queue"):
        _queues(child, path, source, out)


def _rules(el: ET.Element, source: str) -> list[tuple[str, dict[str, str]]]:
    rules = []
    for rule in el:
        name = rule.get("name", "")
        if rule.tag != "rule" or name not in RULES:
            raise UsageError(f"{source}: <queuePlacementPolicy> rule {name or rule.tag!r} is "
                             f"not one of {', '.join(RULES)} (nestedUserQueue and queue "
                             "creation are not modeled)")
        rules.append((name, dict(rule.attrib)))
    return rules


def read_allocations(path: Path | str) -> Allocations:
    """Parse ``path``; every problem is a UsageError naming the file and the element."""
    source = str(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise UsageError(f"{source}: cannot read allocation file ({exc})") from None
    if root.tag != "allocations":
        raise UsageError(f"{source}: top element is <{root.tag}>, expected <allocations>")
    queues: list[QueueConfig] = []
    out = Allocations(queues, source=source)
    defaults: dict[str, Any] = {}
    for el in root:
        where = f"{source}: <allocations>"
        if el.tag == "queue":
            _queues(el, "", source, queues)
        elif el.tag == "defaultQueueSchedulingPolicy":
            out.default_policy = _policy(el, where)
        elif el.tag in ("defaultFairSharePreemptionTimeout", "defaultMinSharePreemptionTimeout"):
            defaults[el.tag.replace("default", "", 1)[0].lower()
                     + el.tag.replace("default", "", 1)[1:]] = _number(el, where)
        elif el.tag == "defaultFairSharePreemptionThreshold":
            defaults["fairSharePreemptionThreshold"] = _number(el, where, 0.0, 1.0)
        elif el.tag == "queueMaxResourcesDefault":
            defaults["maxResourcesDefault"] = parse_resources(el.text or "", f"{where} <"
                                                              f"{el.tag}>")
        elif el.tag == "queuePlacementPolicy":
            out.rules = _rules(el, source)
        elif el.tag not in IGNORED:
            raise UsageError(f"{source}: unknown element <{el.tag}> in <allocations>")
    if not [q for q in queues if q.path != "root"]:
        raise UsageError(f"{source}: no <queue> configured")
    root_cfg = next((q for q in queues if q.path == "root"), None)
    root_props = dict(root_cfg.props) if root_cfg else {}
    for key, value in defaults.items():  # file defaults sit on root (queues inherit them)
        root_props.setdefault(key, value)
    queues[:] = [QueueConfig("root", 100.0, WEIGHT, 100.0, root_props)] + [
        q for q in queues if q.path != "root"]
    return out
