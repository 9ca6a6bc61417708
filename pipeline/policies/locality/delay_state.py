"""The named state of delay scheduling's compiled loop (:mod:`.kernel`).

``Offers``, ``Pending``, ``Jobs`` and ``Rule`` are what the policy hands the kernel per call
(:class:`~pipeline.policies.locality.delay.DelayScheduling`); ``Scan`` is the call's
working state, built once per call by :func:`scan`; the counters of ``Scan.tally`` are
indexed by the constants below.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.locality.candidates import Asks, csr, task_racks


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
def scan(offers, pending, jobs, rule, last_hb):
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
