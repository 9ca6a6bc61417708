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
    after_offer,
    offer_inputs,
    worth_offering,
)
from pipeline.policies.settings import Setting, from_file

if TYPE_CHECKING:
    from pipeline.sim.interface import SchedView


def fair_rule(threshold_node: float, threshold_rack: float, continuous: bool,
              delay_node_ms: float, delay_rack_ms: float) -> LocalityRule:
    """The rule YARN applies: time-based with continuous scheduling, else count-based."""
    if continuous:
        return LocalityRule(FS_TIME, delay_node_ms / 1000.0 if delay_node_ms >= 0 else -1.0,
                            delay_rack_ms / 1000.0 if delay_rack_ms >= 0 else -1.0)
    return LocalityRule(FS_COUNT, threshold_node, threshold_rack)


def wants_offers(rule: LocalityRule, view: SchedView, rows: np.ndarray | None) -> bool:
    """Whether this call places on heartbeats: the rule can delay and a request has data."""
    if view.offers is None or not rule.delays or len(view.pending) == 0:
        return False
    first = np.asarray(view.pending.inputs)[:, 0]
    return bool((first[rows] if rows is not None else first).max(initial=-1) >= 0)


def fill_on_offers(view: SchedView, rule: LocalityRule, state: LocalityState,
                   sel: np.ndarray | None, args: tuple, app_job: np.ndarray,
                   n_queues: int) -> tuple[np.ndarray, np.ndarray]:
    """Requests (indices into the kernel's ``req``) placed and their nodes, heartbeat by
    heartbeat (``args``: :func:`~pipeline.policies.fair.kernel.fair_fill`'s inputs up to
    ``loc``; ``app_job``: job code per application, tree node ``n_queues + a``)."""
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
                       np.asarray(node_of_req, np.int64), nq, np.asarray(pend.ready_s)[rows])
    up = np.asarray(nodes.state) == 2
    free = np.ascontiguousarray(np.where(up[:, None], nodes.cap - nodes.alloc, 0.0))
    fit = np.ascontiguousarray(np.maximum(req, np.asarray(pend.req)[rows]), np.float64)
    off_node, off_time, smallest, ready_times = offer_inputs(
        view.offers, fit, np.arange(len(fit)), cands)
    rest = cands.rest(rule, int(up.sum()), free, fit, cursor_start(node_of_req, nq),
                      job_of_node, state)
    out_req, out_node = np.empty(len(fit), np.int64), np.empty(len(fit), np.int64)
    n = fs_offers(args, rest, off_node, off_time, free, smallest, ready_times, cands.visits,
                  len(fit), out_req, out_node)
    return out_req[:n], out_node[:n]


@njit(cache=True)
def fs_offers(args, rest, off_node, off_time, free, smallest, ready_times, visits, n_left,
              out_req, out_node):
    """Run :func:`fair_fill` for each heartbeat in turn; return how many were placed."""
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
        k = fair_fill(*args, (nd, off_time[o]) + rest, got, got_node)  # noqa: RUF005
        for t in range(k):
            out_req[n + t] = got[t]
            out_node[n + t] = nd
        n += k
        n_left -= k
        if n_left == 0:
            break
        after_offer(k, visits[0] != before, free, nd, idle_room)
    return n


def cursor_start(node_of_req: np.ndarray, nq: int) -> np.ndarray:
    """Each tree node's first position in ``group_by_code(node_of_req, nq)``."""
    counts = np.bincount(np.asarray(node_of_req, np.int64), minlength=nq)
    return (np.cumsum(counts) - counts).astype(np.int64)


SITE = "yarn.scheduler.fair."
# fair_rule argument -> yarn-site.xml property (FairSchedulerConfiguration)
SITE_PROPS = {"threshold_node": "locality.threshold.node",
              "threshold_rack": "locality.threshold.rack",
              "continuous": "continuous-scheduling-enabled",
              "delay_node_ms": "locality-delay-node-ms",
              "delay_rack_ms": "locality-delay-rack-ms"}


def site_locality(path: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with those a yarn-site.xml sets replaced (errors name file and property;
    delays must be -1 or more)."""
    r = Reader(read_properties(Path(path)), path)
    out = dict(values)
    for key, name in SITE_PROPS.items():
        if SITE + name not in r.props:
            continue
        if key == "continuous":
            out[key] = r.flag(SITE + name, False)
        elif key.startswith("threshold"):  # below 0: no delay; above 1: capped (YARN)
            out[key] = min(r.number(SITE + name, -1.0), 1.0)
        else:
            out[key] = r.number(SITE + name, -1.0, -1.0)
    return out


# fair_rule argument -> the policy parameter it stands for
PARAM_OF = {"threshold_node": "locality_threshold_node",
            "threshold_rack": "locality_threshold_rack",
            "continuous": "continuous_scheduling",
            "delay_node_ms": "locality_delay_node_ms",
            "delay_rack_ms": "locality_delay_rack_ms"}


def site_settings(path: str, values: dict[str, Any]) -> dict[str, Setting]:
    """The locality settings ``path`` decides (``values``: as :func:`site_locality` read)."""
    props = read_properties(Path(path))
    return {PARAM_OF[key]: from_file(values[key], path, SITE + name, SITE + name in props)
            for key, name in SITE_PROPS.items()}
