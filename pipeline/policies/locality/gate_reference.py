"""The locality gate's decision in plain Python: the reference the compiled gate is tested
against (:mod:`pipeline.policies.locality.gate`, ``tests/policies/
test_locality_gate_reference.py``).  A change of behaviour starts here, then goes to the
kernel.

A queue scheduler (``capacity-scheduler``, ``fair-scheduler``) has chosen the application
that gets the next container, and a node has heartbeated (an *offer*).  The gate says which
of the application's pending asks takes the node, with which locality, or that the
application lets the offer pass; it keeps the application's count of missed scheduling
opportunities and, for the FairScheduler, its allowed locality level.  The rules are
Hadoop 3.3's (``RegularContainerAllocator`` without its activity logging,
``FSAppAttempt.getAllowedLocalityLevel`` and ``getAllowedLocalityLevelByTime``) as
docs/families/locality.md describes them:

- an ask is *usable* on the node now when it is pending, ready, fits the node's free room
  and may use its GPU model;
- a usable ask with data on the node goes first (node-local; the lowest ask index), then a
  usable ask without data (an ANY-only ask: never delayed, first in queue order), else the
  offer is an opportunity only if some usable ask has data (``hasContainerForNode``): it is
  counted and the rule says which level is allowed; a rack-local ask (data in the node's
  rack; the lowest index) goes when rack-local is allowed, else the first usable ask with
  data in queue order goes off-switch when off-switch is allowed;
- an assignment resets the count as the rule says (:func:`book`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.policies.locality.candidates import ANY, NODE, RACK
from pipeline.policies.locality.gate import CS, FS_COUNT, OFF_ONLY, LocalityRule

ANY_ONLY = -1  # the type of an assignment of an ask without data (YARN: a separate priority)
PASS = -1  # the ask index of a decision that lets the offer pass
TOLERANCE = 1e-9  # room a fit check forgives (float sums of requests)


@dataclass
class Ask:
    """One pending container request of the application (a ``ResourceRequest``)."""

    index: int  # its position in the call's request list: node- and rack-local ties go low
    ready_s: float  # from when it may start
    need: tuple[float, float, float]  # room it takes on a node: cpu, memory, gpu
    hosts: tuple[int, ...]  # the nodes holding its data (empty: an ANY-only ask)
    racks: frozenset[int]  # the racks of those nodes (:func:`data_racks`)
    models: int = 0  # the GPU models it may use, one bit each (0: any)
    done: bool = False  # assigned already


@dataclass
class Offer:
    """A node's heartbeat: the node, its rack (-1: none), its free room, its GPU model bit."""

    node: int
    rack: int
    now_s: float
    free: list[float]  # cpu, memory, gpu; an assignment takes its ask's need from it
    model_bit: int = 0


@dataclass
class Memory:
    """What YARN keeps per application between offers and calls (per job code here):
    ``schedulingOpportunities`` and, for the FairScheduler, the allowed locality level and
    the time of the last assignment or relaxation (NaN: never offered)."""

    missed: int = 0
    level: int = NODE
    since_s: float = float("nan")


@dataclass(frozen=True)
class Decision:
    """The ask that takes the offer (``PASS``: none) and its type (NODE, RACK, ANY or
    ANY_ONLY), and whether the offer counted (an opportunity counted or an ask taken)."""

    index: int
    type: int
    counted: bool


def data_racks(hosts: tuple[int, ...], rack_of: list[int]) -> frozenset[int]:
    """The racks holding an ask's data (nodes without a rack name none)."""
    return frozenset(rack_of[h] for h in hosts if rack_of[h] >= 0)


def locations(asks: list[Ask]) -> int:
    """L of the CapacityScheduler's rule: the distinct hosts plus the distinct racks the
    application's asks name (taken at the scheduling call's start)."""
    hosts = {h for ask in asks for h in ask.hosts}
    racks = {r for ask in asks for r in ask.racks}
    return len(hosts) + len(racks)


def usable(ask: Ask, offer: Offer) -> bool:
    """Whether the ask may take the offered node now: pending, ready, fits, right GPU."""
    if ask.done or ask.ready_s > offer.now_s:
        return False
    if any(ask.need[k] > offer.free[k] + TOLERANCE for k in range(3)):
        return False
    return ask.models == 0 or (offer.model_bit & ask.models) != 0


def allowed_level(rule: LocalityRule, memory: Memory, n_nodes: int, containers: int,
                  n_locations: int, now_s: float) -> int:
    """Count this opportunity and return the locality level the rule allows now: NODE,
    RACK, ANY, or OFF_ONLY (CapacityScheduler: off-switch allowed, rack-local not yet).

    ``containers``: C, the application's outstanding asks with data; ``n_locations``: L.
    """
    memory.missed += 1
    node_delay, rack_delay = rule.p0, rule.p1
    if rule.kind == CS:
        if node_delay < 0:  # node-locality-delay -1: locality ignored
            return ANY
        missed = memory.missed
        if rack_delay > -1:  # rack-locality-additional-delay set
            off_switch = missed > min(n_nodes, node_delay + rack_delay)
        else:  # the L * C / N rule (localityWaitFactor)
            wait_factor = min(n_locations / max(n_nodes, 1), 1.0)
            off_switch = min(n_nodes, containers * wait_factor) < missed
        rack_local = missed > min(n_nodes, node_delay)
        if off_switch:
            return ANY if rack_local else OFF_ONLY
        return RACK if rack_local else NODE
    if node_delay < 0 or rack_delay < 0:  # a threshold below 0: no delay
        return ANY
    if rule.kind == FS_COUNT:  # thresholds: fractions of the cluster's nodes, capped at 1
        if memory.since_s != memory.since_s:  # NaN: the first call returns its level as is
            memory.since_s = now_s
            return memory.level
        if memory.level == NODE and memory.missed > n_nodes * min(node_delay, 1.0):
            memory.level, memory.missed = RACK, 0
        elif memory.level == RACK and memory.missed > n_nodes * min(rack_delay, 1.0):
            memory.level, memory.missed = ANY, 0
        return memory.level
    # FS_TIME (continuous scheduling): delays in seconds since the last assignment or
    # relaxation, or since the application's first offer
    if memory.since_s != memory.since_s:
        memory.since_s = now_s
    if memory.level == NODE and now_s - memory.since_s > node_delay:
        memory.level, memory.since_s = RACK, now_s
    elif memory.level == RACK and now_s - memory.since_s > rack_delay:
        memory.level, memory.since_s = ANY, now_s
    return memory.level


def decide(asks: list[Ask], offer: Offer, rule: LocalityRule, memory: Memory, n_nodes: int,
           n_locations: int) -> Decision:
    """The gate's decision for one application (its asks in queue order) at one offer;
    counts the opportunity in ``memory`` (an ask it returns is booked by :func:`book`)."""
    ready = [ask for ask in asks if usable(ask, offer)]
    node_local = [ask for ask in ready if offer.node in ask.hosts]
    if node_local:
        memory.missed += 1  # counted, then reset by the node-local assignment
        return Decision(min(ask.index for ask in node_local), NODE, True)
    without_data = [ask for ask in ready if not ask.hosts]
    if without_data:
        return Decision(without_data[0].index, ANY_ONLY, True)
    with_data = [ask for ask in ready if ask.hosts]
    if not with_data:  # nothing of it could use this node: not an opportunity
        return Decision(PASS, PASS, False)
    containers = sum(1 for ask in asks if ask.hosts and not ask.done)
    level = allowed_level(rule, memory, n_nodes, containers, n_locations, offer.now_s)
    if level in (RACK, ANY) and offer.rack >= 0:
        rack_local = [ask for ask in with_data if offer.rack in ask.racks]
        if rack_local:
            return Decision(min(ask.index for ask in rack_local), RACK, True)
    if level in (ANY, OFF_ONLY):  # off-switch, even on a node of the data's rack
        return Decision(with_data[0].index, ANY, True)
    return Decision(PASS, PASS, True)  # a missed opportunity


def book(ask: Ask, typ: int, offer: Offer, rule: LocalityRule, memory: Memory) -> None:
    """The ask takes the node with assignment type ``typ``: its room, and the reset of the
    application's count (CapacityScheduler: a node-local assignment resets it, a rack-local
    one too with rack-locality-full-reset, else caps it at the node delay, an off-switch one
    never; FairScheduler: every assignment resets it and lowers the allowed level to its
    type).  An ANY-only ask leaves the count alone."""
    ask.done = True
    for k in range(3):
        offer.free[k] -= ask.need[k]
    if typ == ANY_ONLY:
        return
    if rule.kind == CS:
        if typ == NODE or (typ == RACK and rule.full_reset):
            memory.missed = 0
        elif typ == RACK:
            memory.missed = min(memory.missed, int(max(rule.p0, 0)))
        return
    memory.missed = 0
    memory.since_s = offer.now_s
    memory.level = min(memory.level, typ)
