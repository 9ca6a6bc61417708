"""Cross-queue preemption: ``ProportionalCapacityPreemptionPolicy`` (Hadoop 3.3).

Sources: CapacityScheduler.md "Capacity Scheduler container preemption" (property names and
defaults) and apache/hadoop 3.3 ``monitor/capacity/`` (``ProportionalCapacityPreemptionPolicy``,
``FifoCandidatesSelector``, ``CapacitySchedulerPreemptionUtils``).  Every
``monitoring_interval`` the monitor computes what each leaf should give back
(:mod:`.ideal`: ideal assignment, scaling, dead zone, natural termination) and selects,
from scratch, containers to cover it (``FifoCandidatesSelector.selectCandidates``: the
round's candidate map is new each round, ``containerBasedPreemptOrKill``):

- per leaf, in the ordering policy's preemption order (last application first, newest
  container first); a container is taken while something is still to obtain
  (``isAnyMajorResourceAboveZero``), if it fits what is left of
  ``total_preemption_per_round * cluster`` for the round (``Resources.fitsIn``: every
  resource with the dominant calculator, so a container larger than that share of the
  cluster is never taken) and lowers some resource still to obtain
  (``tryPreemptContainerAndDeductResToObtain``, non-conservative DRF, the default for
  cross-queue preemption, compares ``componentwiseMax(., 0)`` before and after); the last
  one may overshoot;
- ``preemptOrkillSelectedContainerAfterWait``: a selected container seen for the first
  time is marked with the round's time; a selected container marked at least
  ``max_wait_before_kill`` ago is killed; a marked container that is not selected again is
  kept until ``cleanupStaledPreemptionCandidates`` drops marks older than twice the wait.

So a container is only ever killed after it has run ``max_wait_before_kill`` (it can be
marked at the first round after it starts, at the earliest); a re-placed task is a new
container and starts that clock again.

With node labels the round runs once per partition (``TempQueuePerPartition``): a queue's
guarantee and maximum are its label capacities, its use is what runs on that partition's
nodes (containers count in the partition of their node), its pending demand what asks for
the partition.  In a leaf, containers that run on the partition *ignoring exclusivity*
(DEFAULT requests on a non-exclusive label) are selected first, newest first
(``FifoCandidatesSelector`` walks ``getIgnoreExclusivityRMContainers`` before the
applications), then the others in the usual order.

Choices: reserved containers count as used and not as pending (:mod:`.reservations`); a
leaf that must give back first drops its reservations (``preemptFrom``: "first drop
reserved containers", ``KILL_RESERVED_CONTAINER``, at once and counted against what is
to obtain), newest first, then selects running containers; there are no killable
containers (lazy preemption is off by default);
AM containers are never selected (Hadoop takes them last, only while the leaf's AMs exceed
its AM share); pending demand is what the caller counts (:mod:`.pending`: active
applications, within user limits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.policies.capacity.ideal import (
    TOL,
    Calculator,
    PreemptionSettings,
    positive,
    to_obtain,
)
from pipeline.policies.capacity.state import dense_sum
from pipeline.policies.queues.tree import QueueTree

EPS = 1e-9


def _above_zero(x: np.ndarray, rc: Calculator) -> bool:
    """``rc.isAnyMajorResourceAboveZero``: memory (default) or any resource (dominant)."""
    scale = np.where(rc.base > 0, rc.base, 1.0)
    return bool(x[1] > TOL * scale[1]) if not rc.dominant else bool((x > TOL * scale).any())


def _fits(c: np.ndarray, room: np.ndarray, rc: Calculator) -> bool:
    """``Resources.fitsIn(rc, c, room)``: memory (default) or every resource (dominant)."""
    slack = TOL * np.where(rc.base > 0, rc.base, 1.0)
    return bool(c[1] <= room[1] + slack[1]) if not rc.dominant else bool(
        (c <= room + slack).all())


def select(amount: np.ndarray, order: np.ndarray, size: np.ndarray, is_am: np.ndarray,
           budget: np.ndarray, rc: Calculator, left_out: list | None = None) -> list[int]:
    """Containers (positions in ``order``) selected to give back ``amount`` (one leaf).

    ``order`` lists the leaf's running containers in preemption order, ``size`` their
    resources; ``budget`` is what is left of the round's total preemption allowance (updated
    in place).  As ``tryPreemptContainerAndDeductResToObtain``: resources with nothing to
    obtain do not count, a container is taken only if it fits the budget and lowers some
    resource still to obtain, and selection stops once nothing is left.  ``left_out``, when
    given, receives what is still to obtain afterwards.
    """
    left = np.where(amount == 0, -TOL * np.where(rc.base > 0, rc.base, 1.0), amount)
    chosen: list[int] = []
    for i in order.tolist():
        if not _above_zero(left, rc):
            break
        if is_am[i] or not _fits(size[i], budget, rc):
            continue
        after = left - size[i]
        if not rc.gt(np.maximum(left, 0.0), np.maximum(after, 0.0))[0]:
            continue  # no resource still to obtain goes down (YARN-8292)
        left = after
        budget -= size[i]
        chosen.append(i)
    if left_out is not None:
        left_out.append(np.where(left < 0, 0.0, left))
    return chosen


@dataclass
class PartitionRound:
    """One partition as the monitor sees it (fields ``None``: the whole cluster, no labels).

    ``guar``/``maxi``: per-queue resource vectors; ``run``/``pend``: indices of the running
    containers on the partition's nodes and of the pending requests asking for it;
    ``ignore``: per running container, whether it was placed ignoring exclusivity;
    ``pending``: (n_leaves, 3) pending demand per leaf as the monitor counts it
    (:mod:`.pending`), instead of the sum of the requests ``pend``; ``reserved``: (n_leaves,
    3) reserved containers, counted as used (:mod:`.reservations`); ``held_leaf``,
    ``held_req``, ``held_row``: each reservation's leaf position, size and task row, dropped
    first when its leaf must give back (``FifoCandidatesSelector.preemptFrom``).
    """

    cluster: np.ndarray
    guar: np.ndarray | None = None
    maxi: np.ndarray | None = None
    run: np.ndarray | None = None
    pend: np.ndarray | None = None
    ignore: np.ndarray | None = None
    pending: np.ndarray | None = None
    reserved: np.ndarray | None = None
    held_leaf: np.ndarray | None = None
    held_req: np.ndarray | None = None
    held_row: np.ndarray | None = None


class PreemptionTimer:
    """Runs the monitor every ``interval_s`` and kills containers selected long enough.

    ``marked`` maps a running task's trace row to (when its container was first marked,
    the container's start): a re-placed task is a new container, so a mark only counts
    for the container it was made for.
    """

    def __init__(self, tree: QueueTree, settings: PreemptionSettings) -> None:
        self.tree = tree
        self.s = settings
        self.next_s = 0.0
        self.marked: dict[int, tuple[float, float]] = {}
        self.dropped: list[int] = []  # task rows whose reservation the last round dropped
        self.paths = tree.leaf_paths_matrix().T.astype(np.float64)
        self.prio = np.array([tree.prop(i, "priority", 0) for i in range(tree.n_queues)])

    def due(self, now: float) -> bool:
        """Whether a monitor round runs at ``now`` (callers gather its inputs only then)."""
        return self.s.enabled and now >= self.next_s - 1e-9

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
        if self.due(now):
            out = self._round(now, run, run_leaf, run_req, pend_leaf, pend_req, first_seen,
                              am_row, calc, parts or [PartitionRound(cluster)])
            self.next_s = (np.floor(now / self.s.interval_s + 1e-9) + 1) * self.s.interval_s
        busy = len(run_leaf) > 0 and (len(pend_leaf) > 0 or bool(self.marked))
        wake = float(self.next_s) if busy else None
        if len(out):  # freed resources go out at the next heartbeat, not the next round
            wake = float(np.nextafter(now, np.inf))
        return out, wake

    def after_placement(self, wake: float | None, placed: int, waiting: int,
                        ) -> float | None:
        """The wake-up once the call's placements are known: containers placed while
        requests still wait need the next round, even when nothing ran before the call
        (``step`` only saw the containers already running)."""
        if self.s.enabled and placed and waiting and (wake is None or wake > self.next_s):
            return float(self.next_s)
        return wake

    def _amounts(self, part: PartitionRound, run_leaf: np.ndarray, run_req: np.ndarray,
                 pend_leaf: np.ndarray, pend_req: np.ndarray, calc: int) -> np.ndarray:
        """(n_queues, 3) amounts to obtain in one partition."""
        n_l = self.tree.n_leaves
        run = slice(None) if part.run is None else part.run
        leaf_used = dense_sum(run_leaf[run], run_req[run], n_l)
        if part.reserved is not None:
            leaf_used += part.reserved
        used = self.paths @ leaf_used
        if part.pending is not None:
            leaf_pending = part.pending
        else:
            pend = slice(None) if part.pend is None else part.pend
            leaf_pending = dense_sum(pend_leaf[pend], pend_req[pend], n_l)
        return to_obtain(self.tree, part.cluster, used, self.paths @ leaf_pending, self.s,
                         part.guar, part.maxi, calc == 1, self.prio)

    def _round(self, now: float, run, run_leaf, run_req, pend_leaf, pend_req,
               first_seen, am_row, calc, parts: list[PartitionRound]) -> np.ndarray:
        rows = np.asarray(run.row, dtype=np.int64)
        job = np.asarray(run.job, dtype=np.int64)
        is_am = am_row[job] == rows
        budget = sum(part.cluster for part in parts) * self.s.per_round
        chosen: set[int] = set()
        for part in parts:
            amount = self._amounts(part, run_leaf, run_req, pend_leaf, pend_req, calc)
            rc = Calculator(calc == 1, np.asarray(part.cluster, dtype=np.float64))
            for pos, q in enumerate(self.tree.leaves.tolist()):
                if not amount[q].any() or not positive(amount[q], rc.base, rc.dominant):
                    continue
                want = self._drop_reserved(part, pos, amount[q], budget, rc)
                if not positive(want, rc.base, rc.dominant):
                    continue
                order = self._order(part, pos, run, run_leaf, rows, job, first_seen)
                chosen.update(select(want, order, run_req, is_am, budget, rc))
        if self.s.observe_only:  # "return before any action is taken"
            self.dropped.clear()
            return np.zeros(0, dtype=np.int64)
        return self._mark_or_kill(now, rows, np.asarray(run.start_s), sorted(chosen))

    def _drop_reserved(self, part: PartitionRound, pos: int, want: np.ndarray,
                       budget: np.ndarray, rc: Calculator) -> np.ndarray:
        """``preemptFrom``'s "first drop reserved containers": leaf ``pos``'s reservations,
        newest first, are dropped at once (recorded in ``dropped``) while something is
        still to obtain; returns what is left to obtain from running containers."""
        if part.held_leaf is None or not (part.held_leaf == pos).any():
            return want
        mine = np.flatnonzero(part.held_leaf == pos)
        mine = mine[np.argsort(-part.held_row[mine], kind="stable")]
        left: list[np.ndarray] = []
        gone = select(want, mine, part.held_req, np.zeros(len(part.held_req), bool), budget,
                      rc, left)
        self.dropped.extend(part.held_row[gone].tolist())
        return left[0]

    def _mark_or_kill(self, now: float, rows: np.ndarray, start: np.ndarray,
                      chosen: list[int]) -> np.ndarray:
        """``preemptOrkillSelectedContainerAfterWait`` then ``cleanupStaled...``: running
        indices (running order) whose container was marked ``wait_before_kill_s`` ago."""
        wait = self.s.wait_before_kill_s
        due = []
        for i in chosen:
            row, began = int(rows[i]), float(start[i])
            mark = self.marked.get(row)
            if mark is None or mark[1] != began:  # first selection of this container
                self.marked[row] = (now, began)
            elif mark[0] + wait <= now + 1e-9:
                due.append(i)
                del self.marked[row]
        self.marked = {r: m for r, m in self.marked.items() if m[0] + 2 * wait >= now - 1e-9}
        return np.array(due, dtype=np.int64)

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
