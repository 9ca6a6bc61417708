"""Delay scheduling over node heartbeats, written for reading (the reference of the kernel).

The same decisions as :func:`pipeline.policies.locality.kernel.delay_schedule`, with none of
its shortcuts (candidate lists, cursors, all-skipped heartbeats counted at once, lazy
waits): every heartbeat visits the jobs in fair order and every job's tasks are scanned.

Sources, as for the kernel: Zaharia et al., "Delay Scheduling: A Simple Technique for
Achieving Locality and Fairness in Cluster Scheduling", EuroSys 2010, Algorithm 2 (skip
count ``D``); Hadoop 1.x ``FairScheduler.getAllowedLocalityLevel`` (two-level time-based
waits: node delay ``W1``, rack delay ``W2``, ``skippedAtLastHeartbeat``).

At a heartbeat of a node with room (``TaskTracker.acceptNewTasks``), first every job
skipped at the previous heartbeat waits the time since then; then the node is offered to
the jobs in fair order (fewest running tasks, then job code) again and again until no job
launches.  A visited job launches, in order: a node-local task (skip count 0, level NODE,
wait 0); a task without input data; else the delay rule: skip count below ``D`` -> skipped
(count + 1); ``getAllowedLocalityLevel`` below RACK, or RACK without a rack-local task ->
skipped (``skippedAtLastHeartbeat``); else a rack-local task, or any task that fits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.policies.locality.delay_state import Jobs, Offers, Pending, Rule
from pipeline.policies.models import may_use

NODE_LOCAL, RACK_LOCAL, OFF_SWITCH = 0, 1, 2  # Hadoop 1's locality levels
NO_INPUT = -1  # the locality a task without input data is launched with
EPS = 1e-9  # room tolerance, as the kernel's


def fits(req: np.ndarray, free: np.ndarray, node: int) -> bool:
    """Whether a request ``req`` (cpu, mem, gpu) fits the free room of ``node``."""
    return all(req[r] <= free[node, r] + EPS for r in range(3))


def get_allowed_locality_level(level: int, wait: float, w1: float, w2: float) -> int:
    """Hadoop 1.x ``FairScheduler.getAllowedLocalityLevel`` (node delay ``w1``, rack
    delay ``w2``), from the job's last launch's locality ``level`` and its ``wait``."""
    if level == NODE_LOCAL:
        if wait >= w1 + w2:
            return OFF_SWITCH
        return RACK_LOCAL if wait >= w1 else NODE_LOCAL
    if level == RACK_LOCAL:
        return OFF_SWITCH if wait >= w2 else RACK_LOCAL
    return OFF_SWITCH


def locality(inputs: np.ndarray, node: int, rack_of: np.ndarray) -> int:
    """The locality of a task whose data is on ``inputs`` (-1 padded) if run on ``node``."""
    level = OFF_SWITCH
    for holder in inputs:
        if holder < 0:
            break
        if holder == node:
            return NODE_LOCAL
        if rack_of[node] >= 0 and rack_of[holder] == rack_of[node]:
            level = RACK_LOCAL
    return level


class Call:
    """One call's view of the pending tasks and the node room it updates."""

    def __init__(self, offers: Offers, pending: Pending) -> None:
        self.offers, self.pending = offers, pending
        self.launched = np.zeros(len(pending.ready), bool)
        self.smallest = (np.min(pending.req, axis=0) if len(pending.req)
                         else np.full(3, np.inf))

    def usable(self, i: int, node: int, now: float) -> bool:
        """Task ``i`` is unlaunched, ready by ``now``, fits ``node`` and may use its GPU."""
        p = self.pending
        return bool(not self.launched[i] and p.ready[i] <= now
                    and fits(p.req[i], self.offers.free, node)
                    and (len(p.allow) == 0 or may_use(p.allow[i], p.bits, node)))

    def accepts_new_tasks(self, node: int) -> bool:
        """The node has room for the smallest request and, with the shape filter, for some
        request shape still pending (``acceptNewTasks``)."""
        p, free = self.pending, self.offers.free
        if not all(free[node, r] + EPS >= self.smallest[r] for r in range(3)):
            return False
        if len(p.shape_of) == 0 or p.shape_of[0] < 0:
            return True
        return any(fits(p.shapes[s], free, node) for s in range(len(p.shapes))
                   if np.any((p.shape_of == s) & ~self.launched))

    def first_task(self, job: int, node: int, now: float, want: Callable[[int], bool]) -> int:
        """The job's first task (queue order) usable on ``node`` for which ``want(i)``."""
        p = self.pending
        for i in range(len(p.ready)):
            if p.job[i] == job and self.usable(i, node, now) and want(i):
                return i
        return -1

    def left_with_input(self, job: int) -> bool:
        """The job has unlaunched tasks with a locality preference."""
        p = self.pending
        return bool(np.any((p.job == job) & p.has_in & ~self.launched))

    def earliest_with_input(self, job: int) -> float:
        """Earliest ready time of the job's tasks with input (launched or not), s."""
        p = self.pending
        ready = p.ready[(p.job == job) & p.has_in]
        return float(ready.min()) if len(ready) else np.inf


def assign_task(call: Call, jobs: Jobs, rule: Rule, queue: list[int], node: int,
                now: float) -> tuple[int, int]:
    """Offer ``node`` to the jobs of ``queue`` in order: (task launched, its locality), or
    (-1, OFF_SWITCH) when every job is skipped or has nothing to run there."""
    p, rack_of = call.pending, call.offers.n_rack
    rack = rack_of[node]
    for j in queue:
        task = call.first_task(j, node, now, lambda i: bool(np.any(p.inputs[i] == node)))
        if task >= 0:
            return task, NODE_LOCAL
        task = call.first_task(j, node, now, lambda i: not p.has_in[i])
        if task >= 0:
            return task, NO_INPUT
        if not call.left_with_input(j) or call.earliest_with_input(j) > now:
            continue  # nothing of this job waits for locality: not visited
        if rule.mode == 0:  # Algorithm 2
            if jobs.skip[j] < rule.d:
                jobs.skip[j] += 1
                continue
        else:  # getAllowedLocalityLevel
            allowed = get_allowed_locality_level(jobs.level[j], jobs.wait[j], rule.w1, rule.w2)
            if allowed >= RACK_LOCAL and rack >= 0:
                task = call.first_task(j, node, now, lambda i: p.has_in[i] and any(
                    h >= 0 and rack_of[h] == rack for h in p.inputs[i]))
                if task >= 0:
                    return task, RACK_LOCAL
            if allowed != OFF_SWITCH:
                jobs.skipped[j] = True
                continue
        task = call.first_task(j, node, now, lambda i: bool(p.has_in[i]))
        if task >= 0:
            return task, locality(p.inputs[task], node, rack_of)
    return -1, OFF_SWITCH


def launch(call: Call, jobs: Jobs, queue: list[int], node: int, task: int,
           level: int) -> None:
    """Run ``task`` on ``node``: the job's locality state, the node's room, the fair order."""
    p = call.pending
    j = int(p.job[task])
    if level == NODE_LOCAL:
        jobs.skip[j] = 0
    if level != NO_INPUT:
        jobs.level[j] = level
        jobs.wait[j] = 0.0
        jobs.skipped[j] = False
    call.launched[task] = True
    for r in range(3):
        call.offers.free[node, r] -= p.req[task, r]
    jobs.running[j] += 1
    at = queue.index(j)  # move the job later past the jobs it now runs more tasks than
    while at + 1 < len(queue) and (jobs.running[queue[at + 1]], queue[at + 1]) < (
            jobs.running[j], j):
        queue[at], queue[at + 1] = queue[at + 1], j
        at += 1


def delay_schedule_reference(offers: Offers, pending: Pending, jobs: Jobs, rule: Rule,
                             last_hb: float, out_req: np.ndarray,
                             out_node: np.ndarray) -> tuple[int, float]:
    """Place pending tasks on the heartbeats ``offers`` as the kernel does; return
    (placements written to ``out_*``, time of the last heartbeat with room).  Updates
    ``offers.free`` and ``jobs`` (running, skip, level, wait, skipped) the same way."""
    call = Call(offers, pending)
    queue = [int(j) for j in pending.order]
    n = 0
    for node, now in zip(offers.node.tolist(), offers.time.tolist(), strict=True):
        if not call.accepts_new_tasks(node):
            continue
        for j in queue:  # skippedAtLastHeartbeat: waited since the previous heartbeat
            if jobs.skipped[j]:
                jobs.wait[j] += now - last_hb
                jobs.skipped[j] = False
        last_hb = now
        while not call.launched.all() and call.accepts_new_tasks(node):
            task, level = assign_task(call, jobs, rule, queue, node, now)
            if task < 0:
                break
            launch(call, jobs, queue, node, task, level)
            out_req[n], out_node[n] = task, node
            n += 1
    return n, last_hb
