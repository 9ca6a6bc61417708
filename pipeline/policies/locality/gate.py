"""YARN's delay scheduling, written once for the queue schedulers that place on node offers.

A queue scheduler (``capacity-scheduler``, ``fair-scheduler``) picks the application that
gets the next container; when it places on a node heartbeat (an *offer*), this module
decides which of that application's requests may use the node, or that the application
lets the offer pass (a *missed scheduling opportunity*).  The rules are Hadoop 3.3's:

- ``CS`` (``RegularContainerAllocator.canAssign``, CapacityScheduler.md): the counter of
  missed opportunities grows by one each time the application is offered a node; a
  rack-local container is allowed once ``missed > min(N, node-locality-delay)``; an
  off-switch one once ``missed > min(N, node-locality-delay + rack-locality-additional-
  delay)``, or, with the additional delay at -1, once ``min(N, C * min(L / N, 1)) <
  missed`` (``L``: distinct hosts and racks the application's requests name, ``C``: its
  outstanding containers, ``N``: nodes).  A node-local container resets the counter, a
  rack-local one too when ``rack-locality-full-reset`` (default true) is on, else sets it
  to the node delay; an off-switch one never does.  A node-locality-delay of -1 ignores
  locality.
- ``FS_COUNT`` (``FSAppAttempt.getAllowedLocalityLevel``): thresholds are fractions of the
  cluster size (capped at 1); the first call for an application returns node-local before
  any threshold is checked (its offer still counts), then the allowed level relaxes one
  step when ``opportunities > N * threshold`` (strictly), resetting the count; any assignment
  resets the count, and one more local than the allowed level raises it back.  A threshold
  below 0 (the default -1) allows off-switch at once.
- ``FS_TIME`` (``getAllowedLocalityLevelByTime``, YARN's continuous scheduling): the same
  ladder, relaxing when the time since the last assignment (or relaxation; from the first
  offer for a new application) exceeds ``locality-delay-node-ms`` / ``-rack-ms``.

Requests without input data (reduces; traces without locations) are YARN's ANY-only asks:
never delayed, and they leave the locality state alone (in MapReduce they are a separate
priority, whose counter is separate).  A request's type is the most local of what the rule
allows and what the node is to it (an off-switch assignment on a node in the data's rack is
an off-switch assignment, as in YARN).  ``L`` and ``C`` are taken at the start of each
scheduling call (YARN updates them as asks are satisfied; within a call they only shrink).

The compiled functions read one :class:`GateState`; :mod:`.gate_reference` is the same
decision in plain Python, which the tests hold them to (a behaviour change starts there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.locality.candidates import (
    ANY,
    NODE,
    RACK,
    Asks,
    best_in,
    csr,
    task_racks,
    usable,
)
from pipeline.policies.models import NO_BITS, NO_MASK
from pipeline.sim.jit import inlined

if TYPE_CHECKING:
    from pipeline.sim.interface import NodeView

NO_DELAY, CS, FS_COUNT, FS_TIME = 0, 1, 2, 3
OFF_ONLY = 3  # CS: off-switch allowed, rack-local not yet (the L * C / N rule comes first)


@dataclass(frozen=True)
class LocalityRule:
    """Which delay rule a scheduler applies, and its two settings (see module doc)."""

    kind: int = NO_DELAY
    p0: float = -1.0  # CS node-locality-delay; FS node threshold (fraction or seconds)
    p1: float = -1.0  # CS rack-locality-additional-delay; FS rack threshold
    full_reset: bool = True  # CS rack-locality-full-reset

    @property
    def delays(self) -> bool:
        """Whether the rule can make an application let an offer pass."""
        if self.kind == CS:
            return self.p0 >= 0
        return self.kind in (FS_COUNT, FS_TIME) and self.p0 >= 0 and self.p1 >= 0


class GateState(NamedTuple):
    """What the locality gate reads and keeps in one scheduling call, at one node offer.

    The queue schedulers' compiled loops take it whole (``allocate``, ``fair_fill``) and
    hand it to the gate's functions, which read it by field.  It is built once per call
    (:func:`no_offer`, :meth:`Candidates.gate_state`) with ``node`` -1; the offer loop sets
    ``node`` and ``now`` per heartbeat (:func:`at_offer`, the same arrays), so what the gate
    updates in place (``asks.done``, ``asks.free``, ``nxt``, the counters) carries from one
    offer to the next, and ``miss``/``level``/``since`` from call to call
    (:class:`LocalityState`).  "Application" is the kernel's: a CS application, an FS tree
    node.
    """

    node: int  # the offered node; -1: no offer (choose against the cluster's room)
    now: float  # the offer's time, s
    kind: int  # the delay rule: NO_DELAY, CS, FS_COUNT or FS_TIME (:class:`LocalityRule`)
    p0: float  # CS node-locality-delay; FS node threshold (fraction of N, or s)
    p1: float  # CS rack-locality-additional-delay; FS rack threshold
    n_nodes: int  # N: the nodes up at the call's start
    full_reset: bool  # CS rack-locality-full-reset
    asks: Asks  # the requests; ``group``: each one's application, ``slot``: the identity
    has_in: np.ndarray  # (requests,) bool: it says where its data is (else an ANY-only ask)
    nxt: np.ndarray  # (applications,) int: cursor into its requests, past the done ones
    app_job: np.ndarray  # (applications,) int: its job code (index of miss, level, since)
    c_out: np.ndarray  # (applications,) int: C, its outstanding requests with data
    n_loc: np.ndarray  # (applications,) int: L, distinct hosts and racks its requests name
    n_noin: np.ndarray  # (applications,) int: its outstanding requests without data
    app_ready: np.ndarray  # (applications,) float: its earliest ready time, s
    node_ptr: np.ndarray  # (nodes + 1,) int: node -> requests with data there (CSR) ...
    node_lst: np.ndarray  # ... the requests, ascending
    rack_ptr: np.ndarray  # (racks + 1,) int: rack -> requests with data in it (CSR) ...
    rack_lst: np.ndarray  # ... the requests, ascending
    n_rack: np.ndarray  # (nodes,) int: each node's rack (-1: none)
    miss: np.ndarray  # (job codes,) int: missed scheduling opportunities
    level: np.ndarray  # (job codes,) int8: FS allowed level (NODE, RACK, ANY)
    since: np.ndarray  # (job codes,) float: FS_TIME last assignment or relaxation (NaN: new)
    visits: np.ndarray  # (1,) int: offers that counted an opportunity or picked a request


ASKS = GateState._fields.index("asks")  # where :func:`named_gate` finds ``asks``
assert ASKS == 7, "named_gate rebuilds a GateState with asks at position 7"


def no_offer(allow: np.ndarray = NO_MASK, bits: np.ndarray = NO_BITS) -> GateState:
    """The gate argument of the compiled loops for choosing against the cluster's room
    (``allow``/``bits``: the requests' GPU model masks and the nodes' model bits,
    :func:`~pipeline.policies.models.model_masks`)."""
    i64, b = np.zeros(0, np.int64), np.zeros(0, np.bool_)
    f2 = np.zeros((0, 3))
    asks = Asks(b, np.zeros(0), f2, f2, allow, bits, i64, i64)
    return GateState(-1, 0.0, 0, -1.0, -1.0, 0, True, asks, b, i64, i64, i64, i64, i64,
                     np.zeros(0), i64, i64, i64, i64, i64, i64, np.zeros(0, np.int8),
                     np.zeros(0), np.zeros(1, np.int64))


def plain_gate(g: GateState) -> tuple:
    """``g`` as a plain tuple (its ``asks`` too), for a call from Python into compiled code:
    numba's dispatcher reads a plain tuple of arrays in C and a NamedTuple field by field
    (a CapacityScheduler pass's arguments: 32 us as NamedTuples, 11 us plain)."""
    return (*g[:ASKS], tuple(g.asks), *g[ASKS + 1:])


@njit(cache=True)
def named_gate(t):
    """The :class:`GateState` of :func:`plain_gate`'s tuple (compiled: on a kernel's entry)."""
    return GateState(t[0], t[1], t[2], t[3], t[4], t[5], t[6], Asks(*t[7]), *t[8:])


@njit(cache=True)
def at_offer(g, nd, now):
    """``g`` at the offer of node ``nd`` at time ``now`` (the same arrays)."""
    return GateState(nd, now, *g[2:])


def offer_run(offers: tuple[np.ndarray, np.ndarray], nodes: NodeView, cands: Candidates,
              rule: LocalityRule, state: LocalityState, fit: np.ndarray, rows: np.ndarray,
              nxt: np.ndarray, app_job: np.ndarray) -> tuple:
    """The arguments of a scheduler's compiled offer loop after its kernel inputs: offered
    nodes and times, the up nodes' free room, the smallest request's room (``fit`` over
    ``rows``, less a tolerance), the requests' ready times sorted, the gate's state
    (:meth:`Candidates.gate_state`), the visits counter and the two outputs (request,
    node)."""
    up = np.asarray(nodes.state) == 2
    free = np.ascontiguousarray(np.where(up[:, None], nodes.cap - nodes.alloc, 0.0))
    fit = np.ascontiguousarray(fit, dtype=np.float64)
    gate = cands.gate_state(rule, int(up.sum()), free, fit, nxt, app_job, state)
    return (np.ascontiguousarray(offers[0], dtype=np.int64),
            np.ascontiguousarray(offers[1], dtype=np.float64), free,
            fit[rows].min(axis=0) - 1e-9, np.sort(cands.ready[~cands.done]), gate,
            cands.visits, np.empty(len(fit), np.int64), np.empty(len(fit), np.int64))


def grown(a: np.ndarray, n: int, fill: float) -> np.ndarray:
    """``a`` (one entry per job code) with room for ``n`` entries: doubled at least, the new
    entries ``fill``."""
    if n <= len(a):
        return a
    return np.concatenate([a, np.full(max(n, 2 * len(a)) - len(a), fill, dtype=a.dtype)])


class LocalityState:
    """Per job code: missed opportunities, allowed level (FS), time of the last assignment
    or relaxation (FS time-based; NaN before the first offer).  Persists between calls."""

    def __init__(self) -> None:
        self.miss = np.zeros(0, np.int64)
        self.level = np.zeros(0, np.int8)
        self.since = np.zeros(0)

    def grow(self, n: int) -> None:
        self.miss = grown(self.miss, n, 0)
        self.level = grown(self.level, n, 0)
        self.since = grown(self.since, n, np.nan)


class Candidates:
    """Where the pending requests' data is, for one scheduling call: node -> requests and
    rack -> requests lists, and per application its outstanding requests with data (C) and
    the distinct hosts and racks they name (L)."""

    def __init__(self, inputs: np.ndarray, n_rack: np.ndarray, app_of: np.ndarray,
                 n_apps: int, ready: np.ndarray,
                 models: tuple[np.ndarray, np.ndarray] = (NO_MASK, NO_BITS)) -> None:
        # the requests' GPU model masks and the nodes' model bits (empty masks: any node)
        self.allow, self.bits = models
        inputs = np.ascontiguousarray(inputs, dtype=np.int64)
        n_rack = np.ascontiguousarray(n_rack, dtype=np.int64)
        self.has_in = inputs[:, 0] >= 0 if len(inputs) else np.zeros(0, np.bool_)
        self.node_ptr, self.node_lst = csr(len(n_rack), inputs, inputs.shape[1])
        n_racks = int(n_rack.max()) + 1 if len(n_rack) else 0
        self.rack_ptr, self.rack_lst = csr(n_racks, task_racks(inputs, n_rack),
                                           inputs.shape[1])
        self.app_of = np.ascontiguousarray(app_of, dtype=np.int64)
        mine = self.app_of >= 0  # requests of no application here are never picked
        self.c_out = np.bincount(self.app_of[self.has_in & mine],
                                 minlength=n_apps).astype(np.int64)
        self.n_loc = locations(inputs, n_rack, self.app_of, n_apps)
        self.n_noin = np.bincount(self.app_of[~self.has_in & mine],
                                  minlength=n_apps).astype(np.int64)
        self.n_rack = n_rack
        self.done = ~mine
        self.ident = np.arange(n_apps, dtype=np.int64)
        self.ready = np.ascontiguousarray(ready, dtype=np.float64)
        self.visits = np.zeros(1, np.int64)  # offers that counted or placed (pick)
        # per application, its earliest ready time: at an earlier heartbeat it asks nothing
        self.app_ready = np.full(n_apps, np.inf)
        np.minimum.at(self.app_ready, self.app_of[mine], self.ready[mine])

    def gate_state(self, rule: LocalityRule, n_nodes: int, free: np.ndarray,
                   fit_req: np.ndarray, nxt: np.ndarray, app_job: np.ndarray,
                   state: LocalityState) -> GateState:
        """The gate's state for this call (no node offered yet: the offer loop sets it,
        :func:`at_offer`); ``free``: the nodes' free room, ``fit_req``: the room each
        request takes, ``nxt``: the applications' cursors, ``app_job``: their job codes."""
        asks = Asks(self.done, self.ready, fit_req, free, self.allow, self.bits, self.app_of,
                    self.ident)
        return GateState(-1, 0.0, rule.kind, float(rule.p0), float(rule.p1), int(n_nodes),
                         rule.full_reset, asks, self.has_in, nxt, app_job, self.c_out,
                         self.n_loc, self.n_noin, self.app_ready, self.node_ptr,
                         self.node_lst, self.rack_ptr, self.rack_lst, self.n_rack,
                         state.miss, state.level, state.since, self.visits)


@njit(cache=True)
def worth_offering(free, nd, smallest, idle_room, at, ready_times, cursor, placed):
    """Whether node ``nd``'s heartbeat at ``at`` can change anything: it has room for the
    smallest request, and more room in some resource than ``idle_room``, the most any node
    had at the offers since the last change that placed nothing and counted no opportunity
    (every application held back by its limits, without a request that fits, or with none
    ready yet: a node with no more room would do the same, until another request becomes
    ready; ``ready_times`` sorted, ``cursor[0]`` the next one; ``placed``: requests placed
    so far in this call, all of them ready)."""
    while cursor[0] < len(ready_times) and ready_times[cursor[0]] <= at:
        cursor[0] += 1
        for r in range(3):
            idle_room[r] = -np.inf
    if cursor[0] <= placed:
        return False  # every request ready by now is placed: nothing waits at this offer
    for r in range(3):
        if free[nd, r] < smallest[r]:
            return False
    for r in range(3):  # noqa: SIM110 (numba compiles loops, not any())
        if free[nd, r] > idle_room[r]:
            return True
    return False


@njit(cache=True)
def offered(k, got, nd, n, out_req, out_node, visited, free, idle_room):
    """After an offer of node ``nd`` that placed ``got[:k]``: append them to ``out_*`` (from
    ``n``; returns the new count) and keep :func:`worth_offering`'s ``idle_room``."""
    for t in range(k):
        out_req[n + t] = got[t]
        out_node[n + t] = nd
    for r in range(3):
        if k > 0 or visited:
            idle_room[r] = -np.inf
        else:
            idle_room[r] = max(idle_room[r], free[nd, r])
    return n + k


@njit(cache=True)
def locations(inputs, n_rack, app_of, n_apps):
    """Per application, the distinct hosts plus distinct racks its requests name (requests
    in any order: each host and rack is marked with the last application that named it,
    so they are visited application by application)."""
    out = np.zeros(n_apps, np.int64)
    seen_n = np.full(len(n_rack), -1, np.int64)
    seen_r = np.full(int(n_rack.max()) + 1 if len(n_rack) else 1, -1, np.int64)
    for i in np.argsort(app_of, kind="mergesort"):
        a = app_of[i]
        if a < 0:
            continue
        for c in range(inputs.shape[1]):
            x = inputs[i, c]
            if x < 0:
                break
            if seen_n[x] != a:
                seen_n[x] = a
                out[a] += 1
            r = n_rack[x]
            if r >= 0 and seen_r[r] != a:
                seen_r[r] = a
                out[a] += 1
    return out


@inlined
def allowed(g, a, j):
    """The level application ``a`` (job code ``j``) may use at this offer (:class:`GateState`):
    NODE, RACK, ANY, or OFF_ONLY (CS: off-switch allowed while rack-local is not yet);
    counts the offer (``miss``) and relaxes the FS level, as the rules of the module doc
    say."""
    p0, p1, n_nodes, now = g.p0, g.p1, g.n_nodes, g.now
    miss, level, since = g.miss, g.level, g.since
    miss[j] += 1
    if g.kind == CS:
        if p0 < 0:
            return ANY
        m = miss[j]
        if p1 > -1:
            off = m > min(n_nodes, p0 + p1)
        else:
            off = min(n_nodes, g.c_out[a] * min(g.n_loc[a] / max(n_nodes, 1), 1.0)) < m
        rack = m > min(n_nodes, p0)
        if off:
            return ANY if rack else OFF_ONLY
        return RACK if rack else NODE
    if p0 < 0 or p1 < 0:
        return ANY
    if g.kind == FS_COUNT:
        if np.isnan(since[j]):  # the application's first call: node-local, nothing checked
            since[j] = now
            return level[j]
        if level[j] == NODE and miss[j] > n_nodes * min(p0, 1.0):
            level[j] = RACK
            miss[j] = 0
        elif level[j] == RACK and miss[j] > n_nodes * min(p1, 1.0):
            level[j] = ANY
            miss[j] = 0
        return level[j]
    if np.isnan(since[j]):
        since[j] = now
    if level[j] == NODE and now - since[j] > p0:
        level[j] = RACK
        since[j] = now
    elif level[j] == RACK and now - since[j] > p1:
        level[j] = ANY
        since[j] = now
    return level[j]


@inlined
def assigned(g, j, typ):
    """Update job code ``j``'s state after an assignment of type ``typ`` (:class:`GateState`)."""
    miss, level = g.miss, g.level
    if g.kind == CS:
        if typ == NODE or (typ == RACK and g.full_reset):
            miss[j] = 0
        elif typ == RACK:
            miss[j] = min(miss[j], int(max(g.p0, 0)))
        return
    miss[j] = 0
    g.since[j] = g.now
    if typ < level[j]:
        level[j] = typ


@inlined
def refresh_local(g, best, touched, n_touched):
    """Per application, its first request with data on the offered node that is usable
    there now (:class:`GateState`), into ``best`` (entries of the previous ``touched``
    cleared first); returns how many applications are touched now."""
    for t in range(n_touched):
        best[touched[t]] = -1
    nd = g.node
    return best_in(g.asks, g.node_lst, g.node_ptr[nd], g.node_ptr[nd + 1], nd, g.now, best,
                   touched, 0)


@inlined
def taken(g, i, typ, a):
    """Book request ``i`` of application ``a`` picked with type ``typ`` (:class:`GateState`)."""
    if typ >= 0:
        assigned(g, g.app_job[a], typ)
    g.asks.done[i] = True
    if g.has_in[i]:
        g.c_out[a] -= 1
    else:
        g.n_noin[a] -= 1


@inlined
def first_fit(g, lst, lo, hi, want_in):
    """First request of ``lst[lo:hi]`` usable on the offered node now (:class:`GateState`),
    with (or without) data."""
    asks = g.asks
    for q in range(lo, hi):
        i = lst[q]
        if not asks.done[i] and asks.ready[i] <= g.now and g.has_in[i] == want_in and \
                usable(i, asks, g.node):
            return i
    return -1


@inlined
def rack_local(g, a, rack):
    """First request of application ``a`` with data in ``rack`` usable on the offered node
    now (:class:`GateState`)."""
    asks = g.asks
    for q in range(g.rack_ptr[rack], g.rack_ptr[rack + 1]):
        i = g.rack_lst[q]
        if asks.group[i] == a and not asks.done[i] and asks.ready[i] <= g.now and \
                usable(i, asks, g.node):
            return i
    return -1


@inlined
def pick(g, a, local_i, lst, lo, hi):
    """The request of application ``a`` (its requests ``lst[lo:hi]``) that may use the
    offered node now (:class:`GateState`), and its type (NODE, RACK, ANY; -1 for an
    ANY-only ask), or ``(-1, -1)`` when the application lets the offer pass.  ``local_i``:
    its first request with data on the node that fits (-1 if none).  An offer counts as an
    opportunity only when some request with data fits the node (``hasContainerForNode``);
    ``visits`` counts the offers that changed some state (an opportunity counted, or a
    request picked)."""
    if g.app_ready[a] > g.now:
        return -1, -1  # nothing of it was waiting yet at this heartbeat
    j = g.app_job[a]
    if local_i >= 0:
        g.visits[0] += 1
        g.miss[j] += 1  # counted, then reset by the node-local assignment
        return local_i, NODE
    if g.n_noin[a] > 0:
        i = first_fit(g, lst, lo, hi, False)
        if i >= 0:
            g.visits[0] += 1
            return i, -1
    if g.c_out[a] == 0:
        return -1, -1
    i_any = first_fit(g, lst, lo, hi, True)
    if i_any < 0:
        return -1, -1
    g.visits[0] += 1
    lvl = allowed(g, a, j)
    rack = g.n_rack[g.node]
    if RACK <= lvl <= ANY and rack >= 0 and rack + 1 < len(g.rack_ptr):
        i = rack_local(g, a, rack)
        if i >= 0:
            return i, RACK
    if lvl >= ANY:
        return i_any, ANY
    return -1, -1
