"""The replay core: an event-driven, policy-blind, deterministic cluster simulation.

Events are task arrivals (streamed in submit order), completions (a heap ordered by
``(end_s, seq)``), node up/down (trace machines, booting elastic nodes), autoscaler deadlines
and policy wake-ups.  The clock jumps from event to event; there is no fixed tick loop.
Decisions are taken at *scheduling points*: the time of the next event rounded up to a grid
of ``sched_interval_s`` (YARN's ResourceManager allocates on NodeManager heartbeats,
``yarn.resourcemanager.nodemanagers.heartbeat-interval-ms`` = 1000 ms by default), so the
policy sees every request that arrived meanwhile as one batch.  ``sched_interval_s = 0``
makes every event time a scheduling point.  Completions keep their exact times.  The policy
is called only when something changed (new requests, freed resources, a node came up) or it
asked to be woken.

Determinism: all ties are broken by sequence numbers or slot/row order, randomness comes
only from the run's generator given to the policy, and outputs are flat per-task records
handed to a sink in chunks.  The core does no I/O and knows no policy by name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import numpy as np

from pipeline.sim import kernels
from pipeline.sim.admission import Admission
from pipeline.sim.cluster import FixedCluster
from pipeline.sim.columns import Finished
from pipeline.sim.contention import SpeedChanges, work_done
from pipeline.sim.decisions import DecisionStep
from pipeline.sim.deps import Dependencies
from pipeline.sim.gangs import Gangs
from pipeline.sim.gpus import GpuDevices
from pipeline.sim.heap import heap_top
from pipeline.sim.heartbeat import Heartbeats
from pipeline.sim.interface import ClusterInfo, Policy, PolicyError
from pipeline.sim.jobstats import JobStats
from pipeline.sim.models import GpuModels
from pipeline.sim.needs import Needs
from pipeline.sim.nodemanager import NodeManagers
from pipeline.sim.options import READ_MB_S, SimOptions, SimSummary
from pipeline.sim.pending import PendingQueue
from pipeline.sim.runs import RunStops
from pipeline.sim.source import Arrivals, TaskBatch
from pipeline.sim.speculation import Speculation
from pipeline.sim.tasks import (
    BLOCKED,
    CENSORED,
    IS_PARENT,
    N_DONE,
    NM_QUEUED,
    PENDING,
    PREEMPTED,
    REC_N,
    RUNNING,
    UNFINISHED,
    Heap,
    Records,
    RecordSink,
    TaskTable,
)
from pipeline.sim.usage import Usage
from pipeline.sim.views import PolicyViews

Cluster = FixedCluster  # or pipeline.sim.autoscaler.ElasticCluster (same duck type)

# Consecutive wake-ups that place nothing while nothing else can happen before the replay
# ends with the remaining tasks unfinished (a policy waiting on a condition that never comes).
MAX_IDLE_WAKES = 1000
# Scheduling points between two calls of the progress callback (cheap, and frequent enough:
# a 1 M-task replay has a few thousand points per second of wall time).
PROGRESS_EVERY = 256

class Simulation:
    """One replay of a task stream on a cluster through a policy.

    The core keeps the state and the loop; its components act on it at named points:
    ``admission`` (arriving tasks get slots), ``views`` (what the policy is shown),
    ``decisions`` (asking the policy and applying its decisions at each scheduling point),
    ``runs`` (runs that end early: stops, evictions, containers back to the RM),
    ``speculation`` (speculative copies: launched by the decision step, settled after each
    completion step, split off a stop, dropped at the end), ``speed_changes`` and ``nm``
    (the NodeManagers' queues), each typed against :class:`pipeline.sim.context.SimContext`.
    """

    def __init__(self, cluster: Cluster, policy: Policy, batches: Iterable[TaskBatch],
                 sink: RecordSink, *, users: tuple[str, ...] = ("",),
                 queues: tuple[str, ...] = ("",), dep_refs: dict[str, int] | None = None,
                 options: SimOptions | None = None,
                 rng: np.random.Generator | None = None,
                 units: dict[str, str] | None = None,
                 on_progress: Callable[[float], None] | None = None,
                 speed_changes: SpeedChanges | None = None,
                 gang_sizes: np.ndarray | None = None,
                 gpu_devices: np.ndarray | None = None,
                 gpu_models: np.ndarray | None = None) -> None:
        self.cluster = cluster
        # GPU model bits per node slot (pipeline.sim.models), None without model constraints
        self.models = (GpuModels(gpu_models, cluster.nodes.cap) if gpu_models is not None
                       else None)
        # GPU devices per node slot (pipeline.sim.gpus), None when no node has a GPU
        self.gpus = (GpuDevices(gpu_devices) if gpu_devices is not None
                     and np.any(np.asarray(gpu_devices) > 0) else None)
        # tasks in gangs start together or not at all (pipeline.sim.gangs); gang_sizes:
        # members per gang code, None when the trace has no gangs
        self.gangs = Gangs(gang_sizes) if gang_sizes is not None else None
        self.on_progress = on_progress  # told the simulated time now and then (no I/O here)
        self.policy = policy
        self.policy_name = getattr(policy, "name", type(policy).__name__)
        self.options = options or SimOptions()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.arrivals = Arrivals(batches)
        self.tasks = TaskTable()
        self.heap = Heap()
        self.records = Records(sink)
        self.deps = Dependencies(dep_refs or {})
        self.queue = PendingQueue()
        self.usage = Usage()
        self.nm: NodeManagers | None = None  # set in run() when the policy asks for one
        self._incoming: list[tuple[np.ndarray, np.ndarray]] = []
        nodes = cluster.nodes
        self.info = ClusterInfo(
            kind=cluster.kind, n_nodes=len(nodes), min_nodes=cluster.min_nodes,
            max_nodes=cluster.max_nodes, n_racks=cluster.n_racks, users=users, queues=queues,
            units=dict(units or {}),
        )
        self.now = -np.inf
        self.last_s = 0.0
        self.needs_decision = False
        self.wake_at = np.inf
        self._only_wake = False
        self.idle_calls = False
        self.needs = Needs()  # what the policy asked for, set in run() after its setup
        self.n_tasks = self.events = self.points = self.calls = self.placements = 0
        censor_at = self.options.censor_at_s
        self.open_flag = CENSORED if censor_at is not None else 0
        self._read_rate = np.asarray(self.options.read_mb_s, dtype=np.float64)
        # the core stops censored tasks itself only when the run goes on past that time
        self._censor_due = censor_at is not None and (
            self.options.horizon_s is None or censor_at < self.options.horizon_s)
        self._follow_slot = np.zeros(4096, dtype=np.int64)
        self._follow_end = np.zeros(4096)
        self._clock = np.zeros(1)  # the last completion's end
        self.job_stats: JobStats | None = None  # for policies that compare tasks with their job
        self.speed_changes = speed_changes  # machines' speeds over time (transient contention)
        if speed_changes is not None:
            self.tasks.enable_extras()
        # the components, called at the named points of the loop (see the class docstring)
        self.views = PolicyViews(self)
        self.decisions = DecisionStep(self)
        self.runs = RunStops(self, self.options.sched_interval_s, speed_changes is not None)
        self.speculation = Speculation(self)
        self.admission = Admission(self)

    def _next_speed_change(self) -> float:
        return np.inf if self.speed_changes is None else self.speed_changes.next_time()

    def _provide(self, needs: object) -> None:
        """Set up what the policy's ``setup`` asked for (:class:`~pipeline.sim.needs.Needs`)."""
        if not isinstance(needs, Needs):
            raise PolicyError(f"policy '{self.policy_name}': setup() returned "
                              f"{type(needs).__name__}, not Needs (pipeline.sim.needs)")
        self.needs = needs
        if needs.heartbeat_s:
            self.views.heartbeats = Heartbeats(
                len(self.cluster.nodes), float(needs.heartbeat_s), int(self.rng.integers(2**62)))
        if needs.node_managers is not None:
            self.nm = NodeManagers(len(self.cluster.nodes), needs.node_managers)
            self.tasks.enable_extras()
        self.idle_calls = needs.idle_calls
        if needs.job_stats:  # speculation rules
            self.job_stats = JobStats()
            self.tasks.enable_extras()

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> SimSummary:
        """Replay until the horizon (or, draining, until every task is accounted for)."""
        started = time.perf_counter()
        self._provide(self.policy.setup(self.info, self.rng))
        horizon = self.options.horizon_s
        idle_wakes, placed = 0, -1
        while not self._done():
            t = self._next_time()
            if t == np.inf:
                break
            # Liveness: with nothing running, arriving or booting, only the policy's own
            # wake-ups remain; if they keep placing nothing, the rest can never run.
            idle_wakes = idle_wakes + 1 if self._only_wake and placed == self.placements else 0
            if idle_wakes > MAX_IDLE_WAKES:
                break
            placed = self.placements
            if horizon is not None and t > horizon:
                break
            at = self._quantize(t)
            if horizon is not None:
                at = min(at, horizon)
            if self._censor_due and at >= self.options.censor_at_s:
                at = self.options.censor_at_s
                self._advance(at)
                self._censor(at)
            else:
                self._advance(at)
            if horizon is None or at < horizon:  # nothing starts when the replay stops
                if self.nm is not None:
                    self.nm.step(self, at)
                self.decisions.step(at)
                scaled = self.cluster.autoscale(at, self.queue.req, self.queue.enter)
                if self.cluster.drains:  # a cluster model that deletes busy nodes
                    drained = self.runs.scale_down(at)
                    if drained:  # the evicted pods are placed again at once
                        self.decisions.step(at)
                    scaled += drained
                if scaled:
                    self.events += scaled
                    self.last_s = max(self.last_s, at)
            self.now = at
            self.points += 1
            if self.on_progress is not None and self.points % PROGRESS_EVERY == 0:
                self.on_progress(at)
        end = self.last_s if horizon is None else horizon
        self._finish(end)
        return SimSummary(end, self.n_tasks, self.events, self.points, self.calls,
                          self.placements, time.perf_counter() - started,
                          self.gangs.held if self.gangs is not None else 0,
                          self.gpus.held if self.gpus is not None else 0,
                          self.models.held if self.models is not None else 0)

    def _done(self) -> bool:
        """Every task accounted for and, up to a horizon, no node event left before it."""
        busy = (len(self.queue) or self._incoming or self._n_running()
                or (self.nm is not None and self.nm.active))
        if not self.arrivals.exhausted or busy:
            return False
        horizon = self.options.horizon_s
        # With a horizon the cluster is measured until then: machines still go down and
        # idle elastic nodes are still released after the last task ends.
        return horizon is None or min(self.cluster.next_event(), self.cluster.next_check(
            self.now, self.queue.enter)) > horizon

    def _n_running(self) -> int:
        return int(self.tasks.counters[kernels.HEAP_N])  # upper bound (stale entries) is enough

    def _quantize(self, t: float) -> float:
        q = self.options.sched_interval_s
        return t if q <= 0 else max(t, float(np.ceil(t / q) * q))  # never before t (rounding)

    def _next_time(self) -> float:
        h, t = self.heap, self.tasks
        times = [
            self.arrivals.next_time(),
            heap_top(h.time, h.seq, h.slot, h.epoch, t.counters, t.epoch),
            self.cluster.next_event(),
            self.cluster.next_check(self.now, self.queue.enter),
            self._next_speed_change(),
        ]
        if self.nm is not None:
            times.append(self.nm.next_check(self.now))
        self._only_wake = min(times) == np.inf
        if self._censor_due:
            times.append(self.options.censor_at_s)
        if self.wake_at > self.now:
            times.append(self.wake_at)
        return min(times)

    def _advance(self, at: float) -> None:
        """Apply every usage change, completion, node event and arrival due at or before
        ``at`` (usage changes only move node ``used``, so their order among the others
        does not matter)."""
        n = self.cluster.nodes
        self.events += self.usage.advance(self.tasks, at, n.used, n.speed)
        while True:
            tn = self.cluster.next_event()
            ts = self._next_speed_change()
            if ts <= at and ts < tn:  # a machine's speed changes: re-time its runs
                self._complete(ts)
                assert self.speed_changes is not None
                self.speed_changes.apply(self, ts)
                continue
            self._complete(min(at, tn))
            if tn > at:
                break
            t, node, is_up = self.cluster.pop_event()
            self.events += 1
            self.last_s = max(self.last_s, t)
            if is_up:
                self.cluster.node_up(t, node)
                self.needs_decision = True
            else:
                self.runs.evict_node(t, node)
                self.cluster.node_down(t, node)
        for batch, lo, hi in self.arrivals.take(at):
            self._admit(batch, lo, hi)
            self.last_s = max(self.last_s, float(batch.submit[hi - 1]))

    def _complete(self, limit: float) -> None:
        t, h, n, r = self.tasks, self.heap, self.cluster.nodes, self.records
        if t.counters[kernels.HEAP_N] == 0 or h.time[0] > limit:
            return  # (the heap's earliest entry is later: nothing is due; spares a kernel
            # call, whose ~60 arrays cost ~9 us to pass, e.g. at each node event)
        before = int(t.counters[N_DONE])
        spec = self.speculation
        out = Finished(self._follow_slot, self._follow_end, self._clock, spec.due_slot,
                       spec.due_end, spec.n_due)
        while True:
            first = int(t.counters[REC_N])
            status, nf = kernels.complete_until(limit, h, t, n, r, out)
            if self.job_stats is not None:
                self._tally(first, int(t.counters[REC_N]))
            if nf:
                self._release_children(self._follow_slot[:nf].copy(), self._follow_end[:nf])
            spec.settle_due()  # attempts of speculated tasks: the first to finish wins
            if status == 0:
                break
            r.room(t.counters, 1)
        done = int(t.counters[N_DONE]) - before
        if done:
            self.events += done
            self.needs_decision = True
            self.last_s = max(self.last_s, float(self._clock[0]))

    def _tally(self, lo: int, hi: int) -> None:
        """Count the tasks the kernel just recorded finished (record rows ``lo:hi``)."""
        if hi > lo:
            r = self.records
            assert self.job_stats is not None
            self.job_stats.finish(r.job[lo:hi].astype(np.int64), r.kind[lo:hi].astype(np.int64),
                                  r.end[lo:hi] - r.start[lo:hi])

    def _release_children(self, slots: np.ndarray, ends: np.ndarray) -> None:
        for slot, end in zip(slots.tolist(), ends.tolist(), strict=True):
            ready = self.deps.finish(slot)
            self.tasks.release(np.array([slot]))
            if ready:
                kids = np.array(ready, dtype=np.int64)
                self.tasks.state[kids] = PENDING
                self.tasks.ready[kids] = end
                self._incoming.append((np.full(len(kids), end), kids))

    # -- arrivals ---------------------------------------------------------------------
    def _admit(self, b: TaskBatch, lo: int, hi: int) -> None:
        """Admit tasks ``lo:hi`` of ``b`` (:meth:`pipeline.sim.admission.Admission.admit`)."""
        self.admission.admit(b, lo, hi)

    def _merge_incoming(self) -> None:
        if not self._incoming:
            return
        enter = np.concatenate([e for e, _ in self._incoming])
        slots = np.concatenate([s for _, s in self._incoming])
        self._incoming.clear()
        order = np.lexsort((self.tasks.row[slots], enter))
        slots = slots[order]
        if self.tasks.extras_on:
            self.tasks.asks[slots] += 1
        self.queue.append(slots, enter[order], np.take(self.tasks.req, slots, axis=0),
                          self.tasks.job[slots])
        self.needs_decision = True

    # -- the window's end ------------------------------------------------------------
    def _censor(self, at: float) -> None:
        """Stop the censored tasks at ``at`` (the trace's window end): those running end
        ``unfinished`` there, those waiting are recorded ``unfinished`` and never start."""
        self._censor_due = False
        self._merge_incoming()
        t = self.tasks
        censored = (t.flags & CENSORED) != 0
        self.runs.stop(at, np.flatnonzero(censored & (t.state == RUNNING)), requeue=False,
                       outcome=UNFINISHED)
        queued = np.flatnonzero(censored[self.queue.slots])
        self._record_waiting(self.queue.remove(queued), at)
        if self.nm is not None:  # censored containers waiting at a NodeManager
            self._record_waiting(self.nm.take(self, censored), at)
        self._record_waiting(np.flatnonzero(censored & (t.state == BLOCKED)), at)
        self.last_s = max(self.last_s, at)

    def _record_waiting(self, slots: np.ndarray, at: float) -> None:
        """Record tasks that were waiting (queued or blocked) when the replay stopped them."""
        t = self.tasks
        outcome = np.where(t.last_preempted[slots], PREEMPTED, UNFINISHED).astype(np.int8)
        self.records.write_slots(t.counters, t, slots, outcome, np.nan,
                                 np.full(len(slots), -1), self.runs.remaining_work(at, slots))
        for s in slots[(t.flags[slots] & IS_PARENT) != 0].tolist():
            self.deps.fail(self.deps.slot_id[s], s)
        t.release(slots)

    def _finish(self, end: float) -> None:
        """Record every task still in flight or never submitted, and close the cluster.

        Tasks running at the end keep ``end_s`` null; ``remaining`` says how much of their
        work was left.  Tasks submitted after the end were never seen (remaining NaN).
        """
        self._merge_incoming()
        self.speculation.drop_running(end)
        t, c = self.tasks, self.tasks.counters
        inst = self.cluster.nodes.instance
        running = t.in_state(RUNNING)
        done = self.usage.stop(t, end, running, self.cluster.nodes.speed)
        if self.speed_changes is not None:
            done = work_done(t, self.cluster.nodes.speed, end, running)
        self.records.write_slots(c, t, running, UNFINISHED, np.nan, inst[t.node[running]],
                                 np.maximum(t.duration[running] - done, 0.0))
        nm_queued = self.nm.take(self) if self.nm is not None else t.in_state(NM_QUEUED)
        waiting = np.concatenate([self.queue.slots, t.in_state(BLOCKED), nm_queued])
        outcome = np.where(t.last_preempted[waiting], PREEMPTED, UNFINISHED).astype(np.int8)
        self.records.write_slots(c, t, waiting, outcome, np.nan, np.full(len(waiting), -1),
                                 self.runs.remaining_work(end, waiting))
        for b, lo, hi in self.arrivals.rest():
            self.n_tasks += hi - lo
            self.records.write_rows(c, b.row[lo:hi], b.job[lo:hi], UNFINISHED, np.nan)
        self.records.flush(c)
        self.cluster.close(end)


__all__ = ["READ_MB_S", "SimOptions", "SimSummary", "Simulation"]
