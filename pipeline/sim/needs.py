"""What a policy asks the core for: the one typed value its ``setup()`` returns.

The core builds only what a policy declares here (a running view costs O(running
containers) per call, heartbeats and NodeManagers cost state per node), and reads nothing
else about the policy.  A layer (:mod:`pipeline.policies.layers`) returns what the policy
it wraps needs plus its own, with :meth:`Needs.merged`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class NMOptions:
    """NodeManager settings for opportunistic containers (one set for every node;
    :mod:`pipeline.sim.nodemanager`)."""

    max_queue: int = 10
    pause: bool = False
    overalloc: tuple[float, float] = (0.0, 0.0)  # cpu, mem utilization thresholds; 0: off
    preempt: tuple[float, float] = (1.0, 1.0)  # cpu, mem preemption thresholds
    preempt_cpu_count: int = 2  # checks above the cpu threshold passed before reclaiming
    monitor_s: float = 3.0

    @property
    def overallocating(self) -> bool:
        return self.overalloc[0] > 0 or self.overalloc[1] > 0


@dataclass(frozen=True)
class Needs:
    """What the core sets up for one run of a policy.

    ``heartbeat_s``: seconds between node heartbeats offered in ``SchedView.offers``
    (:mod:`pipeline.sim.heartbeat`), None for none.  ``running``: ``SchedView.running``
    is built (policies that preempt, move or speculate).  ``job_stats``: ``SchedView.jobs``
    (per job and task kind, for speculation rules).  ``idle_calls``: the policy is called
    at every scheduling point where something changed, even with nothing waiting (one that
    moves running work when room frees: Quincy's QFP).  ``node_managers``: the NodeManagers
    queue, start, pause and kill opportunistic containers with these options; None: no
    opportunistic containers.
    """

    heartbeat_s: float | None = None
    running: bool = False
    job_stats: bool = False
    idle_calls: bool = False
    node_managers: NMOptions | None = None

    def merged(self, **own: object) -> Needs:
        """These needs with a layer's ``own`` added: flags are or-ed, values set."""
        flags = {k: bool(getattr(self, k)) or bool(v) for k, v in own.items()
                 if k in ("running", "job_stats", "idle_calls")}
        values = {k: v for k, v in own.items() if k not in flags}
        return replace(self, **flags, **values)  # type: ignore[arg-type]
