"""A hierarchical queue tree (root, parents, leaves) shared by the queue-based policies.

Each queue has a configured *capacity*, either a percentage of its parent (``mode =
"percent"``) or a weight (``mode = "weight"``), a *maximum capacity* as a percentage of its
parent's maximum, and free-form ``props`` (user-limit-factor, ordering policy, Fair
Scheduler minResources, ...).  Absolute shares of the cluster are computed top-down:

- guaranteed: ``abs_cap(q) = abs_cap(parent) * cap(q) / 100`` in percent mode, or
  ``abs_cap(parent) * w(q) / sum of sibling weights`` in weight mode (CapacityScheduler.md:
  "three queues under a parent with weights 3w, 2w, 5w ... calculated minimum capacity
  will be 30%, 20% and 50%"; the Fair Scheduler's steady fair share of weights is the same
  split);
- maximum: ``abs_max(q) = abs_max(parent) * max_cap(q) / 100`` (CSQueueUtils in apache/hadoop
  3.3 derives the absolute maximum capacity from the parent's the same way); never below
  the guarantee.

Siblings must share one mode (Hadoop 3.3 rejects mixed percent/weight siblings).  Percent
children of a parent must add up to 100 (CapacityScheduler.md: "the sum of capacities for
all queues, at each level, must be equal to 100") unless ``check_sums=False``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.errors import UsageError

PERCENT = "percent"
WEIGHT = "weight"
SUM_TOLERANCE = 1e-6  # percent points (Hadoop compares with a small epsilon too)


@dataclass(frozen=True)
class QueueConfig:
    """One queue as configured: full path, capacity (percent or weight), max, properties."""

    path: str
    capacity: float = 100.0
    mode: str = PERCENT
    max_capacity: float = 100.0
    props: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The short name (last path component)."""
        return self.path.rsplit(".", 1)[-1]

    @property
    def parent_path(self) -> str | None:
        return self.path.rsplit(".", 1)[0] if "." in self.path else None


class QueueTree:
    """Queues in breadth-first order (index 0 = root) with absolute shares of the cluster.

    Arrays (one entry per queue): ``parent`` (-1 for root), ``depth``, ``is_leaf``,
    ``capacity`` (as configured), ``share`` (fraction of the parent's guarantee),
    ``abs_cap`` (guaranteed fraction of the cluster), ``abs_max`` (maximum fraction).
    ``leaves`` lists the leaf queue indices in configuration order; policies number leaves
    ``0..n_leaves-1`` by that order (``leaf_names``).
    """

    def __init__(self, configs: Iterable[QueueConfig], *, source: str = "queue config",
                 check_sums: bool = True) -> None:
        self.source = source
        by_path = {c.path: c for c in configs}
        if "root" not in by_path:
            by_path["root"] = QueueConfig("root")
        children: dict[str, list[str]] = {p: [] for p in by_path}
        for cfg in by_path.values():
            self._check_one(cfg)
            parent = cfg.parent_path
            if cfg.path == "root":
                continue
            if parent is None or parent not in by_path:
                raise UsageError(f"{source}: queue '{cfg.path}' has no parent queue "
                                 f"'{parent or ''}' (paths start at 'root')")
            children[parent].append(cfg.path)
        order = ["root"]
        for path in order:  # breadth-first; grows while iterating
            order.extend(children[path])
        self.configs = tuple(by_path[p] for p in order)
        self.paths = tuple(order)
        self.index = {p: i for i, p in enumerate(order)}
        self.children = tuple(tuple(self.index[c] for c in children[p]) for p in order)
        self._shares(check_sums)
        self.leaves = np.array([i for i, kids in enumerate(self.children) if not kids],
                               dtype=np.int64)
        self.leaf_names = tuple(self.paths[i] for i in self.leaves)
        self._short = self._short_names()

    def _check_one(self, cfg: QueueConfig) -> None:
        where = f"{self.source}: queue '{cfg.path}'"
        if cfg.mode not in (PERCENT, WEIGHT):
            raise UsageError(f"{where}: capacity mode {cfg.mode!r} is not percent or weight")
        if not np.isfinite(cfg.capacity) or cfg.capacity < 0:
            raise UsageError(f"{where}: capacity {cfg.capacity!r} must be a number >= 0")
        if cfg.mode == PERCENT and cfg.capacity > 100 + SUM_TOLERANCE:
            raise UsageError(f"{where}: capacity {cfg.capacity:g}% is above 100")
        if not np.isfinite(cfg.max_capacity) or not 0 < cfg.max_capacity <= 100:
            raise UsageError(f"{where}: maximum-capacity {cfg.max_capacity!r} must be in "
                             "(0, 100] (-1 means 100)")
        if cfg.mode == PERCENT and cfg.max_capacity < cfg.capacity - SUM_TOLERANCE:
            raise UsageError(f"{where}: maximum-capacity {cfg.max_capacity:g} is below its "
                             f"capacity {cfg.capacity:g}")

    def _shares(self, check_sums: bool) -> None:
        n = len(self.paths)
        self.parent = np.full(n, -1, dtype=np.int64)
        self.depth = np.zeros(n, dtype=np.int64)
        self.is_leaf = np.array([not kids for kids in self.children])
        self.capacity = np.array([c.capacity for c in self.configs], dtype=np.float64)
        self.share = np.ones(n)
        self.abs_cap = np.ones(n)
        self.abs_max = np.array([c.max_capacity / 100.0 for c in self.configs])
        self.abs_max[0] = 1.0
        for p, kids in enumerate(self.children):
            if not kids:
                continue
            self._split(p, list(kids), check_sums)
            for k in kids:
                self.parent[k] = p
                self.depth[k] = self.depth[p] + 1
                self.abs_cap[k] = self.abs_cap[p] * self.share[k]
                self.abs_max[k] = max(self.abs_max[p] * self.abs_max[k], self.abs_cap[k])

    def _split(self, p: int, kids: list[int], check_sums: bool) -> None:
        modes = {self.configs[k].mode for k in kids}
        if len(modes) > 1:
            raise UsageError(f"{self.source}: children of '{self.paths[p]}' mix percent and "
                             "weight capacities")
        caps = self.capacity[kids]
        if modes == {WEIGHT}:
            total = caps.sum()
            self.share[kids] = caps / total if total > 0 else 1.0 / len(kids)
            return
        total = float(caps.sum())
        if check_sums and abs(total - 100.0) > SUM_TOLERANCE:
            raise UsageError(f"{self.source}: capacities of the children of '{self.paths[p]}'"
                             f" add up to {total:g}, not 100")
        self.share[kids] = caps / 100.0

    def _short_names(self) -> dict[str, int]:
        """Short name -> leaf position, or -1 when two leaves share the short name."""
        out: dict[str, int] = {}
        for pos, i in enumerate(self.leaves.tolist()):
            name = self.configs[i].name
            out[name] = -1 if name in out else pos
        return out

    # -- lookups ------------------------------------------------------------------------
    @property
    def n_queues(self) -> int:
        return len(self.paths)

    @property
    def n_leaves(self) -> int:
        return len(self.leaves)

    def find_leaf(self, name: str) -> int | None:
        """Leaf position (``0..n_leaves-1``) of a full path or unambiguous short name."""
        if name in self.index:
            i = self.index[name]
            hits = np.flatnonzero(self.leaves == i)
            return int(hits[0]) if len(hits) else None
        if not name.startswith("root.") and f"root.{name}" in self.index:
            return self.find_leaf(f"root.{name}")
        pos = self._short.get(name)
        return None if pos is None or pos < 0 else pos

    def leaf(self, name: str, *, where: str = "") -> int:
        """Like :meth:`find_leaf` but a UsageError when ``name`` names no (unique) leaf."""
        pos = self.find_leaf(name)
        if pos is None:
            why = ("is ambiguous (several leaves have that name)"
                   if self._short.get(name) == -1 else "is not a leaf queue")
            raise UsageError(f"{self.source}{': ' + where if where else ''}: queue '{name}' "
                             f"{why} (leaves: {', '.join(self.leaf_names)})")
        return pos

    def prop(self, queue: int, key: str, default: Any = None, *, inherit: bool = False) -> Any:
        """Property ``key`` of queue index ``queue`` (from its ancestors if ``inherit``)."""
        i = queue
        while i >= 0:
            props = self.configs[i].props
            if key in props:
                return props[key]
            if not inherit:
                break
            i = int(self.parent[i])
        return default

    def leaf_prop(self, key: str, default: Any = None, *, inherit: bool = False) -> list[Any]:
        """Property ``key`` of every leaf, in leaf order."""
        return [self.prop(int(i), key, default, inherit=inherit) for i in self.leaves]

    def ancestors(self, queue: int) -> list[int]:
        """Queue indices from ``queue`` up to the root (inclusive)."""
        out = []
        while queue >= 0:
            out.append(queue)
            queue = int(self.parent[queue])
        return out

    def leaf_paths_matrix(self) -> np.ndarray:
        """(n_leaves, n_queues) bool: whether each queue is on each leaf's path to the root."""
        m = np.zeros((self.n_leaves, self.n_queues), dtype=bool)
        for pos, i in enumerate(self.leaves.tolist()):
            m[pos, self.ancestors(i)] = True
        return m


def flat_tree(shares: Mapping[str, float], *, mode: str = PERCENT,
              max_capacity: Mapping[str, float] | None = None,
              source: str = "queues") -> QueueTree:
    """A one-level tree ``root.<name>`` for each entry of ``shares`` (quick inline use)."""
    max_capacity = max_capacity or {}
    configs = [QueueConfig(f"root.{name}", float(cap), mode,
                           float(max_capacity.get(name, 100.0)))
               for name, cap in shares.items()]
    return QueueTree(configs, source=source)


def parse_inline(text: str, *, source: str = "queues", check_sums: bool = True) -> QueueTree:
    """A tree from ``"a:50,b:30,c:20"``: entries ``path:capacity[:max-capacity]``.

    ``path`` is relative to root (``eng.batch:50`` is a child of ``eng``); a capacity ending
    in ``w`` is a weight (``a:2w``), else a percentage; max-capacity is a percentage.
    """
    configs = []
    for raw in (e.strip() for e in text.split(",")):
        if not raw:
            continue
        parts = [p.strip() for p in raw.split(":")]
        if len(parts) not in (2, 3) or not parts[0]:
            raise UsageError(f"{source}: entry {raw!r} is not name:capacity[:max-capacity]")
        path = parts[0] if parts[0].startswith("root.") else f"root.{parts[0]}"
        mode = WEIGHT if parts[1].lower().endswith("w") else PERCENT
        try:
            cap = float(parts[1][:-1] if mode == WEIGHT else parts[1])
            mx = float(parts[2]) if len(parts) == 3 else 100.0
        except ValueError:
            raise UsageError(f"{source}: entry {raw!r} has a capacity that is not a number")\
                from None
        configs.append(QueueConfig(path, cap, mode, 100.0 if mx == -1 else mx))
    if not configs:
        raise UsageError(f"{source}: no queues in {text!r}")
    return QueueTree(configs, source=source, check_sums=check_sums)
