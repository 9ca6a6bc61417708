"""Scheduling points with node labels: the assignment loop once per partition and mode.

Hadoop allocates per node heartbeat: on a node of partition ``x`` it first runs
``RESPECT_PARTITION_EXCLUSIVITY`` (only requests asking for ``x``, from queues that can
access it) and, when nothing was allocated and ``x`` is non-exclusive,
``IGNORE_PARTITION_EXCLUSIVITY`` (requests asking for DEFAULT), see
``allocateOrReserveNewContainers`` (the scheduler class of ``scheduler/capacity``) and
``SchedulingMode``.  tracereplay's batch model runs, at each scheduling point, the compiled
loop of :mod:`.kernel` over

1. DEFAULT, then each label, in RESPECT mode: the partition's requests, queue guarantees,
   maxima, user limits and AM limits of that partition, usage of containers running on
   its nodes, its free resources; chosen containers go to the partition's least
   allocated up node;
2. each non-exclusive label in IGNORE mode: DEFAULT requests still unplaced, of
   applications already running (AM containers are never placed this way: "AM container
   allocation doesn't support non-exclusive allocation"), with every queue's limit on the
   label set to the whole partition and the user-limit cap to the partition's resource
   (``AbstractCSQueue.getCurrentLimitResource``, ``UsersManager``); queues that can access
   the label are offered first.

Delay before non-exclusive use (choice): Hadoop lets a DEFAULT request onto a
non-exclusive node only after the application missed ``numClusterNodes`` scheduling
opportunities (``missedNonPartitionedRequestSchedulingOpportunity``, reset when it is
allocated on DEFAULT), so DEFAULT nodes are tried first.  Here an application becomes
eligible once it was left with DEFAULT requests after the DEFAULT pass of an *earlier*
scheduling point (one full round over the DEFAULT nodes standing in for
``numClusterNodes`` missed heartbeats), and stops being eligible when it gets a container
on a DEFAULT node; when applications become eligible while a non-exclusive partition has
room, the policy asks to be woken at the next instant.  Passes see the placements of the
passes before them (usage, free resources, started applications).
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.capacity.batch import active_users, app_blocks, normalized, startable
from pipeline.policies.capacity.inputs import Apps, Leaves, Queues, Room, Users
from pipeline.policies.capacity.kernel import assign
from pipeline.policies.capacity.partitions import Partitions
from pipeline.policies.capacity.pending import leaf_pending
from pipeline.policies.capacity.preemption import PartitionRound, PreemptionTimer
from pipeline.policies.capacity.prepare import (
    AliveCounts,
    JobSums,
    alive_counts,
    scan_running_parts,
    stamp_pending,
)
from pipeline.policies.capacity.runtime import CapacityState
from pipeline.policies.capacity.state import am_limits, dense_sum, up_resources
from pipeline.policies.locality.gate import no_offer
from pipeline.policies.models import pending_allow
from pipeline.sim.interface import Decisions, SchedView


class _Call:
    """One scheduling point's state across passes; updated with what each pass placed."""

    def __init__(self, st: CapacityState, parts: Partitions, view: SchedView,
                 req: np.ndarray, jobs: np.ndarray, pair_used: np.ndarray,
                 run_job: np.ndarray, totals: np.ndarray, free: np.ndarray,
                 eff: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.st, self.parts, self.view, self.req, self.jobs = st, parts, view, req, jobs
        self.pair_used, self.totals, self.free, self.eff = pair_used, totals, free, eff
        n_p, n_l, n_users = st.caps.n_parts, st.tree.n_leaves, st.n_users
        self.leaf = np.take(st.job_leaf, jobs)
        self.part = np.take(st.job_part, jobs)
        self.q_used = np.stack([st.paths @ pair_used[x].reshape(n_l, n_users, 3).sum(axis=1)
                                for x in range(n_p)])
        am_used = np.zeros((n_p * n_l, 3))
        self.pair_apps = np.zeros(n_l * n_users, dtype=np.int64)
        key_apps = np.zeros(n_p * n_l, dtype=np.int64)  # per (partition, leaf)
        job_key = st.job_part * n_l + st.job_leaf
        alive_counts(run_job, jobs, st.alive_apps(job_key),
                     AliveCounts(am_used, key_apps, self.pair_apps))
        self.am_used = am_used.reshape(n_p, n_l, 3)
        self.leaf_apps = key_apps.reshape(n_p, n_l).sum(axis=0)
        self.app_max, self.user_app_max = st.app_limits(totals, [e[0] for e in eff])
        self.sel = startable(st, jobs, self.leaf_apps, self.app_max, job_key,
                             self._closed().ravel())
        self.pair_left = np.bincount(st.job_pair[jobs[self.sel]],
                                     minlength=n_l * n_users).astype(np.int64)
        self.placed = np.zeros(len(jobs), dtype=bool)
        self.out_req: list[np.ndarray] = []
        self.out_node: list[np.ndarray] = []

    def _closed(self) -> np.ndarray:
        """(P, n_leaves): leaves where no application asking for the partition can start
        now: its AM limit there is reached (unless its AM use there is zero, Hadoop's
        exemption) or the leaf is at maximum-applications.  Sets ``am_limit``: from the
        maximum capacity in DEFAULT, from the guarantee in a label."""
        st, t = self.st, self.st.tree
        calc = "dominant" if st.calc else "default"
        self.am_limit = np.stack([
            am_limits(st.settings, (g if x else m)[t.leaves], st.minimum, calc,
                      st.caps.am_percent[x] if x else None)
            for x, (g, m) in enumerate(self.eff)])
        am_busy = self.am_used.any(axis=2)
        am_full = self.am_used[:, :, 1] + st.minimum[1] > self.am_limit[:, :, 1] + 1e-9
        return (self.leaf_apps > 0)[None, :] & (
            (am_busy & am_full) | (self.leaf_apps >= self.app_max)[None, :])

    def run(self, x: int, idx: np.ndarray, ignore: bool) -> None:
        """One pass of the kernel over requests ``idx`` in partition ``x``; place, apply."""
        if not len(idx) or not self.totals[x].any():
            return
        if (np.take(self.req, idx, axis=0).min(axis=0) > self.free[x] + 1e-9).any():
            return  # not even the smallest request fits: the kernel would block them all
        st, t, s = self.st, self.st.tree, self.st.settings
        req_idx, app_lo, app_hi, sjobs, lo, hi, pend_mem = app_blocks(st, self.req, self.jobs,
                                                                      self.leaf, idx)
        guar, maxi = self.eff[x]
        if ignore:  # the queue limit and the user-limit cap are the whole partition
            maxi = np.tile(self.totals[x], (t.n_queues, 1))
        pair_used, pair_left = self.pair_used[x].copy(), self.pair_left.copy()
        pair_w, active_used, active_w = active_users(st, pair_left, pair_used)
        app_mem = st.job_mem[sjobs] if s.fair.any() else np.zeros(len(sjobs))
        out = np.empty(len(self.req), dtype=np.int64)
        apps = Apps(self.req, req_idx, app_lo, app_hi, st.job_pair[sjobs].astype(np.int64),
                    st.started[sjobs].copy(), app_mem.copy(), pend_mem + app_mem, lo, hi)
        users = Users(pair_used, pair_w, pair_left, self.pair_apps.copy())
        leaves = Leaves(t.leaves.astype(np.int64), guar[t.leaves], maxi[t.leaves], s.mulp,
                        np.full(t.n_leaves, -1.0) if ignore else s.ulf, s.fair,
                        s.size_weight, active_used, active_w, self.leaf_apps.copy(),
                        self.app_max, self.user_app_max, self.am_used[x].copy(),
                        self.am_limit[x])
        queues = Queues(self.q_used[x].copy(), guar, maxi, t.parent.astype(np.int64),
                        s.q_kids_lo, s.q_kids, s.q_prio, s.q_use_prio, s.q_leaf,
                        st.caps.access[x])
        room = Room(self.free[x].copy(), self.totals[x], st.minimum, st.calc, True)
        n = assign(apps, users, leaves, queues, room, no_offer(), out)
        order = out[:n]
        pend = self.view.pending
        fit = np.maximum(np.take(self.req, order, axis=0), np.take(pend.req, order, axis=0))
        placed, node = self.parts.index[x].place(self.view.nodes, fit, None, packing=False,
                                               allow=pending_allow(self.view, order))
        self._apply(x, order[placed], node, fit[placed])

    def _apply(self, x: int, chosen: np.ndarray, node: np.ndarray, held: np.ndarray) -> None:
        """Account the containers placed in partition ``x`` for the passes after (``held``:
        what their nodes now hold, the raw request when it exceeds the normalised one)."""
        if not len(chosen):
            return
        st = self.st
        r = np.take(self.req, chosen, axis=0)
        j = self.jobs[chosen]
        pair, leaf = st.job_pair[j], st.job_leaf[j]
        np.add.at(self.pair_used[x], pair, r)
        self.q_used[x] += st.paths @ dense_sum(leaf, r, st.tree.n_leaves)
        self.free[x] -= held.sum(axis=0)
        np.subtract.at(self.pair_left, pair, 1)
        self.placed[chosen] = True
        uniq, first = np.unique(j, return_index=True)
        new = ~st.started[uniq]
        if new.any():  # their first container is the AM (RESPECT passes only)
            k = first[new]
            np.add.at(self.am_used[x], leaf[k], r[k])
            np.add.at(self.leaf_apps, leaf[k], 1)
            np.add.at(self.pair_apps, pair[k], 1)
        st.mark_started(j, r, self.view.pending.take("row", chosen))
        if st.settings.fair.any():
            np.add.at(st.job_mem, j, r[:, 1])
        if x == 0:
            st.nx_since[j] = np.inf  # allocated on DEFAULT: the missed count restarts
        self.out_req.append(chosen)
        self.out_node.append(node)

    def missed_default(self, now: float) -> bool:
        """Mark running applications left with DEFAULT requests after the DEFAULT pass;
        whether any became eligible for non-exclusive partitions just now."""
        st = self.st
        left = self.sel[(self.part[self.sel] == 0) & ~self.placed[self.sel]]
        js = np.unique(self.jobs[left])
        js = js[st.started[js] & (st.nx_since[js] == np.inf)]
        st.nx_since[js] = now
        return bool(len(js))


def decide_partitioned(st: CapacityState, parts: Partitions, timer: PreemptionTimer,
                       rng: np.random.Generator, view: SchedView) -> Decisions:
    """The capacity-scheduler's decisions at one scheduling point with node labels
    (``parts``: the nodes' partitions, refreshed with ``rng``; ``timer``: the preemption
    monitor, stepped)."""
    caps = st.caps
    assert view.running is not None
    parts.refresh(view.nodes, rng)
    nodes, pend, run = view.nodes, view.pending, view.running
    totals, free = parts.totals(nodes)
    largest = up_resources(nodes)[1]
    jobs = np.asarray(pend.job, dtype=np.int64)
    run_job = np.asarray(run.job, dtype=np.int64)
    st.grow(jobs, run_job)
    req = normalized(st, pend.req, largest, None)
    first = np.empty(len(jobs), dtype=np.int64)
    n_first = stamp_pending(jobs, st.first_seen, view.now, first)
    if n_first:
        st.submit(pend, jobs, first[:n_first])
    run_part = np.take(parts.node_part, np.asarray(run.node, dtype=np.int64))
    run_req = np.empty((len(run_job), 3))
    job_mem = st.job_mem if st.settings.fair.any() else st.job_mem[:0]
    pair_used = scan_running_parts(run_job, run_part, run.req, st.sizing,
                                   JobSums(st.first_seen, st.job_pair, job_mem),
                                   st.weights.size, caps.n_parts, run_req)
    eff = [caps.effective(x, totals[x], st.calc) for x in range(caps.n_parts)]
    call = None
    if len(pend) and nodes.up.any():
        call = _Call(st, parts, view, req, jobs, pair_used, run_job, totals, free, eff)
    rounds = _rounds(st, timer, call, run_job, run_part, totals, eff) \
        if timer.due(view.now) else []
    preempt, wake = timer.step(
        view.now, run, np.take(st.job_leaf, run_job), run_req, np.take(st.job_leaf, jobs),
        req, st.first_seen, st.am_row, totals.sum(axis=0), st.calc, rounds)
    if call is None:
        st.job_mem[run_job] = 0.0
        return Decisions(preempt=preempt, wake_at_s=wake)
    newly = False
    for x in range(caps.n_parts):
        call.run(x, call.sel[call.part[call.sel] == x], ignore=False)
        if x == 0:
            newly = call.missed_default(view.now)
    for x in np.flatnonzero(~caps.exclusive).tolist():
        s = call.sel
        ok = (call.part[s] == 0) & ~call.placed[s] & st.started[jobs[s]] & (
            st.nx_since[jobs[s]] < view.now)
        call.run(x, s[ok], ignore=True)
    st.job_mem[run_job] = 0.0
    st.job_mem[jobs[call.placed]] = 0.0
    if newly and (call.free[~caps.exclusive, 1] > 1e-9).any():
        wake = float(np.nextafter(view.now, np.inf))  # eligible now: try them next instant
    if not call.out_req:
        return Decisions(preempt=preempt, wake_at_s=wake)
    placed = int(call.placed.sum())
    wake = timer.after_placement(wake, placed, len(pend) - placed)
    return Decisions(place_req=np.concatenate(call.out_req),
                     place_node=np.concatenate(call.out_node), preempt=preempt,
                     wake_at_s=wake)


def _rounds(st: CapacityState, timer: PreemptionTimer, call: _Call | None,
            run_job: np.ndarray, run_part: np.ndarray, totals: np.ndarray,
            eff: list[tuple[np.ndarray, np.ndarray]]) -> list[PartitionRound]:
    """The preemption monitor's view of each partition with resources (``call``: this
    scheduling point's state, None when nothing is pending)."""
    if not timer.s.enabled:
        return []
    ignore = (run_part > 0) & (np.take(st.job_part, run_job) == 0)
    out = []
    for x in range(len(totals)):
        if not totals[x].any():
            continue
        demand = np.zeros((st.tree.n_leaves, 3))
        if call is not None:
            sel = call.sel[call.part[call.sel] == x]
            demand = leaf_pending(st, call.req, call.jobs, sel, call.pair_used[x], eff[x][0],
                                  eff[x][1], totals[x])
        out.append(PartitionRound(totals[x], eff[x][0], eff[x][1],
                                  np.flatnonzero(run_part == x), None, ignore, demand))
    return out
