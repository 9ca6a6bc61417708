"""Placing applications in leaf queues: YARN queue mappings plus the trace's own queue.

Rules follow ``yarn.scheduler.capacity.queue-mappings`` (CapacityScheduler.md, "Queue
Mapping based on User or Group", apache/hadoop 3.3 ``UserGroupMappingPlacementRule``):
a comma-separated list, first match wins:

- ``u:alice:q`` a named user; ``u:%user:q`` any user; ``g:group:q`` a user in the group;
- targets may use ``%user``, ``%primary_group`` and ``%secondary_group`` (the first of the
  user's other groups that names a leaf), e.g. ``u:%user:%user`` or
  ``u:%user:root.tenants.%primary_group``;
- a mapping whose target is not an existing leaf is skipped (tracereplay does not model
  auto-created queues).

The trace's queue (canonical ``jobs.queue``) plays the part of the queue an application is
submitted to.  With ``override=False`` (Hadoop's default for
``yarn.scheduler.capacity.queue-mappings-override.enable``) a trace queue that names an
existing leaf, other than ``default``, wins over the mappings; with ``override=True`` the
mappings win and the trace queue is used only when no mapping matches.  Otherwise the
application goes to the default leaf.  Where YARN would reject an application (a queue
that does not exist), tracereplay places it in the default leaf instead, so no task of the
trace disappears (a documented choice).

Groups: trace users are opaque hashes, so besides a static user -> groups table there is
a tracereplay extension, :class:`HashGroups`: each user belongs to exactly one group,
``<prefix><k>`` with ``k = blake2b(user) mod n`` (stable across runs and machines), so
``u:%user:%primary_group`` with leaves ``g0..g{n-1}`` spreads hashed users over queues
deterministically.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.queues.tree import QueueTree

DEFAULT_QUEUE = "default"


class GroupProvider(Protocol):
    """User name -> group names (primary group first)."""

    def groups(self, user: str) -> list[str]: ...


@dataclass(frozen=True)
class StaticGroups:
    """Groups from a fixed table (users not in it have no groups)."""

    table: Mapping[str, Sequence[str]]

    def groups(self, user: str) -> list[str]:
        return list(self.table.get(user, ()))


@dataclass(frozen=True)
class HashGroups:
    """tracereplay extension: one group per user, ``prefix + str(blake2b(user) mod n)``."""

    n: int
    prefix: str = "g"

    def groups(self, user: str) -> list[str]:
        digest = hashlib.blake2b(user.encode(), digest_size=8).digest()
        return [f"{self.prefix}{int.from_bytes(digest, 'big') % self.n}"]


NO_GROUPS = StaticGroups({})


@dataclass(frozen=True)
class MappingRule:
    """One parsed mapping rule: kind ``u`` or ``g``, source (name or ``%user``), target."""

    kind: str
    source: str
    target: str


def parse_mappings(text: str, *, source: str = "queue-mappings") -> list[MappingRule]:
    """Rules from ``"u:alice:a,g:eng:b,u:%user:%primary_group"`` (UsageError if malformed)."""
    rules = []
    for raw in (r.strip() for r in text.split(",")):
        if not raw:
            continue
        parts = [p.strip() for p in raw.split(":")]
        if len(parts) != 3 or parts[0] not in ("u", "g") or not parts[1] or not parts[2]:
            raise UsageError(f"{source}: mapping {raw!r} is not u:user:queue or g:group:queue")
        rules.append(MappingRule(*parts))
    return rules


class QueuePlacement:
    """Leaf queue of each application from its user and trace queue (see module doc)."""

    def __init__(self, tree: QueueTree, rules: Sequence[MappingRule] = (),
                 groups: GroupProvider = NO_GROUPS, *, override: bool = False,
                 default_queue: str = DEFAULT_QUEUE) -> None:
        self.tree = tree
        self.rules = list(rules)
        self.groups = groups
        self.override = override
        default = tree.find_leaf(default_queue)
        # No 'default' leaf: the first leaf in configuration order (documented choice).
        self.default_leaf = 0 if default is None else default
        self._check_static_targets()

    def _check_static_targets(self) -> None:
        """A mapping to a fixed queue name that is not a leaf is a configuration error."""
        for rule in self.rules:
            if "%" not in rule.target:
                self.tree.leaf(rule.target, where=f"mapping {rule.kind}:{rule.source}:"
                                                  f"{rule.target}")

    def leaf_of_user(self, user: str) -> int:
        """Leaf position the mappings give ``user``, or -1 when no rule matches."""
        groups = self.groups.groups(user)
        for rule in self.rules:
            if rule.kind == "u" and rule.source not in ("%user", user):
                continue
            if rule.kind == "g" and rule.source not in groups:
                continue
            leaf = self._target(rule.target, user, groups)
            if leaf is not None:
                return leaf
        return -1

    def _target(self, target: str, user: str, groups: list[str]) -> int | None:
        if "%secondary_group" in target:
            for g in groups[1:]:
                leaf = self.tree.find_leaf(target.replace("%secondary_group", g)
                                           .replace("%user", user))
                if leaf is not None:
                    return leaf
            return None
        if "%primary_group" in target:
            if not groups:
                return None
            target = target.replace("%primary_group", groups[0])
        return self.tree.find_leaf(target.replace("%user", user))

    def leaf_of_queue(self, queue: str) -> int:
        """Leaf position of a trace queue name, or -1 (empty, ``default`` or not a leaf)."""
        if not queue or queue == DEFAULT_QUEUE:
            return -1
        leaf = self.tree.find_leaf(queue)
        return -1 if leaf is None else leaf

    def table(self, users: Sequence[str], queues: Sequence[str]) -> LeafTable:
        """The leaf of every (user code, trace queue code) pair, as a vectorized lookup."""
        by_user = np.array([self.leaf_of_user(u) for u in users] or [-1], dtype=np.int64)
        by_queue = np.array([self.leaf_of_queue(q) for q in queues] or [-1], dtype=np.int64)
        return LeafTable(by_user, by_queue, self.default_leaf, self.override)


@dataclass(frozen=True)
class LeafTable:
    """Per-code mapping results; :meth:`leaf` combines them for arrays of codes."""

    by_user: np.ndarray
    by_queue: np.ndarray
    default_leaf: int
    override: bool

    def leaf(self, user: np.ndarray, queue: np.ndarray) -> np.ndarray:
        """Leaf position (int64) for each (user code, trace queue code)."""
        u = self.by_user[np.asarray(user, dtype=np.int64)]
        q = self.by_queue[np.asarray(queue, dtype=np.int64)]
        first, second = (u, q) if self.override else (q, u)
        out = np.where(first >= 0, first, second)
        return np.where(out >= 0, out, self.default_leaf)


def groups_provider(spec: str, *, source: str = "groups") -> GroupProvider:
    """``""`` (no groups), ``hash:N[:prefix]`` or ``user=g1|g2;user2=g3`` (static table)."""
    spec = spec.strip()
    if not spec:
        return NO_GROUPS
    if spec.startswith("hash:"):
        parts = spec.split(":")
        try:
            n = int(parts[1])
        except (IndexError, ValueError):
            n = 0
        if n < 1 or len(parts) > 3:
            raise UsageError(f"{source}: {spec!r} is not hash:N[:prefix] with N >= 1")
        return HashGroups(n, parts[2] if len(parts) == 3 else "g")
    table: dict[str, list[str]] = {}
    for entry in (e.strip() for e in spec.split(";")):
        user, sep, groups = entry.partition("=")
        if not sep or not user.strip():
            raise UsageError(f"{source}: entry {entry!r} is not user=group1|group2")
        table[user.strip()] = [g.strip() for g in groups.split("|") if g.strip()]
    return StaticGroups(table)
