"""The policy interface: what a scheduling policy sees, what it returns, what the core checks.

The replay core (:mod:`pipeline.sim.core`) is policy-blind.  At each *scheduling point* it
hands the policy one read-only :class:`SchedView` and applies the :class:`Decisions` it gets
back.  The interface covers every policy family the project plans (uniform and packing
placement, Capacity/Fair/DRF queues and users, preemption and kills, delay scheduling for
data locality, opportunistic containers driven by measured usage, speculative copies on slow
machines), so adding one is a new class, never a change to the core.

What a policy sees (all numpy arrays are read-only; resources are ``(cpu, mem, gpu)`` in the
trace's units; node arrays are indexed by *node slot* ``0..n_nodes-1``, fixed for the run):

``view.now``
    Simulated time of the scheduling point (s).
``view.cluster`` (:class:`ClusterInfo`, static)
    ``kind`` (``fixed``/``elastic``), ``n_nodes``, ``min_nodes``/``max_nodes`` (elastic only,
    else ``None``), ``n_racks``, ``users``/``queues`` (names by code: Capacity/Fair/DRF
    policies key their queue and user settings on them).  Randomness comes only from the
    generator passed to ``setup`` (seeded from the run's identity).
``view.nodes`` (:class:`NodeView`)
    ``cap`` (n, 3) capacities; ``alloc`` (n, 3) allocated by running guaranteed containers
    (what the RM accounts); ``opp_alloc`` (n, 3) allocated by running opportunistic
    containers, ``opp_queued`` (n,) opportunistic containers queued at each NodeManager and
    ``opp_oldest_s`` (n,) when its oldest queued one joined the queue (NaN: none);
    ``used`` (n, 2) measured cpu/mem usage of all running containers, following each task's
    usage over time where the trace has it (its mean, else its request, elsewhere);
    ``n_containers``; ``state`` (0 absent, 1 booting, 2 up, 3 down) and ``up`` (bool);
    ``speed`` (relative, 1.0 = nominal); ``rack`` (int code, -1 none); ``gpu_free`` (n, D)
    free milli-GPU per device (-1: no such device; None without GPUs); ``n_provisioned``
    (nodes billed now, booting included); ``changed``: node slots whose state or allocation
    changed since this policy's previous call (all nodes on the first call), so a policy can
    keep incremental indexes.
``view.pending`` (:class:`PendingView`), requests in queue order (arrival order to the
    queue; re-queued tasks at the back); attributes are gathered on first access:
    ``req`` (m, 3), ``used`` (m, 2, NaN where unmeasured), ``user``/``queue``/``job`` (int
    codes), ``priority``, ``submit_s``, ``ready_s`` (when it became pending: submit, or its
    last parent's end), ``wait_s`` (now - ready), ``attempts`` (starts so far), ``asks``
    (times it joined this queue: a request again after a kill, preemption or rejection),
    ``inputs`` ((m, INPUT_WIDTH) node slots holding the task's input data, -1 padded; the
    same as a CSR list in ``inputs_indptr``/``inputs_node``), ``input_mb`` (MiB it reads),
    ``row`` (the task's row in the trace, stable across runs), ``recorded_node`` and
    ``recorded_start_s`` (where and when the trace ran it: -1 / NaN where not recorded),
    ``requested_s`` (the run time the user asked for, NaN where not stated) and ``gang``
    (the task's gang code, -1: none), both also on ``view.running``.
``view.running`` (:class:`RunningView`, only built for a policy whose ``setup`` returned
    ``Needs(running=True)``, :mod:`pipeline.sim.needs`): the running containers with
    ``node``, ``req``, ``used``, ``user``, ``queue``, ``job``, ``priority``, ``start_s``,
    ``progress`` (fraction of work done), ``attempts``, ``row`` (the task's trace row, a
    stable identity across calls), ``kind`` (0 one phase,
    1 map, 2 reduce), ``speculative`` (a copy), ``has_copy`` (an original whose copy runs),
    ``copies`` (copies launched for the task so far), and as when pending
    ``ready_s``, ``inputs`` (with its CSR form) and ``input_mb``.

What a policy returns (:class:`Decisions`; index arrays are int64):

- ``place_req``/``place_node``: pending index -> node slot, applied in order.
- ``preempt``: running indices to stop and re-queue (counted as preemptions; run time lost).
- ``kill``: running indices to stop for good (outcome ``killed``).
- ``opp_req``/``opp_node``: opportunistic containers sent to nodes' NodeManagers, which
  start, queue or reject them (:mod:`pipeline.sim.nodemanager`); only for a policy whose
  ``setup`` returned the NodeManagers' settings (``Needs.node_managers``).
  ``opp_queue_limit``: the queue limit the RM pushes to every NodeManager (queued
  containers beyond it are sent back to the RM).
- ``spec_run``/``spec_node``: speculative copies: running index -> node slot
  (:mod:`pipeline.sim.speculation`; the first attempt to finish wins, the other is killed).
  Checked: the container is running (not stopped in the same call), is not itself a copy,
  its task has no running copy, the node is up, not the original's, and has room after the
  call's guaranteed placements.
- ``wake_at_s``: ask for a scheduling point at that time even if nothing else happens (delay
  scheduling, timeouts); otherwise the core calls the policy only when something changed
  while requests wait, or, for a policy with ``Needs.idle_calls``, when
  something changed at all (a task ended, a node came or went).

What the core checks: indices in range, each request placed at most once, the node up, and
the placement fitting the node's free capacity in every resource after the earlier
decisions of the same call (preemptions and kills are applied first; a relative slack of
1e-9 absorbs float drift).  A violation raises :class:`PolicyError` naming
the policy, the request and the node: no policy can overcommit a node by accident.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar, Protocol

import numpy as np

from pipeline.sim.gather import gather
from pipeline.sim.needs import Needs
from pipeline.sim.tasks import OPPORTUNISTIC, run_share

EMPTY = np.zeros(0, dtype=np.int64)
EMPTY.flags.writeable = False


class PolicyError(RuntimeError):
    """A policy returned a decision the core refuses (a bug in the policy, not in the input)."""


def readonly(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array`` (the data stays shared)."""
    view = array.view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True)
class ClusterInfo:
    """Static facts about the cluster a policy is set up for."""

    kind: str
    n_nodes: int
    min_nodes: int | None
    max_nodes: int | None
    n_racks: int
    users: tuple[str, ...]
    queues: tuple[str, ...]
    units: dict[str, str] = field(default_factory=dict)  # the trace manifest's units


@dataclass
class NodeView:
    """Read-only node state, one row per node slot."""

    cap: np.ndarray
    alloc: np.ndarray
    used: np.ndarray
    n_containers: np.ndarray
    state: np.ndarray
    speed: np.ndarray
    rack: np.ndarray
    changed: np.ndarray = field(default_factory=lambda: EMPTY)
    n_provisioned: int = 0
    opp_alloc: np.ndarray | None = None
    opp_queued: np.ndarray | None = None
    opp_oldest_s: np.ndarray | None = None  # when each node's oldest queued one was queued
    done: np.ndarray | None = None  # tasks finished on each node's current incarnation
    done_run_s: np.ndarray | None = None  # and their summed run times (s)
    # free share of each GPU device (milli-GPU, -1: no such device), None without GPUs
    # (pipeline.sim.gpus: the core binds devices and holds back what fits none; with
    # devices, alloc[:, 2] is the GPU no request can use: capacity minus the room)
    gpu_free: np.ndarray | None = None
    # each node's GPU model bit (0: none named), None when the replay has no model
    # constraints (pipeline.sim.models: a task may run where ``allow & bit`` or allow is 0)
    gpu_model: np.ndarray | None = None

    @property
    def up(self) -> np.ndarray:
        """Whether each node slot can take containers now."""
        return self.state == 2


class _TaskColumns:
    """Columns of a set of task slots, each gathered from the task table on first access."""

    _COLUMNS: ClassVar[tuple[str, ...]] = ("req", "used", "user", "queue", "job", "priority",
                                           "attempts", "row", "kind", "requested", "gang",
                                           "allow", "asks")
    _slots: np.ndarray
    _t: object

    def __len__(self) -> int:
        return len(self._slots)

    def _take(self, name: str) -> np.ndarray:
        # compiled (pipeline.sim.gather): faster than np.take, itself far faster than a
        # fancy index for the rows of an (n, k) column
        return readonly(gather(getattr(self._t, name), self._slots))

    def rows_of(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(this view's slots, the task table's whole column ``name``), both read-only, for
        a compiled pass that reads each row once where it is: row ``i`` of the view is
        ``column[slots[i]]``.  A gathered column is a copy of ~10^5 scattered rows at every
        call (about 0.5 ms for the requests of the bench's 93k running containers), read
        again right after by such a pass."""
        if name not in self._COLUMNS:
            raise AttributeError(f"{type(self).__name__} has no column {name!r}")
        return readonly(self._slots), readonly(getattr(self._t, name))

    def take(self, name: str, index: np.ndarray) -> np.ndarray:
        """Column ``name`` at positions ``index`` only (cheaper than the whole column when a
        policy needs a few entries, e.g. the rows of the requests it places)."""
        if name not in self._COLUMNS:
            raise AttributeError(f"{type(self).__name__} has no column {name!r}")
        if name in self.__dict__:  # already gathered whole
            return readonly(np.take(self.__dict__[name], index, axis=0))
        slots = np.take(self._slots, np.asarray(index, dtype=np.int64))  # checks ``index``
        return readonly(gather(getattr(self._t, name), slots))

    @cached_property
    def req(self) -> np.ndarray:
        return self._take("req")

    @cached_property
    def used(self) -> np.ndarray:
        return self._take("used")

    @cached_property
    def user(self) -> np.ndarray:
        return self._take("user")

    @cached_property
    def queue(self) -> np.ndarray:
        return self._take("queue")

    @cached_property
    def job(self) -> np.ndarray:
        return self._take("job")

    @cached_property
    def priority(self) -> np.ndarray:
        return self._take("priority")

    @cached_property
    def attempts(self) -> np.ndarray:
        return self._take("attempts")

    @cached_property
    def row(self) -> np.ndarray:
        """The task's row in the trace: a stable identity across calls."""
        return self._take("row")

    @cached_property
    def asks(self) -> np.ndarray:
        """Times the task has joined the RM's queue (1: its first request; one more each
        time it is asked for again after a kill, preemption, eviction or a NodeManager
        giving it back), so a request is told from the same task's earlier ones.  Kept
        only in replays with NodeManagers or usage profiles (zeros elsewhere)."""
        if not self._t.extras_on:  # type: ignore[attr-defined]
            return readonly(np.zeros(len(self._slots), dtype=np.int32))
        return self._take("asks")

    @cached_property
    def kind(self) -> np.ndarray:
        """The task's kind code (pipeline.sim.tasks.KINDS: 0 one phase, 1 map, 2 reduce)."""
        return self._take("kind")

    # Columns both views have: a running task's are those it had while pending (a policy
    # that weighs running work, e.g. Quincy's running arcs, reads them here).
    @cached_property
    def ready_s(self) -> np.ndarray:
        """When each task became ready (submit, or its last parent's end)."""
        return self._take("ready")

    @cached_property
    def inputs(self) -> np.ndarray:
        """(n, INPUT_WIDTH) node slots holding each task's input, -1 padded."""
        return self._take("inp")

    @cached_property
    def has_inputs(self) -> np.ndarray:
        """Whether each task's input is on some node here (``inputs[:, 0] >= 0``), without
        gathering the whole ``inputs`` block (a policy asking "does any request have
        data?" at every call reads one column, not eight)."""
        if "inputs" in self.__dict__:
            return readonly(self.__dict__["inputs"][:, 0] >= 0)
        if not self._t.inputs_on:  # type: ignore[attr-defined]  # no task said where
            return readonly(np.zeros(len(self._slots), dtype=bool))
        # a fancy index, not np.take: np.take copies a strided column whole first
        return readonly(self._t.inp[self._slots, 0] >= 0)  # type: ignore[attr-defined]

    @cached_property
    def gang(self) -> np.ndarray:
        """Each task's gang code (-1: none): tasks of one gang start together or not at all
        (:mod:`pipeline.sim.gangs`; the core holds back a gang not placed whole)."""
        return self._take("gang")

    @cached_property
    def gpu_allow(self) -> np.ndarray:
        """Each task's GPU models as a mask of node model bits (0: any node;
        :mod:`pipeline.sim.models`): it may run on node ``n`` iff the mask is 0 or shares a
        bit with ``view.nodes.gpu_model[n]``."""
        return self._take("allow")

    @cached_property
    def requested_s(self) -> np.ndarray:
        """The run time each task's user asked for (an HPC job's wall-time limit, what
        backfilling plans with; NaN: the trace states none).  Not its actual run time."""
        return self._take("requested")

    @cached_property
    def input_mb(self) -> np.ndarray:
        """MiB each task reads (NaN: not stated)."""
        return self._take("input_mb")

    def subset(self, index: np.ndarray) -> _TaskColumns:
        """The same view restricted to positions ``index`` (in that order): a layered
        policy hands an inner policy part of what it sees."""
        new = object.__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items()
                             if k in ("now", "_at", "_t", "_speed")})
        index = np.asarray(index, dtype=np.int64)
        new._slots = readonly(np.take(self._slots, index))
        for name in self._COLUMNS:  # columns at hand (given by the core, or gathered whole)
            if name in self.__dict__:
                new.__dict__[name] = readonly(np.take(self.__dict__[name], index, axis=0))
        return new

    @cached_property
    def _csr(self) -> tuple[np.ndarray, np.ndarray]:
        rows = self.inputs
        have = rows >= 0
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(have.sum(axis=1), out=indptr[1:])
        return readonly(indptr), readonly(rows[have].astype(np.int64))

    @property
    def inputs_indptr(self) -> np.ndarray:
        return self._csr[0]

    @property
    def inputs_node(self) -> np.ndarray:
        return self._csr[1]

class PendingView(_TaskColumns):
    """Pending requests in queue order; each attribute is gathered on first access."""

    def __init__(self, now: float, slots: np.ndarray, table: object,
                 req: np.ndarray | None = None, job: np.ndarray | None = None) -> None:
        self.now = now
        self._slots = slots
        self._t = table
        if req is not None:  # the core keeps requests and jobs in queue order already
            self.__dict__["req"] = req
        if job is not None:
            self.__dict__["job"] = job

    @cached_property
    def submit_s(self) -> np.ndarray:
        return self._take("submit")

    @cached_property
    def wait_s(self) -> np.ndarray:
        return readonly(self.now - self.ready_s)

    @cached_property
    def recorded_node(self) -> np.ndarray:
        """Node slot the trace ran the task on (-1: not recorded, or not a node here)."""
        return self._take("recorded_node")

    @cached_property
    def recorded_start_s(self) -> np.ndarray:
        """When the trace started the task (NaN: not recorded)."""
        return self._take("recorded_start")


class RunningView(_TaskColumns):
    """Running containers (built only for policies that ask for it), in slot order.

    Like :class:`PendingView`, each column is gathered on first access: a policy pays only
    for the columns it reads (with ~10^5 containers running, copying all of them at every
    scheduling point dominated the replay).
    """

    def __init__(self, at: float, slots: np.ndarray, table: object, speed: np.ndarray) -> None:
        self._at = at
        self._slots = slots
        self._t = table
        self._speed = speed

    @cached_property
    def node(self) -> np.ndarray:
        return self._take("node")

    @cached_property
    def start_s(self) -> np.ndarray:
        return self._take("start")

    @cached_property
    def opportunistic(self) -> np.ndarray:
        """Whether each container is opportunistic (started by a NodeManager's queue)."""
        return readonly((self._t.flags[self._slots] & OPPORTUNISTIC) != 0)

    @cached_property
    def speculative(self) -> np.ndarray:
        """Whether each container is a speculative copy of a task (pipeline.sim.speculation)."""
        if not self._t.extras_on:
            return readonly(np.zeros(len(self._slots), dtype=np.bool_))
        return readonly(~np.isnan(self._t.spec_end[self._slots]))

    @cached_property
    def has_copy(self) -> np.ndarray:
        """Whether each container is an original attempt whose copy is running."""
        if not self._t.extras_on:
            return readonly(np.zeros(len(self._slots), dtype=np.bool_))
        return readonly((self._t.twin[self._slots] >= 0) & ~self.speculative)

    @cached_property
    def copies(self) -> np.ndarray:
        """Speculative copies launched so far for each container's task (0 for a copy)."""
        if not self._t.extras_on:
            return readonly(np.zeros(len(self._slots), dtype=np.int32))
        return readonly(self._t.spec[self._slots, 0].astype(np.int32))

    @cached_property
    def progress(self) -> np.ndarray:
        """Fraction of the task's work done, in [0, 1]: the share of this run's time gone
        (a run reads its input and computes throughout, so for a map this is the share of
        its input read), on top of the work a paused run had done before; a run with no
        known end (a censored task) counts work at its node's speed."""
        t, slots = self._t, self._slots
        duration = t.duration[slots]
        before = t.work0[slots] if t.extras_on else 0.0  # paused runs
        share = run_share(t, slots, self._at)
        by_speed = (self._at - self.start_s) * self._speed[self.node]
        done = before + np.where(np.isnan(share), by_speed,
                                 np.nan_to_num(share) * (duration - before))
        return readonly(np.clip(done / duration, 0.0, 1.0))


@dataclass
class SchedView:
    """Everything a policy may look at during one scheduling point."""

    now: float
    cluster: ClusterInfo
    nodes: NodeView
    pending: PendingView
    running: RunningView | None = None
    # for policies with a heartbeat interval (else None): what :attr:`offers` returns,
    # computed when a policy first reads it (one that does not, e.g. with no data-local
    # request, pays nothing; ``beats is None`` asks whether there are heartbeats at all)
    beats: Callable[[], tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)
    # per job and task kind (pipeline.sim.jobstats.JobStats: ``arrived``, ``finished``,
    # ``run_s_sum``, ``run_s_sq``, (jobs, 3) arrays), for policies with Needs.job_stats
    jobs: object | None = None

    @cached_property
    def offers(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Node heartbeats since the policy's previous call (:mod:`pipeline.sim.heartbeat`),
        for policies whose ``setup`` asked for them (``Needs.heartbeat_s``): up node slots in
        report order, and report times."""
        return None if self.beats is None else self.beats()


@dataclass
class Decisions:
    """What a policy asks the core to do at one scheduling point."""

    place_req: np.ndarray = field(default_factory=lambda: EMPTY)
    place_node: np.ndarray = field(default_factory=lambda: EMPTY)
    preempt: np.ndarray = field(default_factory=lambda: EMPTY)
    kill: np.ndarray = field(default_factory=lambda: EMPTY)
    opp_req: np.ndarray = field(default_factory=lambda: EMPTY)
    opp_node: np.ndarray = field(default_factory=lambda: EMPTY)
    spec_run: np.ndarray = field(default_factory=lambda: EMPTY)
    spec_node: np.ndarray = field(default_factory=lambda: EMPTY)
    wake_at_s: float | None = None
    opp_queue_limit: int | None = None


class Policy(Protocol):
    """A scheduling policy: built from ``(name, params)``, set up once, asked to decide."""

    name: ClassVar[str]

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        """Prepare per-run state and say what the core must provide for it (called once by
        the core before the first decision)."""
        ...

    def decide(self, view: SchedView) -> Decisions:
        """Return the decisions for one scheduling point."""
        ...
