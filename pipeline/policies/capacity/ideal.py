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
from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.queues.tree import QueueTree

TOL = 1e-9  # shares below this are zero (float drift; Hadoop counts whole MB and vcores)
MAX_PASSES = 10_000


@dataclass(frozen=True)
class PreemptionSettings:
    """``yarn.resourcemanager.monitor.capacity.preemption.*`` (defaults from yarn-default)."""

    enabled: bool = False
    observe_only: bool = False
    interval_s: float = 3.0
    wait_before_kill_s: float = 15.0
    per_round: float = 0.1
    dead_zone: float = 0.1
    natural_termination: float = 0.2


class Siblings(NamedTuple):
    """The children of one parent, as the water-filling of step 1 reads them (k queues)."""

    guar: np.ndarray  # (k, 3) guaranteed
    maxi: np.ndarray  # (k, 3) maximum capacity
    used: np.ndarray  # (k, 3) used
    want: np.ndarray  # (k, 3) used + pending
    leaf: np.ndarray  # (k,) bool: a leaf queue
    prio: np.ndarray  # (k,) int64 queue priority (read when the parent orders by it)


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


@njit(cache=True)
def _cmp(a, b, base, dominant):
    """``rc.compare(base, a, b)`` for single vectors: -1, 0 or 1 (see :class:`Calculator`)."""
    sa = np.zeros(3)
    sb = np.zeros(3)
    n = 0
    if not dominant:
        scale = base[1] if base[1] > 0 else 1.0
        sa[0], sb[0], n = a[1] / scale, b[1] / scale, 1
    else:
        for r in range(3):
            if base[r] > 0:
                sa[n], sb[n] = a[r] / base[r], b[r] / base[r]
                n += 1
        if n == 0:
            sa[:], sb[:], n = a, b, 3
        sa[:n] = -np.sort(-sa[:n])
        sb[:n] = -np.sort(-sb[:n])
    for i in range(n):
        d = sa[i] - sb[i]
        if abs(d) > TOL:
            return 1 if d > 0 else -1
    return 0


@njit(cache=True)
def _smaller(a, b, base, dominant):
    return b.copy() if _cmp(a, b, base, dominant) > 0 else a.copy()


@njit(cache=True)
def _larger(a, b, base, dominant):
    return a.copy() if _cmp(a, b, base, dominant) > 0 else b.copy()


@njit(cache=True)
def _lead(x, base, dominant):
    """The first comparison key: memory share, or the largest share."""
    if not dominant:
        return x[1] / (base[1] if base[1] > 0 else 1.0)
    best = -np.inf
    for r in range(3):
        if base[r] > 0:
            best = max(best, x[r] / base[r])
    return best if best > -np.inf else max(x[0], max(x[1], x[2]))


@njit(cache=True)
def _before(x, y, rel, prio, use_prio):
    """``TQComparator``: -1 when queue ``x`` is more underserved than ``y``, 0 on a tie
    (priority first when both are under or both over their guarantee)."""
    if use_prio and prio[x] != prio[y] and (rel[x] < 1.0) == (rel[y] < 1.0):
        return -1 if prio[x] > prio[y] else 1
    if rel[x] == rel[y] or abs(rel[x] - rel[y]) <= TOL:  # zero guarantees: both inf
        return 0
    return -1 if rel[x] < rel[y] else 1


@njit(cache=True)
def _offer(avail, q, ideal, sib, base, dominant):
    """What queue ``q`` of ``sib`` (:class:`Siblings`) accepts of ``avail``
    (``TempQueuePerPartition.offer``)."""
    room = np.maximum(sib.maxi[q] - ideal[q], 0.0)
    accepted = np.minimum(room, _smaller(avail, sib.want[q] - ideal[q], base, dominant))
    if sib.leaf[q]:  # filterByMaxDeductAssigned: never past max(used, guaranteed)
        cap = np.maximum(_larger(sib.used[q], sib.guar[q], base, dominant) - ideal[q], 0.0)
        accepted = _smaller(accepted, cap, base, dominant)
    return np.minimum(np.maximum(accepted, 0.0), avail)


@njit(cache=True)
def _fixpoint(ideal, unassigned, members, sib, use_prio, by_guarantee, base, dominant):
    """``computeFixpointAllocation`` over ``members`` of ``sib`` (:class:`Siblings`);
    updates ``ideal`` and ``unassigned`` in place."""
    guar, want, prio = sib.guar, sib.want, sib.prio
    k = len(ideal)
    zero = np.zeros(3)
    active = members.copy()
    for q in range(k):
        active[q] = active[q] and _cmp(want[q], ideal[q], base, dominant) > 0
    rel = np.empty(k)
    for _ in range(MAX_PASSES):
        if not active.any() or _cmp(unassigned, zero, base, dominant) <= 0:
            break
        tot = np.zeros(3)
        n_active = 0
        for q in range(k):
            if active[q]:
                tot += guar[q]
                n_active += 1
            pos = _cmp(guar[q], zero, base, dominant) > 0
            rel[q] = _lead(ideal[q], base, dominant) / _lead(guar[q], base, dominant) \
                if pos else np.inf
        head = -1
        for q in range(k):
            if active[q] and (head < 0 or _before(q, head, rel, prio, use_prio) < 0):
                head = q
        offered = unassigned.copy()  # dupUnassignedForTheRound
        for q in range(k):
            if not active[q] or _before(q, head, rel, prio, use_prio) != 0:
                continue
            norm = np.full(3, 1.0 / n_active)
            if by_guarantee:  # resetCapacity: normalised over the queues still asking
                for r in range(3):
                    norm[r] = guar[q, r] / tot[r] if tot[r] > 0 else 0.0
            avail = np.minimum(offered * norm, unassigned)
            done = _offer(avail, q, ideal, sib, base, dominant)
            ideal[q] += done
            unassigned[:] = np.maximum(unassigned - done, 0.0)
            active[q] = _cmp(done, zero, base, dominant) > 0


@njit(cache=True)
def _ideal(total, guar, maxi, used, pending, leaf, prio, use_prio, dominant):
    k = len(used)
    zero = np.zeros(3)
    ideal = used.copy()
    nonzero = np.zeros(k, dtype=np.bool_)
    unassigned = total.copy()
    for q in range(k):
        if _cmp(used[q], guar[q], total, dominant) > 0:  # initIdealAssignment
            ideal[q] = np.minimum(guar[q], used[q])
        nonzero[q] = _cmp(guar[q], zero, total, dominant) > 0
        if nonzero[q]:
            unassigned -= ideal[q]
    # Hadoop lets a component of what is left go negative only until the first offer
    unassigned = np.maximum(unassigned, 0.0)
    sib = Siblings(guar, maxi, used, used + pending, leaf, prio)
    _fixpoint(ideal, unassigned, nonzero, sib, use_prio, True, total, dominant)
    if (~nonzero).any() and _cmp(unassigned, zero, total, dominant) > 0:
        for q in range(k):  # zero guarantees share what is left equally
            if not nonzero[q]:
                unassigned -= ideal[q]
        unassigned = np.maximum(unassigned, 0.0)
        _fixpoint(ideal, unassigned, ~nonzero, sib, False, False, total, dominant)
    return ideal


def ideal_assignment(total: np.ndarray, guar: np.ndarray, maxi: np.ndarray, used: np.ndarray,
                     pending: np.ndarray, leaf: np.ndarray, dominant: bool = False,
                     prio: np.ndarray | None = None) -> np.ndarray:
    """Ideal share (k, 3) of the parent's ideal ``total`` among sibling queues (step 1).

    ``prio``: the siblings' queue priorities when the parent orders by
    ``priority-utilization`` (``TempQueuePerPartition.relativePriority``), else None.
    """
    def arr(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x, dtype=np.float64)

    use_prio = prio is not None
    prio_arr = np.zeros(len(used), np.int64) if prio is None else np.asarray(prio, np.int64)
    return _ideal(arr(total), arr(guar), arr(maxi), arr(used), arr(pending),
                  np.asarray(leaf, dtype=np.bool_), prio_arr, use_prio, dominant)


@njit(cache=True)
def _to_be_preempted(ideal, guar, used, pending, allowed, base, dominant):
    """Steps 2-3 for one level of siblings (``assignPreemption`` with the scaling)."""
    k = len(used)
    needed = np.zeros(3)
    for q in range(k):
        if _cmp(used[q], ideal[q], base, dominant) > 0:
            needed += used[q] - ideal[q]
    scale = 1.0
    if _cmp(needed, allowed, base, dominant) > 0:
        scale = _lead(allowed, base, dominant) / _lead(needed, base, dominant)
    out = np.zeros((k, 3))
    for q in range(k):
        keep = _larger(_smaller(used[q] + pending[q], guar[q], base, dominant), ideal[q],
                       base, dominant)
        if _cmp(used[q], keep, base, dominant) > 0:
            out[q] = (used[q] - keep) * scale
    return out


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
        out[kids] = _to_be_preempted(ideal[kids], np.ascontiguousarray(guar[kids]),
                                     np.ascontiguousarray(used[kids]),
                                     np.ascontiguousarray(pending[kids]), allowed,
                                     ideal[p].copy(), dominant)
    return _act(out, np.ascontiguousarray(used), np.ascontiguousarray(guar) * (1 + s.dead_zone),
                tree.is_leaf, s.natural_termination, cluster, dominant)


@njit(cache=True)
def _act(out, used, dead_zone, leaf, factor, cluster, dominant):
    """Step 4: leaves beyond the dead zone ask for ``factor`` of what they should give."""
    zero = np.zeros(3)
    res = np.zeros_like(out)
    for q in range(len(out)):
        if (leaf[q] and _cmp(used[q], dead_zone[q], cluster, dominant) > 0
                and _cmp(out[q], zero, cluster, dominant) > 0):
            res[q] = out[q] * factor
    return res


def positive(x: np.ndarray, base: np.ndarray, dominant: bool) -> bool:
    """``Resources.greaterThan(rc, base, x, none)`` for one vector (compiled)."""
    return _cmp(np.ascontiguousarray(x, dtype=np.float64), np.zeros(3),
                np.ascontiguousarray(base, dtype=np.float64), dominant) > 0

