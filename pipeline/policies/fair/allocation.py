"""Reading a FairScheduler allocation file (``fair-scheduler.xml``, Hadoop 3.3 format).

Source: FairScheduler.md "Allocation file format" and ``AllocationFileParser`` /
``AllocationFileQueueParser`` (apache/hadoop 3.3).  Read here:

- ``<queue name="..." [type="parent"]>`` (nested for hierarchy; a top-level ``<queue
  name="root">`` is the root itself) with ``<weight>``, ``<minResources>``,
  ``<maxResources>``, ``<schedulingPolicy>`` (fifo/fair/drf), ``<fairSharePreemptionTimeout>``
  and ``<minSharePreemptionTimeout>`` (seconds), ``<fairSharePreemptionThreshold>``
  (0..1), ``<allowPreemptionFrom>``, ``<maxRunningApps>`` (a whole number >= 0) and
  ``<maxAMShare>`` (-1 = off, else >= 0; larger than 1 is read as 1, as Hadoop's
  allocation file loader clamps it; it matters on leaf queues only, as in Hadoop 3.3);
- top level: ``<defaultQueueSchedulingPolicy>``, ``<defaultFairSharePreemptionTimeout>``,
  ``<defaultMinSharePreemptionTimeout>``, ``<defaultFairSharePreemptionThreshold>``,
  ``<queueMaxResourcesDefault>``, ``<queueMaxAppsDefault>``, ``<queueMaxAMShareDefault>``,
  ``<userMaxAppsDefault>``, ``<user name="..."><maxRunningApps>N</maxRunningApps></user>``
  and ``<queuePlacementPolicy>`` with ``<rule name=...>``.

The application limits are enforced by :mod:`.limits`.  Elements that only matter to a
real ResourceManager are accepted and ignored (not modeled): the ACLs (``aclSubmitApps``,
``aclAdministerApps``: every trace job may submit anywhere), ``maxChildResources`` (for ad
hoc child queues, which tracereplay never creates), ``maxContainerAllocation`` and the
reservation system.  Any other element is an error naming the file and the element.
Resources: ``"X mb, Y vcores"``, ``"memory-mb=X, vcores=Y"`` or percentages (``"X%"``,
``"X% memory, Y% cpu"``, ``"memory-mb=X%, vcores=Y%"``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.queues import WEIGHT, QueueConfig

POLICIES = ("fifo", "fair", "drf")
# Accepted and not modeled (see the module docstring); the application limits are read.
IGNORED = {"aclSubmitApps", "aclAdministerApps", "maxChildResources",
           "maxContainerAllocation", "reservation", "reservation-agent", "reservation-policy",
           "reservation-planner"}
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
    # application limits set at the top level (None: not in the file)
    queue_max_apps_default: int | None = None
    queue_max_am_share_default: float | None = None
    user_max_apps_default: int | None = None
    user_max_apps: dict[str, int] = field(default_factory=dict)


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


def _count(el: ET.Element, where: str) -> int:
    """A ``maxRunningApps``-style limit: a whole number >= 0 (Hadoop: ``Integer.parseInt``)."""
    try:
        value = int((el.text or "").strip())
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"{where}: <{el.tag}> must be a whole number >= 0, got {el.text!r}")
    return value


def _am_share(el: ET.Element, where: str) -> float:
    """A ``maxAMShare``: -1 (no check) or a fraction; above 1 means 1 (Hadoop clamps it)."""
    try:
        value = float((el.text or "").strip())
    except ValueError:
        value = float("nan")
    if not (value == -1.0 or 0.0 <= value < np.inf):
        raise UsageError(f"{where}: <{el.tag}> must be -1 (off) or a number >= 0, "
                         f"got {el.text!r}")
    return min(value, 1.0)


def _user(el: ET.Element, source: str) -> tuple[str, int | None]:
    """``<user name="u"><maxRunningApps>N</maxRunningApps></user>``."""
    name = (el.get("name") or "").strip()
    if not name:
        raise UsageError(f"{source}: <user> needs a name attribute")
    where = f"{source}: <user name={name!r}>"
    limit = None
    for child in el:
        if child.tag != "maxRunningApps":
            raise UsageError(f"{where}: unknown element <{child.tag}> (only <maxRunningApps>)")
        limit = _count(child, where)
    return name, limit


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
        elif tag == "maxRunningApps":
            props[tag] = _count(child, where)
        elif tag == "maxAMShare":
            props[tag] = _am_share(child, where)
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
        elif el.tag in ("defaultQueueSchedulingPolicy", "defaultQueueSchedulingMode"):
            # defaultQueueSchedulingMode: the older name AllocationFileLoaderService still reads
            out.default_policy = _policy(el, where)
        elif el.tag in ("defaultFairSharePreemptionTimeout", "defaultMinSharePreemptionTimeout"):
            defaults[el.tag.replace("default", "", 1)[0].lower()
                     + el.tag.replace("default", "", 1)[1:]] = _number(el, where)
        elif el.tag == "defaultFairSharePreemptionThreshold":
            defaults["fairSharePreemptionThreshold"] = _number(el, where, 0.0, 1.0)
        elif el.tag == "queueMaxResourcesDefault":
            defaults["maxResourcesDefault"] = parse_resources(el.text or "", f"{where} <"
                                                              f"{el.tag}>")
        elif el.tag == "queueMaxAppsDefault":
            out.queue_max_apps_default = _count(el, where)
        elif el.tag == "queueMaxAMShareDefault":
            out.queue_max_am_share_default = _am_share(el, where)
        elif el.tag == "userMaxAppsDefault":
            out.user_max_apps_default = _count(el, where)
        elif el.tag == "user":
            user, limit = _user(el, source)
            if limit is not None:
                out.user_max_apps[user] = limit
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
