"""Delay scheduling over node heartbeats, compiled (Zaharia et al., EuroSys 2010).

One call walks the heartbeats since the previous call (:mod:`pipeline.sim.heartbeat`) in
time order.  A heartbeat from a node with room for some pending request is a scheduling
opportunity; jobs are visited in fair-sharing order (fewest running tasks first, then job
code), and the first job that launches ends the visit; the node is then offered again
(Hadoop 1's FairScheduler fills every free slot of a heartbeat, one task at a time, re-sorting
jobs after each) until no job launches.  For a visited job, in order:

1. a task with data on the node (node-local) launches, and the job's locality state resets
   (skip count 0; two-level: level node, wait 0);
2. a task with no input data (reduces, inputs unknown) launches: delay scheduling only
   delays tasks that have a locality preference (Hadoop 1 delays maps only);
3. otherwise the delay rule decides:

   - ``mode 0`` (Algorithm 2, skip count ``D``): if the job was skipped ``D`` times it
     launches any task (the skip count is *not* reset by a non-local launch: the paper's
     Algorithm 2 resets it only on a local launch); else its skip count grows and the next
     job is visited;
   - ``mode 1`` (Hadoop 1.x HFS, ``FairScheduler.getAllowedLocalityLevel`` with separate
     node and rack delays ``W1``/``W2``): last launch node-local -> rack allowed once the
     job waited ``W1``, anywhere once it waited ``W1 + W2``; last launch rack-local ->
     anywhere once it waited ``W2``; last launch off-rack -> anywhere.  A rack-local task
     launches when rack is allowed; any task when anywhere is.  A launch sets the level to
     the launched task's locality and the wait to 0.  A job that is visited and skipped is
     marked; at the next heartbeat that asks for work (of any node) a marked job's wait
     grows by the time since the previous one and the mark is cleared
     (``skippedAtLastHeartbeat``; settled lazily, when the job is next looked at).  A node
     without room asks for no work and changes nothing (Hadoop 1: ``acceptNewTasks``).

Only tasks ready by a heartbeat's time can use it, and only tasks whose request fits the
node's free room (resources, not slots: tracereplay's nodes have cpu/memory/gpu; a "free
slot" is room for the task; a node with room for none of the pending request shapes asks for
no work).  A heartbeat at which every waiting job would be skipped (no task without input,
none local to the node nor, for jobs allowed rack-local, to its rack, and no job past its
delay) is counted once for all of them instead of visiting each (:func:`_deadline`): the
same decisions, at a cost per heartbeat that does not grow with the number of waiting jobs.
Likewise, a heartbeat ends at once when no pending task is ready yet and no job is due a
visit, and a job's tasks are scanned again only once one of them can be ready
(:func:`~pipeline.policies.locality.candidates.first_usable` keeps that time).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.locality.candidates import (
    ANY,
    NODE,
    RACK,
    Asks,
    best_in,
    csr,
    first_usable,
    fits,
    locality_of,
    room_for_any,
    task_racks,
)
from pipeline.sim.jit import helper


class Offers(NamedTuple):
    """The heartbeats of one call and the room they offer (node slots)."""

    node: np.ndarray  # (heartbeats,) int: the node of each heartbeat, in time order
    time: np.ndarray  # (heartbeats,) float: its time, s
    free: np.ndarray  # (nodes, 3) float: free cpu / mem / gpu of each node, updated
    n_rack: np.ndarray  # (nodes,) int: each node's rack, -1: none


class Pending(NamedTuple):
    """The pending tasks of one call (task index space) and their jobs in fair order."""

    ready: np.ndarray  # (tasks,) float: time from which the task may start, s
    req: np.ndarray  # (tasks, 3) float: cpu / mem / gpu it asks
    job: np.ndarray  # (tasks,) int: its job code
    inputs: np.ndarray  # (tasks, k) int: nodes holding its data, -1 padded
    has_in: np.ndarray  # (tasks,) bool: it has a locality preference
    order: np.ndarray  # (jobs,) int: job codes with pending tasks, in fair order
    shapes: np.ndarray  # (shapes, 3) float: distinct request shapes (+inf row: no filter)
    shape_of: np.ndarray  # (tasks,) int: each task's row of ``shapes`` (-1: no filter)
    allow: np.ndarray  # (tasks,) int: GPU model masks (empty: any node)
    bits: np.ndarray  # (nodes,) int: each node's GPU model bit


class Jobs(NamedTuple):
    """Per job code state, kept by the caller between calls (updated in place)."""

    running: np.ndarray  # int: running tasks (fair order key)
    skip: np.ndarray  # int: skip count (mode 0)
    level: np.ndarray  # int: locality of the last launch, NODE / RACK / ANY (mode 1)
    wait: np.ndarray  # float: time waited at that level, s (mode 1)
    skipped: np.ndarray  # bool: skipped at the last heartbeat (accrues at the next)
    slot: np.ndarray  # int: index in ``order`` during a call, -1 outside (a buffer)


class Rule(NamedTuple):
    """The delay rule."""

    mode: int  # 0: Algorithm 2 (skip count), 1: Hadoop 1 HFS two-level waits
    d: int  # mode 0: heartbeats a job is skipped before a non-local launch (D)
    w1: float  # mode 1: node wait before rack-local, s (W1)
    w2: float  # mode 1: further wait before off-rack, s (W2)


# fields of ``Scan.tally``: counters the compiled passes share
LEFT = 0  # pending tasks not yet placed
NXT = 1  # cursor into ``by_ready``, past the done tasks
N_VISIT = 2  # eligible jobs with tasks with inputs left (they are visited)
FREE_LEFT = 3  # pending tasks without inputs left
N_OUT = 4  # placements so far
N_HB = 5  # heartbeats recorded in ``hb_time``


class Scan(NamedTuple):
    """One call's working state (index ``k``: a job's position in ``order``)."""

    asks: Asks  # the tasks as the candidate lookups see them
    by_job: np.ndarray  # (tasks,) int: tasks by job, without inputs first, queue order
    job_mid: np.ndarray  # (jobs,) int: end of a job's tasks without inputs in ``by_job``
    job_hi: np.ndarray  # (jobs,) int: end of its tasks in ``by_job``
    cur_free: np.ndarray  # (jobs,) int: cursor past done tasks without inputs
    cur_in: np.ndarray  # (jobs,) int: cursor past done tasks with inputs
    lb_free: np.ndarray  # (jobs,) float: no task without inputs usable before, s
    lb_in: np.ndarray  # (jobs,) float: same, tasks with inputs
    by_ready: np.ndarray  # (tasks,) int: tasks by ready time
    node_ptr: np.ndarray  # (nodes + 1,) int: node -> tasks with data there (CSR) ...
    node_lst: np.ndarray  # ... the tasks
    rack_ptr: np.ndarray  # (racks + 1,) int: rack -> tasks with data in it (CSR) ...
    rack_lst: np.ndarray  # ... the tasks
    min_r: np.ndarray  # (3,) float: smallest request of all tasks
    hb_time: np.ndarray  # (heartbeats + 1,) float: times of the heartbeats with room
    mark: np.ndarray  # (jobs,) int: heartbeat at which the job was last skipped, -1
    local_best: np.ndarray  # (jobs,) int: node-local candidate per job, -1
    rack_best: np.ndarray  # (jobs,) int: rack-local candidate per job, -1
    touched: np.ndarray  # (jobs,) int: jobs with a node-local candidate
    touched_r: np.ndarray  # (jobs,) int: jobs with a rack-local candidate
    pos: np.ndarray  # (jobs,) int: rank in the fair order of the job at index k
    rank: np.ndarray  # (jobs,) int: rank -> job index k
    n_free: np.ndarray  # (jobs,) int: pending tasks left without inputs
    n_in: np.ndarray  # (jobs,) int: pending tasks left with inputs
    shape_left: np.ndarray  # (shapes,) int: pending tasks left per shape
    use_shapes: bool  # test shapes before visiting jobs
    first_in: np.ndarray  # (jobs,) float: earliest ready time of its tasks with inputs
    min_free: np.ndarray  # (jobs, 3) float: smallest request of its tasks without inputs
    min_in: np.ndarray  # (jobs, 3) float: same, tasks with inputs
    by_first: np.ndarray  # (jobs,) int: jobs in the order they become eligible
    eligible: np.ndarray  # (jobs,) bool: it has a task ready (visitable)
    a_res: np.ndarray  # (jobs,) float: how much of ``acc`` the job's count already holds
    tally: np.ndarray  # (6,) int: counters, indexed by LEFT, NXT, ... N_HB


@helper
def _skip_all(s, offers, pending, jobs, nd, tau, rack_level):
    """Whether no pending task is local to ``nd`` and, if some job is allowed rack-local
    (``rack_level``), none of those jobs has a task local to ``nd``'s rack."""
    asks, best, touched, node_ptr, rack_ptr = s.asks, s.local_best, s.touched, s.node_ptr, \
        s.rack_ptr
    n_t = best_in(asks, s.node_lst, node_ptr[nd], node_ptr[nd + 1], nd, tau, best, touched, 0)
    for t in range(n_t):
        best[touched[t]] = -1
    if n_t > 0:
        return False
    rack = offers.n_rack[nd]
    if not rack_level or rack < 0 or len(rack_ptr) <= rack + 1:
        return True
    n_t = best_in(asks, s.rack_lst, rack_ptr[rack], rack_ptr[rack + 1], nd, tau, best, touched,
                  0)
    clear = True
    for t in range(n_t):
        clear = clear and jobs.level[pending.order[touched[t]]] != RACK
        best[touched[t]] = -1
    return clear


@helper
def _allowed(level, wait, w1, w2):
    """``getAllowedLocalityLevel`` with node delay ``w1`` and rack delay ``w2``."""
    if level == NODE:
        if wait >= w1 + w2:
            return ANY
        return RACK if wait >= w1 else NODE
    if level == RACK:
        return ANY if wait >= w2 else RACK
    return ANY


@njit(cache=True)
def _fold(acc, s, order, jobs, mode):
    """Add what every waiting job accrued over all-skipped heartbeats to its own count."""
    a_res, n_in, eligible = s.a_res, s.n_in, s.eligible
    for k in range(len(order)):
        if n_in[k] > 0 and eligible[k] and acc > a_res[k]:
            if mode == 1:
                jobs.wait[order[k]] += acc - a_res[k]
            else:
                jobs.skip[order[k]] += int(acc - a_res[k] + 0.5)
        a_res[k] = acc


@helper
def _deadline(acc, s, order, jobs, rule):
    """Settle every mark; return the ``acc`` at which some waiting job would no longer be
    skipped (-inf: one already would not), and whether some job may launch rack-local."""
    _fold(acc, s, order, jobs, rule.mode)
    n_in, eligible, mark, hb_time = s.n_in, s.eligible, s.mark, s.hb_time
    wait, level = jobs.wait, jobs.level
    n_hb = s.tally[N_HB]
    best = np.inf
    rack_level = False
    for k in range(len(order)):
        if n_in[k] == 0 or not eligible[k]:
            continue
        j = order[k]
        if rule.mode == 0:
            best = min(best, acc + rule.d - jobs.skip[j])
            continue
        h = mark[k]
        if h >= 0 and h < n_hb - 1:
            wait[j] += hb_time[h + 1] - hb_time[h]
            mark[k] = -1
        if level[j] == ANY:
            return -np.inf, True
        rack_level = rack_level or level[j] == RACK
        best = min(best, acc + (rule.w1 if level[j] == NODE else rule.w2) - wait[j])
    return best, rack_level


@njit(cache=True)
def _job_ranges(pending, slot):
    """Tasks by job (without inputs first, queue order within each group) and each job's
    ``[lo, mid, hi)`` range in that order (``slot``: job code -> index)."""
    job, has_in = pending.job, pending.has_in
    n_j = len(pending.order)
    by_job = np.argsort(job * 2 + has_in, kind="mergesort")
    job_lo = np.zeros(n_j, np.int64)
    job_mid = np.zeros(n_j, np.int64)
    job_hi = np.zeros(n_j, np.int64)
    for q in range(len(pending.ready)):
        i = by_job[q]
        k = slot[job[i]]
        if job_hi[k] == 0:
            job_lo[k] = q
            job_mid[k] = q
        if not has_in[i]:
            job_mid[k] = q + 1
        job_hi[k] = q + 1
    return by_job, job_lo, job_mid, job_hi


@njit(cache=True)
def _job_minima(pending, by_job, job_lo, job_mid, job_hi):
    """Per job: the smallest request of its tasks without / with inputs (a node with less
    room cannot take any of them: skip the scan; launches only raise it, so it stays safe)
    and the earliest ready time of its tasks with inputs."""
    n_j = len(pending.order)
    req, ready = pending.req, pending.ready
    first_in = np.full(n_j, np.inf)
    min_free = np.full((n_j, 3), np.inf)
    min_in = np.full((n_j, 3), np.inf)
    for k in range(n_j):
        for q in range(job_lo[k], job_hi[k]):
            i = by_job[q]
            lo_r = min_free if q < job_mid[k] else min_in
            for r in range(3):
                lo_r[k, r] = min(lo_r[k, r], req[i, r])
            if q >= job_mid[k]:
                first_in[k] = min(first_in[k], ready[i])
    return first_in, min_free, min_in


@njit(cache=True)
def _scan(offers, pending, jobs, rule, last_hb):
    """Build the call's working state (and fill ``jobs.slot`` for the jobs of ``order``)."""
    order, req, inputs, shape_of = pending.order, pending.req, pending.inputs, pending.shape_of
    n_p = len(pending.ready)
    n_j = len(order)
    n_nodes = offers.free.shape[0]
    for k in range(n_j):
        jobs.slot[order[k]] = k
    by_job, job_lo, job_mid, job_hi = _job_ranges(pending, jobs.slot)
    node_ptr, node_lst = csr(n_nodes, inputs, inputs.shape[1])
    n_racks = int(offers.n_rack.max()) + 1 if n_nodes else 0
    if rule.mode == 1 and n_racks > 0:
        rack_ptr, rack_lst = csr(n_racks, task_racks(inputs, offers.n_rack), inputs.shape[1])
    else:
        rack_ptr, rack_lst = np.zeros(1, np.int64), np.zeros(0, np.int64)
    asks = Asks(np.zeros(n_p, np.bool_), pending.ready, req, offers.free, pending.allow,
                pending.bits, pending.job, jobs.slot)
    min_r = np.full(3, np.inf)
    for i in range(n_p):
        for r in range(3):
            min_r[r] = min(min_r[r], req[i, r])
    # Marks, lazily: mark[k] is the heartbeat (index into hb_time) at which job k was last
    # visited and skipped; its wait grows by the gap to the next heartbeat when it is next
    # looked at (or at the end of the call), instead of touching every marked job at every
    # heartbeat.  Heartbeat 0 stands for the previous call's last one (time last_hb).
    hb_time = np.empty(len(offers.node) + 1)
    hb_time[0] = last_hb
    mark = np.full(n_j, -1, np.int64)
    for k in range(n_j):
        if jobs.skipped[order[k]]:
            mark[k] = 0
    shape_left = np.zeros(len(pending.shapes), np.int64)
    for i in range(n_p):
        if shape_of[i] >= 0:
            shape_left[shape_of[i]] += 1
    first_in, min_free, min_in = _job_minima(pending, by_job, job_lo, job_mid, job_hi)
    n_free = job_mid - job_lo
    use_shapes = n_p > 0 and shape_of[0] >= 0
    tally = np.zeros(6, np.int64)
    tally[LEFT] = n_p
    tally[FREE_LEFT] = n_free.sum()
    tally[N_HB] = 1
    return Scan(asks, by_job, job_mid, job_hi, job_lo.copy(), job_mid.copy(),
                np.full(n_j, -np.inf), np.full(n_j, -np.inf),
                np.argsort(pending.ready, kind="mergesort"), node_ptr, node_lst, rack_ptr,
                rack_lst, min_r, hb_time, mark, np.full(n_j, -1, np.int64),
                np.full(n_j, -1, np.int64), np.empty(n_j, np.int64), np.empty(n_j, np.int64),
                np.arange(n_j), np.arange(n_j), n_free, job_hi - job_mid, shape_left,
                use_shapes, first_in, min_free, min_in,
                np.argsort(first_in), np.zeros(n_j, np.bool_), np.zeros(n_j), tally)


@helper
def _choose(s, offers, pending, jobs, rule, nd, tau):
    """Visit the jobs in fair order at heartbeat ``(nd, tau)``; return the task the first
    launching job runs and its locality (``got``: NODE, RACK, ANY, or -1 for a task without
    inputs), or (-1, ANY) when no job launches."""
    asks, order, skip, wait, level, mark = s.asks, pending.order, jobs.skip, jobs.wait, \
        jobs.level, s.mark
    free, n_rack, hb_time, n_hb = offers.free, offers.n_rack, s.hb_time, s.tally[N_HB]
    rack = n_rack[nd]
    n_t = best_in(asks, s.node_lst, s.node_ptr[nd], s.node_ptr[nd + 1], nd, tau, s.local_best,
                  s.touched, 0)
    n_tr = -1  # rack candidates: computed on first need
    chosen = -1
    got = ANY
    for rk in range(len(order)):
        k = s.rank[rk]
        if s.local_best[k] >= 0:
            chosen, got = s.local_best[k], NODE
            break
        if s.n_free[k] > 0 and s.lb_free[k] <= tau and fits(s.min_free[k], free, nd):
            i = first_usable(asks, s.by_job, s.cur_free, k, s.job_mid[k], nd, tau, s.lb_free)
            if i >= 0:
                chosen, got = i, -1
                break
        if s.n_in[k] == 0 or s.first_in[k] > tau:
            continue  # no task of this job to run yet: not visited
        j = order[k]
        if rule.mode == 0:
            if skip[j] < rule.d:
                skip[j] += 1  # "j has an unlaunched task": skipped
                continue
        else:
            h = mark[k]
            if h >= 0 and h < n_hb - 1:  # skipped at an earlier heartbeat: accrue
                wait[j] += hb_time[h + 1] - hb_time[h]
                mark[k] = -1
            allowed = _allowed(level[j], wait[j], rule.w1, rule.w2)
            if allowed >= RACK and rack >= 0:
                if n_tr < 0:
                    n_tr = best_in(asks, s.rack_lst, s.rack_ptr[rack], s.rack_ptr[rack + 1],
                                   nd, tau, s.rack_best, s.touched_r, 0)
                if s.rack_best[k] >= 0:
                    chosen, got = s.rack_best[k], RACK
                    break
            if allowed != ANY:
                mark[k] = n_hb - 1
                continue
        # may run a task anywhere: the first of its tasks that fits this node
        if s.lb_in[k] > tau or not fits(s.min_in[k], free, nd):
            continue
        i = first_usable(asks, s.by_job, s.cur_in, k, s.job_hi[k], nd, tau, s.lb_in)
        if i >= 0:
            chosen, got = i, locality_of(i, pending.inputs, nd, rack, n_rack)
            break
    for t in range(n_t):
        s.local_best[s.touched[t]] = -1
    for t in range(max(n_tr, 0)):
        s.rack_best[s.touched_r[t]] = -1
    return chosen, got


@helper
def _launch(s, offers, pending, jobs, nd, chosen, got, out_req, out_node):
    """Run task ``chosen`` (locality ``got``) on ``nd``: update the job's locality state,
    the counts and room, record the placement and keep the fair order."""
    order, running, slot, tally = pending.order, jobs.running, jobs.slot, s.tally
    j = pending.job[chosen]
    if got == NODE:
        jobs.skip[j] = 0
    if got >= 0:
        jobs.level[j] = got
        jobs.wait[j] = 0.0
        s.mark[slot[j]] = -1
    s.asks.done[chosen] = True
    tally[LEFT] -= 1
    if s.use_shapes:
        s.shape_left[pending.shape_of[chosen]] -= 1
    if pending.has_in[chosen]:
        s.n_in[slot[j]] -= 1
        tally[N_VISIT] -= s.eligible[slot[j]] and s.n_in[slot[j]] == 0
    else:
        s.n_free[slot[j]] -= 1
        tally[FREE_LEFT] -= 1
    for r in range(3):
        offers.free[nd, r] -= pending.req[chosen, r]
    out_req[tally[N_OUT]] = chosen
    out_node[tally[N_OUT]] = nd
    tally[N_OUT] += 1
    running[j] += 1
    # keep the fair order: move the job later while it has more running tasks
    rank, pos = s.rank, s.pos
    n_j = len(order)
    k = slot[j]
    rk = pos[k]
    while rk + 1 < n_j and (running[order[rank[rk + 1]]] < running[j] or (
            running[order[rank[rk + 1]]] == running[j] and order[rank[rk + 1]] < j)):
        other = rank[rk + 1]
        rank[rk] = other
        pos[other] = rk
        rk += 1
    rank[rk] = k
    pos[k] = rk


@helper
def _has_room(s, pending, free, nd):
    """Whether node ``nd`` has room for the smallest request (and, with the shape filter,
    for some pending shape): a node without room asks for no task (Hadoop 1:
    ``acceptNewTasks``)."""
    min_r = s.min_r
    if free[nd, 0] + 1e-9 < min_r[0] or free[nd, 1] + 1e-9 < min_r[1] or \
            free[nd, 2] + 1e-9 < min_r[2]:
        return False
    return not s.use_shapes or room_for_any(pending.shapes, s.shape_left, free, nd)


@helper
def _fill(s, offers, pending, jobs, rule, nd, tau, out_req, out_node):
    """Offer heartbeat ``(nd, tau)`` again and again until no job launches."""
    tally, by_ready, done, ready = s.tally, s.by_ready, s.asks.done, pending.ready
    n_p = len(ready)
    while tally[LEFT] > 0:
        if not _has_room(s, pending, offers.free, nd):
            break
        while tally[NXT] < n_p and done[by_ready[tally[NXT]]]:
            tally[NXT] += 1
        nxt = tally[NXT]
        if tally[N_VISIT] == 0 and (nxt == n_p or ready[by_ready[nxt]] > tau):
            break  # no task is ready and no job would be visited: nothing changes
        chosen, got = _choose(s, offers, pending, jobs, rule, nd, tau)
        if chosen < 0:
            break
        _launch(s, offers, pending, jobs, nd, chosen, got, out_req, out_node)


@helper
def _settle(s, pending, jobs, rule, acc, prev):
    """End of call: fold a final run of skipped heartbeats, settle the marks (accrue where a
    later heartbeat came, else carry ``skipped`` to the next call) and clear ``slot``."""
    order, mark, hb_time, wait = pending.order, s.mark, s.hb_time, jobs.wait
    n_hb = s.tally[N_HB]
    if prev == 2:  # the jobs were all skipped at the last heartbeat
        _fold(acc, s, order, jobs, rule.mode)
        for k in range(len(order)):
            if s.n_in[k] > 0 and s.eligible[k]:
                mark[k] = n_hb - 1
    for k in range(len(order)):
        j = order[k]
        h = mark[k]
        if h >= 0 and h < n_hb - 1:
            wait[j] += hb_time[h + 1] - hb_time[h]
            h = -1
        jobs.skipped[j] = h >= 0  # marked at the last heartbeat: accrues at the next call's
        jobs.slot[j] = -1


@njit(cache=True)
def delay_schedule(offers, pending, jobs, rule, last_hb, out_req, out_node):
    """Place pending tasks on the heartbeats ``offers``; return (placements, last heartbeat).

    ``offers.free`` is updated; ``pending.order`` lists the jobs with pending tasks in fair
    order; ``jobs`` (per job code) is updated and persists between calls, its ``slot`` is
    -1 again on return (a buffer kept by the caller, since a new one per call would cost
    the trace's job count, not the pending jobs); ``last_hb`` is the previous heartbeat's
    time.  ``pending.shapes``/``shape_of``: a node with room for none of the shapes is not
    offered to any job.  Node-local and rack-local candidates come from node -> task and
    rack -> task lists built once per call, so a heartbeat costs the tasks with data on its
    node, not all.
    """
    s = _scan(offers, pending, jobs, rule, last_hb)
    order, level, tally, hb_time = pending.order, jobs.level, s.tally, s.hb_time
    mode, n_j = rule.mode, len(order)
    # A heartbeat at which every waiting job would be skipped (no task without inputs, none
    # local to the node or, for jobs allowed rack-local, to its rack, and no job past its
    # delay) adds to ``acc`` instead of visiting every job; ``a_res`` says how much of
    # ``acc`` each job's wait (or skip count) already holds.  Same decisions, O(1) a beat.
    n_elig = 0
    acc = 0.0
    prev = 0  # the previous heartbeat with room: 1 visited the jobs, 2 skipped them all
    dl = -np.inf
    rack_level = True
    for o in range(len(offers.node)):
        tau = offers.time[o]
        nd = offers.node[o]
        if not _has_room(s, pending, offers.free, nd):
            continue
        hb_time[tally[N_HB]] = tau
        tally[N_HB] += 1
        last_hb = tau
        if mode == 1 and prev == 2:
            acc += tau - hb_time[tally[N_HB] - 2]
        while n_elig < n_j and s.first_in[s.by_first[n_elig]] <= tau:
            k = s.by_first[n_elig]  # a job with a task ready by now: it has waited for nothing
            s.eligible[k] = True
            s.a_res[k] = acc
            n_elig += 1
            tally[N_VISIT] += s.n_in[k] > 0
            if prev == 2:  # in a run of skipped heartbeats: it joins with its own deadline
                j = order[k]
                if mode == 0:
                    dl = min(dl, acc + rule.d - jobs.skip[j])
                elif level[j] == ANY:
                    dl = -np.inf
                else:
                    rack_level = rack_level or level[j] == RACK
                    dl = min(dl, acc + (rule.w1 if level[j] == NODE else rule.w2) - jobs.wait[j])
        if tally[FREE_LEFT] == 0 and tally[LEFT] > 0 and _skip_all(
                s, offers, pending, jobs, nd, tau, rack_level):
            if prev != 2:
                dl, rack_level = _deadline(acc, s, order, jobs, rule)
            if acc < dl and (prev == 2 or _skip_all(s, offers, pending, jobs, nd, tau,
                                                    rack_level)):
                if mode == 0:
                    acc += 1.0
                prev = 2
                continue
        if prev == 2:
            _fold(acc, s, order, jobs, mode)
        prev = 1
        _fill(s, offers, pending, jobs, rule, nd, tau, out_req, out_node)
    _settle(s, pending, jobs, rule, acc, prev)
    return tally[N_OUT], last_hb
