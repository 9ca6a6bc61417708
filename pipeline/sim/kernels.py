"""Compiled hot paths of the core: the completion heap, releasing finished tasks, and
checking-and-applying a policy's placements.  They know nothing of policies.

Ties in the heap are broken by a sequence number, so the order of simultaneous completions
is the order their tasks started (deterministic by construction, as in SimPy's kernel).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.sim.jit import helper
from pipeline.sim.tasks import (
    DONE,
    FREE,
    FREE_TOP,
    HEAP_N,
    HEAP_SEQ,
    N_DONE,
    OPPORTUNISTIC,
    PAUSED,
    PENDING,
    REC_N,
    RUNNING,
    X_OPP,
    X_OPP_QUEUE_S,
    X_OPP_STARTS,
)

UP = 2
EPS = 1e-9  # relative slack in capacity checks (float sums of requests drift)


@helper
def heap_push(ht, hs, hslot, hep, counters, time, slot, epoch):
    """Push ``(time, next seq, slot, epoch)``; the caller reserved room."""
    seq = counters[HEAP_SEQ]
    counters[HEAP_SEQ] = seq + 1
    i = counters[HEAP_N]
    counters[HEAP_N] = i + 1
    while i > 0:  # sift the hole up
        p = (i - 1) >> 1
        if ht[p] < time or (ht[p] == time and hs[p] < seq):
            break
        ht[i], hs[i], hslot[i], hep[i] = ht[p], hs[p], hslot[p], hep[p]
        i = p
    ht[i], hs[i], hslot[i], hep[i] = time, seq, slot, epoch


@helper
def heap_pop(ht, hs, hslot, hep, counters):
    """Remove the top entry (the caller read it first)."""
    n = counters[HEAP_N] - 1
    counters[HEAP_N] = n
    if n == 0:
        return
    t, q, sl, ep = ht[n], hs[n], hslot[n], hep[n]
    i = 0
    while True:  # sift the hole at the root down
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hs[c + 1] < hs[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and q < hs[c]):
            break
        ht[i], hs[i], hslot[i], hep[i] = ht[c], hs[c], hslot[c], hep[c]
        i = c
    ht[i], hs[i], hslot[i], hep[i] = t, q, sl, ep


@njit(cache=True)
def heap_top(ht, hs, hslot, hep, counters, task_epoch):
    """Time of the earliest live completion (stale entries are dropped), or +inf."""
    while counters[HEAP_N] > 0:
        if hep[0] == task_epoch[hslot[0]]:
            return ht[0]
        heap_pop(ht, hs, hslot, hep, counters)
    return np.inf


@njit(cache=True)
def complete_until(limit, ht, hs, hslot, hep, counters,
                   t_row, t_job, t_ready, t_first, t_start, t_req, t_used, t_state, t_node,
                   t_attempts, t_pre, t_evi, t_wasted, t_epoch, t_flags, t_loc, t_lastpre,
                   t_read, free_stack, n_alloc, n_used, n_ncont, n_idle, n_dirty, n_instance,
                   r_row, r_inst, r_job, r_ready, r_first, r_start, r_end, r_out, r_att,
                   r_pre, r_evi, r_wasted, r_loc, r_read, follow_slot, follow_end, parent_flag,
                   clock, t_extra, r_extra, n_oalloc, opp_flag, tracked_flag, t_kind, r_kind,
                   spec_flag, n_done, n_done_s, spec_slot, spec_end, n_spec):
    """Finish tasks whose end is ``<= limit``, in time order; record them and free slots.

    Freed slots are reset for reuse.  Finished slots flagged ``parent_flag`` are listed in
    ``follow_*`` (kept, not freed) so the caller can release their dependants.
    ``clock[0]`` is set to the last end time.  Returns (status, n_follow): status 0 when all
    due completions are done, 1 when the record buffer or the follow list is full.
    A task flagged ``opp_flag`` gives its resources back to the node's opportunistic
    allocation ``n_oalloc`` (the RM's ``n_alloc`` never held them); one flagged
    ``tracked_flag`` records its ``t_extra`` row (then zeroed), the others zeros.
    A task flagged ``spec_flag`` (it has or had a speculative copy, or is one) is popped and
    listed in ``spec_slot``/``spec_end`` (``n_spec[0]`` of them) for the caller, which
    settles which attempt won (:mod:`pipeline.sim.speculation`); its resources stay held
    until then (nothing is placed before).
    Each finished task counts in its node's ``n_done`` and ``n_done_s`` (run time).
    """
    nf = 0
    cap_r = len(r_row)
    while counters[HEAP_N] > 0:
        s = hslot[0]
        if hep[0] != t_epoch[s]:
            heap_pop(ht, hs, hslot, hep, counters)
            continue
        end = ht[0]
        if end > limit:
            return 0, nf
        if counters[REC_N] >= cap_r or nf >= len(follow_slot) or n_spec[0] >= len(spec_slot):
            return 1, nf
        heap_pop(ht, hs, hslot, hep, counters)
        clock[0] = end
        if t_flags[s] & spec_flag:
            spec_slot[n_spec[0]] = s
            spec_end[n_spec[0]] = end
            n_spec[0] += 1
            continue
        nd = t_node[s]
        n_done[nd] += 1
        n_done_s[nd] += end - t_start[s]
        _release_node(nd, s, end, t_req, t_used, n_oalloc if t_flags[s] & opp_flag else n_alloc,
                      n_used, n_ncont, n_idle, n_dirty, n_alloc, n_oalloc)
        i = counters[REC_N]
        r_row[i] = t_row[s]
        r_inst[i] = n_instance[nd]
        r_job[i] = t_job[s]
        r_ready[i] = t_ready[s]
        r_first[i] = t_first[s]
        r_start[i] = t_start[s]
        r_end[i] = end
        r_out[i] = 0
        r_att[i] = t_attempts[s]
        r_pre[i] = t_pre[s]
        r_evi[i] = t_evi[s]
        r_wasted[i] = t_wasted[s]
        r_loc[i] = t_loc[s]
        r_read[i, 0] = t_read[s, 0]
        r_read[i, 1] = t_read[s, 1]
        r_kind[i] = t_kind[s]
        if t_flags[s] & tracked_flag:
            for k in range(t_extra.shape[1]):
                r_extra[i, k] = t_extra[s, k]
                t_extra[s, k] = 0.0
        else:
            for k in range(r_extra.shape[1]):
                r_extra[i, k] = 0.0
        counters[REC_N] = i + 1
        counters[N_DONE] += 1
        t_epoch[s] += 1
        if t_flags[s] & parent_flag:
            follow_slot[nf] = s
            follow_end[nf] = end
            nf += 1
            t_state[s] = DONE  # finished, awaiting the caller
            continue
        t_state[s] = FREE
        t_node[s] = -1
        t_start[s] = np.nan
        t_first[s] = np.nan
        t_attempts[s] = 0
        t_pre[s] = 0
        t_evi[s] = 0
        t_wasted[s] = 0.0
        t_flags[s] = 0
        t_loc[s] = -1
        t_lastpre[s] = False
        t_read[s, 0] = 0.0
        t_read[s, 1] = 0.0
        free_stack[counters[FREE_TOP]] = s
        counters[FREE_TOP] += 1
    return 0, nf


@helper
def _release_node(nd, s, end, t_req, t_used, held, n_used, n_ncont, n_idle, n_dirty,
                  n_alloc, n_oalloc):
    """Give task ``s``'s resources on node ``nd`` back at time ``end`` (``held``: the
    allocation it was counted in, ``n_alloc`` or ``n_oalloc``)."""
    for k in range(3):
        held[nd, k] -= t_req[s, k]
    for k in range(2):
        u = t_used[s, k]
        n_used[nd, k] -= t_req[s, k] if np.isnan(u) else u
    n_ncont[nd] -= 1
    if n_ncont[nd] == 0:
        n_idle[nd] = end
        for k in range(3):
            n_alloc[nd, k] = 0.0  # no containers: clear float drift
            n_oalloc[nd, k] = 0.0
        for k in range(2):
            n_used[nd, k] = 0.0
    n_dirty[nd] = True


@helper
def locality_level(inputs, nd, n_rack):
    """0 node-local (``nd`` holds the data), 1 rack-local (a node of ``nd``'s rack does),
    2 off-rack; ``inputs`` lists node slots, -1 padded (none: the data is on no node here,
    as on an elastic cluster, so the read is remote)."""
    level = 2
    rack = n_rack[nd]
    for k in range(len(inputs)):
        x = inputs[k]
        if x < 0:
            break
        if x == nd:
            return 0
        if rack >= 0 and n_rack[x] == rack:
            level = 1
    return level


@helper
def run_time(duration, speed, mb, level, read_rate):
    """Seconds a task runs: ``duration`` is its run time on a speed-1.0 machine reading its
    ``mb`` MiB of input node-locally; the compute part scales with the machine's speed, the
    read goes at ``read_rate[level]`` MiB/s (node, rack, off-rack)."""
    if not mb > 0:  # NaN or zero: nothing read beyond what the duration holds
        return duration / speed
    local = mb / read_rate[0]
    compute = duration - local if duration > local else 0.0
    return compute / speed + mb / read_rate[level]


@helper
def _open_run(s, nd, now, work, first, ht, hs, hslot, hep, counters, t_flags, open_flag,
              inputs_flag, t_inp, t_input_mb, t_loc, t_read, t_epoch, n_rack, n_speed,
              read_rate, t_run_end):
    """A run of task ``s`` on node ``nd`` starts at ``now`` with ``work`` left (s at speed
    1.0): a ``first`` run (not a resumed one) gets its locality and reads its input; its
    completion is pushed (never, for a task flagged ``open_flag``) and kept in ``t_run_end``."""
    level = 0
    mb = 0.0
    if first:
        if t_flags[s] & inputs_flag:
            level = locality_level(t_inp[s], nd, n_rack)
            t_loc[s] = level
        mb = t_input_mb[s]
        if level > 0 and mb > 0:
            t_read[s, level - 1] += mb
    end = np.inf if t_flags[s] & open_flag else now + run_time(
        work, n_speed[nd], mb, level, read_rate)
    t_run_end[s] = end
    heap_push(ht, hs, hslot, hep, counters, end, s, t_epoch[s])


@njit(cache=True)
def apply_placements(now, req_idx, node_idx, pend_slots, ht, hs, hslot, hep, counters,
                     t_duration, t_req, t_used, t_state, t_node, t_start, t_first,
                     t_attempts, t_epoch, t_flags, open_flag, n_cap, n_alloc, n_used, n_ncont,
                     n_state, n_speed, n_dirty, t_inp, t_input_mb, t_loc, t_read, n_rack,
                     read_rate, inputs_flag, t_run_end):
    """Check and apply placements in order; return (-1, 0) or (bad index, reason code).

    A task flagged ``open_flag`` (censored: 0 when the run censors nothing) never completes
    on its own: the core stops it when the trace's window closes.  A task flagged
    ``inputs_flag`` gets its locality here (:func:`locality_level`) and a task that reads
    ``t_input_mb`` runs for :func:`run_time`; the MiB it read across a rack or the core are
    added to ``t_read``.
    Reason codes: 1 request index out of range, 2 node index out of range, 3 request
    already placed, 4 node not up, 5 does not fit the node's free capacity.
    """
    m = len(pend_slots)
    n = len(n_state)
    for i in range(len(req_idx)):
        r = req_idx[i]
        nd = node_idx[i]
        if r < 0 or r >= m:
            return i, 1
        if nd < 0 or nd >= n:
            return i, 2
        s = pend_slots[r]
        if t_state[s] != PENDING:
            return i, 3
        if n_state[nd] != UP:
            return i, 4
        for k in range(3):
            c = n_cap[nd, k]
            if n_alloc[nd, k] + t_req[s, k] > c + EPS * c + 1e-12:
                return i, 5
        for k in range(3):
            n_alloc[nd, k] += t_req[s, k]
        for k in range(2):
            u = t_used[s, k]
            n_used[nd, k] += t_req[s, k] if np.isnan(u) else u
        n_ncont[nd] += 1
        n_dirty[nd] = True
        t_state[s] = RUNNING
        t_node[s] = nd
        t_start[s] = now
        if np.isnan(t_first[s]):
            t_first[s] = now
        t_attempts[s] += 1
        _open_run(s, nd, now, t_duration[s], True, ht, hs, hslot, hep, counters, t_flags,
                  open_flag, inputs_flag, t_inp, t_input_mb, t_loc, t_read, t_epoch, n_rack,
                  n_speed, read_rate, t_run_end)
    return -1, 0


@njit(cache=True)
def start_opportunistic(at, slots, nodes, ht, hs, hslot, hep, counters, t_duration, t_req, t_used,
           t_state, t_node, t_start, t_first, t_attempts, t_epoch, t_flags, t_work0,
           t_inp, t_input_mb, t_loc, t_read, t_extra, t_since, open_flag, inputs_flag,
           n_oalloc, n_used, n_ncont, n_speed, n_dirty, n_rack, read_rate, t_run_end):
    """Start (or resume) opportunistic containers ``slots`` on ``nodes`` at ``at``
    (:mod:`pipeline.sim.nodemanager`): their resources count in the node's opportunistic
    allocation ``n_oalloc``; a resumed (paused) one runs only the work it had left."""
    for j in range(len(slots)):
        s = slots[j]
        nd = nodes[j]
        for k in range(3):
            n_oalloc[nd, k] += t_req[s, k]
        for k in range(2):
            n_used[nd, k] += t_used[s, k] if not np.isnan(t_used[s, k]) else t_req[s, k]
        n_ncont[nd] += 1
        n_dirty[nd] = True
        resumed = (t_flags[s] & PAUSED) != 0
        t_flags[s] = (t_flags[s] & ~PAUSED) | OPPORTUNISTIC
        t_state[s] = RUNNING
        t_node[s] = nd
        t_start[s] = at
        if np.isnan(t_first[s]):
            t_first[s] = at
        if not np.isnan(t_since[s]):
            t_extra[s, X_OPP_QUEUE_S] += at - t_since[s]
        t_since[s] = np.nan
        t_extra[s, X_OPP] = 1.0
        if not resumed:
            t_attempts[s] += 1
            t_extra[s, X_OPP_STARTS] += 1.0
        _open_run(s, nd, at, t_duration[s] - t_work0[s], not resumed, ht, hs, hslot, hep,
                  counters, t_flags, open_flag, inputs_flag, t_inp, t_input_mb, t_loc, t_read,
                  t_epoch, n_rack, n_speed, read_rate, t_run_end)


@njit(cache=True)
def nm_arrivals(slots, nodes, req, cap, alloc, oalloc, queued, max_queue, eps, action):
    """What each NodeManager does with arriving opportunistic containers, in order: 0 start
    (its queue is empty and the container fits the unallocated room), 1 queue (fewer than
    ``max_queue`` queued), 2 reject.  ``queued`` (a copy of the queue lengths) and the
    room taken by earlier starts of the same call are updated as it goes."""
    taken = np.zeros((len(cap), 3))  # room taken by this call's starts, by node
    for i in range(len(slots)):
        s = slots[i]
        nd = nodes[i]
        fits = queued[nd] == 0
        if fits:
            for k in range(3):
                c = cap[nd, k]
                if req[s, k] > c - alloc[nd, k] - oalloc[nd, k] - taken[nd, k] + eps * c + 1e-12:
                    fits = False
                    break
        if fits:
            action[i] = 0
            for k in range(3):
                taken[nd, k] += req[s, k]
        elif queued[nd] < max_queue:
            action[i] = 1
            queued[nd] += 1
        else:
            action[i] = 2


@njit(cache=True)
def nm_fifo_starts(flat, indptr, nodes, req, cap, alloc, oalloc, room, eps, go):
    """How many queued containers start from the head of each node's queue (``flat`` in
    CSR form by ``indptr``): FIFO while the head fits what is available, the larger of the
    unallocated room and ``room`` (the headroom below the over-allocation threshold, cpu
    and mem; -inf off a utilization check; GPUs by allocation), resource by resource;
    each start takes its request off it (:func:`pipeline.sim.overalloc.available`)."""
    for i in range(len(nodes)):
        nd = nodes[i]
        avail = np.empty(3)
        for k in range(3):
            avail[k] = cap[nd, k] - alloc[nd, k] - oalloc[nd, k]
            if k < 2:
                avail[k] = max(avail[k], room[i, k])
        n = 0
        for j in range(indptr[i], indptr[i + 1]):
            s = flat[j]
            ok = True
            for k in range(3):
                if req[s, k] > avail[k] + eps * cap[nd, k] + 1e-12:
                    ok = False
                    break
            if not ok:
                break
            for k in range(3):
                avail[k] -= req[s, k]
            n += 1
        go[i] = n
