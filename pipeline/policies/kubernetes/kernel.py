"""kube-scheduler's scheduling cycles over the pending pods, compiled.

One cycle per pod, in the queue's order (Kubernetes v1.31 ``schedule_one.go``):

1. **Filter** (``findNodesThatPassFilters``): the nodes of the snapshot are checked in
   their list order from ``nextStartNodeIndex`` on, wrapping around; a node passes when it
   is Ready, the pod may use its GPU model, it has room for one more pod (``max_pods``)
   and the pod's requests fit what its allocatable leaves (``NodeResourcesFit``).  The
   search stops once ``to_find`` nodes passed (:func:`.scoring.num_feasible_nodes_to_find`);
   ``nextStartNodeIndex`` then moves on by the number of nodes checked.
2. **Score** each passing node: ``w_fit * NodeResourcesFit + w_bal * BalancedAllocation``
   (:mod:`.scoring`, with the pod counted on the node).  One passing node is taken
   without scoring.
3. **Select** (``selectHost``): the highest total; ties go to one of the tied nodes
   uniformly at random (reservoir sampling, the run's seeded generator).
4. **Assume**: the pod's requests count on that node for the pods after it (its
   integer requests add to the node's, as the scheduler's cache sums them).

The filter and score of a (node, pod shape) pair come from :mod:`.memo` when the node
is unchanged since they were computed: the same numbers, without the arithmetic (the
benchmark at 12,500 nodes, 300,000 pods: this kernel 3.5 s -> 0.9 s, the replay 5.2 s ->
2.5 s, 98 % of the pairs looked up).

A pod that passes no node stays pending (unschedulable), unless its priority lets it
preempt: the call then returns, the policy runs ``DefaultPreemption`` for it
(:mod:`.preemption`) and calls again from the next pod.  Free room only shrinks within a
call (preemption frees room between calls), so a pod at least as large as one that passed no
node passes none either and is not searched again (the outcome, and ``nextStartNodeIndex``,
are the same as a full search).

:mod:`.reference` is the same cycle written for reading; ``tests/policies/kubernetes``
drives both on random states and requires identical decisions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.kubernetes.memo import FAILS, SLOTS
from pipeline.policies.kubernetes.scoring import balanced_score, draw, fit_score
from pipeline.policies.models import may_use
from pipeline.policies.placement.nodetree import dominated_by_failure, remember_failure
from pipeline.sim.jit import helper, inlined
from pipeline.sim.kernels import EPS


class Pods(NamedTuple):
    """The pending pods."""

    req: np.ndarray  # (m, 3) requests, trace units
    units: np.ndarray  # (m, 3) int64 the same as the API server holds them (scoring.to_units)
    order: np.ndarray  # (m,) int64 positions in queue order (PrioritySort)
    allow: np.ndarray  # (m,) int64 GPU model masks (empty: all may use any node)
    priority: np.ndarray  # (m,) int64
    preempt_above: int  # a pod of higher priority that passes no node stops the call


class Nodes(NamedTuple):
    """The scheduler's snapshot of the nodes; ``alloc`` and ``pods`` are updated as pods
    are assumed."""

    cap: np.ndarray  # (n, 3) allocatable, trace units
    alloc: np.ndarray  # (n, 3) requested by the pods on each node
    cap_units: np.ndarray  # (n, 3) int64 allocatable as the API server holds it
    alloc_units: np.ndarray  # (n, 3) int64 requested, the sum of the pods' integer requests
    pods: np.ndarray  # (n,) int64 pods on each node
    ready: np.ndarray  # (n,) bool
    bits: np.ndarray  # (n,) int64 GPU model bit per node (unread when no pod has a mask)
    order: np.ndarray  # (k,) int64 node slots in the snapshot's list order


class Profile(NamedTuple):
    """A scheduler profile's scoring (:mod:`.config`)."""

    fit_weights: np.ndarray  # (3,) int64 NodeResourcesFit resource weights (0: not listed)
    balanced: np.ndarray  # (3,) bool resources BalancedAllocation looks at
    shape_u: np.ndarray  # (k,) int64 RequestedToCapacityRatio shape: utilization 0..100
    shape_s: np.ndarray  # (k,) int64 ... and score, scaled to 0..100
    strategy: int  # scoring.LEAST, MOST or RATIO
    w_fit: int  # plugin weights
    w_bal: int
    max_pods: int


class Cycle(NamedTuple):
    """What persists between calls and what a call writes."""

    start: np.ndarray  # (1,) int64 nextStartNodeIndex
    rng: np.ndarray  # (1,) int64 generator state (scoring.draw)
    out_req: np.ndarray  # (m,) int64 pod position placed
    out_node: np.ndarray  # (m,) int64 on node slot
    units: np.ndarray  # (2, 3) int64 scratch: requested with the pod, allocatable
    pos: np.ndarray  # (2,) int64 queue position to go on from, and pods placed so far


@njit(cache=True)
def schedule(pods, nodes, profile, cycle, memo, to_find):
    """Run a cycle for each pending pod in order from queue position ``cycle.pos[0]``;
    return how many are placed in all (the first entries of ``cycle.out_req``/
    ``out_node``, counting the ``cycle.pos[1]`` placed before).  The call stops early at
    a pod that passes no node and may preempt (priority above ``pods.preempt_above``):
    ``cycle.pos[0]`` is then its position (else the queue's length), for the caller's
    ``DefaultPreemption`` (:mod:`.preemption`) before it goes on.  ``memo``
    (:class:`.memo.Memo`) holds the filter and score results of unchanged nodes."""
    failed = np.empty((16, 3))
    return _cycles(pods, nodes, profile, cycle, memo, to_find, failed)


@helper
def _cycles(pods, nodes, profile, cycle, memo, to_find, failed):
    """:func:`schedule`'s loop (a helper: its steps are inlined into it)."""
    n_failed = 0
    c = cycle.pos[1]
    k = len(nodes.order)
    m = len(pods.order)
    for j in range(cycle.pos[0], m):
        i = pods.order[j]
        may_preempt = pods.priority[i] > pods.preempt_above
        rc, rm, rg = pods.req[i, 0], pods.req[i, 1], pods.req[i, 2]
        nd = -1
        mask = pods.allow[i] if len(pods.allow) else 0
        if not dominated_by_failure(failed, n_failed, rc, rm, rg):
            nd, checked = _one_cycle(i, mask, pods, nodes, profile, cycle, memo, to_find)
            cycle.start[0] = (cycle.start[0] + checked) % k
            if nd < 0 and mask == 0:
                n_failed = remember_failure(failed, n_failed, rc, rm, rg)
        if nd < 0:
            if may_preempt:
                cycle.pos[0], cycle.pos[1] = j, c
                return c
            continue
        for r in range(3):
            nodes.alloc[nd, r] += pods.req[i, r]
            nodes.alloc_units[nd, r] += pods.units[i, r]
        nodes.pods[nd] += 1
        memo.version[nd] += 1
        cycle.out_req[c] = i
        cycle.out_node[c] = nd
        c += 1
    cycle.pos[0], cycle.pos[1] = m, c
    return c


@inlined
def _one_cycle(i, mask, pods, nodes, profile, cycle, memo, to_find):
    """Filter, score and select for pod ``i``: ``(node slot or -1, nodes checked)``."""
    k = len(nodes.order)
    p = cycle.start[0]  # the walk's position in the list, wrapping around
    found = 0
    best = -1
    best_score = np.int64(-1)
    ties = 0
    checked = 0
    for _ in range(k):
        nd = nodes.order[p]
        p = p + 1 if p + 1 < k else 0
        checked += 1
        s = _filter_score(i, nd, mask, pods, nodes, profile, cycle, memo)
        if s == FAILS:
            continue
        found += 1
        if s > best_score:
            best, best_score, ties = nd, s, 1
        elif s == best_score:
            ties += 1
            if draw(cycle.rng, ties) == 0:
                best = nd
        if found == to_find:
            break
    return best, checked


@inlined
def _filter_score(i, nd, mask, pods, nodes, profile, cycle, memo):
    """Node ``nd``'s score for pod ``i``, or ``FAILS`` when it does not pass the filter:
    the memo's entry when it is for the pod's shape at the node's current version, else
    computed and entered."""
    sid = memo.shape[i]
    slot = sid & (SLOTS - 1)
    entry = memo.entry
    if entry[slot, nd, 0] == sid and entry[slot, nd, 1] == memo.version[nd]:
        return entry[slot, nd, 2]
    s = np.int64(FAILS)
    if _passes(i, nd, mask, pods, nodes, profile.max_pods):
        s = _score(i, nd, pods, nodes, profile, cycle)
    entry[slot, nd, 0] = sid
    entry[slot, nd, 1] = memo.version[nd]
    entry[slot, nd, 2] = s
    return s


@inlined
def _passes(i, nd, mask, pods, nodes, max_pods):
    """The filter: Ready, GPU model allowed, a pod slot free, and the requests fit."""
    if not nodes.ready[nd] or nodes.pods[nd] + 1 > max_pods:
        return False
    if not may_use(mask, nodes.bits, nd):  # mask 0 (no models): any node
        return False
    for r in range(3):
        c = nodes.cap[nd, r]
        if nodes.alloc[nd, r] + pods.req[i, r] > c + EPS * c + 1e-12:
            return False
    return True


@inlined
def _score(i, nd, pods, nodes, profile, cycle):
    """The node's total score for pod ``i`` (its requests counted on the node)."""
    units = cycle.units
    for r in range(3):
        units[0, r] = nodes.alloc_units[nd, r] + pods.units[i, r]
        units[1, r] = nodes.cap_units[nd, r]
    total = np.int64(0)
    if profile.w_fit:
        total += profile.w_fit * fit_score(units, profile.fit_weights, profile.strategy,
                                           profile.shape_u, profile.shape_s)
    if profile.w_bal:
        total += profile.w_bal * balanced_score(units, profile.balanced)
    return total
