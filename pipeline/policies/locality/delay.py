"""``delay-scheduling``: fair sharing with delay scheduling, as the paper and Hadoop 1 HFS.

Source: M. Zaharia, D. Borthakur, J. Sen Sarma, K. Elmeleegy, S. Shenker, I. Stoica, "Delay
Scheduling: A Simple Technique for Achieving Locality and Fairness in Cluster Scheduling",
EuroSys 2010: Algorithm 2 (skip count ``D``) and the two-level time-based form of its
section 5 as Hadoop 1.x's Fair Scheduler implements it (apache/hadoop-common branch-1,
``FairScheduler.getAllowedLocalityLevel``: one wait for node -> rack and one for rack ->
any; ``timeWaitedForLocalMap`` grows only for jobs skipped at the previous heartbeat and is
reset by a launch, ``lastMapLocalityLevel`` is the launched task's locality).

Choices, and why:

- Scheduling opportunities are node heartbeats, modelled once in the core
  (:mod:`pipeline.sim.heartbeat`): every node reports every ``heartbeat_s`` (Hadoop 1's
  TaskTracker minimum, 3 s), in an order that changes each interval.
- Fair sharing is the paper's: jobs in increasing order of running tasks (ties: trace
  order); no pools, weights or minimum shares (the paper's algorithms do not have them).
- Resources, not slots: a node offers room, and a task launches where its request fits
  (tracereplay's machines have cpu/memory, and slots would hide the traces' sizes).
  A heartbeat launches tasks until no job launches (Hadoop 1 assigns a task per free slot).
- Tasks without input data (reduces; jobs whose inputs are unknown) are never delayed.
- ``delay=skip`` is Algorithm 2 (a job that was skipped ``skip_count`` times may launch a
  non-local task; only a local launch resets the count); ``delay=time`` is HFS with
  ``node_wait_s`` (W1) and ``rack_wait_s`` (W2); unset, both are Hadoop 1's automatic
  ``localityDelay`` = 1.5 heartbeats (capped at 15 s).

The compiled decision loop is :func:`pipeline.policies.locality.kernel.delay_schedule`.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.base import Param, PolicyBase
from pipeline.policies.locality.delay_state import Jobs, Offers, Pending, Rule
from pipeline.policies.locality.gate import grown
from pipeline.policies.locality.kernel import schedule
from pipeline.policies.models import model_masks, pending_allow
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs

AUTO_DELAY_CAP_S = 15.0  # MAX_AUTOCOMPUTED_LOCALITY_DELAY, Hadoop 1 FairScheduler
MAX_SHAPES = 64  # distinct request shapes tested per heartbeat before any job is visited


class DelayScheduling(PolicyBase):
    """Fair sharing over heartbeats, delaying jobs for node-local (then rack-local) tasks."""

    name = "delay-scheduling"
    summary = ("Fair sharing with delay scheduling (jobs wait a few heartbeats for a node "
               "holding their data)")
    source = ("Zaharia et al., 'Delay Scheduling', EuroSys 2010 (Algorithm 2); Hadoop 1.x "
              "FairScheduler.getAllowedLocalityLevel (two-level time-based delay)")
    PARAMS: ClassVar[dict[str, Param]] = {
        "delay": Param("time", "skip: Algorithm 2 skip count; time: HFS node/rack waits", str,
                       choices=("skip", "time")),
        "skip_count": Param(10, "delay=skip: heartbeats a job is skipped before it may run "
                            "a non-local task (D; 0 = naive fair sharing)", int, 0),
        "node_wait_s": Param(None, "delay=time: wait before rack-local (W1; default 1.5 "
                             "heartbeats, at most 15 s)", float, 0.0),
        "rack_wait_s": Param(None, "delay=time: further wait before off-rack (W2; default "
                             "as node_wait_s)", float, 0.0),
        "heartbeat_s": Param(3.0, "seconds between a node's heartbeats (Hadoop 1: 3 s at "
                             "least)", float, 1e-3),
    }

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        super().setup(cluster, rng)
        auto = min(AUTO_DELAY_CAP_S, 1.5 * self.heartbeat_s)
        self.w1_ = auto if self.node_wait_s is None else float(self.node_wait_s)
        self.w2_ = self.w1_ if self.rack_wait_s is None else float(self.rack_wait_s)
        self.skip_ = np.zeros(0, np.int64)
        self.level_ = np.zeros(0, np.int8)
        self.wait_ = np.zeros(0)
        self.skipped_ = np.zeros(0, np.bool_)
        self.running_ = np.zeros(0, np.int64)  # running tasks, set for the pending jobs only
        self.slot_ = np.zeros(0, np.int64)  # -1 between calls (the kernel's job -> index)
        self.last_hb_ = -np.inf
        return Needs(running=True, heartbeat_s=float(self.heartbeat_s))

    def _grow(self, n: int) -> None:
        self.skip_, self.level_ = grown(self.skip_, n, 0), grown(self.level_, n, 0)
        self.wait_, self.skipped_ = grown(self.wait_, n, 0.0), grown(self.skipped_, n, False)
        self.running_, self.slot_ = grown(self.running_, n, 0), grown(self.slot_, n, -1)

    def decide(self, view: SchedView) -> Decisions:
        pend = view.pending
        wake = view.now + self.heartbeat_s if len(pend) else None
        assert view.offers is not None and view.running is not None
        off_node, off_time = view.offers
        if len(pend) == 0 or len(off_node) == 0:
            return Decisions(wake_at_s=wake)
        job = np.asarray(pend.job, dtype=np.int64)
        run_job = np.asarray(view.running.job, dtype=np.int64)
        n_jobs = int(max(job.max(), run_job.max() if len(run_job) else 0)) + 1
        self._grow(n_jobs)
        jobs = np.unique(job)
        running = self._running(jobs, run_job)
        order = jobs[np.lexsort((jobs, running[jobs]))]
        nodes = view.nodes
        free = np.where((nodes.state == 2)[:, None], nodes.cap - nodes.alloc, 0.0)
        has_in = pend.inputs[:, 0] >= 0  # data on no node here (elastic): no preference
        req = np.asarray(pend.req)
        shapes, shape_of = unique_rows(req)
        if len(shapes) > MAX_SHAPES:  # too many to test one by one: no shape filter
            shapes, shape_of = np.full((1, 3), np.inf), np.full(len(req), -1)
        out_req = np.empty(len(job), np.int64)
        out_node = np.empty(len(job), np.int64)
        offers = Offers(off_node, off_time, free, np.asarray(nodes.rack))
        tasks = Pending(np.asarray(pend.ready_s), req, job, np.asarray(pend.inputs), has_in,
                        order, np.ascontiguousarray(shapes, dtype=np.float64),
                        np.asarray(shape_of, dtype=np.int64).ravel(),
                        *model_masks(nodes, pending_allow(view)))
        jobs_state = Jobs(running, self.skip_, self.level_, self.wait_, self.skipped_,
                          self.slot_)
        rule = Rule(0 if self.delay == "skip" else 1, int(self.skip_count), self.w1_, self.w2_)
        n, self.last_hb_ = schedule(offers, tasks, jobs_state, rule, self.last_hb_,
                                    out_req, out_node)
        return Decisions(place_req=out_req[:n], place_node=out_node[:n], wake_at_s=wake)

    def _running(self, jobs: np.ndarray, run_job: np.ndarray) -> np.ndarray:
        """Running tasks per job code, right for the pending ``jobs`` (the kernel reads no
        other entry): counted over the running tasks of those jobs only, so a call costs the
        tasks in flight, not the trace's job count."""
        slot = self.slot_
        slot[jobs] = np.arange(len(jobs))
        of = slot[run_job]
        counts = np.bincount(of[of >= 0], minlength=len(jobs))
        slot[jobs] = -1
        self.running_[jobs] = counts
        return self.running_


def unique_rows(req: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(req, axis=0, return_inverse=True)`` for a 2-d float array: the distinct
    rows in lexicographic order and each row's index among them.  A lexsort of the columns
    runs several times faster than numpy's sort of rows as records, and a large backlog asks
    for this at every scheduling point."""
    if len(req) == 0:
        return req[:0], np.zeros(0, np.int64)
    order = np.lexsort(req.T[::-1])
    ranked = req[order]
    first = np.empty(len(req), np.bool_)
    first[0] = True
    np.any(ranked[1:] != ranked[:-1], axis=1, out=first[1:])
    inverse = np.empty(len(req), np.int64)
    inverse[order] = np.cumsum(first) - 1
    return ranked[first], inverse

