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
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from pipeline.policies.capacity.reader import Reader, read_properties
from pipeline.policies.fair.kernel import fair_fill
from pipeline.policies.locality.gate import (
    FS_COUNT,
    FS_TIME,
    Candidates,
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
                   sel: np.ndarray | None, args: tuple, app_job: np.ndarray,
                   n_queues: int, models: tuple[np.ndarray, np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Requests (indices into the kernel's ``req``) placed and their nodes, heartbeat by
    heartbeat (``args``: :func:`~pipeline.policies.fair.kernel.fair_fill`'s inputs up to
    ``gate``; ``app_job``: job code per application, tree node ``n_queues + a``;
    ``models``: the requests' GPU model masks and the nodes' model bits)."""
    assert view.offers is not None
    pend, nodes = view.pending, view.nodes
    req, node_of_req = args[0], args[1]
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
    run = offer_run(view.offers, nodes, cands, rule, state, fit, np.arange(len(fit)),
                    cursor_start(node_of_req, nq), job_of_node)
    n = fs_offers(args, len(fit), *run)
    return run[-2][:n], run[-1][:n]


@njit(cache=True)
def fs_offers(args, n_all, off_node, off_time, free, smallest, ready_times, gate, visits,
              out_req, out_node):
    """Run :func:`fair_fill` for each heartbeat in turn; return how many of the ``n_all``
    requests were placed."""
    idle_room = np.full(3, -np.inf)
    cursor = np.zeros(1, np.int64)
    got = np.empty(len(out_req), np.int64)
    got_node = np.empty(len(out_req), np.int64)
    n = 0
    for o in range(len(off_node)):
        nd = off_node[o]
        if not worth_offering(free, nd, smallest, idle_room, off_time[o], ready_times, cursor,
                              n):
            continue
        before = visits[0]
        k = fair_fill(*args, at_offer(gate, nd, off_time[o]), got, got_node)
        n = offered(k, got, nd, n, out_req, out_node, visits[0] != before, free, idle_room)
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
