"""Queue guarantees and maxima per partition, as resource vectors, for the cluster of a call.

Partition 0 is DEFAULT; the others are node labels (:mod:`.partitions`).  A queue's
capacity in a partition is configured as a percentage or weight of its parent's (then
``guarantee = absolute share * partition resource``, as ``ParentQueue``/``CSQueueUtils``
in Hadoop 3.3 multiply ``resourceByLabel`` by the absolute capacity) or, Hadoop 3.3's
"absolute resource" configuration, as a vector ``[memory=10240,vcores=12]``
(CapacityScheduler.md).  Absolute guarantees follow ``ParentQueue.
calculateEffectiveResourcesAndCapacity``: the children's configured minimums are summed
and, when the parent's effective guarantee (the partition's resource for root) is smaller
than that sum under the resource calculator, every resource with a non-zero sum is scaled
by ``parent / sum`` (per resource, as Hadoop's ``getEffectiveMinRatioPerResource`` does,
so a resource whose sum is below the parent's is scaled *up* by the same rule); an absolute
queue's maximum is its configured maximum capped at the parent's effective maximum (or
the parent's when unset).  Choice: Hadoop takes the cap from the parent's *configured*
maximum, falling back to the grandparent's effective one; tracereplay uses the parent's
effective maximum, which is the same whenever the parent's maximum is configured or it is
root.  A resource left out of a configured maximum (``[memory=4096]``) takes the parent's
value (Hadoop leaves it 0, which under the dominant calculator would starve the queue).
Because elastic clusters change size, effective values are computed at every scheduling
point from the up nodes, as Hadoop recomputes them on ``updateClusterResource``.  Values
stay in the trace's float units (Hadoop truncates to whole MB/vcores).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.policies.capacity.formulas import DEFAULT, DOMINANT, greater, ratio
from pipeline.policies.queues.tree import QueueTree


@dataclass
class QueueCaps:
    """Per-partition capacity settings of every queue (queue index order of the tree).

    ``abs_cap``/``abs_max`` (P, n_q): shares of the partition for percent/weight queues
    (partition 0 is the tree's own ``abs_cap``/``abs_max``); ``absolute`` (n_q,): queues
    configured in absolute resources, whose configured ``min_res``/``max_res`` (P, n_q, 3)
    are in the trace's units (``max_res`` NaN when unset); ``access`` (P, n_q): whether the
    queue can use the partition (``accessible-node-labels``); ``am_percent`` (P, n_leaves);
    ``leaf_part`` (n_leaves,): the partition a leaf's applications ask for
    (``default-node-label-expression``); ``exclusive`` (P,).
    """

    tree: QueueTree
    names: tuple[str, ...]
    exclusive: np.ndarray
    access: np.ndarray
    abs_cap: np.ndarray
    abs_max: np.ndarray
    absolute: np.ndarray
    min_res: np.ndarray
    max_res: np.ndarray
    am_percent: np.ndarray
    leaf_part: np.ndarray

    @property
    def n_parts(self) -> int:
        return len(self.names)

    @property
    def any_absolute(self) -> bool:
        return bool(self.absolute.any())

    def in_units(self, mem_unit_mb: float) -> QueueCaps:
        """A copy with absolute memory (configured in MB) in trace units."""
        scale = np.array([1.0, 1.0 / mem_unit_mb, 1.0])
        return QueueCaps(self.tree, self.names, self.exclusive, self.access, self.abs_cap,
                         self.abs_max, self.absolute, self.min_res * scale,
                         self.max_res * scale, self.am_percent, self.leaf_part)

    def effective(self, part: int, total: np.ndarray, calc: int,
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(guarantee, maximum), (n_q, 3) each, of every queue in partition ``part`` whose
        up nodes hold ``total``."""
        guar = self.abs_cap[part][:, None] * total[None, :]
        maxi = self.abs_max[part][:, None] * total[None, :]
        if not self.any_absolute:
            return guar, maxi
        name = DOMINANT if calc else DEFAULT
        t = self.tree
        guar[0], maxi[0] = total, total
        for q, kids_t in enumerate(t.children):
            kids = list(kids_t)
            if not kids or not self.absolute[kids[0]]:
                continue  # percent/weight children: shares of the partition, above
            conf = self.min_res[part, kids]
            need = conf.sum(axis=0)
            scale = np.ones(3)
            if greater(need, guar[q], total, name) and (q > 0 or total.any()):
                has = need > 0
                scale[has] = guar[q][has] / need[has]
            guar[kids] = conf * scale
            for k in kids:  # resources a maximum leaves out are the parent's
                cap = np.where(np.isnan(self.max_res[part, k]), maxi[q], self.max_res[part, k])
                maxi[k] = _vmin(cap, maxi[q], total, name)
        return guar, maxi

    def app_shares(self, parts_total: np.ndarray | None, guar: list[np.ndarray],
                   calc: int) -> np.ndarray:
        """Per leaf, the largest absolute capacity over the partitions it can access.

        Maximum applications follow ``(int)(maximum-applications * absolute capacity)``;
        with node labels Hadoop (``LeafQueue.updateMaximumApplications``) takes the
        largest value over the queue's partitions, so a queue whose guarantee is all in a
        label is not limited to one application.  Absolute queues use their effective
        guarantee's share of the partition (``rc.divide``; 0 without ``parts_total``).
        """
        t = self.tree
        leaves = t.leaves
        best = np.zeros(t.n_leaves)
        name = DOMINANT if calc else DEFAULT
        for p in range(self.n_parts):
            share = self.abs_cap[p, leaves].copy()
            for pos, q in enumerate(leaves.tolist()):
                if self.absolute[q]:
                    if parts_total is None:
                        share[pos] = 0.0
                        continue
                    tot = parts_total[p]
                    share[pos] = ratio(guar[p][q], tot, tot, name) if tot.any() else 0.0
            best = np.maximum(best, np.where(self.access[p, leaves], share, 0.0))
        return best


def _vmin(a: np.ndarray, b: np.ndarray, total: np.ndarray, name: str) -> np.ndarray:
    """``Resources.min``: the whole smaller vector as the calculator compares them."""
    return b if greater(a, b, total, name) else a


def flat_caps(tree: QueueTree, n_parts: int, exclusive: np.ndarray,
              am_percent: np.ndarray, names: tuple[str, ...] = ("",)) -> QueueCaps:
    """Capacities when nothing but DEFAULT percentages is configured: every queue can use
    every label (Hadoop: ``accessible-node-labels`` is inherited from root's ``*``) with a
    label capacity of 0 (root 100%) and a label maximum of 100%."""
    n_q = tree.n_queues
    abs_cap = np.zeros((n_parts, n_q))
    abs_max = np.ones((n_parts, n_q))
    abs_cap[:, 0] = 1.0
    abs_cap[0], abs_max[0] = tree.abs_cap, tree.abs_max
    return QueueCaps(
        tree=tree, names=names, exclusive=exclusive,
        access=np.ones((n_parts, n_q), dtype=bool), abs_cap=abs_cap, abs_max=abs_max,
        absolute=np.zeros(n_q, dtype=bool), min_res=np.zeros((n_parts, n_q, 3)),
        max_res=np.full((n_parts, n_q, 3), np.nan),
        am_percent=np.tile(am_percent, (n_parts, 1)),
        leaf_part=np.zeros(tree.n_leaves, dtype=np.int64))
