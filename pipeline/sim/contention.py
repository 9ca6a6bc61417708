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
from pipeline.sim.tasks import RUNNING

if TYPE_CHECKING:
    from pipeline.sim.core import Simulation


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


def run_share(t: object, slots: np.ndarray, at: float) -> np.ndarray:
    """Share of each running slot's run done at ``at`` (from its last speed change, if any
    came after its start, else from its start), by its current end ``run_end``."""
    start = t.start[slots]
    end = t.run_end[slots]
    if t.extras_on:
        seg = t.seg_t[slots] > start  # (a stale seg_t of an earlier run is never after)
        s0 = np.where(seg, t.seg_t[slots], start)
        b0 = np.where(seg, t.seg_share[slots], 0.0)
    else:
        s0, b0 = start, 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        share = b0 + (at - s0) / (end - s0) * (1.0 - b0)
    return np.where(np.isfinite(end) & (end > s0), np.clip(share, 0.0, 1.0), np.nan)


class Contended:
    """Speed changes handling, mixed into :class:`pipeline.sim.core.Simulation`."""

    def next_speed_change(self: Simulation) -> float:
        return np.inf if self.speed_changes is None else self.speed_changes.next_time()

    def change_speeds(self: Simulation, at: float) -> None:
        """Apply the speed changes due at ``at`` (the completions before it are done)."""
        assert self.speed_changes is not None
        nodes, speeds = self.speed_changes.take(at)
        for node, speed in zip(nodes.tolist(), speeds.tolist(), strict=True):
            self._retime(at, node, speed)
        self.events += len(nodes)

    def _retime(self: Simulation, at: float, node: int, speed: float) -> None:
        t, n, h = self.tasks, self.cluster.nodes, self.heap
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
        copies = self.is_copy(slots)
        t.spec_end[slots[copies]] = new_end[copies]
        t.epoch[slots] += 1  # their pending completions go stale
        h.reserve(int(t.counters[kernels.HEAP_N]), len(slots))
        for s, e in zip(slots.tolist(), new_end.tolist(), strict=True):
            heap_push(h.time, h.seq, h.slot, h.epoch, t.counters, e, s,
                              int(t.epoch[s]))

    def work_done(self: Simulation, at: float, slots: np.ndarray) -> np.ndarray:
        """Work (s at speed 1.0) running ``slots`` have done at ``at``, all runs, on machines
        whose speed changed: the share of the current run done (:func:`run_share`), on top
        of a paused run's earlier work; work at the node's speed where no end is known."""
        t = self.tasks
        before = t.work0[slots] if t.extras_on else 0.0
        share = run_share(t, slots, at)
        by_speed = before + (at - t.start[slots]) * self.cluster.nodes.speed[t.node[slots]]
        done = np.where(np.isnan(share), by_speed,
                        before + np.nan_to_num(share) * (t.duration[slots] - before))
        return np.minimum(done, t.duration[slots])
