"""A scheduling point's decision step: the core's component that asks the policy for
decisions when something changed, checks them (no policy can overcommit a node or place a
request twice) and applies them: stops, guaranteed placements, speculative copies (through
``sim.speculation``) and opportunistic containers (through the NodeManagers).

It owns no replay state: it acts on the simulation it was built for
(:class:`pipeline.sim.context.SimContext`); what the policy sees comes from ``sim.views``,
and runs it stops end through ``sim.runs``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.sim import kernels
from pipeline.sim.interface import Decisions, PolicyError
from pipeline.sim.tasks import PENDING, TRACKED, X_OPP

if TYPE_CHECKING:
    from pipeline.sim.context import SimContext

_REASONS = {
    1: "request index out of range", 2: "node index out of range",
    3: "request already placed", 4: "node is not up", 5: "request does not fit the node",
}
Bindings = list[tuple[int, int, int, int]]  # GPU device bindings (pipeline.sim.gpus)


def gpu_checked(sim: SimContext, req: np.ndarray, node: np.ndarray, slots: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, Bindings]:
    """The placements ``(req, node)`` (``req``: indices into the task ``slots``) whose
    node has a GPU model the task allows (:mod:`pipeline.sim.models`) and devices that
    can take its GPU request (:mod:`pipeline.sim.gpus`), with their device bindings;
    the others are held back and counted."""
    dirty = sim.cluster.nodes.dirty
    if sim.models is not None and len(req):
        req, node = sim.models.check(req, node, slots, sim.tasks.allow, dirty)
    if sim.gpus is not None and len(req):
        return sim.gpus.bind(req, node, slots, sim.tasks, dirty)
    return req, node, []


def _pairs(policy: str, idx: np.ndarray, node: np.ndarray,
           what: str) -> tuple[np.ndarray, np.ndarray]:
    """Decisions ``what`` as two int64 arrays of one length (the policy's error if not)."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    node = np.ascontiguousarray(node, dtype=np.int64)
    if len(idx) != len(node):
        raise PolicyError(f"policy '{policy}': {what}_req and {what}_node differ "
                          f"in length ({len(idx)} vs {len(node)})")
    return idx, node


class DecisionStep:
    """Asks the policy of the simulation ``sim`` and applies its decisions (the core holds
    one as ``sim.decisions`` and calls :meth:`step` at each scheduling point)."""

    def __init__(self, sim: SimContext) -> None:
        self.sim = sim

    def step(self, at: float) -> None:
        """Ask the policy for decisions if something changed while work waits (or at all,
        for a policy that decides when idle), or if it asked to be woken."""
        sim = self.sim
        sim._merge_incoming()
        woken = sim.wake_at <= at
        if not woken and (not sim.needs_decision
                          or (len(sim.queue) == 0 and not sim.idle_calls)):
            return
        sim.needs_decision = False
        sim.wake_at = np.inf
        decisions = sim.policy.decide(sim.views.view(at))
        sim.calls += 1
        sim.events += 1
        self.apply(at, decisions)

    def apply(self, at: float, d: Decisions) -> None:
        """Check and apply one call's decisions: stops first, then guaranteed placements in
        order (a node whose allocation then passes its capacity reclaims opportunistic
        containers), then speculative copies (:mod:`pipeline.sim.speculation`), then
        opportunistic ones (sent to the nodes' NodeManagers)."""
        sim = self.sim
        name = sim.policy_name
        if len(d.opp_req) and sim.nm is None:
            raise PolicyError(f"policy '{name}' returned opportunistic decisions "
                              "but its setup asked for no NodeManagers (Needs.node_managers)")
        if len(d.preempt) or len(d.kill):
            self._stops(at, np.asarray(d.preempt, np.int64), np.asarray(d.kill, np.int64))
        if d.wake_at_s is not None:
            sim.wake_at = float(d.wake_at_s)
        req, node = _pairs(name, d.place_req, d.place_node, "place")
        opp_req, opp_node = _pairs(name, d.opp_req, d.opp_node, "opp")
        spec_run, spec_node = _pairs(name, d.spec_run, d.spec_node, "spec")
        opp_slots = self._opp_slots(at, opp_req, opp_node) if len(opp_req) else None
        # models and devices first: a gang needs all its own
        req, node, bound = gpu_checked(sim, req, node, sim.queue.slots)
        if sim.gangs is not None and len(req):
            req, node = sim.gangs.whole(req, node, sim.queue.slots, sim.tasks,
                                        sim.cluster.nodes.dirty)
            if bound:
                bound = self._bound_kept(bound, req)
        if len(req):
            self._place(at, req, node)
        if bound:
            sim.gpus.commit(bound, sim.tasks)
        if opp_slots is not None and np.any(sim.tasks.state[opp_slots] != PENDING):
            raise PolicyError(f"policy '{name}' placed a request both as "
                              f"guaranteed and opportunistic at t={at:g}s")
        if len(req) or opp_slots is not None:
            sim.queue.remove(np.concatenate([req, opp_req]))
        if len(spec_run):
            sim.speculation.launch(at, spec_run, spec_node)
        if opp_slots is not None:
            self._dispatch(at, opp_slots, opp_node)
        if sim.nm is not None and d.opp_queue_limit is not None:
            shed = sim.nm.shed(sim, at, int(d.opp_queue_limit))
            sim.runs.back_to_rm(at, shed)

    def _opp_slots(self, at: float, req: np.ndarray, node: np.ndarray) -> np.ndarray:
        """Check opportunistic decisions (before the queue changes); return their slots."""
        sim = self.sim
        pend, n = sim.queue.slots, sim.cluster.nodes
        bad = np.flatnonzero((req < 0) | (req >= len(pend)) | (node < 0)
                             | (node >= len(n.state)))
        if len(bad) == 0 and len(np.unique(req)) != len(req):
            bad = np.array([len(req) - 1])
        if len(bad) == 0:
            bad = np.flatnonzero(n.state[node] != 2)
        if len(bad):
            i = int(bad[0])
            raise PolicyError(f"policy '{sim.policy_name}' opportunistic placement {i} "
                              f"rejected at t={at:g}s: request {int(req[i])} on node "
                              f"{int(node[i])}: index out of range, repeated or node not up")
        slots = pend[req].copy()
        gpu = np.flatnonzero(sim.tasks.req[slots, 2] > 0)
        if len(gpu):  # (a GPU share is bound to a device for the whole run: never opp.)
            i = int(gpu[0])
            raise PolicyError(f"policy '{sim.policy_name}' opportunistic placement {i} "
                              f"rejected at t={at:g}s: request {int(req[i])} asks for a GPU "
                              "(GPUs are not over-subscribed)")
        return slots

    def _dispatch(self, at: float, slots: np.ndarray, node: np.ndarray) -> None:
        """Send opportunistic containers (taken off the RM's queue) to their nodes'
        NodeManagers; the ones a NodeManager rejects go back to the RM."""
        sim = self.sim
        assert sim.nm is not None
        sim.tasks.last_preempted[slots] = False
        rejected = sim.nm.dispatch(sim, at, slots, node)
        sim.placements += len(slots) - len(rejected)
        sim.runs.back_to_rm(at, np.asarray(rejected, dtype=np.int64))

    def _bound_kept(self, bound: Bindings, req: np.ndarray) -> Bindings:
        """The device bindings of placements a gang check kept; the others given back."""
        sim = self.sim
        assert sim.gpus is not None
        kept = set(sim.queue.slots[req[(req >= 0) & (req < len(sim.queue))]].tolist())
        sim.gpus.undo([b for b in bound if b[0] not in kept])
        return [b for b in bound if b[0] in kept]

    def _place(self, at: float, req: np.ndarray, node: np.ndarray) -> None:
        """Start guaranteed placements ``(req, node)`` (``req`` into the RM's queue)."""
        sim = self.sim
        t, h, n = sim.tasks, sim.heap, sim.cluster.nodes
        slots = sim.queue.slots[req[(req >= 0) & (req < len(sim.queue))]]
        if len(slots) == len(req):  # (a bad index is reported by the kernel below)
            if sim.nm is not None:  # a container the NM once ran is guaranteed now
                t.extra[slots[(t.flags[slots] & TRACKED) != 0], X_OPP] = 0.0
            sim.usage.start(t, at, slots, node, n.speed)
        h.reserve(int(t.counters[kernels.HEAP_N]), len(req))
        bad, code = kernels.apply_placements(at, req, node, sim.queue.slots, h, t, n,
                                             sim.open_flag, sim._read_rate)
        if bad >= 0:
            r, nd = int(req[bad]), int(node[bad])
            pend = sim.queue.slots
            row = int(t.row[pend[r]]) if 0 <= r < len(pend) else -1
            raise PolicyError(
                f"policy '{sim.policy_name}' placement {bad} rejected at t={at:g}s: request "
                f"{r} (trace row {row}) on node {nd}: {_REASONS[code]}"
            )
        sim.placements += len(req)
        sim.events += len(req)
        sim.last_s = max(sim.last_s, at)
        t.last_preempted[slots] = False
        if sim.nm is not None:
            sim.nm.make_room(sim, at, slots, node)

    def _stops(self, at: float, preempt: np.ndarray, kill: np.ndarray) -> None:
        """Check and apply preemptions and kills (indices into the running view shown)."""
        sim = self.sim
        slots = sim.views.running_slots
        every = np.concatenate([preempt, kill])
        if slots is None or np.any((every < 0) | (every >= len(slots))):
            raise PolicyError(f"policy '{sim.policy_name}' preempted or killed a container "
                              "outside view.running (return Needs(running=True) from setup)")
        if len(np.unique(every)) != len(every):
            raise PolicyError(f"policy '{sim.policy_name}' stopped a container twice")
        sim.runs.stop(at, slots[preempt], requeue=True)
        sim.runs.stop(at, slots[kill], requeue=False)
