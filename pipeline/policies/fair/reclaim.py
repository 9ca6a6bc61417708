"""One scheduling point of ``fair-scheduler`` preemption: kill, hand the room over, warn.

The order of :func:`preempt_step` follows Hadoop 3.3: the preemption thread's timer kills
the containers warned ``waitTimeBeforeKill`` ago (``PreemptContainersTask``), the node's
freed room goes to the starved queue first (``FairScheduler.attemptScheduling`` ->
``assignPreemptedContainers``), then ``FairScheduler.update`` looks for starvation when
the cluster is busy enough (``shouldAttemptPreemption``) and the preemption thread warns
new victims (:mod:`.preempt`).  A call that kills returns only the kills and the
placements on the freed nodes, and asks for the next scheduling point right after, where
the assignment pass sees the freed room (the core applies stops before placements).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from pipeline.policies.fair.config import QueueSetup
from pipeline.policies.fair.limits import AppLimits
from pipeline.policies.fair.preempt import (
    UTILIZATION_THRESHOLD,
    FairPreemption,
    Promise,
    compared,
    run_info,
    starved_claims,
)
from pipeline.sim.interface import Decisions, SchedView


class FairScheduler(Protocol):
    """What the preemption step reads of the scheduler (:mod:`.policy`): its preemption
    state, queues and application limits, the first container (AM) of each job, the
    instantaneous fair shares and the leaf-to-ancestor paths."""

    preempt_: FairPreemption
    queues_: QueueSetup
    limits_: AppLimits
    am_row_: np.ndarray

    def grow_am_rows(self, jobs: np.ndarray) -> None: ...

    def instant_fair(self, total: np.ndarray, demand: np.ndarray) -> np.ndarray: ...

    def paths(self) -> np.ndarray: ...

# The core applies preemptions before this call's placements, but the node index only sees
# the freed room in the next view: ask for a call right after (the core rounds it up to its
# scheduling grid, like the next NodeManager heartbeat).
FREED_DELAY_S = 1e-6


def preempt_step(p: FairScheduler, view: SchedView, run_leaf: np.ndarray,
                 pend_leaf: np.ndarray, usage: np.ndarray, demand: np.ndarray,
                 min_share: np.ndarray, max_share: np.ndarray, total: np.ndarray,
                 ) -> Decisions:
    """Kills due now with the placements they make room for, plus the next wake-up."""
    st, running, now = p.preempt_, view.running, view.now
    assert running is not None
    rows = np.asarray(running.row, dtype=np.int64)
    starts = np.asarray(running.start_s, dtype=np.float64)
    due = st.due(now)
    kill = _killed(due, rows, starts)
    place_req, place_node = _hand_over(p, view, due, kill, run_leaf, pend_leaf, usage,
                                       max_share)
    wake = None
    alloc = view.nodes.alloc[view.nodes.up].sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.nanmax(np.where(total[:2] > 0, alloc[:2] / total[:2], 0.0))
    if util > UTILIZATION_THRESHOLD:  # shouldAttemptPreemption: strictly above
        qs, tree = p.queues_, p.queues_.tree
        fair = p.instant_fair(total, demand)
        claims, wake = starved_claims(now, tree.leaves, qs.kind, usage, demand, fair,
                                      min_share, qs.fs_threshold, qs.fs_timeout,
                                      qs.ms_timeout, st.since, st.next_check)
        if claims.any():
            marked = st.marked(rows, starts)
            marked[kill] = True
            info = _victims_view(p, view, run_leaf, rows, starts, marked, usage, fair,
                                 claims)
            st.warn(now, claims, pend_leaf, view.pending.req,
                    np.asarray(view.pending.row, dtype=np.int64), info)
    wakes = [w for w in (wake, st.next_kill(), now + FREED_DELAY_S if len(kill) else None)
             if w is not None]
    return Decisions(preempt=kill, place_req=place_req, place_node=place_node,
                     wake_at_s=min(wakes) if wakes else None)


def _killed(due: list[Promise], rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running indices of the warned containers of ``due`` that are still running."""
    if not due:
        return np.zeros(0, dtype=np.int64)
    warned = {(int(r), float(s)) for pr in due
              for r, s in zip(pr.rows.tolist(), pr.starts.tolist(), strict=True)}
    hit = np.fromiter(((int(r), float(s)) in warned for r, s in
                       zip(rows.tolist(), starts.tolist(), strict=True)),
                      dtype=np.bool_, count=len(rows))
    return np.flatnonzero(hit).astype(np.int64)


def _victims_view(p: FairScheduler, view: SchedView, run_leaf: np.ndarray, rows: np.ndarray,
                  starts: np.ndarray, marked: np.ndarray, usage: np.ndarray,
                  fair: np.ndarray, claims: np.ndarray):
    """The running containers, nodes and leaves as the victim search reads them."""
    qs, tree, running = p.queues_, p.queues_.tree, view.running
    assert running is not None
    req = np.asarray(running.req, dtype=np.float64)
    jobs = np.asarray(running.job, dtype=np.int64)
    p.grow_am_rows(jobs)
    is_am = p.am_row_[jobs] == rows
    leaf_q = tree.leaves
    warned = np.zeros((tree.n_leaves, 3))
    np.add.at(warned, run_leaf[marked], req[marked])
    room = usage[leaf_q] - fair[leaf_q] - warned  # resourcesToBePreempted
    q_ok = qs.preemptable[leaf_q] & ~(claims > 0).any(axis=1)
    nodes = view.nodes
    return run_info(np.asarray(running.node, dtype=np.int64), req, rows, starts, is_am,
                    run_leaf, marked, nodes.cap, nodes.alloc, nodes.up, q_ok, room,
                    compared(qs.kind[leaf_q]))


def _hand_over(p: FairScheduler, view: SchedView, due: list[Promise], kill: np.ndarray,
               run_leaf: np.ndarray, pend_leaf: np.ndarray, usage: np.ndarray,
               max_share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Placements of the starved leaves' requests on the nodes their kills free
    (``assignPreemptedContainers``): each promise's request first, then the leaf's other
    requests in order, while one fits and the freed amount is not used up."""
    empty = np.zeros(0, dtype=np.int64)
    if not len(kill):
        return empty, empty
    nodes, running, pend = view.nodes, view.running, view.pending
    assert running is not None
    free = nodes.cap - nodes.alloc
    np.add.at(free, np.asarray(running.node)[kill], np.asarray(running.req)[kill])
    ok = _servable(p, np.asarray(pend.job, dtype=np.int64))
    req = np.asarray(pend.req, dtype=np.float64)
    pend_row = np.asarray(pend.row, dtype=np.int64)
    paths = p.paths()
    gone = np.zeros((len(paths), 3))  # the killed containers' use, per leaf
    np.add.at(gone, run_leaf[kill], np.asarray(running.req)[kill])
    use = usage - paths.T @ gone
    out_req: list[int] = []
    out_node: list[int] = []
    for pr in due:
        if not nodes.up[pr.node]:
            continue
        cand = np.flatnonzero((pend_leaf == pr.leaf) & ok)
        first = cand[pend_row[cand] == pr.row]
        cand = np.concatenate([first, cand[pend_row[cand] != pr.row]])
        left = pr.amount.copy()
        while (left > 1e-12).any() and len(cand):
            path = paths[pr.leaf] > 0
            fits = ((req[cand] <= free[pr.node]).all(axis=1)
                    & (use[path][None, :, :] + req[cand][:, None, :]
                       <= max_share[path][None, :, :] * (1 + 1e-9)).all(axis=(1, 2)))
            if not fits.any():
                break
            k = int(np.argmax(fits))
            i = int(cand[k])
            out_req.append(i)
            out_node.append(pr.node)
            free[pr.node] -= req[i]
            use[path] += req[i]
            left = np.maximum(left - req[i], 0.0)
            ok[i] = False
            cand = np.delete(cand, k)
    return np.array(out_req, dtype=np.int64), np.array(out_node, dtype=np.int64)


def _servable(p: FairScheduler, jobs: np.ndarray) -> np.ndarray:
    """Per pending request: its job may get a container without a new AM-share check
    (runnable under maxRunningApps, and started when AM limits apply)."""
    lim = p.limits_
    ok = np.ones(len(jobs), dtype=np.bool_)
    if not lim.active:
        return ok
    known = jobs < len(lim.started)
    safe = np.where(known, jobs, 0)
    ok &= known & lim.started[safe]
    if lim.count_apps:
        ok &= lim.runnable[safe]
    return ok
