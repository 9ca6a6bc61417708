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
"""

from __future__ import annotations

from dataclasses import dataclass

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
          fs_threshold: float = 0.5) -> QueueSetup:
    """The queue setup from the policy's parameters (UsageError naming what is wrong).

    ``fs_timeout``/``fs_threshold`` are the defaults where neither a queue, its ancestors
    nor the file's ``default...`` elements set them.
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
    return _arrays(tree, placement, default_policy, fs_timeout, fs_threshold)


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
        fs_timeout, threshold, ms_timeout, allow, child_ptr, child_idx)
