"""The queue setup of ``fair-scheduler``: tree, per-queue settings as arrays, placement.

Sources of the queues, in order: an allocation file (:mod:`.allocation`); inline weights
``queues="a:1w,b:2w"`` (the shared :func:`~pipeline.policies.queues.parse_inline` format;
weights only); else one leaf ``root.<name>`` of weight 1 per queue named in the trace
(``root.default`` for jobs without one), which is what the default ``specified`` placement
rule with ``create="true"`` would build in YARN (tracereplay creates no queues while running).

Placement (``<queuePlacementPolicy>``, FairScheduler.md) is mapped onto the shared
:class:`~pipeline.policies.queues.QueuePlacement`: ``user`` -> ``u:%user:%user``,
``primaryGroup`` -> ``u:%user:%primary_group``, ``secondaryGroupExistingQueue`` ->
``u:%user:%secondary_group``, ``default queue="q"`` -> the default leaf; ``specified`` (the
trace's queue) is tried before those rules when it is the first rule, else after them.  A
rule's target must be an existing leaf (no ``create``); ``reject`` sends the job to the
default leaf so no task disappears.  These are documented approximations.

Application limits (Hadoop 3.3 ``AllocationConfiguration``: a queue's own value, else the
file's default, else Hadoop's default): ``maxRunningApps`` per queue, root and parents
included (``queueMaxAppsDefault``, unlimited by default, applies to every queue, the root
too, as ``getQueueMaxApps`` does); ``maxAMShare`` per leaf (``queueMaxAMShareDefault``,
0.5 by default; parents have no AM limit); per user ``<user>`` limits, else
``userMaxAppsDefault`` (unlimited).  The policy's ``max_running_apps``, ``max_am_share``
and ``user_max_apps`` parameters are the defaults where the file sets none (or there is no
file).  Enforced by :mod:`.limits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.fair.allocation import Allocations, ResourceSpec, read_allocations
from pipeline.policies.fair.kernel import DRF, FAIR, FIFO
from pipeline.policies.queues import (
    WEIGHT,
    QueueConfig,
    QueuePlacement,
    QueueTree,
    groups_provider,
    parse_inline,
)
from pipeline.policies.queues.placement import MappingRule

KINDS = {"fair": FAIR, "drf": DRF, "fifo": FIFO}
NEVER = np.inf  # Hadoop's Long.MAX_VALUE preemption timeouts
UNLIMITED = 1 << 62  # Hadoop's Integer.MAX_VALUE application limits


@dataclass
class QueueSetup:
    """Arrays (one entry per queue of ``tree``) the scheduler needs at every call."""

    tree: QueueTree
    placement: QueuePlacement
    kind: np.ndarray
    weight: np.ndarray
    min_spec: list[ResourceSpec | None]
    max_spec: list[ResourceSpec | None]
    fs_timeout: np.ndarray
    fs_threshold: np.ndarray
    ms_timeout: np.ndarray
    preemptable: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
    max_apps: np.ndarray  # per queue: maxRunningApps (UNLIMITED when unset)
    am_share: np.ndarray  # per queue: maxAMShare of a leaf, -1 = no check (parents: -1)
    user_max_default: int = UNLIMITED  # userMaxAppsDefault
    user_max: dict[str, int] | None = None  # <user name=...><maxRunningApps>

    def user_limits(self, users: tuple[str, ...]) -> np.ndarray:
        """maxRunningApps per user code of ``users``, plus one last entry for a null user."""
        table = self.user_max or {}
        return np.array([table.get(u, self.user_max_default) for u in users]
                        + [self.user_max_default], dtype=np.int64)

    @property
    def limits_apps(self) -> bool:
        """Whether any queue or user has a finite maxRunningApps."""
        return bool((self.max_apps < UNLIMITED).any() or self.user_max_default < UNLIMITED
                    or any(v < UNLIMITED for v in (self.user_max or {}).values()))

    def resources(self, total: np.ndarray, mem_unit_mb: float) -> tuple[np.ndarray, np.ndarray]:
        """``(min_share, max_share)`` per queue in trace units for a cluster of ``total``."""
        n = self.tree.n_queues
        low, high = np.zeros((n, 3)), np.tile(np.asarray(total, np.float64), (n, 1))
        for q in range(n):
            for spec, out in ((self.min_spec[q], low), (self.max_spec[q], high)):
                for k, v in enumerate(spec.values if spec is not None else ()):
                    if v is not None:
                        scale = total[k] / 100.0 if spec.percent else (
                            1.0 / mem_unit_mb if k == 1 else 1.0)
                        out[q, k] = v * scale
        return low, high


def _rules(alloc: Allocations | None) -> tuple[list[MappingRule], bool, str]:
    """Shared mapping rules, override flag and default queue from placement rules."""
    if alloc is None or not alloc.rules:
        return [], False, "default"
    targets = {"user": "%user", "primaryGroup": "%primary_group",
               "secondaryGroupExistingQueue": "%secondary_group"}
    rules, default = [], "default"
    for name, attrs in alloc.rules:
        if name in targets:
            rules.append(MappingRule("u", "%user", targets[name]))
        elif name == "default":
            default = attrs.get("queue", "default")
    override = alloc.rules[0][0] != "specified"
    return rules, override, default


def _trace_tree(queues: tuple[str, ...]) -> QueueTree:
    names = sorted({q.replace(".", "_") or "default" for q in queues} | {"default"})
    return QueueTree([QueueConfig(f"root.{n}", 1.0, WEIGHT) for n in names],
                     source="trace queues")


def build(allocation_file: str, queues: str, default_policy: str, groups: str,
          trace_queues: tuple[str, ...], where: str, fs_timeout: float = NEVER,
          fs_threshold: float = 0.5, max_apps: int = UNLIMITED, am_share: float = 0.5,
          user_max_apps: int = UNLIMITED) -> QueueSetup:
    """The queue setup from the policy's parameters (UsageError naming what is wrong).

    ``fs_timeout``/``fs_threshold`` are the defaults where neither a queue, its ancestors
    nor the file's ``default...`` elements set them; ``max_apps``/``am_share``/
    ``user_max_apps`` stand for ``queueMaxAppsDefault``/``queueMaxAMShareDefault``/
    ``userMaxAppsDefault`` where the file does not set them.
    """
    alloc = read_allocations(allocation_file) if allocation_file else None
    if alloc is not None and queues:
        raise UsageError(f"{where}: give either 'allocation_file' or 'queues', not both")
    if alloc is not None:
        tree = QueueTree(alloc.queues, source=alloc.source, check_sums=False)
        default_policy = alloc.default_policy
    elif queues:
        tree = parse_inline(queues, source=f"{where} parameter 'queues'", check_sums=False)
    else:
        tree = _trace_tree(trace_queues)
    rules, override, default = _rules(alloc)
    placement = QueuePlacement(tree, rules, groups_provider(groups, source=f"{where} "
                                                                          "parameter 'groups'"),
                               override=override, default_queue=default)
    setup = _arrays(tree, placement, default_policy, fs_timeout, fs_threshold)
    if alloc is not None:
        max_apps = _given(alloc.queue_max_apps_default, max_apps)
        am_share = _given(alloc.queue_max_am_share_default, am_share)
        user_max_apps = _given(alloc.user_max_apps_default, user_max_apps)
        setup.user_max = dict(alloc.user_max_apps)
    n = tree.n_queues
    setup.max_apps = np.array([tree.prop(q, "maxRunningApps", max_apps) for q in range(n)],
                              dtype=np.int64)
    # maxAMShare is a leaf setting (FairScheduler.md); Hadoop 3.3 ignores it on parents
    setup.am_share = np.array([tree.prop(q, "maxAMShare", am_share) if tree.is_leaf[q]
                               else -1.0 for q in range(n)], dtype=np.float64)
    setup.user_max_default = int(user_max_apps)
    return setup


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _arrays(tree: QueueTree, placement: QueuePlacement, default_policy: str,
            fs_default: float, threshold_default: float) -> QueueSetup:
    n = tree.n_queues
    # A fifo default applies to leaves; parents then use fair (tracereplay choice, as
    # Hadoop allows fifo on leaf queues only); an explicit fifo on a parent is an error.
    parent_default = "fair" if default_policy == "fifo" else default_policy
    kind = np.array([KINDS[tree.prop(q, "policy", default_policy if tree.is_leaf[q]
                                     else parent_default)] for q in range(n)])
    for q in range(1, n):
        if kind[q] == DRF and kind[tree.parent[q]] == FAIR:
            raise UsageError(f"{tree.source}: queue '{tree.paths[q]}': schedulingPolicy drf "
                             "under a fair parent is not allowed (Hadoop FairSharePolicy."
                             "isChildPolicyAllowed)")
    for q in range(n):
        if kind[q] == FIFO and not tree.is_leaf[q]:
            raise UsageError(f"{tree.source}: queue '{tree.paths[q]}': schedulingPolicy fifo "
                             "is only allowed on leaf queues (Hadoop FifoPolicy)")
    fs_timeout = np.array([tree.prop(q, "fairSharePreemptionTimeout", fs_default, inherit=True)
                           for q in range(n)], dtype=np.float64)
    ms_timeout = np.array([tree.prop(q, "minSharePreemptionTimeout", NEVER, inherit=True)
                           for q in range(n)], dtype=np.float64)
    threshold = np.array([tree.prop(q, "fairSharePreemptionThreshold", threshold_default,
                                    inherit=True)
                          for q in range(n)], dtype=np.float64)
    allow = np.ones(n, dtype=bool)
    for q in range(n):  # allowPreemptionFrom=false covers the whole subtree
        allow[q] = all(tree.prop(a, "allowPreemptionFrom", True) for a in tree.ancestors(q))
    max_default = tree.prop(0, "maxResourcesDefault")
    child_ptr = np.zeros(n + 1, dtype=np.int64)
    child_ptr[1:] = np.cumsum([len(k) for k in tree.children])
    child_idx = np.array([c for k in tree.children for c in k], dtype=np.int64)
    return QueueSetup(
        tree, placement, kind.astype(np.int64), tree.capacity.astype(np.float64),
        [tree.prop(q, "minResources") for q in range(n)],
        [tree.prop(q, "maxResources", max_default if tree.is_leaf[q] else None)
         for q in range(n)],
        fs_timeout, threshold, ms_timeout, allow, child_ptr, child_idx,
        np.full(n, UNLIMITED, dtype=np.int64), np.full(n, -1.0))
