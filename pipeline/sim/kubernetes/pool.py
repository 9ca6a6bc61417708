"""Node slots of several instance types: what Kubernetes cluster models buy and release.

Each slot holds at most one node at a time; a node is an *instance* (its own machine id,
``TYPE-NNNNNN``, and provisioning interval).  Capacities and prices are per instance type, so
cost is per type.  A bought node is billed from its request and takes pods ``boot_delay_s``
later, as the elastic cluster's do (:mod:`pipeline.sim.autoscaler`).
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.cluster import ABSENT, BOOTING, BootQueue, Intervals, NodeState


class TypedPool(BootQueue):
    """``n_slots`` node slots; types ``names`` with allocatable ``caps`` (T, 3) and ``prices``."""

    def __init__(self, names: tuple[str, ...], caps: np.ndarray, prices: np.ndarray,
                 n_slots: int) -> None:
        super().__init__()
        self.names = names
        self.type_cap = np.asarray(caps, dtype=np.float64).reshape(-1, 3)
        self.type_price = np.asarray(prices, dtype=np.float64)
        self.nodes = NodeState(n_slots)
        self.slot_type = np.full(n_slots, -1, dtype=np.int64)
        self.machine_ids: list[str] = []
        self.instance_type: list[int] = []
        self.intervals = Intervals()

    def provision(self, t: float, typ: int, ready_s: float) -> int:
        """Buy a node of type ``typ`` at ``t`` in the lowest free slot; up at ``ready_s``."""
        free = np.flatnonzero(self.nodes.state == ABSENT)
        if len(free) == 0:
            raise AssertionError("no free node slot (the cluster model's limits allow more)")
        node = int(free[0])
        instance = len(self.machine_ids)
        self.machine_ids.append(f"{self.names[typ]}-{instance:06d}")
        self.instance_type.append(typ)
        st = self.nodes
        st.instance[node] = instance
        st.state[node] = BOOTING
        st.cap[node] = self.type_cap[typ]
        st.dirty[node] = True
        self.slot_type[node] = typ
        self.intervals.start(instance, t, ready_s)
        if ready_s <= t:
            st.bring_up(t, node)
        else:
            self.boot(node, ready_s)
        return node

    def remove(self, t: float, node: int) -> None:
        """Release ``node`` at ``t`` (its pods already gone)."""
        st = self.nodes
        st.state[node] = ABSENT
        st.dirty[node] = True
        self.intervals.stop(int(st.instance[node]), t)
        st.instance[node] = -1
        self.slot_type[node] = -1

    def size(self, typ: int) -> int:
        """Nodes of type ``typ`` provisioned now (booting, up or cordoned)."""
        return int(np.count_nonzero(self.nodes.live() & (self.slot_type == typ)))

    def price_per_hour(self, instance: int) -> float:
        return float(self.type_price[self.instance_type[instance]])

    def instance_caps(self) -> np.ndarray:
        """Allocatable (cpu, mem, gpu) of every instance so far, (instances, 3)."""
        return self.type_cap[np.asarray(self.instance_type, dtype=np.int64)].reshape(-1, 3)

    def instance_types(self) -> list[str]:
        """The instance type of every instance so far."""
        return [self.names[typ] for typ in self.instance_type]

    def close(self, end_s: float) -> None:
        self.intervals.close_all(end_s)
