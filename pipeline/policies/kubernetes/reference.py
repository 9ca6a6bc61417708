"""kube-scheduler's cycles written for reading: the same decisions as :mod:`.kernel`.

Pods go in queue order.  For each, the nodes are walked from ``nextStartNodeIndex`` in
the snapshot's order, wrapping around, until ``to_find`` of them pass the filter; each one
that passes is scored; the best score wins, ties drawn uniformly (reservoir sampling);
the pod is assumed on the winner.  ``nextStartNodeIndex`` moves on by the nodes walked.
A pod no node passes stays pending, or, when its priority lets it preempt, ends the call
at its queue position for the caller's ``DefaultPreemption``.
The score arithmetic is :mod:`.scoring`'s, the one definition both use.
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.kubernetes.kernel import Cycle, Nodes, Pods, Profile
from pipeline.policies.kubernetes.scoring import balanced_score, draw, fit_score
from pipeline.sim.kernels import EPS


def schedule(pods: Pods, nodes: Nodes, profile: Profile, cycle: Cycle, to_find: int) -> int:
    """As :func:`.kernel.schedule`: place what fits, update ``nodes`` and ``cycle``."""
    placed = int(cycle.pos[1])
    k = len(nodes.order)
    m = len(pods.order)
    for j in range(int(cycle.pos[0]), m):
        i = pods.order[j]
        walk = [int(nodes.order[(int(cycle.start[0]) + j) % k]) for j in range(k)]
        passing: list[int] = []
        walked = 0
        for nd in walk:
            walked += 1
            if fits(i, nd, pods, nodes, profile):
                passing.append(nd)
                if len(passing) == to_find:
                    break
        cycle.start[0] = (cycle.start[0] + walked) % k
        if not passing:
            if pods.priority[i] > pods.preempt_above:  # may preempt: the caller's turn
                cycle.pos[0], cycle.pos[1] = j, placed
                return placed
            continue  # unschedulable: stays pending
        best = select(passing, [score(i, nd, pods, nodes, profile) for nd in passing],
                      cycle.rng)
        nodes.alloc[best] += pods.req[i]
        nodes.alloc_units[best] += pods.units[i]
        nodes.pods[best] += 1
        cycle.out_req[placed], cycle.out_node[placed] = i, best
        placed += 1
    cycle.pos[0], cycle.pos[1] = m, placed
    return placed


def fits(i: int, nd: int, pods: Pods, nodes: Nodes, profile: Profile) -> bool:
    """Ready, a pod slot free, the GPU model allowed, and every request fits."""
    if not nodes.ready[nd] or nodes.pods[nd] + 1 > profile.max_pods:
        return False
    mask = int(pods.allow[i]) if len(pods.allow) else 0
    if mask and not (int(nodes.bits[nd]) & mask):
        return False
    cap = nodes.cap[nd]
    return bool(np.all(nodes.alloc[nd] + pods.req[i] <= cap + EPS * cap + 1e-12))


def score(i: int, nd: int, pods: Pods, nodes: Nodes, profile: Profile) -> int:
    """``w_fit * NodeResourcesFit + w_bal * BalancedAllocation`` with the pod on ``nd``."""
    units = np.array([nodes.alloc_units[nd] + pods.units[i], nodes.cap_units[nd]],
                     dtype=np.int64)
    fit = fit_score(units, profile.fit_weights, profile.strategy, profile.shape_u,
                    profile.shape_s)
    return int(profile.w_fit * fit + profile.w_bal * balanced_score(units, profile.balanced))


def select(nodes: list[int], scores: list[int], rng: np.ndarray) -> int:
    """``selectHost``: the highest score; among ``t`` tied so far, the ``t``-th replaces the
    choice with probability ``1/t``.  A single node is taken without a draw."""
    best, top, tied = nodes[0], scores[0], 1
    for nd, s in zip(nodes[1:], scores[1:], strict=True):
        if s > top:
            best, top, tied = nd, s, 1
        elif s == top:
            tied += 1
            if draw(rng, tied) == 0:
                best = nd
    return best
