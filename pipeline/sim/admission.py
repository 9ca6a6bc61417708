"""Tasks arriving: the core's component that gives each arriving task of a batch a slot
in the task table, or records it ``unschedulable`` when it fits no node (or no GPU model it
allows), and hands the admitted ones to the core's incoming list (queued at the next
scheduling point; tasks whose parents have not finished wait blocked).

It owns no state: it writes the task table, the records and the dependencies of the
simulation it was built for (:class:`pipeline.sim.context.SimContext`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim.tasks import (
    BLOCKED,
    CENSORED,
    HAS_INPUTS,
    IS_PARENT,
    PENDING,
    UNSCHEDULABLE,
)

if TYPE_CHECKING:
    from pipeline.sim.context import SimContext
    from pipeline.sim.source import TaskBatch


class Admission:
    """Admits the arriving tasks of the simulation ``sim`` (the core holds one as
    ``sim.admission`` and calls :meth:`admit` for each batch due)."""

    def __init__(self, sim: SimContext) -> None:
        self.sim = sim

    def admit(self, b: TaskBatch, lo: int, hi: int) -> None:
        """Admit tasks ``lo:hi`` of ``b``: unschedulable ones are recorded, others get slots."""
        sim = self.sim
        sim.n_tasks += hi - lo
        sim.events += hi - lo
        fits = sim.cluster.fits_some(b.req[lo:hi])
        if sim.models is not None and b.allow is not None:
            fits &= sim.models.fits(b.req[lo:hi], b.allow[lo:hi])
        bad = np.flatnonzero(~fits)
        if len(bad):
            sim.records.write_rows(sim.tasks.counters, b.row[lo:hi][bad],
                                   b.job[lo:hi][bad], UNSCHEDULABLE)
            for i in bad.tolist():
                if lo + i in b.task_id:
                    sim.deps.fail(b.task_id[lo + i])
        local = np.flatnonzero(fits) + lo
        if len(local) == 0:
            return
        t = sim.tasks
        slots = t.alloc(len(local))  # free slots come reset (kernel or release)
        t.row[slots] = b.row[local]
        if t.extras_on:  # (lazy fields of a reused slot are not reset by the kernel)
            t.asks[slots] = 0
        t.submit[slots] = b.submit[local]
        t.ready[slots] = b.submit[local]
        t.duration[slots] = b.duration[local]
        t.req[slots] = b.req[local]
        t.used[slots] = b.used[local]
        sim.usage.admit(t, slots, b.usage_of(local))
        for name in ("user", "queue", "job", "priority"):
            getattr(t, name)[slots] = getattr(b, name)[local]
        t.kind[slots] = b.kind[local] if b.kind is not None else 0
        if sim.job_stats is not None:
            sim.job_stats.arrive(t.job[slots].astype(np.int64), t.kind[slots].astype(np.int64))
        t.state[slots] = PENDING
        if sim.open_flag and b.censored is not None:
            t.flags[slots[b.censored[local]]] |= CENSORED
        # (the completion kernel resets only what every run uses: a reused slot keeps these
        # until they are set, so they are set for every task of a run that uses them)
        t.requested[slots] = b.requested[local] if b.requested is not None else np.nan
        if sim.models is not None:
            t.allow[slots] = b.allow[local] if b.allow is not None else 0
        if sim.gangs is not None:
            sim.gangs.arrive(t, slots, b.gang[local] if b.gang is not None
                             else np.full(len(local), -1, dtype=np.int64))
        if b.recorded_start is not None:
            t.recorded_start[slots] = b.recorded_start[local]
            t.recorded_node[slots] = b.recorded_node[local]
        if b.inputs is not None:
            t.inp[slots] = b.inputs[local]
            has = b.has_inputs[local]
            t.flags[slots[has]] |= HAS_INPUTS
            t.inputs_on = t.inputs_on or bool(has.any())
        if b.input_mb is not None:
            t.input_mb[slots] = b.input_mb[local]
        if b.deps or b.task_id:
            self._sparse(b, local, slots)
        ok = t.state[slots] == PENDING
        sim._incoming.append((t.submit[slots[ok]], slots[ok]))

    def _sparse(self, b: TaskBatch, local: np.ndarray, slots: np.ndarray) -> None:
        """Tasks with dependencies or dependants (``b.deps``, ``b.task_id``): parents are
        marked, and tasks whose parents have not all finished wait blocked."""
        sim = self.sim
        t = sim.tasks
        for i, slot in zip(local.tolist(), slots.tolist(), strict=True):
            if i in b.task_id and sim.deps.is_parent(b.task_id[i]):
                sim.deps.slot_id[slot] = b.task_id[i]
                t.flags[slot] |= IS_PARENT
            if i in b.deps and not sim.deps.arrive(slot, b.deps[i]):
                t.state[slot] = BLOCKED
                t.ready[slot] = np.nan
