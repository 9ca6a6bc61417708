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


@helper
def _skip_all(node_ptr, node_lst, rack_ptr, rack_lst, done, ready, req, free, nd, n_rack, tau,
              job, slot, order, level, best, touched, rack_level, allow, bits):
    """Whether no pending task is local to ``nd`` and, if some job is allowed rack-local
    (``rack_level``), none of those jobs has a task local to ``nd``'s rack."""
    asks = Asks(done, ready, req, free, allow, bits, job, slot)
    n_t = best_in(asks, node_lst, node_ptr[nd], node_ptr[nd + 1], nd, tau, best, touched, 0)
    for t in range(n_t):
        best[touched[t]] = -1
    if n_t > 0:
        return False
    rack = n_rack[nd]
    if not rack_level or rack < 0 or len(rack_ptr) <= rack + 1:
        return True
    n_t = best_in(asks, rack_lst, rack_ptr[rack], rack_ptr[rack + 1], nd, tau, best, touched, 0)
    clear = True
    for t in range(n_t):
        clear = clear and level[order[touched[t]]] != RACK
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
def _fold(acc, a_res, n_in, eligible, order, mode, wait, skip):
    """Add what every waiting job accrued over all-skipped heartbeats to its own count."""
    for k in range(len(order)):
        if n_in[k] > 0 and eligible[k] and acc > a_res[k]:
            if mode == 1:
                wait[order[k]] += acc - a_res[k]
            else:
                skip[order[k]] += int(acc - a_res[k] + 0.5)
        a_res[k] = acc


@helper
def _deadline(acc, a_res, n_in, eligible, order, mode, wait, skip, level, mark, hb_time, n_hb,
              d, w1, w2):
    """Settle every mark; return the ``acc`` at which some waiting job would no longer be
    skipped (-inf: one already would not), and whether some job may launch rack-local."""
    _fold(acc, a_res, n_in, eligible, order, mode, wait, skip)
    best = np.inf
    rack_level = False
    for k in range(len(order)):
        if n_in[k] == 0 or not eligible[k]:
            continue
        j = order[k]
        if mode == 0:
            best = min(best, acc + d - skip[j])
            continue
        h = mark[k]
        if h >= 0 and h < n_hb - 1:
            wait[j] += hb_time[h + 1] - hb_time[h]
            mark[k] = -1
        if level[j] == ANY:
            return -np.inf, True
        rack_level = rack_level or level[j] == RACK
        best = min(best, acc + (w1 if level[j] == NODE else w2) - wait[j])
    return best, rack_level


@njit(cache=True)
def delay_schedule(off_node, off_time, free, n_rack, ready, req, job, inputs, has_in,
                   order, running, skip, level, wait, skipped, last_hb, mode, d, w1, w2,
                   shapes, shape_of, allow, bits, slot, out_req, out_node):
    """Place pending tasks on the heartbeats ``off_*``; return (placements, last heartbeat).

    ``shapes``/``shape_of``: the distinct request shapes and each task's (a node with room
    for none of them is not offered to any job; one row of +inf when there are too many).
    ``free`` (nodes, 3) is updated; ``order`` lists the jobs with pending tasks in fair
    order (``running`` per job code, updated); ``skip``/``level``/``wait``/``skipped`` are
    per job code and persist between calls; ``last_hb`` is the previous heartbeat's time.
    ``slot`` (per job code, all -1) maps the jobs of ``order`` to their index during the
    call and is -1 again on return: a buffer kept by the caller, since a new one per call
    would cost the trace's job count, not the pending jobs.
    Node-local and rack-local candidates come from node -> task and rack -> task lists
    built once per call, so a heartbeat costs the tasks with data on its node, not all.
    """
    n_p = len(ready)
    n_j = len(order)
    n_nodes = free.shape[0]
    # tasks by job, those without input data first, queue order within each group
    by_job = np.argsort(job * 2 + has_in, kind="mergesort")
    for k in range(n_j):
        slot[order[k]] = k
    job_lo = np.zeros(n_j, np.int64)
    job_mid = np.zeros(n_j, np.int64)
    job_hi = np.zeros(n_j, np.int64)
    for q in range(n_p):
        i = by_job[q]
        k = slot[job[i]]
        if job_hi[k] == 0:
            job_lo[k] = q
            job_mid[k] = q
        if not has_in[i]:
            job_mid[k] = q + 1
        job_hi[k] = q + 1
    cur_free = job_lo.copy()  # cursors past done tasks: without inputs, with inputs
    cur_in = job_mid.copy()
    # no task of the range is usable before these times (first_usable), and the
    # tasks by ready time, for "is any task ready at all?" (``nxt``: past the done ones)
    lb_free = np.full(n_j, -np.inf)
    lb_in = np.full(n_j, -np.inf)
    by_ready = np.argsort(ready, kind="mergesort")
    nxt = 0
    node_ptr, node_lst = csr(n_nodes, inputs, inputs.shape[1])
    n_racks = int(n_rack.max()) + 1 if n_nodes else 0
    if mode == 1 and n_racks > 0:
        rack_ptr, rack_lst = csr(n_racks, task_racks(inputs, n_rack), inputs.shape[1])
    else:
        rack_ptr, rack_lst = np.zeros(1, np.int64), np.zeros(0, np.int64)
    done = np.zeros(n_p, np.bool_)
    asks = Asks(done, ready, req, free, allow, bits, job, slot)
    left = n_p
    min_r = np.full(3, np.inf)
    for i in range(n_p):
        for r in range(3):
            min_r[r] = min(min_r[r], req[i, r])
    # Marks, lazily: mark[k] is the heartbeat (index into hb_time) at which job k was last
    # visited and skipped; its wait grows by the gap to the next heartbeat when it is next
    # looked at (or at the end of the call), instead of touching every marked job at every
    # heartbeat.  Heartbeat 0 stands for the previous call's last one (time last_hb).
    hb_time = np.empty(len(off_node) + 1)
    hb_time[0] = last_hb
    n_hb = 1
    mark = np.full(n_j, -1, np.int64)
    for k in range(n_j):
        if skipped[order[k]]:
            mark[k] = 0
    local_best = np.full(n_j, -1, np.int64)
    rack_best = np.full(n_j, -1, np.int64)
    touched = np.empty(n_j, np.int64)
    touched_r = np.empty(n_j, np.int64)
    n_out = 0
    pos = np.arange(n_j)  # pos[k]: rank in the fair order of the job at index k
    rank = np.arange(n_j)  # rank -> job index k
    n_free = np.zeros(n_j, np.int64)  # pending tasks left per job: without, with inputs
    n_in = np.zeros(n_j, np.int64)
    shape_left = np.zeros(len(shapes), np.int64)
    for i in range(n_p):
        if shape_of[i] >= 0:
            shape_left[shape_of[i]] += 1
    use_shapes = n_p > 0 and shape_of[0] >= 0
    first_in = np.full(n_j, np.inf)  # earliest ready time of a job's tasks with inputs
    # smallest request of a job's tasks without / with inputs (a node with less room than
    # that cannot take any of them: skip the scan; launches only raise it, so it stays safe)
    min_free = np.full((n_j, 3), np.inf)
    min_in = np.full((n_j, 3), np.inf)
    for k in range(n_j):
        n_free[k] = job_mid[k] - job_lo[k]
        n_in[k] = job_hi[k] - job_mid[k]
        for q in range(job_lo[k], job_hi[k]):
            i = by_job[q]
            lo_r = min_free if q < job_mid[k] else min_in
            for r in range(3):
                lo_r[k, r] = min(lo_r[k, r], req[i, r])
            if q >= job_mid[k]:
                first_in[k] = min(first_in[k], ready[i])
    # A heartbeat at which every waiting job would be skipped (no task without inputs, none
    # local to the node or, for jobs allowed rack-local, to its rack, and no job past its
    # delay) adds to ``acc`` instead of visiting every job; ``a_res`` says how much of
    # ``acc`` each job's wait (or skip count) already holds.  Same decisions, O(1) a beat.
    free_left = 0
    for k in range(n_j):
        free_left += n_free[k]
    by_first = np.argsort(first_in)  # jobs become waiting (visitable) in this order
    eligible = np.zeros(n_j, np.bool_)
    n_elig = 0
    n_visit = 0  # eligible jobs with tasks with inputs left: they are visited
    acc = 0.0
    a_res = np.zeros(n_j)
    prev = 0  # the previous heartbeat with room: 1 visited the jobs, 2 skipped them all
    dl = -np.inf
    rack_level = True
    for o in range(len(off_node)):
        tau = off_time[o]
        nd = off_node[o]
        if free[nd, 0] + 1e-9 < min_r[0] or free[nd, 1] + 1e-9 < min_r[1] or \
                free[nd, 2] + 1e-9 < min_r[2]:
            continue  # a node without room asks for no task (Hadoop 1: acceptNewTasks)
        if use_shapes and not room_for_any(shapes, shape_left, free, nd):
            continue
        hb_time[n_hb] = tau
        n_hb += 1
        last_hb = tau
        if mode == 1 and prev == 2:
            acc += tau - hb_time[n_hb - 2]
        while n_elig < n_j and first_in[by_first[n_elig]] <= tau:
            k = by_first[n_elig]  # a job with a task ready by now: it has waited for nothing
            eligible[k] = True
            a_res[k] = acc
            n_elig += 1
            n_visit += n_in[k] > 0
            if prev == 2:  # in a run of skipped heartbeats: it joins with its own deadline
                j = order[k]
                if mode == 0:
                    dl = min(dl, acc + d - skip[j])
                elif level[j] == ANY:
                    dl = -np.inf
                else:
                    rack_level = rack_level or level[j] == RACK
                    dl = min(dl, acc + (w1 if level[j] == NODE else w2) - wait[j])
        if free_left == 0 and left > 0 and _skip_all(
                node_ptr, node_lst, rack_ptr, rack_lst, done, ready, req, free, nd, n_rack,
                tau, job, slot, order, level, local_best, touched, rack_level, allow, bits):
            if prev != 2:
                dl, rack_level = _deadline(acc, a_res, n_in, eligible, order, mode, wait,
                                           skip, level, mark, hb_time, n_hb, d, w1, w2)
            if acc < dl and (prev == 2 or _skip_all(
                    node_ptr, node_lst, rack_ptr, rack_lst, done, ready, req, free, nd,
                    n_rack, tau, job, slot, order, level, local_best, touched, rack_level,
                    allow, bits)):
                if mode == 0:
                    acc += 1.0
                prev = 2
                continue
        if prev == 2:
            _fold(acc, a_res, n_in, eligible, order, mode, wait, skip)
        prev = 1
        rack = n_rack[nd]
        while left > 0:
            if free[nd, 0] + 1e-9 < min_r[0] or free[nd, 1] + 1e-9 < min_r[1] or \
                    free[nd, 2] + 1e-9 < min_r[2]:
                break
            if use_shapes and not room_for_any(shapes, shape_left, free, nd):
                break
            while nxt < n_p and done[by_ready[nxt]]:
                nxt += 1
            if n_visit == 0 and (nxt == n_p or ready[by_ready[nxt]] > tau):
                break  # no task is ready and no job would be visited: nothing changes
            n_t = best_in(asks, node_lst, node_ptr[nd], node_ptr[nd + 1], nd, tau, local_best,
                          touched, 0)
            n_tr = -1  # rack candidates: computed on first need
            chosen = -1
            got = ANY
            for rk in range(n_j):
                k = rank[rk]
                if local_best[k] >= 0:
                    chosen, got = local_best[k], NODE
                    break
                if n_free[k] > 0 and lb_free[k] <= tau and fits(min_free[k], free, nd):
                    i = first_usable(asks, by_job, cur_free, k, job_mid[k], nd, tau, lb_free)
                    if i >= 0:
                        chosen, got = i, -1
                        break
                if n_in[k] == 0 or first_in[k] > tau:
                    continue  # no task of this job to run yet: not visited
                j = order[k]
                if mode == 0:
                    if skip[j] < d:
                        skip[j] += 1  # "j has an unlaunched task": skipped
                        continue
                else:
                    h = mark[k]
                    if h >= 0 and h < n_hb - 1:  # skipped at an earlier heartbeat: accrue
                        wait[j] += hb_time[h + 1] - hb_time[h]
                        mark[k] = -1
                    allowed = _allowed(level[j], wait[j], w1, w2)
                    if allowed >= RACK and rack >= 0:
                        if n_tr < 0:
                            n_tr = best_in(asks, rack_lst, rack_ptr[rack], rack_ptr[rack + 1],
                                           nd, tau, rack_best, touched_r, 0)
                        if rack_best[k] >= 0:
                            chosen, got = rack_best[k], RACK
                            break
                    if allowed != ANY:
                        mark[k] = n_hb - 1
                        continue
                # may run a task anywhere: the first of its tasks that fits this node
                if lb_in[k] > tau or not fits(min_in[k], free, nd):
                    continue
                i = first_usable(asks, by_job, cur_in, k, job_hi[k], nd, tau, lb_in)
                if i >= 0:
                    chosen, got = i, locality_of(i, inputs, nd, rack, n_rack)
                    break
            for t in range(n_t):
                local_best[touched[t]] = -1
            for t in range(max(n_tr, 0)):
                rack_best[touched_r[t]] = -1
            if chosen < 0:
                break
            j = job[chosen]
            if got == NODE:
                skip[j] = 0
            if got >= 0:
                level[j] = got
                wait[j] = 0.0
                mark[slot[j]] = -1
            done[chosen] = True
            left -= 1
            if use_shapes:
                shape_left[shape_of[chosen]] -= 1
            if has_in[chosen]:
                n_in[slot[j]] -= 1
                n_visit -= eligible[slot[j]] and n_in[slot[j]] == 0
            else:
                n_free[slot[j]] -= 1
                free_left -= 1
            for r in range(3):
                free[nd, r] -= req[chosen, r]
            out_req[n_out] = chosen
            out_node[n_out] = nd
            n_out += 1
            running[j] += 1
            # keep the fair order: move the job later while it has more running tasks
            k = slot[j]
            rk = pos[k]
            while rk + 1 < n_j and (running[order[rank[rk + 1]]] < running[j] or (
                    running[order[rank[rk + 1]]] == running[j]
                    and order[rank[rk + 1]] < j)):
                other = rank[rk + 1]
                rank[rk] = other
                pos[other] = rk
                rk += 1
            rank[rk] = k
            pos[k] = rk
    if prev == 2:  # the jobs were all skipped at the last heartbeat
        _fold(acc, a_res, n_in, eligible, order, mode, wait, skip)
        for k in range(n_j):
            if n_in[k] > 0 and eligible[k]:
                mark[k] = n_hb - 1
    for k in range(n_j):  # settle the marks: accrue where a later heartbeat came
        j = order[k]
        h = mark[k]
        if h >= 0 and h < n_hb - 1:
            wait[j] += hb_time[h + 1] - hb_time[h]
            h = -1
        skipped[j] = h >= 0  # marked at the last heartbeat: accrues at the next call's
        slot[j] = -1
    return n_out, last_hb
