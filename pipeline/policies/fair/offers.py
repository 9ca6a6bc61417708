"""FairScheduler delay scheduling: the assignment loop run once per node heartbeat.

Hadoop's FairScheduler assigns on a node's heartbeat (``FairScheduler.nodeUpdate`` ->
``attemptScheduling``: descend the queues for that node) or, with continuous scheduling,
on every node in turn; an application whose requests want other nodes passes the node up
(``FSAppAttempt.assignContainer``), and the next application in fair order may take it.
When the locality settings can delay (``locality.threshold.node/rack``, or with
``continuous_scheduling`` the ``locality-delay-node-ms/-rack-ms``) and a pending request
says where its data is, the core's heartbeats since the previous call are offered in time
order, each runs :func:`~pipeline.policies.fair.kernel.fair_fill` for its node, and the
locality gate (:mod:`pipeline.policies.locality.gate`, rules ``FS_COUNT``/``FS_TIME``)
picks the request or the skip.  Otherwise requests go to the least-allocated node at once,
as before.  A heartbeat fills its node (``assignmultiple`` with no per-heartbeat cap; Hadoop's
default assigns one container per heartbeat, which tracereplay does not model).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numba import njit

from pipeline.policies.capacity.reader import Reader, read_properties
from pipeline.policies.drf import Nodes, Placements
from pipeline.policies.fair.fill_state import AmCheck, Fill, FillTree, Pending
from pipeline.policies.fair.kernel import fair_fill
from pipeline.policies.locality.gate import (
    FS_COUNT,
    FS_TIME,
    Candidates,
    GateState,
    LocalityRule,
    LocalityState,
    at_offer,
    offer_run,
    offered,
    worth_offering,
)
from pipeline.policies.settings import Setting, from_file

if TYPE_CHECKING:
    from pipeline.sim.interface import SchedView


def hadoop_threshold(value: float) -> float:
    """A ``locality.threshold.*`` value as ``FSAppAttempt.getAllowedLocalityLevel`` reads it:
    above 1 capped at 1, below 0 no delay (-1), whether set inline or in yarn-site.xml."""
    return -1.0 if value < 0 else min(float(value), 1.0)


def fair_rule(locality_threshold_node: float, locality_threshold_rack: float,
              continuous_scheduling: bool, locality_delay_node_ms: float,
              locality_delay_rack_ms: float) -> LocalityRule:
    """The rule YARN applies: time-based with continuous scheduling, else count-based
    (arguments: the policy parameters of the same names)."""
    if continuous_scheduling:
        node_ms, rack_ms = locality_delay_node_ms, locality_delay_rack_ms
        return LocalityRule(FS_TIME, node_ms / 1000.0 if node_ms >= 0 else -1.0,
                            rack_ms / 1000.0 if rack_ms >= 0 else -1.0)
    return LocalityRule(FS_COUNT, locality_threshold_node, locality_threshold_rack)


def wants_offers(rule: LocalityRule, view: SchedView, rows: np.ndarray | None) -> bool:
    """Whether this call places on heartbeats: the rule can delay and a request has data."""
    if view.beats is None or not rule.delays or len(view.pending) == 0:
        return False  # (``beats``, not ``offers``: the reports are computed when read)
    have = view.pending.has_inputs
    return bool((have[rows] if rows is not None else have).any())


def fill_on_offers(view: SchedView, rule: LocalityRule, state: LocalityState,
                   sel: np.ndarray | None, fill: Fill, node_of_req: np.ndarray,
                   app_job: np.ndarray, models: tuple[np.ndarray, np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Requests (indices into ``fill.pending.req``) placed and their nodes, heartbeat by
    heartbeat (``fill``: :func:`~pipeline.policies.fair.kernel.fair_fill`'s inputs;
    ``node_of_req``: each request's application as a tree node; ``app_job``: job code per
    application, tree node ``n_queues + a``; ``models``: the requests' GPU model masks and
    the nodes' model bits)."""
    assert view.offers is not None
    pend, nodes = view.pending, view.nodes
    req, n_queues = fill.pending.req, fill.tree.n_queues
    nq = n_queues + len(app_job)
    job_of_node = np.concatenate([np.full(n_queues, -1, np.int64),
                                  np.asarray(app_job, np.int64)])
    if len(req) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if len(app_job):
        state.grow(int(np.max(app_job)) + 1)
    rows = sel if sel is not None else np.arange(len(pend))
    cands = Candidates(np.asarray(pend.inputs)[rows], nodes.rack,
                       np.asarray(node_of_req, np.int64), nq, np.asarray(pend.ready_s)[rows],
                       models)
    fit = np.maximum(req, np.asarray(pend.req)[rows])
    run = OfferRun(*offer_run(view.offers, nodes, cands, rule, state, fit,
                              np.arange(len(fit)), cursor_start(node_of_req, nq),
                              job_of_node))
    n = fs_offers(tuple(tuple(x) for x in fill), run, len(fit))
    return run.out_req[:n], run.out_node[:n]


class OfferRun(NamedTuple):
    """The heartbeats of one call and what the offer loop keeps across them
    (:func:`~pipeline.policies.locality.gate.offer_run`, same order)."""

    off_node: np.ndarray  # (offers,) int64: the node of each heartbeat, in time order
    off_time: np.ndarray  # (offers,) float64: its time, s
    free: np.ndarray  # (nodes, 3) float64: the up nodes' free room (down: 0)
    smallest: np.ndarray  # (3,) float64: the smallest request's room, less a tolerance
    ready_times: np.ndarray  # (requests not done,) float64: ready times, s, sorted
    gate: GateState  # the locality gate's state (no node offered yet)
    visits: np.ndarray  # (1,) int64: offers that changed the gate's state
    out_req: np.ndarray  # (requests,) int64: placed request rows, in order ...
    out_node: np.ndarray  # ... and their nodes


@njit(cache=True)
def fs_offers(fill, run, n_all):
    """Run :func:`fair_fill` for each heartbeat of ``run`` (:class:`OfferRun`) in turn, on
    ``fill`` (:class:`~.fill_state.Fill` as plain tuples); return how many of the ``n_all``
    requests were placed."""
    tree, pending, am = FillTree(*fill[0]), Pending(*fill[1]), AmCheck(*fill[2])
    nodes = Nodes(*fill[3])
    free, visits, out_req, out_node = run.free, run.visits, run.out_req, run.out_node
    idle_room = np.full(3, -np.inf)
    cursor = np.zeros(1, np.int64)
    got = Placements(np.empty(len(out_req), np.int64), np.empty(len(out_req), np.int64))
    n = 0
    for o in range(len(run.off_node)):
        nd = run.off_node[o]
        if not worth_offering(free, nd, run.smallest, idle_room, run.off_time[o],
                              run.ready_times, cursor, n):
            continue
        before = visits[0]
        k = fair_fill(tree, pending, am, nodes, at_offer(run.gate, nd, run.off_time[o]), got)
        n = offered(k, got.req, nd, n, out_req, out_node, visits[0] != before, free,
                    idle_room)
        if n == n_all:
            break
    return n


def cursor_start(node_of_req: np.ndarray, nq: int) -> np.ndarray:
    """Each tree node's first position in ``group_by_code(node_of_req, nq)``."""
    counts = np.bincount(np.asarray(node_of_req, np.int64), minlength=nq)
    return (np.cumsum(counts) - counts).astype(np.int64)


SITE = "yarn.scheduler.fair."
# policy parameter (fair_rule argument) -> yarn-site.xml property (FairSchedulerConfiguration)
SITE_PROPS = {"locality_threshold_node": "locality.threshold.node",
              "locality_threshold_rack": "locality.threshold.rack",
              "continuous_scheduling": "continuous-scheduling-enabled",
              "locality_delay_node_ms": "locality-delay-node-ms",
              "locality_delay_rack_ms": "locality-delay-rack-ms"}


def site_locality(path: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with those a yarn-site.xml sets replaced (errors name file and property;
    delays must be -1 or more)."""
    r = Reader(read_properties(Path(path)), path)
    out = dict(values)
    for key, name in SITE_PROPS.items():
        if SITE + name not in r.props:
            continue
        if key == "continuous_scheduling":
            out[key] = r.flag(SITE + name, False)
        elif key.startswith("locality_threshold"):  # read as hadoop_threshold (the caller)
            out[key] = r.number(SITE + name, -1.0)
        else:
            out[key] = r.number(SITE + name, -1.0, -1.0)
    return out


def site_settings(path: str, values: dict[str, Any]) -> dict[str, Setting]:
    """The locality settings ``path`` decides (``values``: as :func:`site_locality` read)."""
    props = read_properties(Path(path))
    return {key: from_file(values[key], path, SITE + name, SITE + name in props)
            for key, name in SITE_PROPS.items()}
