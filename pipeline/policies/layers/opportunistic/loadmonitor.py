"""The RM's view of NodeManager queues: the k least-loaded nodes, round-robin allocation
over them, and the queue limit pushed to every NodeManager.

Hadoop 3.3 ``NodeQueueLoadMonitor`` (resourcemanager/scheduler/distributed): every
``sorting-nodes-interval-ms`` the RM sorts the nodes by load, ascending (``QUEUE_LENGTH``:
queued opportunistic containers; ``QUEUE_WAIT_TIME``: the NM's estimated queue wait), and
opportunistic requests go to the first k nodes round-robin.  Each assignment tentatively
raises the node's queue length (``compareAndIncrement``) and succeeds only while the new
length stays within the node's queue capacity; a request no listed node can take waits at
the RM.  Ties go to the node with the more recent heartbeat in Hadoop; the replay has no
heartbeat order, so ties go to the lower node slot.  Hadoop 3.3's NodeManagers report no
queue wait estimate (YARN-2886 is open), so ``queue_wait_time`` uses the wait so far of each
node's oldest queued container, which an NM can measure.

``QueueLimitCalculator`` (integer arithmetic, as Hadoop): mean = floor(sum / n),
stdev = round(sqrt(sum((v - mean)^2) / n)), limit = clamp((int)(mean + k * stdev),
[min, max]).
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.sim.interface import NodeView


def queue_limit(lengths: np.ndarray, k: float, lo: int, hi: int) -> int:
    """The queue limit the RM pushes, from the nodes' queue lengths (integer arithmetic as
    Hadoop's: floor mean, stdev rounded half up, threshold truncated)."""
    values = np.asarray(lengths, dtype=np.int64)
    if len(values) == 0:
        return lo
    n = len(values)
    mean = int(values.sum()) // n
    square = int(((values - mean) ** 2).sum())
    stdev = math.floor(math.sqrt(square / n) + 0.5)  # Java Math.round: half up
    threshold = int(mean + k * stdev)
    return min(hi, max(lo, threshold))


class LoadMonitor:
    """Sorted least-loaded nodes, refreshed every ``interval_s``, and the round-robin cursor."""

    def __init__(self, k: int, interval_s: float, load: str, capacity: int,
                 stdev_k: float, min_queue: int, max_queue: int) -> None:
        self.k, self.interval_s, self.load, self.capacity = k, interval_s, load, capacity
        self.stdev_k, self.min_queue, self.max_queue = stdev_k, min_queue, max_queue
        self.top = np.zeros(0, dtype=np.int64)
        self.length = np.zeros(0, dtype=np.int64)  # RM-side queue lengths of the top nodes
        self.sorted_at = -math.inf
        self.cursor = 0
        self.limit: int | None = None
        self.room_at_sort = False  # some listed node could take a container at the sort

    def refresh(self, now: float, nodes: NodeView, oldest_wait: np.ndarray | None) -> bool:
        """Re-sort when the interval has passed; return whether it did."""
        if now < self.sorted_at + self.interval_s:
            return False
        self.sorted_at = now
        up = np.flatnonzero(nodes.up)
        queued = np.asarray(nodes.opp_queued, dtype=np.int64)
        if self.load == "queue_wait_time" and oldest_wait is not None:
            key = oldest_wait[up]
        else:
            key = queued[up]
        order = np.lexsort((up, key))
        self.top = up[order[: self.k]]
        self.length = queued[self.top].copy()
        self.room_at_sort = bool(np.any(self.length < self.capacity))
        self.cursor = 0
        self.limit = queue_limit(queued[up], self.stdev_k, self.min_queue, self.max_queue)
        return True

    def assign(self, n_requests: int) -> np.ndarray:
        """A node slot for each of ``n_requests`` opportunistic requests (-1: none could
        take it), round-robin over the top nodes with compare-and-increment."""
        out = np.full(n_requests, -1, dtype=np.int64)
        m = len(self.top)
        if m == 0:
            return out
        for i in range(n_requests):
            for step in range(m):
                j = (self.cursor + step) % m
                if self.length[j] + 1 <= self.capacity:
                    self.length[j] += 1
                    out[i] = self.top[j]
                    self.cursor = (j + 1) % m
                    break
            else:
                break  # every listed node is full: the rest wait for the next sort
        return out
