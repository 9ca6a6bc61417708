"""Capacity-scheduler delay scheduling: the assignment loop run once per node heartbeat.

Hadoop allocates when a NodeManager heartbeats (``nodeUpdate`` ->
``allocateContainersToNode`` of the scheduler in ``scheduler/capacity``): the queues are
descended for *that* node, and an application whose requests want other nodes lets it pass
(a missed scheduling opportunity, ``RegularContainerAllocator``), so the next application
in the queue's order gets it.
tracereplay does the same when the pending requests say where their data is: the core's
heartbeats since the previous call (:mod:`pipeline.sim.heartbeat`) are offered in time
order, each runs :func:`~pipeline.policies.capacity.kernel.allocate` with the node's room,
and the locality gate (:mod:`pipeline.policies.locality.gate`, rule ``CS``) picks the
request or the skip.  Queue, user and AM accounting carry over from one heartbeat to the
next within a call.  Without data locations the containers are chosen against the cluster's
room at once, as before (no request could be delayed, so the order of nodes is moot).

Not modelled: ``per-node-heartbeat.maximum-offswitch-assignments`` (1 in Hadoop 3.3) and
the multiple-assignments switch (a heartbeat fills its node, as the aggregate path does),
reservations, and locality with node labels (a labelled configuration places as before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from pipeline.policies.capacity.inputs import Inputs
from pipeline.policies.capacity.kernel import allocate
from pipeline.policies.locality.gate import (
    Candidates,
    GateState,
    LocalityRule,
    LocalityState,
    at_offer,
    offer_run,
    offered,
    worth_offering,
)
from pipeline.policies.models import model_masks, pending_allow

if TYPE_CHECKING:
    from pipeline.sim.interface import SchedView


def wants_offers(rule: LocalityRule, view: SchedView) -> bool:
    """Whether this call places on heartbeats: ``rule`` (the policy's delay scheduling)
    can delay and a request has data."""
    if view.beats is None or not rule.delays or len(view.pending) == 0:
        return False  # (``beats``, not ``offers``: the reports are computed when read)
    return bool(view.pending.has_inputs.any())


def place_on_offers(rule: LocalityRule, locality: LocalityState, view: SchedView,
                    args: Inputs, fit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Requests placed and their nodes, heartbeat by heartbeat (``rule``/``locality``: the
    policy's delay scheduling and its per-application counters, updated; ``args``: the
    kernel's inputs from :func:`~pipeline.policies.capacity.batch.kernel_inputs`; ``fit``:
    per request the room it needs on a node, the larger of its raw and normalised sizes)."""
    assert view.offers is not None
    nodes = view.nodes
    req_idx, app_lo, app_hi = args.apps.req_idx, args.apps.lo, args.apps.hi
    n_apps = len(app_lo)
    if n_apps == 0 or len(view.offers[0]) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    app_of = np.full(len(fit), -1, np.int64)
    app_of[req_idx] = np.repeat(np.arange(n_apps), app_hi - app_lo)
    jobs = np.asarray(view.pending.job, dtype=np.int64)
    app_job = jobs[req_idx[app_lo]]
    locality.grow(int(app_job.max()) + 1)
    cands = Candidates(view.pending.inputs, nodes.rack, app_of, n_apps, view.pending.ready_s,
                       model_masks(nodes, pending_allow(view)))
    run = offer_run(view.offers, nodes, cands, rule, locality, fit, req_idx,
                    app_lo.copy(), app_job)
    n = cs_offers(args, *run)
    return run[-2][:n], run[-1][:n]


@njit(cache=True)
def cs_offers(args: Inputs, off_node: np.ndarray, off_time: np.ndarray, free: np.ndarray,
              smallest: np.ndarray, ready_times: np.ndarray, gate: GateState,
              visits: np.ndarray, out_req: np.ndarray, out_node: np.ndarray) -> int:
    """Run :func:`allocate` for each heartbeat in turn; return how many of the requests
    (``args.apps.req_idx``) were placed (the arguments after ``args``:
    :func:`~pipeline.policies.locality.gate.offer_run`)."""
    n_all = len(args.apps.req_idx)
    idle_room = np.full(3, -np.inf)
    cursor = np.zeros(1, np.int64)
    got = np.empty(len(out_req), np.int64)
    n = 0
    for o in range(len(off_node)):
        nd = off_node[o]
        if not worth_offering(free, nd, smallest, idle_room, off_time[o], ready_times, cursor,
                              n):
            continue
        before = visits[0]
        k = allocate(args.apps, args.users, args.leaves, args.queues, args.room,
                     at_offer(gate, nd, off_time[o]), got)
        n = offered(k, got, nd, n, out_req, out_node, visits[0] != before, free, idle_room)
        if n == n_all:
            break
    return n
