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
from dataclasses import dataclass

import numpy as np

from pipeline.sim import kernels
from pipeline.sim.cluster import FixedCluster
from pipeline.sim.columns import Finished
from pipeline.sim.contention import SpeedChanges, work_done
from pipeline.sim.deps import Dependencies
from pipeline.sim.gangs import Gangs
from pipeline.sim.gpus import GpuDevices
from pipeline.sim.heap import heap_top
from pipeline.sim.heartbeat import Heartbeats
from pipeline.sim.interface import ClusterInfo, NodeView, Policy, PolicyError, readonly
from pipeline.sim.jobstats import JobStats
from pipeline.sim.models import GpuModels
from pipeline.sim.needs import Needs
from pipeline.sim.nodemanager import NodeManagers
from pipeline.sim.ops import Operations
from pipeline.sim.pending import PendingQueue
from pipeline.sim.source import Arrivals, TaskBatch
from pipeline.sim.speculation import Speculating
from pipeline.sim.tasks import (
    BLOCKED,
    CENSORED,
    HAS_INPUTS,
    IS_PARENT,
    N_DONE,
    NM_QUEUED,
    PENDING,
    PREEMPTED,
    REC_N,
    RUNNING,
    UNFINISHED,
    UNSCHEDULABLE,
    Heap,
    Records,
    RecordSink,
    TaskTable,
)
from pipeline.sim.usage import Usage

Cluster = FixedCluster  # or pipeline.sim.autoscaler.ElasticCluster (same duck type)

# Consecutive wake-ups that place nothing while nothing else can happen before the replay
# ends with the remaining tasks unfinished (a policy waiting on a condition that never comes).
MAX_IDLE_WAKES = 1000
# Scheduling points between two calls of the progress callback (cheap, and frequent enough:
# a 1 M-task replay has a few thousand points per second of wall time).
PROGRESS_EVERY = 256
# MiB/s a task reads its input at: node-local (one disk), rack-local (through the top-of-rack
# switch), off-rack (through the oversubscribed core).  Chosen so that a task that only reads
# runs twice as fast node-local as off-rack, as the delay-scheduling paper measured for
# IO-heavy work (Zaharia et al., EuroSys 2010, section 5: "up to 2x"); a 128 MiB HDFS block
# takes 1 s, 1.33 s and 2 s.
READ_MB_S = (128.0, 96.0, 64.0)


@dataclass(frozen=True)
class SimOptions:
    """Knobs of the core that are not the policy's: batching grid, horizon and censoring.

    ``horizon_s``: the replay stops there (the trace window's end, by default): tasks still
    running or waiting end ``unfinished`` and every node still provisioned is released
    there, so a fixed cluster is measured over exactly the window.  ``None`` drains: the
    replay runs until every task is accounted for.
    ``censor_at_s``: tasks the trace records as still running at its window's end
    (``censored``) have no known end: they run until this time and are then stopped
    (``unfinished``), never restarted beyond it.  ``None`` runs them for their recorded
    duration like any other task.
    """

    sched_interval_s: float = 1.0
    horizon_s: float | None = None
    censor_at_s: float | None = None
    read_mb_s: tuple[float, float, float] = READ_MB_S


@dataclass
class SimSummary:
    """What the core counted while running (the records carry the rest)."""

    end_s: float
    tasks: int
    events: int
    scheduling_points: int
    policy_calls: int
    placements: int
    sim_s: float = 0.0
    # placements held back because their gang was not placed whole (pipeline.sim.gangs)
    gang_held: int = 0
    # placements held back because their GPU request fit no device (pipeline.sim.gpus)
    gpu_held: int = 0
    # placements held back: the node's GPU model is not one the task allows
    # (pipeline.sim.models)
    gpu_model_held: int = 0


class Simulation(Operations, Speculating):
    """One replay of a task stream on a cluster through a policy."""

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
        self.node_view = NodeView(
            cap=readonly(nodes.cap), alloc=readonly(nodes.alloc), used=readonly(nodes.used),
            n_containers=readonly(nodes.ncont), state=readonly(nodes.state),
            speed=readonly(nodes.speed), rack=readonly(nodes.rack),
            opp_alloc=readonly(nodes.oalloc), opp_queued=readonly(nodes.oppq),
            opp_oldest_s=readonly(nodes.oppq_since), done=readonly(nodes.done),
            done_run_s=readonly(nodes.done_s),
            gpu_free=readonly(self.gpus.free) if self.gpus is not None else None,
            gpu_model=readonly(self.models.bits) if self.models is not None else None,
        )
        if self.gpus is not None:  # the GPU a request cannot use, as policies see it
            self._view_alloc = nodes.alloc.copy()
            self.node_view.alloc = readonly(self._view_alloc)
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
        self._heartbeats: Heartbeats | None = None  # set in run(), after the policy's setup
        self._hb_from = -np.inf
        # the core stops censored tasks itself only when the run goes on past that time
        self._censor_due = censor_at is not None and (
            self.options.horizon_s is None or censor_at < self.options.horizon_s)
        self._follow_slot = np.zeros(4096, dtype=np.int64)
        self._follow_end = np.zeros(4096)
        self._clock = np.zeros(1)  # the last completion's end
        self._spec_slot = np.zeros(4096, dtype=np.int64)  # SPEC completions to settle
        self._spec_end = np.zeros(4096)
        self._n_spec = np.zeros(1, dtype=np.int64)
        self.job_stats: JobStats | None = None  # for policies that compare tasks with their job
        self.speed_changes = speed_changes  # machines' speeds over time (transient contention)
        if speed_changes is not None:
            self.tasks.enable_extras()

    def _next_speed_change(self) -> float:
        return np.inf if self.speed_changes is None else self.speed_changes.next_time()

    def work_done(self, at: float, slots: np.ndarray) -> np.ndarray:
        """Work (s at speed 1.0) running ``slots`` have done at ``at`` on machines whose
        speed changed (:func:`pipeline.sim.contention.work_done`)."""
        return work_done(self.tasks, self.cluster.nodes.speed, at, slots)

    def _provide(self, needs: object) -> None:
        """Set up what the policy's ``setup`` asked for (:class:`~pipeline.sim.needs.Needs`)."""
        if not isinstance(needs, Needs):
            raise PolicyError(f"policy '{self.policy_name}': setup() returned "
                              f"{type(needs).__name__}, not Needs (pipeline.sim.needs)")
        self.needs = needs
        if needs.heartbeat_s:
            self._heartbeats = Heartbeats(len(self.cluster.nodes), float(needs.heartbeat_s),
                                          int(self.rng.integers(2**62)))
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
                self._schedule(at)
                scaled = self.cluster.autoscale(at, self.queue.req, self.queue.enter)
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
                self._evict_node(t, node)
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
        out = Finished(self._follow_slot, self._follow_end, self._clock, self._spec_slot,
                       self._spec_end, self._n_spec)
        while True:
            first = int(t.counters[REC_N])
            status, nf = kernels.complete_until(limit, h, t, n, r, out)
            if self.job_stats is not None:
                self._tally(first, int(t.counters[REC_N]))
            if nf:
                self._release_children(self._follow_slot[:nf].copy(), self._follow_end[:nf])
            ns = int(self._n_spec[0])
            if ns:  # attempts of speculated tasks: the first of each to finish wins
                self._n_spec[0] = 0
                self.settle_completions(self._spec_slot[:ns].copy(), self._spec_end[:ns].copy())
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
        """Admit tasks ``lo:hi`` of ``b``: unschedulable ones are recorded, others get slots."""
        self.n_tasks += hi - lo
        self.events += hi - lo
        fits = self.cluster.fits_some(b.req[lo:hi])
        if self.models is not None and b.allow is not None:
            fits &= self.models.fits(b.req[lo:hi], b.allow[lo:hi])
        bad = np.flatnonzero(~fits)
        if len(bad):
            self.records.write_rows(self.tasks.counters, b.row[lo:hi][bad],
                                    b.job[lo:hi][bad], UNSCHEDULABLE)
            for i in bad.tolist():
                if lo + i in b.task_id:
                    self.deps.fail(b.task_id[lo + i])
        local = np.flatnonzero(fits) + lo
        if len(local) == 0:
            return
        t = self.tasks
        slots = t.alloc(len(local))  # free slots come reset (kernel or release)
        t.row[slots] = b.row[local]
        if t.extras_on:  # (lazy fields of a reused slot are not reset by the kernel)
            t.asks[slots] = 0
        t.submit[slots] = b.submit[local]
        t.ready[slots] = b.submit[local]
        t.duration[slots] = b.duration[local]
        t.req[slots] = b.req[local]
        t.used[slots] = b.used[local]
        self.usage.admit(t, slots, b.usage_of(local))
        for name in ("user", "queue", "job", "priority"):
            getattr(t, name)[slots] = getattr(b, name)[local]
        t.kind[slots] = b.kind[local] if b.kind is not None else 0
        if self.job_stats is not None:
            self.job_stats.arrive(t.job[slots].astype(np.int64), t.kind[slots].astype(np.int64))
        t.state[slots] = PENDING
        if self.open_flag and b.censored is not None:
            t.flags[slots[b.censored[local]]] |= CENSORED
        # (the completion kernel resets only what every run uses: a reused slot keeps these
        # until they are set, so they are set for every task of a run that uses them)
        t.requested[slots] = b.requested[local] if b.requested is not None else np.nan
        if self.models is not None:
            t.allow[slots] = b.allow[local] if b.allow is not None else 0
        if self.gangs is not None:
            self.gangs.arrive(t, slots, b.gang[local] if b.gang is not None
                              else np.full(len(local), -1, dtype=np.int64))
        if b.recorded_start is not None:
            t.recorded_start[slots] = b.recorded_start[local]
            t.recorded_node[slots] = b.recorded_node[local]
        if b.inputs is not None:
            t.inp[slots] = b.inputs[local]
            has = b.has_inputs[local]
            t.flags[slots[has]] |= HAS_INPUTS
            t.inputs_on = t.inputs_on or bool(has.any())
        if b.input_mb is not None:
            t.input_mb[slots] = b.input_mb[local]
        if b.deps or b.task_id:
            self._admit_sparse(b, local, slots)
        ok = t.state[slots] == PENDING
        self._incoming.append((t.submit[slots[ok]], slots[ok]))

    def _admit_sparse(self, b: TaskBatch, local: np.ndarray, slots: np.ndarray) -> None:
        t = self.tasks
        for i, slot in zip(local.tolist(), slots.tolist(), strict=True):
            if i in b.task_id and self.deps.is_parent(b.task_id[i]):
                self.deps.slot_id[slot] = b.task_id[i]
                t.flags[slot] |= IS_PARENT
            if i in b.deps and not self.deps.arrive(slot, b.deps[i]):
                t.state[slot] = BLOCKED
                t.ready[slot] = np.nan

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
        self._stop(at, np.flatnonzero(censored & (t.state == RUNNING)), requeue=False,
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
                                 np.full(len(slots), -1), self.remaining_work(at, slots))
        for s in slots[(t.flags[slots] & IS_PARENT) != 0].tolist():
            self.deps.fail(self.deps.slot_id[s], s)
        t.release(slots)

    def _finish(self, end: float) -> None:
        """Record every task still in flight or never submitted, and close the cluster.

        Tasks running at the end keep ``end_s`` null; ``remaining`` says how much of their
        work was left.  Tasks submitted after the end were never seen (remaining NaN).
        """
        self._merge_incoming()
        self.drop_running_copies(end)
        t, c = self.tasks, self.tasks.counters
        inst = self.cluster.nodes.instance
        running = t.in_state(RUNNING)
        done = self.usage.stop(t, end, running, self.cluster.nodes.speed)
        if self.speed_changes is not None:
            done = self.work_done(end, running)
        self.records.write_slots(c, t, running, UNFINISHED, np.nan, inst[t.node[running]],
                                 np.maximum(t.duration[running] - done, 0.0))
        nm_queued = self.nm.take(self) if self.nm is not None else t.in_state(NM_QUEUED)
        waiting = np.concatenate([self.queue.slots, t.in_state(BLOCKED), nm_queued])
        outcome = np.where(t.last_preempted[waiting], PREEMPTED, UNFINISHED).astype(np.int8)
        self.records.write_slots(c, t, waiting, outcome, np.nan, np.full(len(waiting), -1),
                                 self.remaining_work(end, waiting))
        for b, lo, hi in self.arrivals.rest():
            self.n_tasks += hi - lo
            self.records.write_rows(c, b.row[lo:hi], b.job[lo:hi], UNFINISHED, np.nan)
        self.records.flush(c)
        self.cluster.close(end)
