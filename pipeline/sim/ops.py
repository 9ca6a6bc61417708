"""What the core does with a policy's decisions: build its views, check and apply placements,
preemptions and kills, and evict tasks from nodes that go down."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim import kernels
from pipeline.sim.cluster import UP
from pipeline.sim.interface import (
    Decisions,
    PendingView,
    PolicyError,
    RunningView,
    SchedView,
    readonly,
)
from pipeline.sim.tasks import (
    IS_PARENT,
    KILLED,
    OPPORTUNISTIC,
    PAUSED,
    PENDING,
    RUNNING,
    SPEC,
    TRACKED,
    UNFINISHED,
    X_OPP,
    X_OPP_KILLS,
    X_OPP_WASTED,
)

if TYPE_CHECKING:
    from pipeline.sim.context import SimContext

_REASONS = {
    1: "request index out of range", 2: "node index out of range",
    3: "request already placed", 4: "node is not up", 5: "request does not fit the node",
}


class Operations:
    """Decision handling, mixed into :class:`pipeline.sim.core.Simulation`."""

    def _schedule(self: SimContext, at: float) -> None:
        """Ask the policy for decisions if something changed while work waits (or at all,
        for a policy that decides when idle), or if it asked to be woken."""
        self._merge_incoming()
        woken = self.wake_at <= at
        if not woken and (not self.needs_decision
                          or (len(self.queue) == 0 and not self.idle_calls)):
            return
        self.needs_decision = False
        self.wake_at = np.inf
        self._running_slots = None
        decisions = self.policy.decide(self.view(at))
        self.calls += 1
        self.events += 1
        self._apply(at, decisions)

    def view(self: SimContext, at: float) -> SchedView:
        """The read-only view handed to the policy at scheduling point ``at``."""
        nodes = self.cluster.nodes
        if self.gpus is not None:  # devices of tasks that ended since are free again
            self.gpus.sync(self.tasks)
            np.copyto(self._view_alloc, nodes.alloc)
            self._view_alloc[:, 2] = nodes.cap[:, 2] - self.gpus.room()
        self.node_view.changed = readonly(np.flatnonzero(nodes.dirty))
        self.node_view.n_provisioned = nodes.n_provisioned()
        nodes.dirty[:] = False
        running = self.running_view(at) if self.needs.running else None
        return SchedView(now=at, cluster=self.info, nodes=self.node_view,
                         pending=self.pending_view(at), running=running,
                         beats=self._offers(at) if self._heartbeats is not None else None,
                         jobs=self.job_stats.view() if self.job_stats is not None else None)

    def _offers(self: SimContext, at: float) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """Up nodes' heartbeats since the previous call (``self._hb_from``) up to ``at``, at
        most one interval's: a node's earlier reports in a longer gap offered the room it
        offers now to the same waiting work (the policy asks to be woken every interval
        while work waits, so a longer gap means nothing was waiting).

        Returned as a function, computed once when the policy first reads them during the
        call (node states do not change until it returns); the window moves on either way.
        """
        assert self._heartbeats is not None
        beats, cluster = self._heartbeats, self.cluster
        t0 = max(self._hb_from, at - beats.h)
        self._hb_from = at

        @cache
        def offers() -> tuple[np.ndarray, np.ndarray]:
            nodes, times = beats.between(t0, at)
            up = cluster.nodes.state[nodes] == UP
            return readonly(nodes[up]), readonly(times[up])

        return offers

    def pending_view(self: SimContext, at: float) -> PendingView:
        return PendingView(at, readonly(self.queue.slots), self.tasks,
                           req=readonly(self.queue.req), job=readonly(self.queue.job))

    def running_view(self: SimContext, at: float) -> RunningView:
        """The running containers (slot order), for policies that preempt or speculate."""
        slots = self.tasks.in_state(RUNNING)
        self._running_slots = slots
        return RunningView(at, slots, self.tasks, self.cluster.nodes.speed)

    def _apply(self: SimContext, at: float, d: Decisions) -> None:
        """Check and apply one call's decisions: stops first, then guaranteed placements in
        order (a node whose allocation then passes its capacity reclaims opportunistic
        containers), then speculative copies (:mod:`pipeline.sim.speculation`), then
        opportunistic ones (sent to the nodes' NodeManagers)."""
        if len(d.opp_req) and self.nm is None:
            raise PolicyError(f"policy '{self.policy_name}' returned opportunistic decisions "
                              "but its setup asked for no NodeManagers (Needs.node_managers)")
        if len(d.preempt) or len(d.kill):
            self._stops(at, np.asarray(d.preempt, np.int64), np.asarray(d.kill, np.int64))
        if d.wake_at_s is not None:
            self.wake_at = float(d.wake_at_s)
        req, node = self._pairs(d.place_req, d.place_node, "place")
        opp_req, opp_node = self._pairs(d.opp_req, d.opp_node, "opp")
        spec_run, spec_node = self._pairs(d.spec_run, d.spec_node, "spec")
        opp_slots = self._opp_slots(at, opp_req, opp_node) if len(opp_req) else None
        # models and devices first: a gang needs all its own
        req, node, bound = self.gpu_checked(req, node, self.queue.slots)
        if self.gangs is not None and len(req):
            req, node = self.gangs.whole(req, node, self.queue.slots, self.tasks,
                                         self.cluster.nodes.dirty)
            if bound:
                bound = self._bound_kept(bound, req)
        if len(req):
            self._place(at, req, node)
        if bound:
            self.gpus.commit(bound, self.tasks)
        if opp_slots is not None and np.any(self.tasks.state[opp_slots] != PENDING):
            raise PolicyError(f"policy '{self.policy_name}' placed a request both as "
                              f"guaranteed and opportunistic at t={at:g}s")
        if len(req) or opp_slots is not None:
            self.queue.remove(np.concatenate([req, opp_req]))
        if len(spec_run):
            self.launch_copies(at, spec_run, spec_node)
        if opp_slots is not None:
            self._dispatch(at, opp_slots, opp_node)
        if self.nm is not None and d.opp_queue_limit is not None:
            shed = self.nm.shed(self, at, int(d.opp_queue_limit))
            self._back_to_rm(at, shed)

    def gpu_checked(self: SimContext, req: np.ndarray, node: np.ndarray, slots: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, int, int]]]:
        """The placements ``(req, node)`` (``req``: indices into the task ``slots``) whose
        node has a GPU model the task allows (:mod:`pipeline.sim.models`) and devices that
        can take its GPU request (:mod:`pipeline.sim.gpus`), with their device bindings;
        the others are held back and counted."""
        dirty = self.cluster.nodes.dirty
        if self.models is not None and len(req):
            req, node = self.models.check(req, node, slots, self.tasks.allow, dirty)
        if self.gpus is not None and len(req):
            return self.gpus.bind(req, node, slots, self.tasks, dirty)
        return req, node, []

    def _pairs(self: SimContext, idx: np.ndarray, node: np.ndarray,
               what: str) -> tuple[np.ndarray, np.ndarray]:
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        node = np.ascontiguousarray(node, dtype=np.int64)
        if len(idx) != len(node):
            raise PolicyError(f"policy '{self.policy_name}': {what}_req and {what}_node differ "
                              f"in length ({len(idx)} vs {len(node)})")
        return idx, node

    def _opp_slots(self: SimContext, at: float, req: np.ndarray, node: np.ndarray
                   ) -> np.ndarray:
        """Check opportunistic decisions (before the queue changes); return their slots."""
        pend, n = self.queue.slots, self.cluster.nodes
        bad = np.flatnonzero((req < 0) | (req >= len(pend)) | (node < 0)
                             | (node >= len(n.state)))
        if len(bad) == 0 and len(np.unique(req)) != len(req):
            bad = np.array([len(req) - 1])
        if len(bad) == 0:
            bad = np.flatnonzero(n.state[node] != 2)
        if len(bad):
            i = int(bad[0])
            raise PolicyError(f"policy '{self.policy_name}' opportunistic placement {i} "
                              f"rejected at t={at:g}s: request {int(req[i])} on node "
                              f"{int(node[i])}: index out of range, repeated or node not up")
        slots = pend[req].copy()
        gpu = np.flatnonzero(self.tasks.req[slots, 2] > 0)
        if len(gpu):  # (a GPU share is bound to a device for the whole run: never opp.)
            i = int(gpu[0])
            raise PolicyError(f"policy '{self.policy_name}' opportunistic placement {i} "
                              f"rejected at t={at:g}s: request {int(req[i])} asks for a GPU "
                              "(GPUs are not over-subscribed)")
        return slots

    def _dispatch(self: SimContext, at: float, slots: np.ndarray, node: np.ndarray) -> None:
        """Send opportunistic containers (taken off the RM's queue) to their nodes'
        NodeManagers; the ones a NodeManager rejects go back to the RM."""
        assert self.nm is not None
        self.tasks.last_preempted[slots] = False
        rejected = self.nm.dispatch(self, at, slots, node)
        self.placements += len(slots) - len(rejected)
        self._back_to_rm(at, np.asarray(rejected, dtype=np.int64))

    def _back_to_rm(self: SimContext, at: float, slots: np.ndarray) -> None:
        """Opportunistic containers the NM would not keep go back to the RM's queue; a
        paused one loses the work it had done."""
        if len(slots) == 0:
            return
        t = self.tasks
        paused = slots[(t.flags[slots] & PAUSED) != 0]
        if len(paused):
            t.wasted[paused] += t.work0[paused]
            t.extra[paused, X_OPP_WASTED] += t.work0[paused]
            t.work0[paused] = 0.0
        t.flags[slots] &= ~np.int8(PAUSED | OPPORTUNISTIC)
        t.state[slots] = PENDING
        t.nmq_since[slots] = np.nan
        self._incoming.append((np.full(len(slots), at), slots))
        self._ask_again(at)

    def _ask_again(self: SimContext, at: float) -> None:
        """Containers a NodeManager gave back are asked for again: the RM sees them at its
        next scheduling point (the next heartbeat), not only at the next event."""
        self.needs_decision = True
        step = self.options.sched_interval_s
        self.wake_at = min(self.wake_at, at + (step if step > 0 else 1e-3))

    def _bound_kept(self: SimContext, bound: list[tuple[int, int, int, int]],
                    req: np.ndarray) -> list[tuple[int, int, int, int]]:
        """The device bindings of placements a gang check kept; the others given back."""
        kept = set(self.queue.slots[req[(req >= 0) & (req < len(self.queue))]].tolist())
        self.gpus.undo([b for b in bound if b[0] not in kept])
        return [b for b in bound if b[0] in kept]

    def _place(self: SimContext, at: float, req: np.ndarray, node: np.ndarray) -> None:
        t, h, n = self.tasks, self.heap, self.cluster.nodes
        slots = self.queue.slots[req[(req >= 0) & (req < len(self.queue))]]
        if len(slots) == len(req):  # (a bad index is reported by the kernel below)
            if self.nm is not None:  # a container the NM once ran is guaranteed now
                t.extra[slots[(t.flags[slots] & TRACKED) != 0], X_OPP] = 0.0
            self.usage.start(t, at, slots, node, n.speed)
        h.reserve(int(t.counters[kernels.HEAP_N]), len(req))
        bad, code = kernels.apply_placements(at, req, node, self.queue.slots, h, t, n,
                                             self.open_flag, self._read_rate)
        if bad >= 0:
            r, nd = int(req[bad]), int(node[bad])
            pend = self.queue.slots
            row = int(t.row[pend[r]]) if 0 <= r < len(pend) else -1
            raise PolicyError(
                f"policy '{self.policy_name}' placement {bad} rejected at t={at:g}s: request "
                f"{r} (trace row {row}) on node {nd}: {_REASONS[code]}"
            )
        self.placements += len(req)
        self.events += len(req)
        self.last_s = max(self.last_s, at)
        t.last_preempted[slots] = False
        if self.nm is not None:
            self.nm.make_room(self, at, slots, node)

    def _stops(self: SimContext, at: float, preempt: np.ndarray, kill: np.ndarray) -> None:
        slots = self._running_slots
        every = np.concatenate([preempt, kill])
        if slots is None or np.any((every < 0) | (every >= len(slots))):
            raise PolicyError(f"policy '{self.policy_name}' preempted or killed a container "
                              "outside view.running (return Needs(running=True) from setup)")
        if len(np.unique(every)) != len(every):
            raise PolicyError(f"policy '{self.policy_name}' stopped a container twice")
        self._stop(at, slots[preempt], requeue=True)
        self._stop(at, slots[kill], requeue=False)

    def release_runs(self: SimContext, at: float, slots: np.ndarray) -> np.ndarray:
        """The runs of running ``slots`` end at ``at``: their node gets its resources back
        (guaranteed or opportunistic allocation), their usage integral is settled, their
        completion goes stale.  Returns each one's work done (s at speed 1.0)."""
        done = self.usage.stop(self.tasks, at, slots, self.cluster.nodes.speed)
        self.free_runs(slots, np.full(len(slots), at))
        return done

    def free_runs(self: SimContext, slots: np.ndarray, at: np.ndarray) -> None:
        """The node side of runs ``slots`` ending at times ``at``: allocation (guaranteed or
        opportunistic), usage and container counts given back, a node left empty idle from
        its last run's end, the runs' heap entries stale."""
        t, n = self.tasks, self.cluster.nodes
        node = t.node[slots]
        opp = (t.flags[slots] & OPPORTUNISTIC) != 0
        used = np.where(np.isnan(t.used[slots]), t.req[slots, :2], t.used[slots])
        np.subtract.at(n.alloc, node[~opp], t.req[slots[~opp]])
        if opp.any():
            np.subtract.at(n.oalloc, node[opp], t.req[slots[opp]])
        np.subtract.at(n.used, node, used)
        np.subtract.at(n.ncont, node, 1)
        gone = n.ncont[node] == 0
        empty = np.unique(node[gone])
        n.alloc[empty] = 0.0
        n.oalloc[empty] = 0.0
        n.used[empty] = 0.0
        n.idle_since[empty] = -np.inf
        np.maximum.at(n.idle_since, node[gone], at[gone])
        n.dirty[node] = True
        t.epoch[slots] += 1  # their heap entries go stale
        self.events += len(slots)
        self.needs_decision = True

    def _stop(self: SimContext, at: float, slots: np.ndarray, requeue: bool,
              evicted: bool = False, outcome: int = KILLED, reason: str = "") -> None:
        """Stop running ``slots`` at ``at``: free their node, then re-queue or record them.

        Recorded (not re-queued) tasks end with ``outcome``: ``killed`` by a policy, or
        ``unfinished`` when the core stops a censored task at the trace's window end.
        ``reason`` ``opp_kill``: a NodeManager killed opportunistic containers (counted as
        such, not as the scheduler's preemptions).
        """
        if len(slots) and self.tasks.extras_on and (self.tasks.flags[slots] & SPEC).any():
            slots = self.split_stops(at, slots, requeue, evicted)
        if len(slots) == 0:
            return
        t, n = self.tasks, self.cluster.nodes
        node = t.node[slots]
        changed = self.work_done(at, slots) if self.speed_changes is not None else None
        done = self.release_runs(at, slots)
        if changed is not None:
            done = changed
        if requeue:  # a killed task keeps its last run as start_s..end_s instead
            lost = at - t.start[slots] + (t.work0[slots] if t.extras_on else 0.0)
            t.wasted[slots] += lost
            if reason == "opp_kill":
                t.extra[slots, X_OPP_KILLS] += 1
                t.extra[slots, X_OPP_WASTED] += lost
                self._ask_again(at)
            else:
                (t.evictions if evicted else t.preemptions)[slots] += 1
                t.last_preempted[slots] = not evicted
            t.flags[slots] &= ~np.int8(OPPORTUNISTIC | PAUSED)
            if t.extras_on:
                t.work0[slots] = 0.0
            t.state[slots] = PENDING
            t.node[slots] = -1
            t.start[slots] = np.nan
            t.locality[slots] = -1
            self._incoming.append((np.full(len(slots), at), slots))
            return
        inst = n.instance[node]
        remaining = (t.duration[slots] - done if outcome == UNFINISHED else 0.0)
        self.records.write_slots(t.counters, t, slots, outcome, at, inst, remaining)
        for s in slots[(t.flags[slots] & IS_PARENT) != 0].tolist():
            self.deps.fail(self.deps.slot_id[s], s)
        t.release(slots)

    def remaining_work(self: SimContext, at: float, slots: np.ndarray) -> np.ndarray:
        """Work ``slots`` still had to do at ``at`` (s on a speed-1.0 machine; all of it if
        not running)."""
        t = self.tasks
        if self.speed_changes is not None:
            running = t.state[slots] == RUNNING
            done = np.zeros(len(slots))
            done[running] = self.work_done(at, slots[running])
            return np.maximum(t.duration[slots] - np.where(
                running, done, t.work0[slots]), 0.0)
        running = t.state[slots] == RUNNING
        done = np.where(running, (at - t.start[slots]) * self.cluster.nodes.speed[
            np.maximum(t.node[slots], 0)], 0.0)
        before = t.work0[slots] if t.extras_on else 0.0  # paused runs' work
        return np.maximum(t.duration[slots] - before - np.nan_to_num(done), 0.0)

    def _evict_node(self: SimContext, at: float, node: int) -> None:
        """A node goes down: its running tasks lose their work and go back to the queue,
        and so do the opportunistic containers queued at it."""
        t = self.tasks
        slots = np.flatnonzero((t.state == RUNNING) & (t.node == node))
        self._stop(at, slots, requeue=True, evicted=True)
        if self.nm is not None:
            self._back_to_rm(at, self.nm.take_queued(node))
            self.nm.sync(self, node)
