"""``DefaultPreemption``: what kube-scheduler does for a pod that passed no node's filter.

Source: Kubernetes v1.31 ``pkg/scheduler/framework/preemption/preemption.go``
(``Evaluator.Preempt``, ``findCandidates``, ``DryRunPreemption``, ``SelectCandidate``,
``pickOneNodeForPreemption``) and ``plugins/defaultpreemption/default_preemption.go``
(``SelectVictimsOnNode``, ``GetOffsetAndNumCandidates``).  The rules, and what is left
out, are in ``docs/families/kubernetes.md``.

For a pod of priority ``p`` that failed the filter on every node:

1. **Potential nodes**: the nodes whose failure preemption might resolve, in the
   snapshot's list order: Ready nodes the pod may use (a node that is not Ready or has
   another GPU model fails as ``UnschedulableAndUnresolvable``).
2. **Dry run** from a random offset in that list, wrapping around, on each node in turn
   (``SelectVictimsOnNode``): remove every pod of priority strictly below ``p``; if the
   pod then fits (requests and pod count), put the removed pods back one by one, most
   important first (higher priority, then the earlier start), keeping each one the pod
   still fits beside (the reprieve).  Those not put back are the node's victims.  The run
   stops once ``max(10% of the potential nodes, 100)`` nodes (all, if fewer) have
   victims (``GetOffsetAndNumCandidates``; the traces have no PodDisruptionBudgets, so
   every candidate is a non-violating one).
3. **Pick one node** (``pickOneNodeForPreemption``), criterion by criterion, each
   keeping the nodes tied at its best: the lowest highest-priority victim; the lowest
   sum of victims' priorities, each offset by ``2**31`` so that every victim adds to it;
   the fewest victims; the latest start among the highest-priority victims (the node whose
   earliest-started such victim started last); then the first in dry-run order.

The victims are deleted and the pod nominated to the node.  Here the victims stop at once
(the simulator has no termination grace period) and the pod binds to its nominated node
at the same scheduling point, so no nomination outlives the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pipeline.sim.kernels import EPS

MIN_CANDIDATE_NODES_PERCENTAGE = 10  # DefaultPreemptionArgs defaults (v1.31)
MIN_CANDIDATE_NODES_ABSOLUTE = 100
PRIORITY_OFFSET = 2**31  # int64(math.MaxInt32) + 1 in pickOneNodeForPreemption


class Running(NamedTuple):
    """The pods running on the snapshot's nodes (the policy's running view)."""

    node: np.ndarray  # (k,) int64 node slot
    req: np.ndarray  # (k, 3) requests, trace units
    priority: np.ndarray  # (k,) int64
    start: np.ndarray  # (k,) float64 when each started
    alive: np.ndarray  # (k,) bool: not yet a victim at this scheduling point


class Args(NamedTuple):
    """``DefaultPreemptionArgs``."""

    min_percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE
    min_absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE


def num_candidates(args: Args, n_nodes: int) -> int:
    """``GetOffsetAndNumCandidates``' count: ``percentage`` of the potential nodes, at
    least ``absolute``, at most all of them."""
    return min(max(n_nodes * args.min_percentage // 100, args.min_absolute), n_nodes)


def lowest_priority(running: Running) -> int | None:
    """The lowest priority among the pods not yet preempted (None: none run): only a
    pod above it may preempt anything."""
    alive = running.priority[running.alive]
    return int(alive.min()) if len(alive) else None


def fits_after(req: np.ndarray, cap: np.ndarray, alloc: np.ndarray, pods: int,
               max_pods: int) -> bool:
    """The fit filter on one node whose requested sum is ``alloc`` with ``pods`` pods."""
    if pods + 1 > max_pods:
        return False
    return bool(np.all(alloc + req <= cap + EPS * cap + 1e-12))


def pick_one(candidates: list[tuple[int, np.ndarray]], running: Running) -> int:
    """``pickOneNodeForPreemption``: the position in ``candidates`` (node, victims) of the
    node to preempt on."""
    keep = list(range(len(candidates)))

    def narrow(key: object) -> None:
        nonlocal keep
        values = [key(candidates[c][1]) for c in keep]  # type: ignore[operator]
        best = min(values)
        keep = [c for c, v in zip(keep, values, strict=True) if v == best]

    prio = running.priority
    narrow(lambda v: int(prio[v].max()))
    narrow(lambda v: int((prio[v] + PRIORITY_OFFSET).sum()))
    narrow(len)
    # the latest of the earliest starts among each node's highest-priority victims
    narrow(lambda v: -float(running.start[v[prio[v] == prio[v].max()]].min()))
    return keep[0]


class Snapshot(NamedTuple):
    """What preemption reads of the scheduler's snapshot (:class:`.kernel.Nodes`)."""

    cap: np.ndarray
    alloc: np.ndarray
    pods: np.ndarray
    ready: np.ndarray
    bits: np.ndarray
    order: np.ndarray


class Lower(NamedTuple):
    """The running pods of priority below the preemptor's, grouped by node (CSR), each
    node's most important first: the potential victims ``SelectVictimsOnNode`` removes."""

    indptr: np.ndarray  # (n + 1,) int64 over node slots
    index: np.ndarray  # (k,) int64 running indices


# a dry run: (pod's requests, nodes in walk order, candidates wanted, snapshot, potential
# victims, their requests, max pods) -> (node, victims) per candidate, in walk order
DryRun = Callable[[np.ndarray, np.ndarray, int, Snapshot, Lower, np.ndarray, int],
                  list[tuple[int, np.ndarray]]]


def importance_order(running: Running) -> np.ndarray:
    """Running indices grouped by node, each node's most important first
    (``MoreImportantPod``: higher priority, then the earlier start; then slot order, where
    the upstream sort leaves the order unspecified)."""
    k = len(running.node)
    return np.lexsort((np.arange(k), running.start, -running.priority, running.node))


def lower_than(priority: int, running: Running, ranked: np.ndarray, n_nodes: int) -> Lower:
    """The alive pods below ``priority`` in ``ranked`` order (:func:`importance_order`)."""
    index = ranked[running.alive[ranked] & (running.priority[ranked] < priority)]
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(running.node[index], minlength=n_nodes), out=indptr[1:])
    return Lower(indptr, index.astype(np.int64))


def preempt(req: np.ndarray, priority: int, mask: int, nodes: Snapshot, running: Running,
            max_pods: int, args: Args, rng: np.random.Generator,
            ranked: np.ndarray | None = None,
            dry_run: DryRun | None = None) -> tuple[int, np.ndarray] | None:
    """``Evaluator.Preempt`` for one pod: ``(node slot, victims' running indices)``, or
    None when no node can be freed for it.  ``ranked``: :func:`importance_order`, when
    the caller keeps it across pods; ``dry_run``: the dry run to use (the compiled
    :func:`.dryrun.dry_run`, or :func:`dry_run_reference`)."""
    listed = nodes.order[nodes.ready[nodes.order]]
    if mask and len(nodes.bits):
        listed = listed[(nodes.bits[listed] & mask) != 0]
    n = len(listed)
    if n == 0:
        return None
    wanted = num_candidates(args, n)
    offset = int(rng.integers(0, n))  # rand.Int31n(len(potentialNodes))
    lower = lower_than(priority, running,
                       importance_order(running) if ranked is None else ranked,
                       len(nodes.cap))
    if len(lower.index) == 0:
        return None
    walk = np.roll(listed, -offset).astype(np.int64)
    run = dry_run_reference if dry_run is None else dry_run
    candidates = run(np.asarray(req, np.float64), walk, wanted, nodes, lower, running.req,
                     max_pods)
    if not candidates:
        return None
    return candidates[pick_one(candidates, running)]


def dry_run_reference(req: np.ndarray, walk: np.ndarray, wanted: int, nodes: Snapshot,
                      lower: Lower, victim_req: np.ndarray,
                      max_pods: int) -> list[tuple[int, np.ndarray]]:
    """``DryRunPreemption`` read plainly: :func:`select_victims` on the nodes in ``walk``
    order until ``wanted`` nodes have victims; ``(node, victims)`` per candidate."""
    candidates: list[tuple[int, np.ndarray]] = []
    for nd in walk:
        on_node = lower.index[lower.indptr[nd]:lower.indptr[nd + 1]]
        if len(on_node) == 0:
            continue
        victims = _reprieve(req, on_node, victim_req, nodes.cap[nd], nodes.alloc[nd],
                            int(nodes.pods[nd]), max_pods)
        if victims is not None and len(victims):
            candidates.append((int(nd), victims))
            if len(candidates) >= wanted:
                break
    return candidates


def select_victims(req: np.ndarray, priority: int, on_node: np.ndarray, running: Running,
                   cap: np.ndarray, alloc: np.ndarray, pods: int,
                   max_pods: int) -> np.ndarray | None:
    """``SelectVictimsOnNode``: the running indices to preempt on one node (the pods
    ``on_node`` hold there), most important first; None when the pod does not fit even
    with every lower-priority pod gone."""
    lower = on_node[running.priority[on_node] < priority]
    ranked = lower[np.lexsort((lower, running.start[lower], -running.priority[lower]))]
    return _reprieve(req, ranked, running.req, cap, alloc, pods, max_pods)


def _reprieve(req: np.ndarray, ranked: np.ndarray, victim_req: np.ndarray, cap: np.ndarray,
              alloc: np.ndarray, pods: int, max_pods: int) -> np.ndarray | None:
    """Remove the pods ``ranked`` (most important first); if the pod then fits, put each
    back that it still fits beside: the rest are the victims (None: it does not fit)."""
    if len(ranked) == 0:
        return None
    room = np.array(alloc, dtype=np.float64)
    for v in ranked:  # one by one, as the compiled dry run sums (the same float bits)
        room = room - victim_req[v]
    count = pods - len(ranked)
    if not fits_after(req, cap, room, count, max_pods):
        return None
    victims = []
    for v in ranked:
        if fits_after(req, cap, room + victim_req[v], count + 1, max_pods):
            room = room + victim_req[v]
            count += 1
        else:
            victims.append(int(v))
    return np.array(victims, dtype=np.int64)
