"""Quincy's flow network as numpy arc arrays, solved by OR-Tools' min-cost flow.

Source: Isard et al., SOSP 2009, section 4 (figure 4); Gleave's description of Firmament's
port (AdamGleave/Hapi ``doc/diss-app-flow-scheduling.tex``).  Vertices, in id order:

    tasks T_i (supply 1) | U_j per job | X | R_l per rack | C_m per machine | sink S

Arcs (capacity; cost): T -> U_j (1; waiting), T -> X (1; alpha), T -> preferred R_l (1;
rho), T -> preferred C_m (1; gamma), a running task's T -> its own C_m (1; gamma - theta),
X -> R_l (sum of its machines' capacities; 0), R_l -> C_m (cap_m; 0), C_m -> S (cap_m; 0),
U_j -> S (F_j - E_j; 0).  U_j has demand N_j - F_j and S the rest of the supply.  Machines
without a rack hang off one extra aggregator under X (only for routing: no task prefers it).

The solver is ``ortools.graph.python.min_cost_flow.SimpleMinCostFlow`` (cost scaling), fed
whole arrays with ``add_arcs_with_capacity_and_unit_cost``; the flow is read back with
``flows`` and turned into one machine (or none) per task by :func:`assign`.  A task that
reaches a machine through X or a rack is matched to a machine of that rack by counting
flows, which is exact because all arcs below X cost 0 (any matching has the same cost).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ortools.graph.python import min_cost_flow

from pipeline.policies.flow.bounds import JobBounds


class InfeasibleNetworkError(RuntimeError):
    """The solver found no feasible flow: a bug in the bounds (never the user's input)."""


@dataclass
class TaskArcSet:
    """Arcs leaving the task vertices: ``task`` index, ``kind`` (see below), ``to`` (job,
    rack or machine index by kind), integer ``cost``."""

    task: np.ndarray
    kind: np.ndarray
    to: np.ndarray
    cost: np.ndarray


TO_U, TO_X, TO_RACK, TO_MACHINE = 0, 1, 2, 3


@dataclass
class Network:
    """One round's network: sizes, arc arrays and supplies, ready for the solver."""

    n_tasks: int
    n_jobs: int
    n_aggs: int
    n_machines: int
    tail: np.ndarray
    head: np.ndarray
    capacity: np.ndarray
    cost: np.ndarray
    supply: np.ndarray
    n_task_arcs: int
    task_arcs: TaskArcSet
    agg_of: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.supply)

    @property
    def n_arcs(self) -> int:
        return len(self.tail)

    def first(self, what: str) -> int:
        """Id of the first vertex of ``what``: u, x, rack, machine, sink."""
        u = self.n_tasks
        x = u + self.n_jobs
        offsets = {"u": u, "x": x, "rack": x + 1, "machine": x + 1 + self.n_aggs,
                   "sink": x + 1 + self.n_aggs + self.n_machines}
        return offsets[what]


def build(arcs: TaskArcSet, n_tasks: int, bounds: JobBounds, machine_cap: np.ndarray,
          machine_rack: np.ndarray) -> Network:
    """The network of ``n_tasks`` tasks with ``arcs``, jobs ``bounds`` and machines of
    capacity ``machine_cap`` in racks ``machine_rack`` (-1: none)."""
    n_jobs, n_machines = len(bounds.n), len(machine_cap)
    rack = np.asarray(machine_rack, np.int64)
    n_racks = int(rack.max()) + 1 if n_machines and rack.max() >= 0 else 0
    agg_of = np.where(rack >= 0, rack, n_racks)  # rackless machines: one extra aggregator
    n_aggs = n_racks + int(np.any(rack < 0))
    net = Network(n_tasks, n_jobs, n_aggs, n_machines, *(np.zeros(0, np.int64),) * 5, 0,
                  arcs, agg_of)
    u0, x, r0, m0, sink = (net.first(w) for w in ("u", "x", "rack", "machine", "sink"))
    base = np.choose(arcs.kind, [u0, x, r0, m0]) if len(arcs.kind) else arcs.kind
    cap = np.asarray(machine_cap, np.int64)
    machines = np.arange(n_machines, dtype=np.int64)
    agg_cap = np.bincount(agg_of, weights=cap, minlength=n_aggs).astype(np.int64)
    net.tail = np.concatenate([arcs.task, np.full(n_aggs, x), r0 + agg_of, m0 + machines,
                               u0 + np.arange(n_jobs)])
    net.head = np.concatenate([base + arcs.to, r0 + np.arange(n_aggs), m0 + machines,
                               np.full(n_machines, sink), np.full(n_jobs, sink)])
    net.capacity = np.concatenate([np.ones(len(arcs.task), np.int64), agg_cap, cap, cap,
                                   bounds.u_capacity])
    net.cost = np.concatenate([arcs.cost, np.zeros(n_aggs + 2 * n_machines + n_jobs,
                                                   np.int64)])
    net.tail, net.head = net.tail.astype(np.int64), net.head.astype(np.int64)
    net.n_task_arcs = len(arcs.task)
    supply = np.zeros(sink + 1, np.int64)
    supply[:n_tasks] = 1
    supply[u0:u0 + n_jobs] = -bounds.u_demand
    supply[sink] = -(n_tasks - int(bounds.u_demand.sum()))
    net.supply = supply
    return net


def solve(net: Network) -> np.ndarray:
    """Solve ``net``; return the flow on each arc (raises InfeasibleNetworkError if none)."""
    flow = min_cost_flow.SimpleMinCostFlow()
    arcs = flow.add_arcs_with_capacity_and_unit_cost(net.tail, net.head, net.capacity,
                                                     net.cost)
    flow.set_nodes_supplies(np.arange(net.n_nodes, dtype=np.int64), net.supply)
    status = flow.solve()
    if status != flow.OPTIMAL:
        raise InfeasibleNetworkError(f"min-cost flow status {status} on {net.n_nodes} vertices, "
                                f"{net.n_arcs} arcs")
    return np.asarray(flow.flows(arcs), dtype=np.int64)


VIA_MACHINE, VIA_X = -1, -2


def assign(net: Network, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Machine index of each task under ``flows`` (-1: left unscheduled), and the route it
    took: VIA_MACHINE (a direct arc), VIA_X, or the rack aggregator's index."""
    a = net.task_arcs
    used = np.flatnonzero(flows[:net.n_task_arcs] > 0)
    dest = np.full(net.n_tasks, -1, np.int64)
    via = np.full(net.n_tasks, VIA_MACHINE, np.int64)
    kind, task, to = a.kind[used], a.task[used], a.to[used]
    direct = kind == TO_MACHINE
    dest[task[direct]] = to[direct]
    via[task[kind == TO_RACK]] = to[kind == TO_RACK]
    via[task[kind == TO_X]] = VIA_X
    # tasks arriving at X are sent on to racks by the X -> R flows, then every task in a
    # rack aggregator (direct or from X) to a machine by the R -> C flows
    k = net.n_task_arcs
    x_flow = flows[k:k + net.n_aggs]
    rc_flow = flows[k + net.n_aggs:k + net.n_aggs + net.n_machines]
    at_x = np.sort(task[kind == TO_X])
    x_rack = np.repeat(np.arange(net.n_aggs), x_flow)
    rack_tasks = np.concatenate([task[kind == TO_RACK], at_x])
    rack_of = np.concatenate([to[kind == TO_RACK], x_rack])
    order = np.lexsort((rack_tasks, rack_of))
    by_rack = np.argsort(net.agg_of, kind="stable")
    machine_seq = np.repeat(by_rack, rc_flow[by_rack])
    if len(machine_seq) != len(order):
        raise InfeasibleNetworkError("flow through the rack aggregators does not balance")
    dest[rack_tasks[order]] = machine_seq
    return dest, via
