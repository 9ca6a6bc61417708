"""Machine speeds that change during a replay (transient contention: a machine slowed for a
while by noisy neighbours, :mod:`pipeline.replay.speeds`).

A speed change is an event like a node going down: at its time the core first completes
what ended before, then re-times every run in flight on the node.  What is left of a run
(its wall time still to go at the old speed, input reading included) stretches or shrinks by
old speed / new speed; its completion moves accordingly (a new heap entry; the old one goes
stale).  Each run keeps how far it got when its speed last changed (``seg_t``, the time,
and ``seg_share``, the share of the run done then), so its progress stays the share of its
work done (:attr:`pipeline.sim.interface.RunningView.progress`).

Usage profiles over time (``task_usage``) keep the timing of the speed a run started at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim import kernels
from pipeline.sim.heap import heap_push
from pipeline.sim.tasks import RUNNING, is_copy, run_share

if TYPE_CHECKING:
    from pipeline.sim.cluster import NodeState
    from pipeline.sim.context import SimContext
    from pipeline.sim.tasks import Heap, TaskTable


class SpeedChanges:
    """Speed changes ``(time, node slot, new speed)`` in time order, consumed in order."""

    def __init__(self, times: np.ndarray, nodes: np.ndarray, speeds: np.ndarray) -> None:
        self.times = np.asarray(times, dtype=np.float64)
        self.nodes = np.asarray(nodes, dtype=np.int64)
        self.speeds = np.asarray(speeds, dtype=np.float64)
        self.i = 0

    def next_time(self) -> float:
        return float(self.times[self.i]) if self.i < len(self.times) else np.inf

    def take(self, at: float) -> tuple[np.ndarray, np.ndarray]:
        """The changes due at ``at`` exactly (nodes, speeds)."""
        j = int(np.searchsorted(self.times, at, side="right"))
        out = self.nodes[self.i:j], self.speeds[self.i:j]
        self.i = j
        return out

    def apply(self, sim: SimContext, at: float) -> None:
        """Apply the speed changes due at ``at`` (the core has completed what ended
        before): the core's extension point for speed changes."""
        nodes, speeds = self.take(at)
        for node, speed in zip(nodes.tolist(), speeds.tolist(), strict=True):
            _retime(sim.tasks, sim.cluster.nodes, sim.heap, at, node, speed)
        sim.events += len(nodes)


def _retime(t: TaskTable, n: NodeState, h: Heap, at: float, node: int, speed: float) -> None:
    """Node ``node`` runs at ``speed`` from ``at``: what is left of each run in flight on it
    stretches or shrinks by old speed / new speed, and its completion moves."""
    old = float(n.speed[node])
    n.speed[node] = speed
    n.dirty[node] = True
    if old == speed:
        return
    slots = np.flatnonzero((t.state == RUNNING) & (t.node == node))
    end = t.run_end[slots]
    live = np.isfinite(end) & (end > at)
    slots, end = slots[live], end[live]
    if len(slots) == 0:
        return
    share = run_share(t, slots, at)
    t.seg_t[slots] = at
    t.seg_share[slots] = share
    new_end = at + (end - at) * old / speed
    t.run_end[slots] = new_end
    copies = is_copy(t, slots)
    t.spec_end[slots[copies]] = new_end[copies]
    t.epoch[slots] += 1  # their pending completions go stale
    h.reserve(int(t.counters[kernels.HEAP_N]), len(slots))
    for s, e in zip(slots.tolist(), new_end.tolist(), strict=True):
        heap_push(h.time, h.seq, h.slot, h.epoch, t.counters, e, s, int(t.epoch[s]))


def work_done(t: TaskTable, speed: np.ndarray, at: float, slots: np.ndarray) -> np.ndarray:
    """Work (s at speed 1.0) running ``slots`` have done at ``at``, all runs, on machines
    whose speed changed: the share of the current run done (:func:`run_share`), on top
    of a paused run's earlier work; work at the node's ``speed`` where no end is known."""
    before = t.work0[slots] if t.extras_on else 0.0
    share = run_share(t, slots, at)
    by_speed = before + (at - t.start[slots]) * speed[t.node[slots]]
    done = np.where(np.isnan(share), by_speed,
                    before + np.nan_to_num(share) * (t.duration[slots] - before))
    return np.minimum(done, t.duration[slots])
