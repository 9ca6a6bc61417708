"""Runs that end before their work is done: the core's component that frees a run's node,
then re-queues the task or records it (preempted, killed, evicted, stopped at the window's
end), and sends containers a NodeManager gave back to the RM's queue.

It owns no state of its own: it acts on the task table, the nodes and the pending work of
the simulation it was built for (:class:`pipeline.sim.context.SimContext`), and is what the
decision step, the NodeManagers and speculative copies call when a run ends early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim.contention import work_done
from pipeline.sim.tasks import (
    IS_PARENT,
    KILLED,
    OPPORTUNISTIC,
    PAUSED,
    PENDING,
    RUNNING,
    SPEC,
    UNFINISHED,
    X_OPP_KILLS,
    X_OPP_WASTED,
)

if TYPE_CHECKING:
    from pipeline.sim.context import SimContext


class RunStops:
    """Ending runs early and re-queuing tasks, for the simulation ``sim`` (the core holds
    one as ``sim.runs``)."""

    def __init__(self, sim: SimContext, sched_interval_s: float, speeds_change: bool) -> None:
        self.sim = sim
        # the RM's scheduling grid: a container given back is asked for at the next point
        self.sched_interval_s = sched_interval_s
        # machines' speeds change during the replay (pipeline.sim.contention): work done is
        # then the share of each run done, not time x speed
        self.speeds_change = speeds_change

    def release(self, at: float, slots: np.ndarray) -> np.ndarray:
        """The runs of running ``slots`` end at ``at``: their node gets its resources back
        (guaranteed or opportunistic allocation), their usage integral is settled, their
        completion goes stale.  Returns each one's work done (s at speed 1.0)."""
        sim = self.sim
        done = sim.usage.stop(sim.tasks, at, slots, sim.cluster.nodes.speed)
        self.free(slots, np.full(len(slots), at))
        return done

    def free(self, slots: np.ndarray, at: np.ndarray) -> None:
        """The node side of runs ``slots`` ending at times ``at``: allocation (guaranteed or
        opportunistic), usage and container counts given back, a node left empty idle from
        its last run's end, the runs' heap entries stale."""
        sim = self.sim
        t, n = sim.tasks, sim.cluster.nodes
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
        sim.events += len(slots)
        sim.needs_decision = True

    def stop(self, at: float, slots: np.ndarray, requeue: bool, evicted: bool = False,
             outcome: int = KILLED, reason: str = "") -> None:
        """Stop running ``slots`` at ``at``: free their node, then re-queue or record them.

        Recorded (not re-queued) tasks end with ``outcome``: ``killed`` by a policy, or
        ``unfinished`` when the core stops a censored task at the trace's window end.
        ``reason`` ``opp_kill``: a NodeManager killed opportunistic containers (counted as
        such, not as the scheduler's preemptions).
        """
        sim = self.sim
        if len(slots) and sim.tasks.extras_on and (sim.tasks.flags[slots] & SPEC).any():
            slots = sim.speculation.split_stops(at, slots, requeue, evicted)
        if len(slots) == 0:
            return
        t, n = sim.tasks, sim.cluster.nodes
        node = t.node[slots]
        changed = work_done(t, n.speed, at, slots) if self.speeds_change else None
        done = self.release(at, slots)
        if changed is not None:
            done = changed
        if requeue:  # a killed task keeps its last run as start_s..end_s instead
            self._requeue(at, slots, evicted, reason)
            return
        inst = n.instance[node]
        remaining = (t.duration[slots] - done if outcome == UNFINISHED else 0.0)
        sim.records.write_slots(t.counters, t, slots, outcome, at, inst, remaining)
        for s in slots[(t.flags[slots] & IS_PARENT) != 0].tolist():
            sim.deps.fail(sim.deps.slot_id[s], s)
        t.release(slots)

    def _requeue(self, at: float, slots: np.ndarray, evicted: bool, reason: str) -> None:
        """Stopped ``slots`` (their nodes freed) lose their run and wait in the queue again."""
        sim = self.sim
        t = sim.tasks
        lost = at - t.start[slots] + (t.work0[slots] if t.extras_on else 0.0)
        t.wasted[slots] += lost
        if reason == "opp_kill":
            t.extra[slots, X_OPP_KILLS] += 1
            t.extra[slots, X_OPP_WASTED] += lost
            self.ask_again(at)
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
        sim._incoming.append((np.full(len(slots), at), slots))

    def back_to_rm(self, at: float, slots: np.ndarray) -> None:
        """Opportunistic containers the NM would not keep go back to the RM's queue; a
        paused one loses the work it had done."""
        if len(slots) == 0:
            return
        sim = self.sim
        t = sim.tasks
        paused = slots[(t.flags[slots] & PAUSED) != 0]
        if len(paused):
            t.wasted[paused] += t.work0[paused]
            t.extra[paused, X_OPP_WASTED] += t.work0[paused]
            t.work0[paused] = 0.0
        t.flags[slots] &= ~np.int8(PAUSED | OPPORTUNISTIC)
        t.state[slots] = PENDING
        t.nmq_since[slots] = np.nan
        sim._incoming.append((np.full(len(slots), at), slots))
        self.ask_again(at)

    def ask_again(self, at: float) -> None:
        """Containers a NodeManager gave back are asked for again: the RM sees them at its
        next scheduling point (the next heartbeat), not only at the next event."""
        sim = self.sim
        sim.needs_decision = True
        step = self.sched_interval_s
        sim.wake_at = min(sim.wake_at, at + (step if step > 0 else 1e-3))

    def remaining_work(self, at: float, slots: np.ndarray) -> np.ndarray:
        """Work ``slots`` still had to do at ``at`` (s on a speed-1.0 machine; all of it if
        not running)."""
        sim = self.sim
        t, speed = sim.tasks, sim.cluster.nodes.speed
        if self.speeds_change:
            running = t.state[slots] == RUNNING
            done = np.zeros(len(slots))
            done[running] = work_done(t, speed, at, slots[running])
            return np.maximum(t.duration[slots] - np.where(
                running, done, t.work0[slots]), 0.0)
        running = t.state[slots] == RUNNING
        done = np.where(running, (at - t.start[slots]) * speed[
            np.maximum(t.node[slots], 0)], 0.0)
        before = t.work0[slots] if t.extras_on else 0.0  # paused runs' work
        return np.maximum(t.duration[slots] - before - np.nan_to_num(done), 0.0)

    def evict_node(self, at: float, node: int) -> None:
        """A node goes down: its running tasks lose their work and go back to the queue,
        and so do the opportunistic containers queued at it."""
        sim = self.sim
        t = sim.tasks
        slots = np.flatnonzero((t.state == RUNNING) & (t.node == node))
        self.stop(at, slots, requeue=True, evicted=True)
        if sim.nm is not None:
            self.back_to_rm(at, sim.nm.take_queued(node))
            sim.nm.sync(sim, node)

    def scale_down(self, at: float) -> int:
        """Delete the busy nodes a draining cluster model's scale-down chose (Cluster
        Autoscaler's): their pods are evicted first (re-queued, their run lost, counted as
        evictions), then the cluster removes the node.  Returns how many were deleted."""
        sim = self.sim
        t = sim.tasks
        running = t.in_state(RUNNING)
        chosen = sim.cluster.scale_down(at, t.node[running], t.req[running]).tolist()
        for node in chosen:
            evicted = int(np.count_nonzero(t.node[running] == node))
            self.evict_node(at, node)
            sim.cluster.remove(at, node, evicted)
        return len(chosen)
