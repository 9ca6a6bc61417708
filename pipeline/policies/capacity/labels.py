"""Node-label and absolute-resource queue settings of a ``capacity-scheduler.xml``.

Properties (NodeLabel.md and CapacityScheduler.md, Hadoop 3.3; ``AbstractCSQueue.
setupQueueConfigs``, ``ParentQueue.setChildQueues``, ``CapacitySchedulerConfiguration``):

- ``<q>.accessible-node-labels``: comma list, ``*`` for all, a blank value for none; unset
  means the parent's; root can access all (Hadoop ignores root's value).  A child of a
  parent other than root whose labels are not ``*`` may not list ``*`` or labels the
  parent lacks.
- ``<q>.accessible-node-labels.<label>.capacity`` (percent of the parent's label
  capacity, default 0; root 100; a weight ``Nw``; or, for absolute queues, ``[...]``) and
  ``.maximum-capacity`` (default 100); at each level the children's percentages for a
  label add up to 100 when the parent's is above 0 (for root: when any child sets one,
  since Hadoop checks only the labels root's own properties name) and to 0 when it is 0.
  tracereplay rejects a label capacity on a queue that cannot access the label.
- ``<q>.accessible-node-labels.<label>.maximum-am-resource-percent`` (default: the
  queue's ``maximum-am-resource-percent``).
- ``<q>.default-node-label-expression``: the partition the queue's applications ask for
  (traces carry no per-request label); unset means the parent's when the queue can access
  everything the parent can, else DEFAULT; a leaf must be able to access it.  Only a single
  label is modelled (no ``&&``/``||`` expressions).
- Absolute resources: ``[memory=10240,vcores=12]`` with optional unit suffixes
  (``Mi``, ``Gi``, ... ; memory in MB otherwise) and ``yarn.io/gpu``; memory must be set
  (tracereplay rejects what Hadoop would silently treat as unset).  Absolute queues'
  children are absolute and percent queues' children are not (``ParentQueue``: "should use
  either percentage based capacity configuration or absolute resource together");
  tracereplay also rejects absolute siblings of percent queues under root.  A minimum
  above the maximum, a child maximum above its parent's and children's minimums above a
  parent's (per resource) are errors, as in Hadoop.
"""

from __future__ import annotations

import re

import numpy as np

from pipeline.policies.capacity.partitions import LabelSpec
from pipeline.policies.capacity.reader import Reader
from pipeline.policies.capacity.resources import QueueCaps
from pipeline.policies.queues.tree import SUM_TOLERANCE, QueueTree

P = "yarn.scheduler.capacity."
ALL = frozenset({"*"})
_UNITS = {"": 1.0, "k": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20, "T": 1e12 / 2**20,
          "Ki": 1.0 / 1024, "Mi": 1.0, "Gi": 1024.0, "Ti": 1024.0**2, "Pi": 1024.0**3}
_KEYS = {"memory": 1, "memory-mb": 1, "vcores": 0, "yarn.io/gpu": 2}
_VALUE = re.compile(r"^([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)$")


def absolute_resource(r: Reader, name: str, unset: float = 0.0) -> np.ndarray:
    """``(vcores, memory MB, gpus)`` of an absolute value such as ``[memory=4Gi,vcores=2]``;
    resources left out are ``unset`` (0 for a minimum, as in Hadoop; NaN for a maximum,
    meaning the parent's)."""
    text = r.props[name].strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise r.fail(name, f"{text!r} is not an absolute resource [memory=...,vcores=...]")
    out = np.full(3, unset)
    seen = set()
    for pair in (p.strip() for p in text[1:-1].split(",")):
        key, sep, value = (x.strip() for x in pair.partition("="))
        m = _VALUE.match(value)
        if not sep or key not in _KEYS or m is None:
            raise r.fail(name, f"{pair!r} is not memory=N, vcores=N or yarn.io/gpu=N")
        unit = m[2]
        if unit not in _UNITS or (unit and _KEYS[key] != 1):
            raise r.fail(name, f"unit {unit!r} of {key} is not one of Ki, Mi, Gi, Ti, Pi, k, "
                               "M, G, T (memory only)")
        out[_KEYS[key]] = float(m[1]) * _UNITS[unit]
        seen.add(_KEYS[key])
    if 1 not in seen or out[1] <= 0:
        raise r.fail(name, "an absolute resource must give memory (> 0)")
    return out


def queue_caps(r: Reader, tree: QueueTree, specs: list[LabelSpec],
               am_default: list[float]) -> QueueCaps:
    """Per-partition capacities of every queue (see module doc); UsageErrors name the
    property."""
    names = ("", *(s.name for s in specs))
    n_p, n_q = len(names), tree.n_queues
    _check_label_properties(r, names)
    access, default = _access(r, tree, names)
    absolute = np.array(["abs_min" in c.props for c in tree.configs])
    min_res = np.zeros((n_p, n_q, 3))
    max_res = np.full((n_p, n_q, 3), np.nan)
    for q, c in enumerate(tree.configs):
        if absolute[q]:
            min_res[0, q] = c.props["abs_min"]
            if c.props.get("abs_max") is not None:
                max_res[0, q] = c.props["abs_max"]
    abs_cap, abs_max = np.zeros((n_p, n_q)), np.ones((n_p, n_q))
    abs_cap[0], abs_max[0] = tree.abs_cap, tree.abs_max
    for p in range(1, n_p):
        _label(r, tree, p, names[p], access, absolute, abs_cap, abs_max, min_res, max_res)
    am = np.array([[r.number(_key(tree, int(q), names[p]) + "maximum-am-resource-percent",
                             am_default[pos], 0, 1) if p else am_default[pos]
                    for pos, q in enumerate(tree.leaves)] for p in range(n_p)])
    return QueueCaps(tree=tree, names=names,
                     exclusive=np.array([True, *(s.exclusive for s in specs)]),
                     access=access, abs_cap=abs_cap, abs_max=abs_max, absolute=absolute,
                     min_res=min_res, max_res=max_res, am_percent=am.reshape(n_p, -1),
                     leaf_part=default[tree.leaves])


def _check_label_properties(r: Reader, names: tuple[str, ...]) -> None:
    """Every ``<q>.accessible-node-labels.<label>.*`` property names a defined label."""
    for name in sorted(r.props):
        if name.startswith(P) and ".accessible-node-labels." in name:
            label = name.split(".accessible-node-labels.", 1)[1].split(".", 1)[0]
            _check_defined(r, name, label, names)


def _key(tree: QueueTree, q: int, label: str) -> str:
    return f"{P}{tree.paths[q]}.accessible-node-labels.{label}."


def _access(r: Reader, tree: QueueTree, names: tuple[str, ...],
            ) -> tuple[np.ndarray, np.ndarray]:
    """(P, n_q) access and each queue's default partition (index into ``names``)."""
    sets: list[frozenset[str]] = []
    default = np.zeros(tree.n_queues, dtype=np.int64)
    for q, path in enumerate(tree.paths):  # breadth first: parents come first
        parent = int(tree.parent[q])
        key = f"{P}{path}.accessible-node-labels"
        if parent < 0 or key not in r.props:
            own = ALL if parent < 0 else sets[parent]
        else:
            own = _label_set(r, key, names)
            _check_subset(r, key, own, sets[parent], parent)
        sets.append(own)
        default[q] = _default_label(r, f"{P}{path}.default-node-label-expression", names,
                                    own, sets[parent] if parent >= 0 else None,
                                    int(default[parent]) if parent >= 0 else 0,
                                    leaf=bool(tree.is_leaf[q]))
    access = np.array([[p == 0 or s == ALL or names[p] in s for s in sets]
                       for p in range(len(names))])
    return access, default


def _label_set(r: Reader, key: str, names: tuple[str, ...]) -> frozenset[str]:
    text = r.props[key].strip()
    if text == "*":
        return ALL
    labels = frozenset(x.strip() for x in text.split(",") if x.strip())
    for x in sorted(labels):
        _check_defined(r, key, x, names)
    return labels


def _check_defined(r: Reader, key: str, label: str, names: tuple[str, ...]) -> None:
    if label not in names[1:]:
        known = ", ".join(names[1:]) or "none"
        raise r.fail(key, f"node label {label!r} is not a cluster node label (defined: "
                          f"{known}; define labels with the node_labels parameter or the "
                          "tracereplay.node-labels property)")


def _check_subset(r: Reader, key: str, own: frozenset[str], parent: frozenset[str],
                  parent_q: int) -> None:
    if parent_q == 0 or parent == ALL:
        return
    if own == ALL:
        raise r.fail(key, "'*' under a parent whose accessible-node-labels is not '*'")
    extra = sorted(own - parent)
    if extra:
        raise r.fail(key, f"labels {', '.join(extra)} are not accessible to the parent queue")


def _default_label(r: Reader, key: str, names: tuple[str, ...], own: frozenset[str],
                   parent: frozenset[str] | None, parent_default: int, *, leaf: bool) -> int:
    """Partition the queue's applications ask for (inherited as AbstractCSQueue does)."""
    if key not in r.props:
        inherits = parent is not None and own >= parent  # literal sets: '*' is an element
        return parent_default if inherits else 0
    text = r.props[key].strip()
    if not text:
        return 0
    if "&&" in text or "||" in text:
        raise r.fail(key, "label expressions are not modelled: give a single label")
    _check_defined(r, key, text, names)
    if leaf and own != ALL and text not in own:
        raise r.fail(key, f"the queue cannot access node label {text!r} "
                          "(accessible-node-labels)")
    return names.index(text)


def _label(r: Reader, tree: QueueTree, p: int, label: str, access: np.ndarray,
           absolute: np.ndarray, abs_cap: np.ndarray, abs_max: np.ndarray,
           min_res: np.ndarray, max_res: np.ndarray) -> None:
    """Fill partition ``p``'s shares (percent/weight queues) or vectors (absolute ones)."""
    cap, mx, weight = np.zeros(tree.n_queues), np.full(tree.n_queues, 100.0), \
        np.zeros(tree.n_queues, dtype=bool)
    root_key = _key(tree, 0, label) + "capacity"
    if root_key in r.props and r.number(root_key, 100.0) != 100.0:
        raise r.fail(root_key, "root always has 100% of every label")
    cap[0], abs_cap[p, 0], abs_max[p, 0] = 100.0, 1.0, 1.0
    for q in range(1, tree.n_queues):
        key = _key(tree, q, label)
        if not access[p, q] and any(key + s in r.props for s in ("capacity",
                                                                 "maximum-capacity")):
            raise r.fail(key + "capacity", f"the queue cannot access node label {label!r} "
                                           "(accessible-node-labels)")
        if absolute[q]:
            _absolute_label(r, key, q, p, min_res, max_res)
        else:
            cap[q], mx[q], weight[q] = _percent_label(r, key)
    for parent, kids_t in enumerate(tree.children):
        kids = list(kids_t)
        if not kids:
            continue
        if absolute[kids[0]]:
            _check_absolute_tree(r, tree, parent, kids, label, min_res[p], max_res[p])
            continue
        share = _shares(r, tree, parent, kids, label, cap, weight, abs_cap[p, parent])
        abs_cap[p, kids] = abs_cap[p, parent] * share
        abs_max[p, kids] = np.maximum(abs_max[p, parent] * mx[kids] / 100.0, abs_cap[p, kids])


def _percent_label(r: Reader, key: str) -> tuple[float, float, bool]:
    name = key + "capacity"
    text = r.props.get(name, "0").strip()
    if text.startswith("["):
        raise r.fail(name, "absolute resources need the queue's capacity in absolute "
                           "resources too")
    is_weight = text.lower().endswith("w")
    try:
        value = float(text[:-1] if is_weight else text)
    except ValueError:
        raise r.fail(name, f"{text!r} is not a number") from None
    if not (0.0 <= value <= (np.inf if is_weight else 100.0)):
        raise r.fail(name, f"{value:g} is outside [0, 100]")
    mx = r.number(key + "maximum-capacity", 100.0, -1.0, 100.0)
    mx = 100.0 if mx == -1 else mx
    if not is_weight and mx < value - SUM_TOLERANCE:
        raise r.fail(key + "maximum-capacity", f"{mx:g} is below the label capacity "
                                               f"{value:g}")
    return value, mx, is_weight


def _absolute_label(r: Reader, key: str, q: int, p: int, min_res: np.ndarray,
                    max_res: np.ndarray) -> None:
    for suffix, out in (("capacity", min_res), ("maximum-capacity", max_res)):
        name = key + suffix
        if name not in r.props:
            continue
        if not r.props[name].strip().startswith("["):
            raise r.fail(name, "the queue's capacity is in absolute resources, so its label "
                               "capacities must be too ([memory=...,vcores=...])")
        out[p, q] = absolute_resource(r, name, np.nan if out is max_res else 0.0)
    if (min_res[p, q] > np.nan_to_num(max_res[p, q], nan=np.inf)).any():
        raise r.fail(key + "capacity", "the minimum is above the maximum-capacity")


def _shares(r: Reader, tree: QueueTree, parent: int, kids: list[int], label: str,
            cap: np.ndarray, weight: np.ndarray, parent_share: float) -> np.ndarray:
    """Fractions of the parent's label capacity (percent or normalised weights)."""
    where = _key(tree, kids[0], label) + "capacity"
    if weight[kids].any():
        if not weight[kids].all():
            raise r.fail(where, f"children of '{tree.paths[parent]}' mix percent and weight "
                                f"capacities for label {label!r}")
        total = cap[kids].sum()
        return cap[kids] / total if total > 0 else np.zeros(len(kids))
    total = float(cap[kids].sum())
    must = parent_share > 0 and (parent > 0 or total > 0)
    if (must and abs(total - 100.0) > SUM_TOLERANCE) or (parent_share <= 0 and total > 0):
        want = 100 if parent_share > 0 else 0
        raise r.fail(where, f"label {label!r} capacities of the children of "
                            f"'{tree.paths[parent]}' add up to {total:g}, not {want}")
    return cap[kids] / 100.0


def _check_absolute_tree(r: Reader, tree: QueueTree, parent: int, kids: list[int],
                         label: str, low: np.ndarray, high: np.ndarray) -> None:
    """Children's minimums within a (non-root) parent's, maximums within its maximum."""
    if parent == 0:
        return
    where = _key(tree, parent, label) + "capacity"
    if (low[kids].sum(axis=0) > low[parent] * (1 + 1e-9)).any():
        raise r.fail(where, f"the children's label {label!r} minimums add up to more than "
                            "the parent's")
    if (high[kids] > high[parent] * (1 + 1e-9)).any():  # NaN (unset) compares False
        raise r.fail(where, f"a child's label {label!r} maximum-capacity is above the "
                            "parent's")
