"""How Quincy's task counts map onto machines with cpu, memory and GPUs.

Quincy counts tasks: a computer runs at most K of them (K = 1 in the paper; Firmament and
Gleave's port use K slots per machine).  tracereplay's machines and tasks have sizes, so
each machine slot ``m`` gets a *slot size* ``s_m`` (cpu, mem) and ``K_m`` slots:

- ``K`` given: ``K_m = K`` on every machine and ``s_m = cap_m / K`` (K equal shares);
- else ``slot_cpu``/``slot_mem`` given (an unset one is not limiting): ``s_m`` is that slot
  and ``K_m = max(1, floor(min(cap_m / s)))``;
- else the slot is the mean (cpu, mem) request of the first :data:`SAMPLE_TASKS` tasks the
  policy sees pending (the mean so far until that many have come; then fixed for the run),
  used as above: a machine holds about as many tasks as its capacity over the mean size.

A task takes one slot whatever its size (Quincy's model).  So that the flow does not send
tasks to machines whose *resources* are full, a machine's capacity in a round is
``min(K_m, running_m + floor(min(free_m / s_m)))``, and never below its running count (no
preemption is forced by a capacity change).  The flow may still pick a machine a large task
does not fit: :func:`fit_in_order` then keeps that placement back (the task stays pending
for the next round) and the policy counts it, so the core never has to refuse one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.models import may_use

SAMPLE_TASKS = 100  # tasks whose mean request sets the default slot
FIT_SLACK = 1e-9  # the core's relative slack for float drift (pipeline.sim.cluster.FIT_EPS)


class FlowPlacements(NamedTuple):
    """The flow's placements of one round, in order (placement index space)."""

    req: np.ndarray  # (placements, 3) float: cpu / mem / gpu the task asks
    node: np.ndarray  # (placements,) int: the machine slot the flow sent it to
    via: np.ndarray  # (placements,) int: rack aggregator it came through; -2: X; -1: none
    job: np.ndarray  # (placements,) int: its job, 0..n_jobs-1
    allow: np.ndarray  # (placements,) int: GPU model mask; empty: any machine


class Substitutes(NamedTuple):
    """Pending tasks the flow left waiting that may take a kept-back placement's place."""

    req: np.ndarray  # (substitutes, 3) float: cpu / mem / gpu the task asks
    job: np.ndarray  # (substitutes,) int: its job, 0..n_jobs-1
    allow: np.ndarray  # (substitutes,) int: GPU model mask; empty: any machine


class Machines(NamedTuple):
    """The machines' room in one round (machine slot index space), updated in place."""

    free: np.ndarray  # (machines, 3) float: free cpu / mem / gpu
    cap: np.ndarray  # (machines, 3) float: capacity (scales the fit tolerance)
    left: np.ndarray  # (machines,) int: task slots the flow left unused
    agg_ptr: np.ndarray  # (aggregators + 1,) int: aggregator a's machines are
    agg_nodes: np.ndarray  # agg_nodes[agg_ptr[a]:agg_ptr[a + 1]] (machine slots)
    bits: np.ndarray  # (machines,) int: GPU model bits; empty: any model


def slot_sizes(cap: np.ndarray, k: int | None, slot: np.ndarray | None) -> tuple[
        np.ndarray, np.ndarray]:
    """``(K_m, s_m)``: slots per machine (int64) and each machine's slot size (n, 2)."""
    cpu_mem = np.asarray(cap, np.float64)[:, :2]
    if k is not None:
        k_m = np.full(len(cpu_mem), int(k), dtype=np.int64)
        return k_m, cpu_mem / float(k)
    assert slot is not None
    s = np.broadcast_to(np.asarray(slot, np.float64), cpu_mem.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(s > 0, cpu_mem / np.where(s > 0, s, 1.0), np.inf)
    count = np.floor(np.min(ratio, axis=1) + FIT_SLACK)
    count = np.where(np.isfinite(count), count, 1.0)
    return np.maximum(count, 1.0).astype(np.int64), np.array(s)


class SlotSample:
    """The default slot: the mean (cpu, mem) request of the first tasks seen (by row)."""

    def __init__(self) -> None:
        self.rows = np.zeros(0, np.int64)
        self.total = np.zeros(2)

    @property
    def fixed(self) -> bool:
        return len(self.rows) >= SAMPLE_TASKS

    def add(self, rows: np.ndarray, req: np.ndarray) -> None:
        """Count the requests ``req`` of trace ``rows`` not seen before, up to the sample."""
        new = np.flatnonzero(~np.isin(rows, self.rows))[:SAMPLE_TASKS - len(self.rows)]
        self.rows = np.concatenate([self.rows, np.asarray(rows, np.int64)[new]])
        self.total += np.asarray(req, np.float64)[new, :2].sum(axis=0)

    @property
    def slot(self) -> np.ndarray:
        """The mean request so far (a zero component is not limiting)."""
        return self.total / max(len(self.rows), 1)


def machine_capacity(k_m: np.ndarray, slot: np.ndarray, free: np.ndarray,
                     running: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Tasks each machine may hold this round (see the module docstring); 0 when down."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(slot > 0, free[:, :2] / np.where(slot > 0, slot, 1.0), np.inf)
    more = np.floor(np.clip(np.min(ratio, axis=1), 0.0, 1e12) + FIT_SLACK)
    cap = np.minimum(k_m, running + more.astype(np.int64))
    return np.where(up, np.maximum(cap, running), 0).astype(np.int64)


@njit(cache=True, inline="always")
def _fits(r, free, cap, nd):  # pragma: no cover - compiled
    for k in range(3):  # noqa: SIM110 (numba compiles loops, not all())
        if r[k] > free[nd, k] + 0.5 * (FIT_SLACK * cap[nd, k] + 1e-12):
            return False
    return True


@njit(cache=True)
def _first_machine(r, mask, lo, hi, m):  # pragma: no cover - compiled
    """First machine of ``m.agg_nodes[lo:hi]`` with a slot left, room for ``r`` and a GPU
    model the mask ``mask`` allows (-1)."""
    for q in range(lo, hi):
        nd = m.agg_nodes[q]
        if m.left[nd] > 0 and _fits(r, m.free, m.cap, nd) and may_use(mask, m.bits, nd):
            return nd
    return -1


@njit(cache=True)
def _use(r, nd, free):  # pragma: no cover - compiled
    for k in range(3):
        free[nd, k] -= r[k]


@njit(cache=True)
def fit_in_order(p, m, subs, n_jobs, max_tries):  # pragma: no cover - compiled
    """Final machine of each placement (-1: kept back) and of each substitute.

    1. Each placement ``p.req[i]`` on the flow's ``p.node[i]``, in order, if it fits what
       is left of ``m.free`` (updated in place); the slot of one that does not is given
       back to ``m.left`` (slots the flow left unused per machine).
    2. One that does not fit but reached its machine through an aggregator (``p.via`` >= 0:
       that rack aggregator's machines; -2: X, any machine) may take another machine of the
       aggregator with a slot left and room: Quincy prices the aggregator arc at its worst
       machine, so the swap never costs more.
    3. Each job's placements still kept back may go to its substitutes (``subs``: pending
       tasks of the job the flow left waiting that cost no more on the worst machine than
       waiting), tried in order, at most ``max_tries`` per kept-back placement, on any
       machine with a slot left and room.
    The tolerance is half the core's (relative to capacity ``m.cap``), so a kept placement
    is never refused.  A machine counts only where its GPU model is one the task allows
    (``p.allow``/``subs.allow``, empty: any; ``m.bits``: the machines' model bits): the
    network has no model arcs, so this is where the constraint is met.
    """
    req, node, via, job, allow = p.req, p.node, p.via, p.job, p.allow
    free, cap, left, agg_ptr, agg_nodes = m.free, m.cap, m.left, m.agg_ptr, m.agg_nodes
    out = np.full(len(node), -1, np.int64)
    for i in range(len(node)):
        mask = allow[i] if allow.shape[0] else 0
        if _fits(req[i], free, cap, node[i]) and may_use(mask, m.bits, node[i]):
            out[i] = node[i]
            _use(req[i], node[i], free)
        else:
            left[node[i]] += 1
    short = np.zeros(n_jobs, np.int64)
    for i in range(len(node)):
        if out[i] >= 0:
            continue
        if via[i] != -1:
            lo, hi = (0, len(agg_nodes)) if via[i] == -2 else (agg_ptr[via[i]],
                                                               agg_ptr[via[i] + 1])
            nd = _first_machine(req[i], allow[i] if allow.shape[0] else 0, lo, hi, m)
            if nd >= 0:
                out[i] = nd
                left[nd] -= 1
                _use(req[i], nd, free)
                continue
        short[job[i]] += 1
    sub_out = np.full(len(subs.job), -1, np.int64)
    tries = short * max_tries
    for s in range(len(subs.job)):
        j = subs.job[s]
        if short[j] == 0 or tries[j] == 0:
            continue
        tries[j] -= 1
        nd = _first_machine(subs.req[s], subs.allow[s] if subs.allow.shape[0] else 0, 0,
                            len(agg_nodes), m)
        if nd >= 0:
            sub_out[s] = nd
            short[j] -= 1
            left[nd] -= 1
            _use(subs.req[s], nd, free)
    return out, sub_out
