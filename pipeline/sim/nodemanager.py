"""NodeManager side of opportunistic containers: per-node queues, kills and pauses, and
over-allocation on measured utilization.

Semantics follow Hadoop 3.3's ``ContainerScheduler`` (YARN-2877/YARN-4597/YARN-5292) and,
for over-allocation, the YARN-1011 branch (apache/hadoop 0a54014: ``ContainerScheduler``,
``SnapshotBasedOverAllocationPolicy`` and ``...PreemptionPolicy``, ``ContainersMonitorImpl``,
``TestContainerSchedulerWithOverAllocation``; the formulas are in :mod:`.overalloc`):

- An opportunistic container sent to a node starts at once if that node's queue is empty and
  it fits the node's unallocated room (capacity - guaranteed allocation - opportunistic
  allocation, every resource); otherwise it joins the node's FIFO queue if fewer than
  ``max_queue`` are queued (``enqueueContainer``: ``size() < maxOppQueueLength``), else the
  NM rejects it (``Opportunistic container queue is full``) and it goes back to the RM
  (``rejected``).  With ``max_queue`` = 0 (Hadoop's default) no opportunistic container is
  ever taken, and the RM sends none (its queue capacity is 0).
- Whenever a container finishes (or is stopped), queued containers start in FIFO order
  while the head fits the unallocated room; the first that does not fit stops the pass
  (``startOpportunisticContainers(getUnallocatedResources())``: never over-allocating).
- A guaranteed container placed by the RM on a node whose guaranteed plus opportunistic
  allocation then exceeds capacity starts on what is available to it: the unallocated room
  or, with over-allocation, the larger of that and the headroom below the utilization
  threshold, resource by resource (``startGuaranteedContainers``).  One that finds too
  little first stops opportunistic containers, most recently started first, each one's
  request credited, until what it lacks beyond what is available is freed (all of it when
  some resource has none available: ``resourcesToFreeUp``); with ``pause``
  (``opportunistic-containers-use-pause-for-preemption``) they are paused instead: a
  paused container gives its resources back, joins the back of the node's queue
  (``onResourcesReclaimed`` re-queues PAUSED containers) and later resumes with its work
  kept.  Killed containers lose their run and go back to the RM's pending queue.
- Queue limit (``updateQueuingLimit``/``shedQueuedOpportunisticContainers``): when the RM
  pushes a limit, a node keeps the first ``limit`` queued containers and sends the rest
  back to the RM (``shed``); paused ones are never shed and take no place.
- Over-allocation (YARN-1011), at utilization checks every ``monitor_s`` (the NM's
  ``container-monitor.interval-ms``, 3 s; ``checkUtilization``): a node whose use leaves
  headroom below ``overalloc`` x capacity in both cpu and memory starts queued containers
  FIFO on the larger of the unallocated room and that headroom; any other node reclaims
  ``min(allocation above capacity, use above preempt x capacity)`` per resource (memory at
  once; CPU only once it has been above its threshold on more than ``preempt_cpu_count``
  consecutive checks), from the most recently started container down, each one's request
  credited.  A node whose allocations fit its capacity is never preempted, however high
  its use.

Where the replay's clock and measurements differ from a NodeManager's (exact use instead
of a 3-second sample, CPU not rounded to vcores, the CPU count kept on nodes with
opportunistic work) is in ``docs/timing.md``.

Not modelled: promotion of opportunistic containers to guaranteed (YARN-5085) and queued
guaranteed containers at the NM (the RM only places guaranteed containers where its own
accounting has room, so once every opportunistic container is stopped one always fits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim.kernels import EPS, start_opportunistic
from pipeline.sim.needs import NMOptions
from pipeline.sim.nm_kernels import nm_arrivals, nm_fifo_starts
from pipeline.sim.overalloc import (
    cpu_over_limit,
    guaranteed_victims,
    headroom,
    lifo_victims,
    to_reclaim,
)
from pipeline.sim.tasks import (
    HEAP_N,
    NM_QUEUED,
    OPPORTUNISTIC,
    PAUSED,
    RUNNING,
    X_OPP_PAUSES,
    X_OPP_SHED,
)

if TYPE_CHECKING:
    from pipeline.sim.context import SimContext


class NodeManagers:
    """The NodeManagers of every node slot: queues, running opportunistic containers,
    utilization checks.  Counters: ``rejected`` (queue full), ``shed`` (queue limit),
    ``killed`` and ``paused`` (by reason: ``guaranteed``, ``overalloc``)."""

    def __init__(self, n_nodes: int, options: NMOptions) -> None:
        self.o = options
        self.queue: list[list[int]] = [[] for _ in range(n_nodes)]
        # running opportunistic containers per node in start order, as (slot, run_seq):
        # entries of runs that ended since are dropped lazily (:meth:`_live`)
        self.running: list[list[tuple[int, int]]] = [[] for _ in range(n_nodes)]
        self.active: set[int] = set()  # nodes with queued or running opportunistic work
        self.cpu_over = np.zeros(n_nodes, dtype=np.int64)
        self.next_check_s = -np.inf
        self.counts = {"rejected": 0, "shed": 0, "killed_guaranteed": 0,
                       "killed_overalloc": 0, "paused_guaranteed": 0, "paused_overalloc": 0,
                       "checks": 0}

    def sync(self, sim: SimContext, nd: int) -> None:
        """Node ``nd``'s queue length and oldest queue time as the RM sees them."""
        n, q = sim.cluster.nodes, self.queue[nd]
        n.oppq[nd] = len(q)
        n.oppq_since[nd] = sim.tasks.nmq_since[q[0]] if q else np.nan

    # -- the RM sends containers --------------------------------------------------------
    def dispatch(self, sim: SimContext, at: float, slots: np.ndarray, nodes: np.ndarray
                 ) -> list[int]:
        """Containers ``slots`` (just taken off the RM's queue) arrive at ``nodes``; return
        the rejected ones (the caller sends them back to the RM)."""
        n, t = sim.cluster.nodes, sim.tasks
        action = np.empty(len(slots), dtype=np.int8)
        nm_arrivals(slots, nodes, t.req, n.cap, n.alloc, n.oalloc, n.oppq.copy(),
                    self.o.max_queue, EPS, action)
        go = action == 0
        if go.any():
            self._start(sim, at, slots[go], nodes[go])
        for s, nd in zip(slots[action == 1].tolist(), nodes[action == 1].tolist(),
                         strict=True):
            self.queue[nd].append(s)
            self.active.add(nd)
        queued = slots[action == 1]
        t.state[queued] = NM_QUEUED
        t.nmq_since[queued] = at
        for nd in np.unique(nodes[action == 1]).tolist():
            self.sync(sim, nd)
        rejected = slots[action == 2].tolist()
        self.counts["rejected"] += len(rejected)
        return rejected

    def _start(self, sim: SimContext, at: float, slots: np.ndarray, nodes: np.ndarray
               ) -> None:
        """Start (or resume) containers ``slots`` on ``nodes`` (in that order)."""
        t, n, h = sim.tasks, sim.cluster.nodes, sim.heap
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        nodes = np.ascontiguousarray(nodes, dtype=np.int64)
        sim.usage.track(t, slots)
        sim.usage.start(t, at, slots, nodes, n.speed)
        h.reserve(int(t.counters[HEAP_N]), len(slots))
        start_opportunistic(at, slots, nodes, h, t, n, sim.open_flag, sim._read_rate)
        for s, nd, rs in zip(slots.tolist(), nodes.tolist(), t.run_seq[slots].tolist(),
                             strict=True):
            self.running[nd].append((s, rs))
            self.active.add(nd)
        sim.events += len(slots)
        sim.last_s = max(sim.last_s, at)

    def step(self, sim: SimContext, at: float) -> None:
        """At a scheduling point: queued containers start where room was freed since the
        policy's last look, and (over-allocation) the utilization check runs when due."""
        n = sim.cluster.nodes
        freed = np.flatnonzero(n.dirty & (n.oppq > 0))
        if len(freed):
            self.start_queued(sim, at, freed.tolist())
        self.check(sim, at)

    def take(self, sim: SimContext, among: np.ndarray | None = None) -> np.ndarray:
        """Take containers queued (or paused) off the queues: all, or those flagged in
        ``among`` (a bool array by slot); return their slots."""
        out: list[int] = []
        for nd in sorted(self.active):
            q = self.queue[nd]
            take = [s for s in q if among is None or among[s]]
            if take:
                self.queue[nd] = [s for s in q if not (among is None or among[s])]
                self.sync(sim, nd)
                out.extend(take)
        return np.asarray(out, dtype=np.int64)

    # -- room appears: start queued containers -----------------------------------------
    def start_queued(self, sim: SimContext, at: float, nodes: list[int],
                     room: np.ndarray | None = None) -> None:
        """Start queued containers, FIFO, on ``nodes`` while the head fits the unallocated
        room or, at a utilization check, ``room`` (the nodes' headroom below the
        over-allocation threshold, cpu and mem): the larger of the two, resource by
        resource (``startOpportunisticContainers``)."""
        n, t = sim.cluster.nodes, sim.tasks
        keep = [i for i, nd in enumerate(nodes) if self.queue[nd] and n.state[nd] == 2]
        if not keep:
            return
        nodes = [nodes[i] for i in keep]
        lengths = np.array([len(self.queue[nd]) for nd in nodes], dtype=np.int64)
        indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        flat = np.fromiter((s for nd in nodes for s in self.queue[nd]), dtype=np.int64,
                           count=int(indptr[-1]))
        over = (np.full((len(nodes), 2), -np.inf) if room is None  # unallocated room only
                else np.array(room, dtype=np.float64)[keep])
        go = np.zeros(len(nodes), dtype=np.int64)
        nm_fifo_starts(flat, indptr, np.asarray(nodes, dtype=np.int64), t.req, n.cap, n.alloc,
                       n.oalloc, over, EPS, go)
        starts, where = [], []
        for i in np.flatnonzero(go).tolist():
            nd, k = nodes[i], int(go[i])
            starts.extend(self.queue[nd][:k])
            where.extend([nd] * k)
            del self.queue[nd][:k]
            self.sync(sim, nd)
        if starts:
            self._start(sim, at, np.asarray(starts, dtype=np.int64),
                        np.asarray(where, dtype=np.int64))

    # -- guaranteed containers need room ------------------------------------------------
    def make_room(self, sim: SimContext, at: float, slots: np.ndarray, nodes: np.ndarray
                  ) -> None:
        """After guaranteed placements ``slots`` on ``nodes`` (in placement order): on a node
        whose guaranteed plus opportunistic allocation now passes its capacity, each
        container starts on the room available to it, and one that finds too little first
        stops opportunistic containers, most recently started first, until what it lacks
        is freed (``startGuaranteedContainers``, ``reclaimOpportunisticContainerResources``)."""
        n = sim.cluster.nodes
        touched = np.unique(nodes)
        touched = touched[np.any(n.oalloc[touched, :2] > 1e-12, axis=1)]
        over = n.alloc[touched, :2] + n.oalloc[touched, :2] - n.cap[touched, :2] * (1 + EPS)
        victims: dict[int, list[int]] = {}
        for nd in touched[np.any(over > 1e-12, axis=1)].tolist():
            picked = self._room_for(sim, nd, slots[nodes == nd])
            if picked:
                victims[nd] = picked
        if victims:
            self._reclaim(sim, at, victims, "guaranteed")

    def _room_for(self, sim: SimContext, nd: int, placed: np.ndarray) -> list[int]:
        """The opportunistic containers node ``nd`` stops so that guaranteed ``placed`` (just
        placed on it, in order) can start (:func:`~pipeline.sim.overalloc.guaranteed_victims`
        on the node as it was before them)."""
        n, t = sim.cluster.nodes, sim.tasks
        req = t.req[placed, :2]
        unalloc = n.cap[nd, :2] - (n.alloc[nd, :2] - req.sum(axis=0)) - n.oalloc[nd, :2]
        measured = n.used[nd] - np.where(np.isnan(t.used[placed]), req, t.used[placed]).sum(0)
        threshold = np.asarray(self.o.overalloc) if self.o.overallocating else None
        return guaranteed_victims(req, n.cap[nd, :2], unalloc, measured, threshold,
                                  self._live(sim, nd), t.req, EPS)

    def _live(self, sim: SimContext, nd: int) -> list[int]:
        """Slots of node ``nd``'s running opportunistic containers, oldest first."""
        t = sim.tasks
        live = [(s, r) for s, r in self.running[nd]
                if t.run_seq[s] == r and t.state[s] == RUNNING and t.node[s] == nd]
        self.running[nd] = live
        return [s for s, _ in live]

    def _reclaim(self, sim: SimContext, at: float, victims: dict[int, list[int]],
                 reason: str) -> None:
        """Kill (or pause) ``victims`` (node -> slots), all in one stop."""
        for nd, picked in victims.items():
            gone = set(picked)
            self.running[nd] = [e for e in self.running[nd] if e[0] not in gone]
        arr = np.fromiter((s for picked in victims.values() for s in picked), dtype=np.int64)
        if self.o.pause:
            self.counts[f"paused_{reason}"] += len(arr)
            self._pause(sim, at, victims, arr)
        else:
            self.counts[f"killed_{reason}"] += len(arr)
            sim.runs.stop(at, arr, requeue=True, reason="opp_kill")

    def _pause(self, sim: SimContext, at: float, victims: dict[int, list[int]],
               slots: np.ndarray) -> None:
        t = sim.tasks
        done = sim.runs.release(at, slots)
        t.work0[slots] = done
        t.state[slots] = NM_QUEUED
        t.flags[slots] = (t.flags[slots] & ~OPPORTUNISTIC) | PAUSED
        t.node[slots] = -1
        t.start[slots] = np.nan
        t.nmq_since[slots] = at
        t.extra[slots, X_OPP_PAUSES] += 1
        for nd, picked in victims.items():
            self.queue[nd].extend(picked)
            self.sync(sim, nd)

    # -- the RM's queue limit -----------------------------------------------------------
    def shed(self, sim: SimContext, at: float, limit: int) -> np.ndarray:
        """Keep the first ``limit`` queued containers on each node, paused ones aside (they
        are never shed and take no place, ``shedQueuedOpportunisticContainers``); return
        the others' slots (the caller sends them back to the RM)."""
        out: list[int] = []
        t = sim.tasks
        for nd in np.flatnonzero(sim.cluster.nodes.oppq > limit).tolist():
            q = self.queue[nd]
            paused = [(t.flags[s] & PAUSED) != 0 for s in q]
            fresh = [s for s, p in zip(q, paused, strict=True) if not p]
            if len(fresh) <= limit:
                continue
            gone = set(fresh[limit:])
            out.extend(fresh[limit:])
            self.queue[nd] = [s for s in q if s not in gone]
            self.sync(sim, nd)
        arr = np.asarray(out, dtype=np.int64)
        if len(arr):
            t.extra[arr, X_OPP_SHED] += 1
            self.counts["shed"] += len(arr)
        return arr

    def take_queued(self, nd: int) -> np.ndarray:
        """Empty node ``nd``'s queue (the node went down); return the slots."""
        q = self.queue[nd]
        self.queue[nd] = []
        self.running[nd] = []
        self.active.discard(nd)
        self.cpu_over[nd] = 0
        return np.asarray(q, dtype=np.int64)

    # -- utilization checks (over-allocation) -------------------------------------------
    def _grid_after(self, now: float) -> float:
        step = self.o.monitor_s
        return float(np.floor(now / step) + 1) * step if np.isfinite(now) else 0.0

    def next_check(self, now: float) -> float:
        """Time of the next utilization check that can change anything, or +inf."""
        if not self.o.overallocating or not self.active:
            return np.inf
        return max(self._grid_after(now), self.next_check_s)

    def check(self, sim: SimContext, at: float) -> None:
        """A utilization check on every node with opportunistic work (over-allocation on),
        on the ``monitor_s`` grid (``ContainersMonitorImpl.checkUtilization``): a node with
        headroom below the utilization threshold in both resources starts queued
        containers on it; any other node is checked for use above the preemption
        thresholds (the CPU count moves only there, as Hadoop's check goes no further on a
        node with headroom) and reclaims what :func:`~pipeline.sim.overalloc.to_reclaim`
        says, from the most recently started container down."""
        if not self.o.overallocating or at < self.next_check_s:
            return
        self.next_check_s = self._grid_after(at)
        if not self.active:
            return
        self.counts["checks"] += 1
        n = sim.cluster.nodes
        act = np.fromiter(sorted(self.active), dtype=np.int64, count=len(self.active))
        act = act[n.state[act] == 2]
        room = headroom(n.cap[act, :2], n.used[act], np.asarray(self.o.overalloc))
        low = np.all(room > 0, axis=1)
        self._preempt_high(sim, at, act[~low])
        queued = low & (n.oppq[act] > 0)
        if queued.any():
            self.start_queued(sim, at, act[queued].tolist(), room[queued])
        self._settle(sim)

    def _preempt_high(self, sim: SimContext, at: float, nodes: np.ndarray) -> None:
        """Nodes ``nodes`` (no headroom): stop opportunistic containers where use is above
        a preemption threshold on an over-allocated node (memory at once, CPU once its
        count is passed)."""
        if len(nodes) == 0:
            return
        n, t = sim.cluster.nodes, sim.tasks
        cap = n.cap[nodes, :2]
        slack = EPS * cap + 1e-12
        above = n.used[nodes] - np.asarray(self.o.preempt) * cap
        counts = self.cpu_over[nodes]
        cpu = cpu_over_limit(counts, above[:, 0] > slack[:, 0], self.o.preempt_cpu_count)
        self.cpu_over[nodes] = counts
        above[:, 0] = np.where(cpu, above[:, 0], 0.0)
        reclaim = to_reclaim(n.alloc[nodes, :2] + n.oalloc[nodes, :2], cap, above)
        victims: dict[int, list[int]] = {}
        for i in np.flatnonzero(np.any(reclaim > slack, axis=1)).tolist():
            nd = int(nodes[i])
            picked = lifo_victims(self._live(sim, nd), t.req, reclaim[i], slack[i])
            if picked:
                victims[nd] = picked
        if victims:
            self._reclaim(sim, at, victims, "overalloc")

    def _settle(self, sim: SimContext) -> None:
        """Drop nodes with no opportunistic container queued or running from the active
        set (a node runs some while it holds opportunistic allocation)."""
        n = sim.cluster.nodes
        act = np.fromiter(self.active, dtype=np.int64, count=len(self.active))
        keep = (n.oppq[act] > 0) | np.any(n.oalloc[act] > 1e-12, axis=1)
        for nd in act[~keep].tolist():
            self.active.discard(nd)
            self.running[nd] = []
            self.cpu_over[nd] = 0


__all__ = ["NM_QUEUED", "NMOptions", "NodeManagers"]
