"""What the core does with a policy's decisions: build its views, check and apply placements,
preemptions and kills, and evict tasks from nodes that go down."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim import kernels
from pipeline.sim.interface import Decisions, PendingView, PolicyError, RunningView, readonly
from pipeline.sim.tasks import HAS_INPUTS, IS_PARENT, KILLED, PENDING, RUNNING, UNFINISHED

if TYPE_CHECKING:
    from pipeline.sim.core import Simulation

_REASONS = {
    1: "request index out of range", 2: "node index out of range",
    3: "request already placed", 4: "node is not up", 5: "request does not fit the node",
}


class Operations:
    """Decision handling, mixed into :class:`pipeline.sim.core.Simulation`."""

    def _schedule(self: Simulation, at: float) -> None:
        """Ask the policy for decisions if something changed (or it asked to be woken)."""
        self._merge_incoming()
        woken = self.wake_at <= at
        if not woken and (len(self.queue) == 0 or not self.needs_decision):
            return
        self.needs_decision = False
        self.wake_at = np.inf
        self._running_slots = None
        decisions = self.policy.decide(self.view(at))
        self.calls += 1
        self.events += 1
        self._apply(at, decisions)

    def pending_view(self: Simulation, at: float) -> PendingView:
        return PendingView(at, readonly(self.queue.slots), self.tasks,
                           req=readonly(self.queue.req))

    def running_view(self: Simulation, at: float) -> RunningView:
        """The running containers (slot order), for policies that preempt or speculate."""
        slots = self.tasks.in_state(RUNNING)
        self._running_slots = slots
        return RunningView(at, slots, self.tasks, self.cluster.nodes.speed)

    def _apply(self: Simulation, at: float, d: Decisions) -> None:
        """Check and apply one call's decisions: stops first, then placements in order."""
        if len(d.opp_req) or len(d.spec_run):
            raise PolicyError(
                f"policy '{self.policy_name}' returned opportunistic or speculative decisions, "
                "which this core version does not apply yet"
            )
        if len(d.preempt) or len(d.kill):
            self._stops(at, np.asarray(d.preempt, np.int64), np.asarray(d.kill, np.int64))
        if d.wake_at_s is not None:
            self.wake_at = float(d.wake_at_s)
        req = np.ascontiguousarray(d.place_req, dtype=np.int64)
        node = np.ascontiguousarray(d.place_node, dtype=np.int64)
        if len(req) != len(node):
            raise PolicyError(f"policy '{self.policy_name}': place_req and place_node differ "
                              f"in length ({len(req)} vs {len(node)})")
        if len(req) == 0:
            return
        self._place(at, req, node)

    def _place(self: Simulation, at: float, req: np.ndarray, node: np.ndarray) -> None:
        t, h, n = self.tasks, self.heap, self.cluster.nodes
        h.reserve(int(t.counters[kernels.HEAP_N]), len(req))
        bad, code = kernels.apply_placements(
            at, req, node, self.queue.slots, h.time, h.seq, h.slot, h.epoch, t.counters,
            t.duration, t.req, t.used, t.state, t.node, t.start, t.first_start, t.attempts,
            t.epoch, t.flags, self.open_flag, n.cap, n.alloc, n.used, n.ncont, n.state,
            n.speed, n.dirty, t.inp, t.input_mb, t.locality, t.read, n.rack,
            self._read_rate, HAS_INPUTS,
        )
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
        placed = self.queue.remove(req)
        t.last_preempted[placed] = False

    def _stops(self: Simulation, at: float, preempt: np.ndarray, kill: np.ndarray) -> None:
        slots = self._running_slots
        every = np.concatenate([preempt, kill])
        if slots is None or np.any((every < 0) | (every >= len(slots))):
            raise PolicyError(f"policy '{self.policy_name}' preempted or killed a container "
                              "outside view.running (set needs_running = True)")
        if len(np.unique(every)) != len(every):
            raise PolicyError(f"policy '{self.policy_name}' stopped a container twice")
        self._stop(at, slots[preempt], requeue=True)
        self._stop(at, slots[kill], requeue=False)

    def _stop(self: Simulation, at: float, slots: np.ndarray, requeue: bool,
              evicted: bool = False, outcome: int = KILLED) -> None:
        """Stop running ``slots`` at ``at``: free their node, then re-queue or record them.

        Recorded (not re-queued) tasks end with ``outcome``: ``killed`` by a policy, or
        ``unfinished`` when the core stops a censored task at the trace's window end.
        """
        if len(slots) == 0:
            return
        t, n = self.tasks, self.cluster.nodes
        node = t.node[slots]
        used = np.where(np.isnan(t.used[slots]), t.req[slots, :2], t.used[slots])
        np.subtract.at(n.alloc, node, t.req[slots])
        np.subtract.at(n.used, node, used)
        np.subtract.at(n.ncont, node, 1)
        empty = np.unique(node[n.ncont[node] == 0])
        n.alloc[empty] = 0.0
        n.used[empty] = 0.0
        n.idle_since[empty] = at
        n.dirty[node] = True
        t.epoch[slots] += 1  # their heap entries go stale
        self.events += len(slots)
        self.needs_decision = True
        if requeue:  # a killed task keeps its last run as start_s..end_s instead
            t.wasted[slots] += at - t.start[slots]
            (t.evictions if evicted else t.preemptions)[slots] += 1
            t.last_preempted[slots] = not evicted
            t.state[slots] = PENDING
            t.node[slots] = -1
            t.start[slots] = np.nan
            t.locality[slots] = -1
            self._incoming.append((np.full(len(slots), at), slots))
            return
        inst = n.instance[node]
        remaining = (self.remaining_work(at, slots) if outcome == UNFINISHED else 0.0)
        self.records.write_slots(t.counters, t, slots, outcome, at, inst, remaining)
        for s in slots[(t.flags[slots] & IS_PARENT) != 0].tolist():
            self.deps.fail(self.deps.slot_id[s], s)
        t.release(slots)

    def remaining_work(self: Simulation, at: float, slots: np.ndarray) -> np.ndarray:
        """Work ``slots`` still had to do at ``at`` (s on a speed-1.0 machine; all of it if
        not running)."""
        t = self.tasks
        running = t.state[slots] == RUNNING
        done = np.where(running, (at - t.start[slots]) * self.cluster.nodes.speed[
            np.maximum(t.node[slots], 0)], 0.0)
        return np.maximum(t.duration[slots] - np.nan_to_num(done), 0.0)

    def _evict_node(self: Simulation, at: float, node: int) -> None:
        """A node goes down: its running tasks lose their work and go back to the queue."""
        t = self.tasks
        slots = np.flatnonzero((t.state == RUNNING) & (t.node == node))
        self._stop(at, slots, requeue=True, evicted=True)
