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

import numpy as np
from numba import njit

from pipeline.policies.locality.candidates import (
    ANY,
    NODE,
    RACK,
    best_in,
    first_usable,
    fits,
    locality_of,
    room_for_any,
)
from pipeline.policies.locality.delay_state import (
    FREE_LEFT,
    LEFT,
    N_HB,
    N_OUT,
    N_VISIT,
    NXT,
    Jobs,
    Offers,
    Pending,
    Rule,
    scan,
)
from pipeline.sim.jit import helper, inlined


@inlined
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


@helper
def _accrue(s, wait, k, j):
    """Settle job ``k``'s mark (code ``j``): a job skipped at a heartbeat waits the gap to
    the next heartbeat with room, once that heartbeat has come."""
    h = s.mark[k]
    if h >= 0 and h < s.tally[N_HB] - 1:
        wait[j] += s.hb_time[h + 1] - s.hb_time[h]
        s.mark[k] = -1


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
    n_in, eligible = s.n_in, s.eligible
    wait, level = jobs.wait, jobs.level
    best = np.inf
    rack_level = False
    for k in range(len(order)):
        if n_in[k] == 0 or not eligible[k]:
            continue
        j = order[k]
        if rule.mode == 0:
            best = min(best, acc + rule.d - jobs.skip[j])
            continue
        _accrue(s, wait, k, j)
        if level[j] == ANY:
            return -np.inf, True
        rack_level = rack_level or level[j] == RACK
        best = min(best, acc + (rule.w1 if level[j] == NODE else rule.w2) - wait[j])
    return best, rack_level


@inlined
def _choose(s, offers, pending, jobs, rule, nd, tau):
    """Visit the jobs in fair order at heartbeat ``(nd, tau)``; return the task the first
    launching job runs and its locality (``got``: NODE, RACK, ANY, or -1 for a task without
    inputs), or (-1, ANY) when no job launches."""
    asks, order, skip, wait, level, mark = s.asks, pending.order, jobs.skip, jobs.wait, \
        jobs.level, s.mark
    free, n_rack, n_hb = offers.free, offers.n_rack, s.tally[N_HB]
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
            _accrue(s, wait, k, j)  # skipped at an earlier heartbeat
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


@inlined
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


@inlined
def _has_room(s, pending, free, nd):
    """Whether node ``nd`` has room for the smallest request (and, with the shape filter,
    for some pending shape): a node without room asks for no task (Hadoop 1:
    ``acceptNewTasks``)."""
    min_r = s.min_r
    if free[nd, 0] + 1e-9 < min_r[0] or free[nd, 1] + 1e-9 < min_r[1] or \
            free[nd, 2] + 1e-9 < min_r[2]:
        return False
    return not s.use_shapes or room_for_any(pending.shapes, s.shape_left, free, nd)


@inlined
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
    order, mark, wait = pending.order, s.mark, jobs.wait
    n_hb = s.tally[N_HB]
    if prev == 2:  # the jobs were all skipped at the last heartbeat
        _fold(acc, s, order, jobs, rule.mode)
        for k in range(len(order)):
            if s.n_in[k] > 0 and s.eligible[k]:
                mark[k] = n_hb - 1
    for k in range(len(order)):
        j = order[k]
        _accrue(s, wait, k, j)
        jobs.skipped[j] = mark[k] >= 0  # marked at the last heartbeat: accrues next call
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
    s = scan(offers, pending, jobs, rule, last_hb)
    return _heartbeats(s, offers, pending, jobs, rule, last_hb, out_req, out_node)


@helper
def _heartbeats(s, offers, pending, jobs, rule, last_hb, out_req, out_node):
    """Offer the call's heartbeats in order (its loop: a :func:`helper`, so the inlined
    steps read the structures' arrays without reference counting)."""
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
                    continue
                _accrue(s, jobs.wait, k, j)  # a mark from the previous call: settle it first
                if level[j] == ANY:
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


def schedule(offers: Offers, pending: Pending, jobs: Jobs, rule: Rule, last_hb: float,
             out_req: np.ndarray, out_node: np.ndarray) -> tuple[int, float]:
    """:func:`delay_schedule` called from Python.  The structures cross into compiled code
    as plain tuples and are named again on entry: numba's dispatcher reads a plain tuple of
    arrays in C, a NamedTuple field by field."""
    return _schedule_plain(tuple(offers), tuple(pending), tuple(jobs), tuple(rule), last_hb,
                           out_req, out_node)


@njit(cache=True)
def _schedule_plain(offers, pending, jobs, rule, last_hb, out_req, out_node):
    """:func:`delay_schedule` on :func:`schedule`'s plain tuples."""
    return delay_schedule(Offers(*offers), Pending(*pending), Jobs(*jobs), Rule(*rule),
                          last_hb, out_req, out_node)
