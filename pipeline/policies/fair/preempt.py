"""Fair-share and min-share preemption of ``fair-scheduler`` (Hadoop 3.3, paraphrased).

Sources: FairScheduler.md ("If the queue waits fairSharePreemptionTimeout without receiving
fairSharePreemptionThreshold*fairShare resources, it is allowed to preempt containers to
take resources from other queues"; minSharePreemptionTimeout likewise for the minimum
share) and apache/hadoop 3.3 ``FairScheduler`` (``update``, ``shouldAttemptPreemption``,
``attemptScheduling``, ``assignPreemptedContainers``), ``FSLeafQueue``
(``updateStarvedApps``), ``FSAppAttempt`` (``fairShareStarvation``,
``getStarvedResourceRequests``, ``preemptionTriggered``), ``FSPreemptionThread`` and
``FairSchedulerConfiguration`` defaults.

Starvation, per leaf queue, with instantaneous fair share ``F``, demand ``D`` (running +
pending) and usage ``U`` (memory only for ``fair``/``fifo`` leaves, every resource for
``drf``): fair-share starved while ``U < min(threshold * F, D)``, claiming
``min(threshold * F, D) - U`` once that has lasted ``fairSharePreemptionTimeout``;
min-share starved while ``U < min(minShare, D)``, claiming ``min(minShare, D) - U`` after
``minSharePreemptionTimeout``; the claim is the larger of the two.  Starvation is only
looked at while cluster allocation (the larger of the cpu and memory ratios) is above
``cluster-utilization-threshold`` (0.8).

A claim is served as Hadoop's preemption thread serves a starved application:

1. the leaf's pending requests, in order, as many as fit in the claim by memory
   (``getStarvedResourceRequests``: ``floor(claim / capability)`` with the scheduler's
   memory-only calculator; a request too large for what is left is skipped);
2. for each, containers on **one node** that make room for it (:mod:`.victims`);
3. they are warned and killed ``waitTimeBeforeKill`` (15 s) later whatever happens
   meanwhile (``PreemptContainersTask``); their room is promised to the starved leaf: when
   they are killed, its pending requests that fit there are placed on that node first,
   up to the freed amount (``assignPreemptedContainers``: "we preempt a container for A
   from B and C gets the preempted containers" is what this prevents);
4. the leaf is not looked at again for ``waitTimeBeforeKill + 4 heartbeats +
   waitTimeBeforeNextStarvationCheck`` = 15 + 4 + 10 = 29 s (``preemptionTriggered``).

So a preempted container has run at least ``waitTimeBeforeKill``, and a leaf triggers at
most one wave of preemptions per 29 s.

tracereplay choices: starvation is queue-level, not per application (the leaf's requests
stand for its applications' starved requests, in the order they wait); the promised room is
used at the kill itself (Hadoop: at the node's next heartbeat) and only by requests that
need no new AM (those go through the AM-share check at the next scheduling point); a
promise ends with that placement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipeline.policies.fair.kernel import DRF
from pipeline.policies.fair.victims import Victims, node_order, victims_for

WAIT_BEFORE_KILL_S = 15.0  # FairSchedulerConfiguration waitTimeBeforeKill (15000 ms)
NEXT_STARVATION_CHECK_S = 10.0  # waitTimeBeforeNextStarvationCheck (10000 ms)
HEARTBEAT_S = 1.0  # yarn.resourcemanager.nodemanagers.heartbeat-interval-ms (1000)
RECHECK_DELAY_S = WAIT_BEFORE_KILL_S + 4 * HEARTBEAT_S + NEXT_STARVATION_CHECK_S
UTILIZATION_THRESHOLD = 0.8  # yarn.scheduler.fair.preemption.cluster-utilization-threshold
MEM = np.array([False, True, False])


def compared(kind: np.ndarray) -> np.ndarray:
    """(n, 3): the resources each queue's policy compares (drf: all; fair/fifo: memory)."""
    return np.where((np.asarray(kind) == DRF)[:, None], True, MEM)


def starved_claims(now: float, leaves: np.ndarray, kind: np.ndarray, usage: np.ndarray,
                   demand: np.ndarray, fair: np.ndarray, min_share: np.ndarray,
                   threshold: np.ndarray, fs_timeout: np.ndarray, ms_timeout: np.ndarray,
                   since: np.ndarray, next_check: np.ndarray,
                   ) -> tuple[np.ndarray, float | None]:
    """Claims ``(n_leaves, 3)`` due now, updating ``since`` (n_leaves, 2, the time each
    starvation began); and when a claim would next fall due.  Leaves whose ``next_check``
    (n_leaves) is still ahead claim nothing."""
    q = leaves
    dims = compared(kind[q])
    claims = np.zeros((len(q), 3))
    checked = now >= next_check - 1e-9
    wake = np.inf
    for col, (target, timeout) in enumerate((
            (np.minimum(threshold[q, None] * fair[q], demand[q]), fs_timeout[q]),
            (np.minimum(min_share[q], demand[q]), ms_timeout[q]))):
        short = np.where(dims, np.maximum(target - usage[q], 0.0), 0.0)
        below = (short > 1e-9 * np.maximum(target, 1.0)).any(axis=1) & np.isfinite(timeout)
        since[~below, col] = np.nan
        since[below & np.isnan(since[:, col]), col] = now
        due = below & checked & (now - since[:, col] >= timeout)
        claims[due] = np.maximum(claims[due], short[due])
        if below.any():
            at = np.maximum(since[below, col] + timeout[below], next_check[below])
            wake = min(wake, float(at[at > now].min()) if (at > now).any() else np.inf)
    return claims, (wake if np.isfinite(wake) else None)


def starved_requests(claim: np.ndarray, req: np.ndarray) -> np.ndarray:
    """Positions of the requests (in order) that serve ``claim``
    (``getStarvedResourceRequests`` with the memory-only calculator)."""
    left = claim.copy()
    out = []
    for i in range(len(req)):
        if not (left > 1e-12).any():
            break
        mem = req[i, 1]
        if mem > 0 and left[1] / mem < 1.0 - 1e-9:
            continue  # "This RR's capability is too large to fit in pending"
        out.append(i)
        left = np.maximum(left - req[i], 0.0)
    return np.array(out, dtype=np.int64)


@dataclass
class Promise:
    """Containers warned for one starved request: killed at ``kill_at`` on ``node``, whose
    freed room goes first to ``leaf`` (its request ``row`` first)."""

    kill_at: float
    rows: np.ndarray
    starts: np.ndarray
    node: int
    leaf: int
    row: int
    amount: np.ndarray


@dataclass
class FairPreemption:
    """Per-run preemption state of one ``fair-scheduler`` run."""

    n_leaves: int
    since: np.ndarray = field(init=False)
    next_check: np.ndarray = field(init=False)
    promises: list[Promise] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.since = np.full((self.n_leaves, 2), np.nan)
        self.next_check = np.full(self.n_leaves, -np.inf)

    def next_kill(self) -> float | None:
        """When the earliest warned container is due to be killed."""
        return min((p.kill_at for p in self.promises), default=None)

    def due(self, now: float) -> list[Promise]:
        """The promises whose containers are killed now (taken off the list)."""
        due = [p for p in self.promises if p.kill_at <= now + 1e-9]
        self.promises = [p for p in self.promises if p.kill_at > now + 1e-9]
        return due

    def marked(self, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Per running container, whether it is already warned."""
        if not self.promises:
            return np.zeros(len(rows), dtype=np.bool_)
        warned = {(int(r), float(s)) for p in self.promises
                  for r, s in zip(p.rows.tolist(), p.starts.tolist(), strict=True)}
        return np.fromiter(((int(r), float(s)) in warned for r, s in
                            zip(rows.tolist(), starts.tolist(), strict=True)),
                           dtype=np.bool_, count=len(rows))

    def warn(self, now: float, claims: np.ndarray, pend_leaf: np.ndarray,
             pend_req: np.ndarray, pend_row: np.ndarray, run: RunInfo,
             ) -> None:
        """Serve each leaf's claim (steps 1-2 and 4 of the module doc), leaf by leaf."""
        out = np.empty(len(run.q), dtype=np.int64)
        v = Victims(run.up, run.ptr, run.idx, run.req, run.q, run.am, run.marked, run.free,
                    run.promised, run.q_ok, run.room, run.dims)
        for leaf in np.flatnonzero((claims > 0).any(axis=1)).tolist():
            self.next_check[leaf] = now + RECHECK_DELAY_S  # preemptionTriggered
            mine = np.flatnonzero(pend_leaf == leaf)
            for i in mine[starved_requests(claims[leaf], pend_req[mine])].tolist():
                nd, n = victims_for(pend_req[i], v, out)
                if n > 0:
                    chosen = out[:n].copy()
                    self.promises.append(Promise(
                        now + WAIT_BEFORE_KILL_S, run.row[chosen], run.start[chosen], nd,
                        leaf, int(pend_row[i]), run.req[chosen].sum(axis=0)))


@dataclass
class RunInfo:
    """The running containers and nodes as :func:`~.victims.victims_for` reads them."""

    q: np.ndarray  # victim queue index of each container (its leaf)
    req: np.ndarray
    row: np.ndarray
    start: np.ndarray
    am: np.ndarray
    marked: np.ndarray
    up: np.ndarray
    ptr: np.ndarray
    idx: np.ndarray
    free: np.ndarray
    promised: np.ndarray
    q_ok: np.ndarray
    room: np.ndarray
    dims: np.ndarray


def run_info(node: np.ndarray, req: np.ndarray, row: np.ndarray, start: np.ndarray,
             is_am: np.ndarray, q: np.ndarray, marked: np.ndarray, cap: np.ndarray,
             alloc: np.ndarray, up: np.ndarray, q_ok: np.ndarray, room: np.ndarray,
             dims: np.ndarray) -> RunInfo:
    """Gather :class:`RunInfo`; ``room``: per queue, usage minus fair share minus what is
    already warned; nodes promise the warned containers' room."""
    ptr, idx = node_order(node, start, row, is_am, len(cap))
    promised = np.zeros((len(cap), 3))
    np.add.at(promised, node[marked], req[marked])
    return RunInfo(q, np.ascontiguousarray(req), row, start, is_am, marked.copy(), up, ptr,
                   idx, np.ascontiguousarray(cap - alloc), promised, q_ok,
                   np.ascontiguousarray(room), np.ascontiguousarray(dims))
