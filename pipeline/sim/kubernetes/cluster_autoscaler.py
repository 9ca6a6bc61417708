"""Cluster Autoscaler as a cluster model: node groups of priced instance types, grown for
pods the scheduler could not place and shrunk when nodes stay under-used.

Source: kubernetes/autoscaler cluster-autoscaler-release-1.31 (``core/static_autoscaler.go``
``RunOnce``, ``core/scaleup``, ``core/scaledown/planner``, ``simulator``), and its FAQ.
The rules, with the flags that set them (:class:`~.settings.AutoscalerSettings`):

- One loop every ``scan_interval_s``, at its multiples (at the first scheduling point at
  or after one; the model skips loops while nothing is pending, under-used or unneeded, as
  they would change nothing).  A loop that scales up does no scale-down.
- Scale-up: the pending pods, older than ``new_pod_delay_s``, except those that fit the free
  room of nodes still booting (CA's upcoming nodes), first fit.  Each group with room
  gives an option (:func:`.scale_up.estimate`); the expander chain picks one
  (:func:`.scale_up.choose`); that group grows by the option's count, within its max and
  ``max_nodes_total``.  New nodes are billed at once and ready ``boot_delay_s`` later.
- Scale-down: ready nodes under the utilization threshold (max of cpu and memory
  requested over allocatable; GPU nodes: GPU only, against ``gpu_threshold``) whose group
  is above its min.  Empty ones are removable.  The first ``non_empty_candidates``
  non-empty ones are drain-simulated in turn (:mod:`.drain`).  A node is unneeded from the
  first loop it is found so until a loop finds it not.  Outside the cooldowns (after a
  scale-up, ``delay_after_add_s``; after a deletion, ``delay_after_delete_s``), nodes
  unneeded for ``unneeded_s`` are deleted: empty ones first, then drained ones, at most
  ``max_scale_down_parallelism`` per loop and ``max_drain_parallelism`` drained, a group
  never below its min.  A drained node's pods are evicted; they restart elsewhere
  (the core re-queues them; their lost work is counted).
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.cluster import BOOTING, UP
from pipeline.sim.kubernetes.base import PoolCluster
from pipeline.sim.kubernetes.drain import Snapshot, group_pods, removable
from pipeline.sim.kubernetes.pool import TypedPool
from pipeline.sim.kubernetes.scale_up import Groups, Option, choose, estimate
from pipeline.sim.kubernetes.settings import AutoscalerSettings


class ClusterAutoscaler(PoolCluster):
    """Node groups (one instance type each) scaled by Cluster Autoscaler's loop."""

    kind = "cluster-autoscaler"

    def __init__(self, settings: AutoscalerSettings, pool: TypedPool, group_type: np.ndarray,
                 groups: Groups, unit: np.ndarray, boot_delay_s: float,
                 rng: np.random.Generator) -> None:
        super().__init__(pool, pool.type_cap[np.asarray(group_type, dtype=np.int64)])
        self.settings = settings
        self.group_type = np.asarray(group_type, dtype=np.int64)
        self.groups = groups  # in vCPU / GiB / GPUs, for the expanders
        self.unit = np.asarray(unit, dtype=np.float64)  # vCPU, GiB, 1 per trace unit
        self.boot_delay_s = boot_delay_s
        self.rng = rng
        sizes = [(g.min_size, g.max_size) for g in settings.groups]
        self.min_nodes = sum(lo for lo, _ in sizes)
        self._loop_at = -np.inf
        self._scaled_up = False
        self._last_up = self._last_delete = -np.inf
        self._since: dict[int, float] = {}  # unneeded node -> since
        self.counts = {"scale_ups": 0, "nodes_added": 0, "nodes_deleted": 0,
                       "nodes_drained": 0, "evictions_scale_down": 0}
        for g, (lo, _) in enumerate(sizes):
            for _ in range(lo):
                pool.provision(0.0, int(self.group_type[g]), ready_s=0.0)

    def next_check(self, now: float, pending_enter: np.ndarray) -> float:
        """The next loop (the next multiple of the scan interval after ``now``), while one
        could change something; the loop then runs at the first point at or after it."""
        busy = bool(len(pending_enter) or self._since or self._under_used().any())
        return self._next_loop(now, self.settings.scan_interval_s, busy)

    # -- the loop --------------------------------------------------------------------
    def autoscale(self, now: float, pending_req: np.ndarray, pending_enter: np.ndarray) -> int:
        """Run a loop when one is due: its scale-up part (scale-down: :meth:`scale_down`)."""
        if not self._loop_runs(now, self.settings.scan_interval_s):
            return 0
        self._due = np.inf
        self._loop_at = now
        self._scaled_up = False
        old = pending_enter + self.settings.new_pod_delay_s <= now
        req = np.ascontiguousarray(pending_req[old], dtype=np.float64).reshape(-1, 3)
        req = req[~self._fit_upcoming(req)]
        if len(req) == 0:
            return 0
        added = self._scale_up(now, req)
        self._scaled_up = added > 0
        return added

    def _fit_upcoming(self, req: np.ndarray) -> np.ndarray:
        """Pods that fit the free room of booting nodes, first fit in slot order."""
        st = self.nodes
        booting = np.flatnonzero(st.state == BOOTING)
        fits = np.zeros(len(req), dtype=np.bool_)
        if len(booting) == 0:
            return fits
        room = st.cap[booting] - st.alloc[booting]
        for i in range(len(req)):
            ok = np.flatnonzero(np.all(req[i] <= room + 1e-9, axis=1))
            if len(ok):
                room[ok[0]] -= req[i]
                fits[i] = True
        return fits

    def _room(self, g: int) -> int:
        s = self.settings
        room = s.groups[g].max_size - self.pool.size(int(self.group_type[g]))
        live = self.nodes.n_provisioned()
        if s.max_nodes_total > 0:
            room = min(room, s.max_nodes_total - live)
        return max(0, min(room, len(self.nodes) - live))

    def _scale_up(self, now: float, req: np.ndarray) -> int:
        options = []
        for g in range(len(self.group_type)):
            room = self._room(g)
            if room <= 0:
                continue
            count, placed = estimate(req, self.pool.type_cap[self.group_type[g]], room)
            if count > 0:
                options.append(Option(g, count, np.flatnonzero(placed)))
        best = choose(options, self.settings.expanders, self.groups, req * self.unit,
                      self.nodes.n_provisioned(), self.rng)
        if best is None:
            return 0
        typ = int(self.group_type[best.group])
        for _ in range(best.count):
            self.pool.provision(now, typ, now + self.boot_delay_s)
        self._last_up = now
        self.counts["scale_ups"] += 1
        self.counts["nodes_added"] += best.count
        return best.count

    def _utilization(self) -> tuple[np.ndarray, np.ndarray]:
        """Each node's utilization and the threshold it is held to."""
        st = self.nodes
        cap = np.where(st.cap > 0, st.cap, 1.0)
        share = st.alloc / cap
        gpu = st.cap[:, 2] > 0
        util = np.where(gpu, share[:, 2], np.maximum(share[:, 0], share[:, 1]))
        thr = np.where(gpu, self.settings.gpu_threshold, self.settings.threshold)
        return util, thr

    def _under_used(self) -> np.ndarray:
        if not self.settings.scale_down_enabled:
            return np.zeros(len(self.nodes), dtype=np.bool_)
        util, thr = self._utilization()
        above_min = np.zeros(len(self.nodes), dtype=np.bool_)
        for g, group in enumerate(self.settings.groups):
            typ = int(self.group_type[g])
            if self.pool.size(typ) > group.min_size:
                above_min |= self.pool.slot_type == typ
        return (self.nodes.state == UP) & (util < thr) & above_min

    def scale_down(self, now: float, pod_node: np.ndarray, pod_req: np.ndarray) -> np.ndarray:
        """The nodes this loop deletes (after a loop without scale-up); the core evicts
        their pods, then calls :meth:`remove` for each."""
        if now != self._loop_at or self._scaled_up or not self.settings.scale_down_enabled:
            return np.zeros(0, dtype=np.int64)
        st, s = self.nodes, self.settings
        cand = np.flatnonzero(self._under_used())
        empty = cand[st.ncont[cand] == 0]
        busy = cand[st.ncont[cand] > 0] if s.safe_to_evict else np.zeros(0, np.int64)
        # nodes already unneeded first (CA keeps them), then slot order
        busy = np.array(sorted(busy.tolist(), key=lambda n: (n not in self._since, n)),
                        dtype=np.int64)[:s.non_empty_candidates]
        start, req = group_pods(len(st), np.asarray(pod_node, np.int64), pod_req)
        up = st.state == UP
        up[empty] = False  # empty candidates are removed first: no destination
        drained = busy[removable(Snapshot(st.cap - st.alloc, up, start, req), busy)]
        unneeded = set(empty.tolist()) | set(drained.tolist())
        self._since = {n: self._since.get(n, now) for n in sorted(unneeded)}
        if now < self._last_up + s.delay_after_add_s or now < self._last_delete + \
                s.delay_after_delete_s:
            return np.zeros(0, dtype=np.int64)
        due = [n for n, since in self._since.items() if now - since >= s.unneeded_s]
        out = self._within_limits([n for n in due if st.ncont[n] == 0],
                                  [n for n in due if st.ncont[n] > 0])
        for n in out:
            self._since.pop(n, None)
        if out:
            self._last_delete = now
        return np.array(out, dtype=np.int64)

    def _within_limits(self, empty: list[int], busy: list[int]) -> list[int]:
        s = self.settings
        size = {int(t): self.pool.size(int(t)) for t in self.group_type}
        low = {int(self.group_type[g]): grp.min_size for g, grp in enumerate(s.groups)}
        out: list[int] = []
        drains = 0
        for n in empty + busy:
            typ = int(self.pool.slot_type[n])
            if len(out) >= s.max_scale_down_parallelism or size[typ] <= low[typ]:
                continue
            if self.nodes.ncont[n] > 0:
                if drains >= s.max_drain_parallelism:
                    continue
                drains += 1
            size[typ] -= 1
            out.append(n)
        return out

    def remove(self, now: float, node: int, evicted: int) -> None:
        """Delete ``node`` (its ``evicted`` pods already sent back to the queue)."""
        self.pool.remove(now, node)
        self.counts["nodes_deleted"] += 1
        if evicted:
            self.counts["nodes_drained"] += 1
            self.counts["evictions_scale_down"] += evicted
