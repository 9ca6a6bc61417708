"""Over-allocation at a NodeManager (the YARN-1011 branch, apache/hadoop at 0a54014): how
much room a container may start on, how much must be reclaimed, and which opportunistic
containers go.  Plain functions over one node's (cpu, mem) vectors, in the trace's units;
:mod:`pipeline.sim.nodemanager` applies them.

- ``SnapshotBasedOverAllocationPolicy.getAvailableResources``: the utilization headroom is
  ``threshold x capacity - measured use`` per resource, and nothing unless both are
  positive (:func:`headroom`).
- ``UtilizationBasedResourceTracker.getAvailableResources``: a container may start on the
  larger, resource by resource, of the unallocated room and that headroom
  (:func:`available`).
- ``ContainerScheduler.getResourcesToReclaim``: at a utilization check, what is reclaimed is
  ``min(allocation above capacity, use above the preemption threshold)`` per resource, so a
  node whose allocations fit its capacity is never preempted, however high its use
  (:func:`to_reclaim`).
- ``SnapshotBasedOverAllocationPreemptionPolicy``: CPU counts only once it has been above
  its threshold on more than ``NM_OVERALLOCATION_PREEMPTION_CPU_COUNT`` consecutive checks;
  the count starts again after it counted (:func:`cpu_over_limit`).
- ``pickOpportunisticContainersToReclaimResources``: victims one at a time, most recently
  started first, each one's *request* credited against what must be freed, stopping as
  soon as nothing is left (:func:`lifo_victims`).
- ``startGuaranteedContainers`` and ``resourcesToFreeUp``: a guaranteed container starts on
  what is available; one that finds too little frees what it lacks beyond what is available,
  or all it asks when some resource has nothing available (:func:`guaranteed_victims`).

Where the replay reads these differently (it has no 3-second snapshot, and its CPU is not
always whole vcores), :mod:`pipeline.sim.nodemanager` says so.
"""

from __future__ import annotations

import numpy as np


def headroom(cap: np.ndarray, used: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Room below the over-allocation threshold, ``(..., 2)``: ``threshold x cap - used``
    where both resources have some, else zeros."""
    room = np.asarray(threshold) * cap - used
    some = np.all(room > 0, axis=-1, keepdims=True)
    return np.where(some, room, 0.0)


def available(unallocated: np.ndarray, room: np.ndarray | None) -> np.ndarray:
    """What a container may start on: the unallocated room, or with over-allocation the
    larger of it and the utilization headroom, resource by resource."""
    return unallocated if room is None else np.maximum(unallocated, room)


def to_reclaim(allocated: np.ndarray, cap: np.ndarray, over_threshold: np.ndarray
               ) -> np.ndarray:
    """What a utilization check reclaims: the allocation above capacity, but no more than
    the use above the preemption threshold (both clipped at zero)."""
    return np.minimum(np.maximum(allocated - cap, 0.0), np.maximum(over_threshold, 0.0))


def cpu_over_limit(count: np.ndarray, hot: np.ndarray, max_count: int) -> np.ndarray:
    """Which nodes' CPU use counts as over its threshold at this check; ``count`` (each
    node's consecutive high checks so far) is updated in place: +1 on a high check, 0 on a
    low one, and 0 again once it passed ``max_count`` and counted."""
    count[:] = np.where(hot, count + 1, 0)
    counted = count > max_count
    count[counted] = 0
    return counted


def lifo_victims(running: list[int], request: np.ndarray, need: np.ndarray,
                 slack: np.ndarray, taken: set[int] | None = None) -> list[int]:
    """Opportunistic containers to stop so that ``need`` (cpu, mem) is freed: from the most
    recently started (``running`` is in start order), each one's ``request[slot]``
    credited, until nothing is left above ``slack``; ``taken`` ones are skipped."""
    need = np.array(need, dtype=np.float64)
    picked: list[int] = []
    for s in reversed(running):
        if not np.any(need > slack):
            break
        if taken is not None and s in taken:
            continue
        picked.append(s)
        need -= request[s, :2]
    return picked


def guaranteed_victims(req: np.ndarray, cap: np.ndarray, unallocated: np.ndarray,
                       measured: np.ndarray, threshold: np.ndarray | None,
                       running: list[int], request: np.ndarray, eps: float) -> list[int]:
    """The opportunistic containers (of ``running``, in start order) a node stops for
    guaranteed containers ``req`` (cpu, mem rows, in arrival order) to start.  The node had
    ``unallocated`` room and ``measured`` use before them; with over-allocation
    (``threshold``), each may also use the headroom below the threshold, with the requests
    of the ones before it counted as use (a 3-second sample would not see them yet)."""
    slack = eps * cap + 1e-12
    picked: list[int] = []
    for r in req:
        room = None if threshold is None else headroom(cap, measured, threshold)
        avail = available(unallocated, room)
        if np.any(r > avail + slack):
            need = r - avail if np.all(avail > 0) else r
            more = lifo_victims(running, request, need, slack, set(picked))
            picked.extend(more)
            for s in more:
                unallocated = unallocated + request[s, :2]
        unallocated = unallocated - r
        measured = measured + r
    return picked
