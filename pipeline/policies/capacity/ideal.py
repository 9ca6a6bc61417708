"""How much each leaf queue gives back in one preemption round (Hadoop 3.3), on vectors.

Paraphrases apache/hadoop 3.3 ``monitor/capacity``: ``PreemptableResourceCalculator``
(``computeIdealResourceDistribution``, ``calculateResToObtainByPartitionForLeafQueues``),
``AbstractPreemptableResourceCalculator`` (``computeFixpointAllocation``,
``resetCapacity``, ``TQComparator``, ``getMostUnderservedQueues``) and
``TempQueuePerPartition`` (``offer``, ``assignPreemption``).  Per level of the queue tree:

1. a queue over its guarantee starts at ``componentwiseMin(guaranteed, used)``, others at
   their use; what is left of the parent's ideal is offered to the queues still asking
   (``ideal < used + pending``), the most underserved first (lowest ``ideal /
   guaranteed``; with a ``priority-utilization`` parent the queue priority decides when
   both are under or both over, ``PriorityUtilizationQueueOrderingPolicy.compare``), each
   ``unassigned * guaranteed / sum of guarantees still asking`` per resource; a queue
   accepts ``componentwiseMin(max - ideal, min(offer, used + pending - ideal))`` and, for a
   leaf, at most ``max(used, guaranteed) - ideal``; a queue that accepts nothing leaves;
2. ``needed = sum of (used - ideal)`` over siblings above their ideal; above
   ``total_preemption_per_round * cluster`` everything is scaled by ``allowed / needed``;
3. a queue keeps ``max(ideal, min(used + pending, guaranteed))`` and is asked for
   ``(used - keep) * scaling`` when ``used`` is above that;
4. a leaf acts only when ``used > guaranteed * (1 + max_ignored_over_capacity)`` (dead
   zone), and then asks for that amount times ``natural_termination_factor``.

Resources are ``(cpu, mem, gpu)`` vectors, as Hadoop's ``Resource``: sums and differences
are per resource; comparisons, minima and ratios go through the resource calculator, with
the parent's ideal as the reference inside a level (Hadoop passes ``tot_guarant`` as the
"cluster" of those calls) and the partition for the dead zone: memory only for
``DefaultResourceCalculator``, dominant shares largest first for
``DominantResourceCalculator``.  (tracereplay used to reduce every container to one number
in the calculator's terms and add those up; dominant shares do not add up, so with the
dominant calculator a full cluster of mixed cpu- and memory-heavy containers "used" more
than the cluster, every queue looked above its ideal and the monitor preempted round after
round with no queue below its guarantee.)  Hadoop rounds offers up to whole MB and vcores;
here they are exact and the water-filling stops when what is left is a negligible share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipeline.policies.queues.tree import QueueTree

if TYPE_CHECKING:
    from pipeline.policies.capacity.preemption import PreemptionSettings

TOL = 1e-9  # shares below this are zero (float drift; Hadoop counts whole MB and vcores)
MAX_PASSES = 10_000


@dataclass(frozen=True)
class Calculator:
    """``Resources`` comparisons under a resource calculator, row by row on (n, 3) arrays.

    ``base`` is the reference resource of the comparisons (the ``clusterResource``
    argument): the dominant calculator compares shares of it, largest first
    (``DominantResourceCalculator.compare``); the default one compares memory.
    """

    dominant: bool
    base: np.ndarray

    def _keys(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if not self.dominant:
            scale = self.base[1] if self.base[1] > 0 else 1.0
            return x[:, 1:2] / scale
        has = self.base > 0
        shares = x[:, has] / self.base[has] if has.any() else x
        return -np.sort(-shares, axis=1)

    def compare(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """-1, 0 or 1 per row (``rc.compare``), within :data:`TOL`."""
        ka, kb = np.broadcast_arrays(self._keys(a), self._keys(b))
        d = ka - kb
        big = np.abs(d) > TOL
        first = np.argmax(big, axis=1)
        return np.sign(d[np.arange(len(d)), first]) * big.any(axis=1)

    def gt(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``Resources.greaterThan``, per row."""
        return self.compare(a, b) > 0

    def positive(self, x: np.ndarray) -> np.ndarray:
        """``Resources.greaterThan(rc, base, x, none)``, per row."""
        return self.gt(x, np.zeros(3))

    def smaller(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``Resources.min``: per row, the whole vector the calculator finds smaller."""
        a, b = np.broadcast_arrays(np.atleast_2d(a), np.atleast_2d(b))
        return np.where(self.gt(a, b)[:, None], b, a)

    def larger(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``Resources.max``."""
        a, b = np.broadcast_arrays(np.atleast_2d(a), np.atleast_2d(b))
        return np.where(self.gt(a, b)[:, None], a, b)

    def divide(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``Resources.divide``: memory ratio, or ratio of the largest shares."""
        ka, kb = self._keys(a)[:, 0], self._keys(b)[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(kb > 0, ka / np.where(kb > 0, kb, 1.0), np.inf)


def _before(x: int, y: int, rel: np.ndarray, prio: np.ndarray | None) -> int:
    """``TQComparator``: -1 when queue ``x`` is more underserved than ``y``, 0 on a tie."""
    if prio is not None and prio[x] != prio[y] and (rel[x] < 1.0) == (rel[y] < 1.0):
        return -1 if prio[x] > prio[y] else 1  # both under or both over: priority first
    if rel[x] == rel[y] or abs(rel[x] - rel[y]) <= TOL:  # zero guarantees: both inf
        return 0
    return -1 if rel[x] < rel[y] else 1


def _most_underserved(active: np.ndarray, rel: np.ndarray, prio: np.ndarray | None,
                      ) -> np.ndarray:
    """The queues tied for first place in ``TQComparator`` order among ``active``."""
    idx = np.flatnonzero(active).tolist()
    head = idx[0]
    for q in idx[1:]:
        if _before(q, head, rel, prio) < 0:
            head = q
    return np.array([q for q in idx if _before(q, head, rel, prio) == 0], dtype=np.int64)


def _offer(rc: Calculator, q: int, avail: np.ndarray, ideal: np.ndarray, guar: np.ndarray,
           maxi: np.ndarray, used: np.ndarray, want: np.ndarray, leaf: bool) -> np.ndarray:
    """What queue ``q`` accepts of ``avail`` (``TempQueuePerPartition.offer``)."""
    room = np.maximum(maxi[q] - ideal[q], 0.0)
    accepted = np.minimum(room, rc.smaller(avail, want[q] - ideal[q])[0])
    if leaf:  # filterByMaxDeductAssigned: never past max(used, guaranteed)
        cap = np.maximum(rc.larger(used[q], guar[q])[0] - ideal[q], 0.0)
        accepted = rc.smaller(accepted, cap)[0]
    return np.minimum(np.maximum(accepted, 0.0), avail)


def _fixpoint(rc: Calculator, ideal: np.ndarray, unassigned: np.ndarray, members: np.ndarray,
              guar: np.ndarray, maxi: np.ndarray, used: np.ndarray, want: np.ndarray,
              leaf: np.ndarray, prio: np.ndarray | None, by_guarantee: bool) -> np.ndarray:
    """``computeFixpointAllocation`` over ``members``; updates ``ideal``, returns what is
    left unassigned."""
    active = members & rc.gt(want, ideal)
    for _ in range(MAX_PASSES):
        if not active.any() or not rc.positive(unassigned)[0]:
            break
        if by_guarantee:  # resetCapacity: guarantees normalised over the queues asking
            tot = guar[active].sum(axis=0)
            norm = np.where(tot > 0, guar / np.where(tot > 0, tot, 1.0), 0.0)
        else:
            norm = np.full(guar.shape, 1.0 / active.sum())
        rel = np.where(rc.positive(guar), rc.divide(ideal, guar), np.inf)
        offered = unassigned.copy()  # dupUnassignedForTheRound
        for q in _most_underserved(active, rel, prio).tolist():
            avail = np.minimum(offered * norm[q], unassigned)
            done = _offer(rc, q, avail, ideal, guar, maxi, used, want, bool(leaf[q]))
            ideal[q] += done
            unassigned = np.maximum(unassigned - done, 0.0)
            active[q] = bool(rc.positive(done)[0])
    return unassigned


def ideal_assignment(total: np.ndarray, guar: np.ndarray, maxi: np.ndarray, used: np.ndarray,
                     pending: np.ndarray, leaf: np.ndarray, dominant: bool = False,
                     prio: np.ndarray | None = None) -> np.ndarray:
    """Ideal share (k, 3) of the parent's ideal ``total`` among sibling queues (step 1).

    ``prio``: the siblings' queue priorities when the parent orders by
    ``priority-utilization`` (``TempQueuePerPartition.relativePriority``), else None.
    """
    rc = Calculator(dominant, np.asarray(total, dtype=np.float64))
    over = rc.gt(used, guar)
    # initIdealAssignment (no untouchable extra: every queue here may be preempted)
    ideal = np.where(over[:, None], np.minimum(guar, used), used).astype(np.float64)
    nonzero = rc.positive(guar)
    # Hadoop lets a component of what is left go negative only until the first offer
    unassigned = np.maximum(total - ideal[nonzero].sum(axis=0), 0.0)
    want = used + pending
    unassigned = _fixpoint(rc, ideal, unassigned, nonzero, guar, maxi, used, want, leaf, prio,
                           by_guarantee=True)
    zero = ~nonzero
    if zero.any() and rc.positive(unassigned)[0]:  # zero guarantees share what is left
        unassigned = np.maximum(unassigned - ideal[zero].sum(axis=0), 0.0)
        _fixpoint(rc, ideal, unassigned, zero, guar, maxi, used, want, leaf, None,
                  by_guarantee=False)
    return ideal


def _to_be_preempted(rc: Calculator, ideal: np.ndarray, guar: np.ndarray, used: np.ndarray,
                     pending: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Steps 2-3 for one level of siblings (``assignPreemption`` with the scaling)."""
    over = rc.gt(used, ideal)
    needed = np.where(over[:, None], used - ideal, 0.0).sum(axis=0)
    scale = 1.0
    if rc.gt(needed, allowed)[0]:
        scale = float(rc.divide(allowed, needed)[0])
    keep = rc.larger(rc.smaller(used + pending, guar), ideal)
    return np.where(rc.gt(used, keep)[:, None], (used - keep) * scale, 0.0)


def to_obtain(tree: QueueTree, cluster: np.ndarray, used: np.ndarray, pending: np.ndarray,
              s: PreemptionSettings, guar: np.ndarray | None = None,
              maxi: np.ndarray | None = None, dominant: bool = False,
              prio: np.ndarray | None = None) -> np.ndarray:
    """What each queue should give back this round, (n_queues, 3); zero for non-leaves.

    ``cluster`` is the partition's resource; ``used``/``pending`` per queue (parents
    summed over their leaves); ``guar``/``maxi`` the queues' guarantees and maxima
    (default: the tree's shares of ``cluster``); ``prio``: queue priorities, used among
    the children of parents that order by ``priority-utilization`` (``tree.prop``).
    """
    cluster = np.asarray(cluster, dtype=np.float64)
    guar = tree.abs_cap[:, None] * cluster if guar is None else guar
    maxi = tree.abs_max[:, None] * cluster if maxi is None else maxi
    ideal = np.zeros((tree.n_queues, 3))
    ideal[0] = cluster  # initializeRootIdealWithGuarangeed: the root's guarantee
    out = np.zeros((tree.n_queues, 3))
    allowed = cluster * s.per_round
    for p, kids_t in enumerate(tree.children):
        if not kids_t:
            continue
        kids = np.array(kids_t)
        kid_prio = None
        if prio is not None and tree.prop(p, "ordering") == "priority-utilization":
            kid_prio = prio[kids]
        ideal[kids] = ideal_assignment(ideal[p], guar[kids], maxi[kids], used[kids],
                                       pending[kids], tree.is_leaf[kids], dominant, kid_prio)
        rc = Calculator(dominant, ideal[p])
        out[kids] = _to_be_preempted(rc, ideal[kids], guar[kids], used[kids], pending[kids],
                                     allowed)
    rc = Calculator(dominant, cluster)
    act = tree.is_leaf & rc.gt(used, guar * (1.0 + s.dead_zone)) & rc.positive(out)
    return np.where(act[:, None], out * s.natural_termination, 0.0)

