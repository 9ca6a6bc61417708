"""Clusters the core replays on: array-shaped node state and the fixed (trace) cluster.

A cluster owns its nodes' capacities and up/down state and the record of when each node was
provisioned (``intervals``).  It knows nothing of tasks or policies: the core tells it when
time passes and asks it which node events are due.  The elastic cluster (template nodes and
an autoscaler) lives in :mod:`pipeline.sim.autoscaler`.
"""

from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass

import numpy as np

ABSENT, BOOTING, UP, DOWN = 0, 1, 2, 3
# up and billed, running its tasks but taking no new ones (Karpenter's
# karpenter.sh/disrupted:NoSchedule taint on a node it is about to replace)
CORDONED = 4
FIT_EPS = 1e-9


@dataclass(frozen=True)
class ClusterSpec:
    """How to build the cluster of a run (all fields resolved; see pipeline.replay.options).

    ``kind`` is ``fixed`` (the trace's machines, with their add/remove times and downtime)
    or ``elastic`` (identical template nodes, scaled between ``min_nodes`` and
    ``max_nodes``).  ``billing_s`` is the billing granularity (1 = per second, 3600 = per
    started hour); ``price_per_hour`` is charged for every provisioned node.  ``dfs`` and
    its block layout, ``rack_size`` and the read rates describe storage and network
    (``pipeline.replay.options``).
    """

    kind: str = "fixed"
    price_per_hour: float = 0.192
    billing_s: float = 1.0
    node_cpu: float = 0.0
    node_mem: float = 0.0
    node_gpu: float = 0.0
    min_nodes: int = 0
    max_nodes: int = 0
    initial_nodes: int = 0
    boot_delay_s: float = 120.0
    upscale_wait_s: float = 180.0
    idle_s: float = 60.0
    dfs: str = "off"
    block_mb: float = 128.0
    replication: int = 3
    rack_size: int = 30
    node_mb_s: float = 128.0
    rack_mb_s: float = 96.0
    core_mb_s: float = 64.0
    # heterogeneity (pipeline.replay.speeds): a share of machines slowed by a factor, and
    # speeds by machine platform
    slow_fraction: float = 0.0
    slow_factor: float = 2.5
    platform_speed: str = ""
    # transient contention: each machine slowed by a factor for periods that come and go
    contention_share: float = 0.0
    contention_factor: float = 2.5
    contention_mean_s: float = 600.0
    # Kubernetes cluster models (pipeline.sim.kubernetes): the instance catalog, Cluster
    # Autoscaler's flags (a file or the flags themselves), the default node groups, and how
    # many vCPUs and GiB one trace unit is; the files' sha256 make part of a run's identity
    catalog: str = ""
    catalog_sha256: str = ""
    autoscaler_flags: str = ""
    flags_sha256: str = ""
    node_groups: str = ""
    vcpu_per_unit: float = 0.0
    gib_per_unit: float = 0.0
    safe_to_evict: bool = True
    nodepool: str = ""  # Karpenter's NodePool file
    nodepool_sha256: str = ""
    # what the report calls the cluster ("CA m5.2xlarge", "CA 4 types least-waste")
    label: str = ""

    def to_dict(self) -> dict[str, object]:
        """The fields that matter for this kind of cluster (fixed: no template or scaling;
        the speed fields only when some machine's speed is changed)."""
        fields = asdict(self)
        if self.slow_fraction == 0 and not self.platform_speed:
            fields = {k: v for k, v in fields.items() if k not in SPEED_FIELDS}
        if self.contention_share == 0:
            fields = {k: v for k, v in fields.items() if k not in CONTENTION_FIELDS}
        # a Kubernetes model has no template and only its own model's fields; other kinds
        # have none of them
        dropped = {"cluster-autoscaler": KARPENTER_FIELDS + TEMPLATE_FIELDS,
                   "karpenter": CA_FIELDS + TEMPLATE_FIELDS}.get(self.kind, KUBE_FIELDS)
        fields = {k: v for k, v in fields.items() if k not in dropped}
        if self.kind == "fixed":
            return {k: v for k, v in fields.items() if k not in ELASTIC_FIELDS}
        return fields

    @property
    def read_mb_s(self) -> tuple[float, float, float]:
        """Read rates by locality level: node, rack, off-rack."""
        return (self.node_mb_s, self.rack_mb_s, self.core_mb_s)


SPEED_FIELDS = ("slow_fraction", "slow_factor", "platform_speed")
CONTENTION_FIELDS = ("contention_share", "contention_factor", "contention_mean_s")
KUBE_KINDS = ("cluster-autoscaler", "karpenter")
CA_FIELDS = ("autoscaler_flags", "flags_sha256", "node_groups", "safe_to_evict")
KARPENTER_FIELDS = ("nodepool", "nodepool_sha256")
KUBE_FIELDS = ("catalog", "catalog_sha256", "autoscaler_flags", "flags_sha256", "node_groups",
               "vcpu_per_unit", "gib_per_unit", "safe_to_evict", "label", "nodepool",
               "nodepool_sha256")
TEMPLATE_FIELDS = ("node_cpu", "node_mem", "node_gpu", "min_nodes", "initial_nodes",
                   "upscale_wait_s", "idle_s")
ELASTIC_FIELDS = ("node_cpu", "node_mem", "node_gpu", "min_nodes", "max_nodes",
                  "initial_nodes", "boot_delay_s", "upscale_wait_s", "idle_s")


class NodeState:
    """Struct-of-arrays node state, one row per node slot (the core and kernels mutate it)."""

    def __init__(self, n: int) -> None:
        self.cap = np.zeros((n, 3))
        self.alloc = np.zeros((n, 3))  # guaranteed containers (what the RM accounts)
        self.oalloc = np.zeros((n, 3))  # opportunistic containers running (NM-side)
        self.oppq = np.zeros(n, dtype=np.int32)  # opportunistic containers queued at the NM
        self.oppq_since = np.full(n, np.nan)  # when the NM's oldest queued one was queued
        self.used = np.zeros((n, 2))
        self.ncont = np.zeros(n, dtype=np.int32)
        self.state = np.zeros(n, dtype=np.int8)
        self.speed = np.ones(n)
        self.rack = np.full(n, -1, dtype=np.int32)
        self.idle_since = np.zeros(n)
        self.dirty = np.ones(n, dtype=np.bool_)
        self.instance = np.full(n, -1, dtype=np.int64)
        # tasks finished on each node's current incarnation and their summed run times
        # (speculation rules judge slow nodes by them: LATE, Hadoop 0.21)
        self.done = np.zeros(n, dtype=np.int64)
        self.done_s = np.zeros(n)

    def __len__(self) -> int:
        return len(self.state)

    def n_provisioned(self) -> int:
        """Nodes billed now (booting, up or cordoned)."""
        return int(np.count_nonzero(self.live()))

    def live(self) -> np.ndarray:
        """Node slots billed now: booting, up or cordoned."""
        return (self.state == BOOTING) | (self.state == UP) | (self.state == CORDONED)

    def bring_up(self, t: float, node: int) -> None:
        """Mark ``node`` up and empty at time ``t``."""
        self.state[node] = UP
        self.idle_since[node] = t
        self.alloc[node] = 0.0
        self.oalloc[node] = 0.0
        self.oppq[node] = 0
        self.oppq_since[node] = np.nan
        self.used[node] = 0.0
        self.ncont[node] = 0
        self.done[node] = 0
        self.done_s[node] = 0.0
        self.dirty[node] = True


def maximal_shapes(cap: np.ndarray) -> np.ndarray:
    """The capacity vectors not dominated by another (a request fits some node iff it fits one)."""
    shapes = np.unique(cap, axis=0)
    keep = [
        i for i, s in enumerate(shapes)
        if not np.any(np.all(shapes >= s, axis=1) & np.any(shapes > s, axis=1))
    ]
    return shapes[keep]


def fits_some(req: np.ndarray, shapes: np.ndarray) -> np.ndarray:
    """Whether each request row fits at least one of ``shapes`` (with float slack)."""
    ok = np.zeros(len(req), dtype=np.bool_)
    for shape in shapes:
        ok |= np.all(req <= shape * (1 + FIT_EPS) + 1e-12, axis=1)
    return ok


class Intervals:
    """When each node instance was provisioned: ``(instance, up_s, ready_s, down_s)`` rows."""

    def __init__(self) -> None:
        self.rows: list[list[float]] = []
        self.open: dict[int, int] = {}

    def start(self, instance: int, up_s: float, ready_s: float) -> None:
        self.open[instance] = len(self.rows)
        self.rows.append([instance, up_s, ready_s, np.nan])

    def stop(self, instance: int, down_s: float) -> None:
        self.rows[self.open.pop(instance)][3] = down_s

    def close_all(self, end_s: float) -> None:
        """Close every open interval at ``end_s`` (a booting node never became ready)."""
        for instance in sorted(self.open):
            row = self.rows[self.open[instance]]
            row[2] = min(row[2], end_s)
            row[3] = end_s
        self.open.clear()


def up_periods(added: np.ndarray, removed: np.ndarray, down_node: np.ndarray,
               down_s: np.ndarray, up_s: np.ndarray) -> list[tuple[int, float, float]]:
    """Each machine's up periods: [added, removed) minus its downtime intervals.

    ``removed``/``up_s`` are NaN where open-ended.  Returns ``(node, start, end)`` sorted by
    start then node, with ``end`` = inf when the machine stays up.
    """
    by_node: dict[int, list[tuple[float, float]]] = {}
    for node, lo, hi in zip(down_node.tolist(), down_s.tolist(), up_s.tolist(), strict=True):
        by_node.setdefault(node, []).append((lo, np.inf if np.isnan(hi) else hi))
    periods = []
    for node in range(len(added)):
        start = float(added[node])
        stop = np.inf if np.isnan(removed[node]) else float(removed[node])
        for lo, hi in sorted(by_node.get(node, [])):
            if lo > start:
                periods.append((node, start, min(lo, stop)))
            start = max(start, hi)
        if stop > start:
            periods.append((node, start, stop))
    periods = [p for p in periods if p[2] > p[1]]
    return sorted(periods, key=lambda p: (p[1], p[0]))


class FixedCluster:
    """The trace's machines: up and down when the trace says, never scaled."""

    kind = "fixed"
    drains = False  # deletes no busy node (pipeline.sim.kubernetes does)
    min_nodes: int | None = None
    max_nodes: int | None = None

    def __init__(self, spec: ClusterSpec, machine_ids: list[str], cap: np.ndarray,
                 speed: np.ndarray, rack: np.ndarray,
                 periods: list[tuple[int, float, float]]) -> None:
        self.spec = spec
        self.nodes = NodeState(len(machine_ids))
        self.nodes.cap[:] = cap
        self.nodes.speed[:] = speed
        self.nodes.rack[:] = rack
        self.nodes.instance[:] = np.arange(len(machine_ids))
        self.machine_ids = list(machine_ids)
        self.n_racks = int(rack.max()) + 1 if len(rack) else 0
        self.shapes = maximal_shapes(cap) if len(cap) else np.zeros((0, 3))
        self.intervals = Intervals()
        events = [(s, 1, n) for n, s, _ in periods]
        events += [(e, 0, n) for n, _, e in periods if np.isfinite(e)]
        events.sort()  # by time, downs before ups, then node
        self._ev_time = np.array([e[0] for e in events], dtype=np.float64)
        self._ev_kind = np.array([e[1] for e in events], dtype=np.int8)
        self._ev_node = np.array([e[2] for e in events], dtype=np.int64)
        self._ev_i = 0

    def next_event(self) -> float:
        """Time of the next machine up/down event, or +inf."""
        return float(self._ev_time[self._ev_i]) if self._ev_i < len(self._ev_time) else np.inf

    def pop_event(self) -> tuple[float, int, bool]:
        """The next event as ``(time, node, is_up)``."""
        i = self._ev_i
        self._ev_i += 1
        return float(self._ev_time[i]), int(self._ev_node[i]), bool(self._ev_kind[i])

    def node_up(self, t: float, node: int) -> None:
        self.nodes.bring_up(t, node)
        self.intervals.start(int(self.nodes.instance[node]), t, t)

    def node_down(self, t: float, node: int) -> None:
        self.nodes.state[node] = DOWN
        self.nodes.dirty[node] = True
        self.intervals.stop(int(self.nodes.instance[node]), t)

    def fits_some(self, req: np.ndarray) -> np.ndarray:
        return fits_some(req, self.shapes)

    def autoscale(self, now: float, pending_req: np.ndarray, pending_enter: np.ndarray) -> int:
        return 0

    def next_check(self, now: float, pending_enter: np.ndarray) -> float:
        return np.inf

    def price_per_hour(self, instance: int) -> float:
        return self.spec.price_per_hour

    def close(self, end_s: float) -> None:
        self.intervals.close_all(end_s)


class BootQueue:
    """Nodes booting, kept by the time each becomes ready (ties in request order): the
    boot events an elastic cluster model hands the core (``next_event``, ``pop_event``,
    ``node_up``).  The model sets ``nodes``."""

    nodes: NodeState

    def __init__(self) -> None:
        self._events: list[tuple[float, int, int]] = []
        self._seq = 0

    def boot(self, node: int, ready_s: float) -> None:
        """``node`` becomes ready at ``ready_s`` (an event of its own, even with no delay,
        so the core makes a scheduling point for it)."""
        heapq.heappush(self._events, (ready_s, self._seq, node))
        self._seq += 1

    def next_event(self) -> float:
        """Time the next booting node becomes ready, or +inf."""
        return self._events[0][0] if self._events else np.inf

    def pop_event(self) -> tuple[float, int, bool]:
        t, _, node = heapq.heappop(self._events)
        return t, node, True

    def node_up(self, t: float, node: int) -> None:
        self.nodes.bring_up(t, node)
