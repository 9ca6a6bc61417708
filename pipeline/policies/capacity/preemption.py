"""Cross-queue preemption: ``ProportionalCapacityPreemptionPolicy`` (Hadoop 3.3).

Sources: CapacityScheduler.md "Capacity Scheduler container preemption" (property names and
defaults) and apache/hadoop ``monitor/capacity/`` (``ProportionalCapacityPreemptionPolicy``,
``PreemptableResourceCalculator``, ``AbstractPreemptableResourceCalculator``,
``FifoCandidatesSelector``).  One monitoring round, per level of the queue tree:

1. ideal assignment by water-filling (``computeFixpointAllocation``): a queue over its
   guarantee starts at the guarantee, others at their use; what is left of the parent's
   ideal is offered to the underserved queues (``ideal < used + pending``) in proportion to
   their normalised guarantees, lowest ``ideal / guaranteed`` first; a queue accepts
   ``min(offer, max - ideal, used + pending - ideal, max(used, guaranteed) - ideal)`` (last
   term for leaves only);
2. ``needed = sum of max(0, used - ideal)`` over the siblings; above
   ``total_preemption_per_round * cluster`` everything is scaled by ``allowed / needed``;
3. per queue ``keep = max(ideal, min(used + pending, guaranteed))`` and
   ``toBePreempted = (used - keep) * scaling`` when positive;
4. a leaf acts only when ``used > guaranteed * (1 + max_ignored_over_capacity)`` (dead
   zone) and then asks for ``toBePreempted * natural_termination_factor``.

With node labels the round runs once per partition (``TempQueuePerPartition``): a queue's
guarantee and maximum are its label capacities, its use is what runs on that partition's
nodes (containers count in the partition of their node), its pending demand what asks for
the partition.  In a leaf, containers that run on the partition *ignoring exclusivity*
(DEFAULT requests on a non-exclusive label) are selected first, newest first
(``FifoCandidatesSelector`` walks ``getIgnoreExclusivityRMContainers`` before the
applications), then the others in the usual order.

Choices: amounts are scalars in the calculator's terms (memory for the default calculator,
dominant share of the partition for the dominant one) rather than per-resource vectors;
there are no reserved containers or killable containers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.policies.queues.tree import QueueTree

EPS = 1e-12


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


def ideal_assignment(total: float, guar: np.ndarray, maxi: np.ndarray, used: np.ndarray,
                     pending: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """Water-filling ideal share of ``total`` among sibling queues (step 1 above).

    As ``computeFixpointAllocation``: guarantees are normalised over *all* queues still
    asking, but only the most underserved group (lowest ``ideal / guaranteed``) is offered
    its share each pass; a queue that accepts nothing leaves the loop.
    """
    ideal = np.where(used > guar, guar, used).astype(np.float64)
    unassigned = total - ideal.sum()
    want = used + pending
    active = (ideal < want - EPS) & (guar > 0)
    tol = max(total, 1.0) * 1e-9
    for _ in range(10_000):  # geometric convergence; Hadoop stops at whole MB
        if not active.any() or unassigned <= tol:
            break
        rel = ideal / np.maximum(guar, EPS)
        low = active & (rel <= rel[active].min() + 1e-12)
        offer = np.where(low, unassigned * guar / guar[active].sum(), 0.0)
        accept = np.minimum.reduce([offer, maxi - ideal, want - ideal,
                                    np.where(leaf, np.maximum(used, guar) - ideal, np.inf)])
        accept = np.where(low, np.maximum(accept, 0.0), 0.0)
        ideal += accept
        unassigned -= accept.sum()
        active &= ~(low & (accept <= tol))
    zero = (guar <= 0) & (ideal < want - EPS)
    if zero.any() and unassigned > tol:  # zero-guarantee queues share what is left equally
        extra = np.minimum(unassigned / zero.sum(), want - ideal)
        ideal = np.where(zero, ideal + np.maximum(extra, 0.0), ideal)
    return ideal


def to_obtain(tree: QueueTree, cluster: float, used: np.ndarray, pending: np.ndarray,
              s: PreemptionSettings, guar: np.ndarray | None = None,
              maxi: np.ndarray | None = None) -> np.ndarray:
    """Amount each queue should give back this round (0 for non-leaves), steps 1-4.

    ``guar``/``maxi`` are the queues' guarantees and maxima in the same terms as
    ``cluster`` (default: the tree's shares of ``cluster``).
    """
    guar = tree.abs_cap * cluster if guar is None else guar
    maxi = tree.abs_max * cluster if maxi is None else maxi
    ideal = np.zeros(tree.n_queues)
    ideal[0] = cluster
    out = np.zeros(tree.n_queues)
    allowed = cluster * s.per_round
    for p, kids_t in enumerate(tree.children):
        if not kids_t:
            continue
        kids = np.array(kids_t)
        ideal[kids] = ideal_assignment(ideal[p], guar[kids], maxi[kids], used[kids],
                                       pending[kids], tree.is_leaf[kids])
        needed = np.maximum(used[kids] - ideal[kids], 0.0).sum()
        scale = allowed / needed if needed > allowed else 1.0
        keep = np.maximum(ideal[kids], np.minimum(used[kids] + pending[kids], guar[kids]))
        out[kids] = np.maximum(used[kids] - keep, 0.0) * scale
    over = used > guar * (1.0 + s.dead_zone) + EPS
    return np.where(tree.is_leaf & over, out * s.natural_termination, 0.0)


def select(amount: float, order: np.ndarray, size: np.ndarray, selected: np.ndarray,
           is_am: np.ndarray) -> np.ndarray:
    """Containers (positions in ``order``) marked to give back ``amount`` (FifoCandidatesSelector).

    ``order`` lists the leaf's running containers in preemption order (last application
    first, newest container first).  Already selected containers count first; non-AM
    containers are then added while something is still to obtain (so the last one may
    overshoot); AM containers are never selected (Hadoop takes them last).
    """
    left = amount
    chosen = []
    for i in order.tolist():
        if selected[i]:
            left -= size[i]
            chosen.append(i)
    for i in order.tolist():
        if left <= EPS:
            break
        if selected[i] or is_am[i]:
            continue
        chosen.append(i)
        left -= size[i]
    return np.array(chosen, dtype=np.int64)


@dataclass
class PartitionRound:
    """One partition as the monitor sees it (fields ``None``: the whole cluster, no labels).

    ``guar``/``maxi``: per-queue resource vectors; ``run``/``pend``: indices of the running
    containers on the partition's nodes and of the pending requests asking for it;
    ``ignore``: per running container, whether it was placed ignoring exclusivity.
    """

    cluster: np.ndarray
    guar: np.ndarray | None = None
    maxi: np.ndarray | None = None
    run: np.ndarray | None = None
    pend: np.ndarray | None = None
    ignore: np.ndarray | None = None


class PreemptionTimer:
    """Runs the monitor every ``interval_s`` and kills containers selected long enough.

    ``marked`` maps a running task's trace row to when it was first selected; each round
    the selection is recomputed, containers no longer selected are forgotten, and those
    selected for ``wait_before_kill_s`` or more are preempted (the core re-queues them and
    counts the lost run time as wasted work).
    """

    def __init__(self, tree: QueueTree, settings: PreemptionSettings) -> None:
        self.tree = tree
        self.s = settings
        self.next_s = 0.0
        self.marked: dict[int, float] = {}
        self.paths = tree.leaf_paths_matrix().T.astype(np.float64)

    def step(self, now: float, run: object, run_leaf: np.ndarray, run_req: np.ndarray,
             pend_leaf: np.ndarray, pend_req: np.ndarray, first_seen: np.ndarray,
             am_row: np.ndarray, cluster: np.ndarray, calc: int,
             parts: list[PartitionRound] | None = None,
             ) -> tuple[np.ndarray, float | None]:
        """Preempted running indices this call, and when to be woken next.

        ``parts`` lists the partitions (node labels); without it the cluster is one.
        """
        empty = np.zeros(0, dtype=np.int64)
        if not self.s.enabled:
            return empty, None
        out = empty
        if now >= self.next_s - 1e-9:
            out = self._round(now, run, run_leaf, run_req, pend_leaf, pend_req, first_seen,
                              am_row, calc, parts or [PartitionRound(cluster)])
            self.next_s = (np.floor(now / self.s.interval_s + 1e-9) + 1) * self.s.interval_s
        busy = len(run_leaf) > 0 and (len(pend_leaf) > 0 or self.marked)
        wake = float(self.next_s) if busy else None
        if len(out):  # freed resources go out at the next heartbeat, not the next round
            wake = float(np.nextafter(now, np.inf))
        return out, wake

    def _scalar(self, x: np.ndarray, cluster: np.ndarray, calc: int) -> np.ndarray:
        if calc == 0:
            return x[:, 1]
        has = cluster > 0
        return (x[:, has] / cluster[has]).max(axis=1) if has.any() else np.zeros(len(x))

    def _amounts(self, part: PartitionRound, run_leaf, run_req, pend_leaf, pend_req,
                 calc) -> tuple[np.ndarray, np.ndarray]:
        """(amount per queue to obtain, size of every running container) in one partition."""
        n_l = self.tree.n_leaves
        cluster = part.cluster
        total = float(cluster[1]) if calc == 0 else 1.0
        size = self._scalar(run_req, cluster, calc)
        if part.run is None:
            used = self.paths @ np.bincount(run_leaf, size, n_l)
            pending = self.paths @ np.bincount(pend_leaf, self._scalar(pend_req, cluster, calc),
                                               n_l)
        else:
            used = self.paths @ np.bincount(run_leaf[part.run], size[part.run], n_l)
            pending = self.paths @ np.bincount(
                pend_leaf[part.pend], self._scalar(pend_req[part.pend], cluster, calc), n_l)
        guar = maxi = None
        if part.guar is not None and part.maxi is not None:
            guar = self._scalar(part.guar, cluster, calc)
            maxi = self._scalar(part.maxi, cluster, calc)
        return to_obtain(self.tree, total, used, pending, self.s, guar, maxi), size

    def _round(self, now: float, run, run_leaf, run_req, pend_leaf, pend_req,
               first_seen, am_row, calc, parts: list[PartitionRound]) -> np.ndarray:
        rows = np.asarray(run.row, dtype=np.int64)
        job = np.asarray(run.job, dtype=np.int64)
        selected = np.isin(rows, np.fromiter(self.marked, np.int64, len(self.marked)))
        is_am = am_row[job] == rows
        marked: dict[int, float] = {}
        for part in parts:
            amount, size = self._amounts(part, run_leaf, run_req, pend_leaf, pend_req, calc)
            for pos, q in enumerate(self.tree.leaves.tolist()):
                if amount[q] <= 0:
                    continue
                order = self._order(part, pos, run, run_leaf, rows, job, first_seen)
                for i in select(float(amount[q]), order, size, selected, is_am).tolist():
                    marked[int(rows[i])] = self.marked.get(int(rows[i]), now)
        self.marked = marked
        if self.s.observe_only:
            return np.zeros(0, dtype=np.int64)
        keys = np.fromiter(marked, np.int64, len(marked))
        since = np.fromiter(marked.values(), np.float64, len(marked))
        ripe = keys[now - since >= self.s.wait_before_kill_s - 1e-9]
        due = np.flatnonzero(np.isin(rows, ripe)).astype(np.int64)  # in running order
        for r in rows[due].tolist():
            del self.marked[r]
        return due

    @staticmethod
    def _order(part: PartitionRound, pos: int, run, run_leaf, rows, job, first_seen,
               ) -> np.ndarray:
        """Leaf ``pos``'s containers in the partition, in the order they are given up."""
        if part.run is None:
            idx = np.flatnonzero(run_leaf == pos)
        else:
            idx = part.run[run_leaf[part.run] == pos]
        start = np.asarray(run.start_s)
        first: np.ndarray = idx[:0]
        if part.ignore is not None:
            ix = part.ignore[idx]
            first, idx = idx[ix], idx[~ix]
            first = first[np.lexsort((-rows[first], -start[first]))]  # newest first
        # last application first (lowest priority, latest), newest container first
        order = idx[np.lexsort((-rows[idx], -start[idx], -first_seen[job[idx]],
                                np.asarray(run.priority)[idx]))]
        return np.concatenate([first, order]) if len(first) else order
