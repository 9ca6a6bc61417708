"""Quincy's arc costs: data transfer through the rack and core switches, waiting, and the
running arc that prices preemption.

Source: M. Isard, V. Prabhakaran, J. Currey, U. Wieder, K. Talwar, A. Goldberg, "Quincy:
Fair Scheduling for Distributed Computing Clusters", SOSP 2009, section 4 (costs
alpha, rho, gamma, v of a task's arcs to the cluster aggregator X, a rack R_l, a computer
C_m and its unscheduled aggregator U_j); defaults as Firmament's reimplementation
(camsas/firmament ``quincy_cost_model.cc``): omega 0.5 per second waited, psi 1 per GB
through a top-of-rack switch, xi 2 per GB through the core, preferred = holds at least 10%
of the input.  Firmament prices a machine ``psi * (rack data not on the machine) + xi *
(input not in the rack)``; :func:`machine_transfer_cost` is that formula.

The project's data model (``pipeline.replay.dfs``, trace ``inputs``) lists the machines
holding a *replica* of a task's whole input (one HDFS block per map), so a machine holds all
of the input or none of it, and a rack holds all of it when any of its machines does (a
replica is counted once: Firmament's own comment notes it double-counts replicas).  Hence
the preferred machines are the replica holders (cost 0), the preferred racks the racks
holding a replica (cost ``psi * G`` for their worst machine, one without a replica; 0 if
every machine of the rack has one), and X costs ``xi * G`` (the worst machine is in a rack
without a replica) unless every rack has one.  A task without a stated size (``input_mb``
NaN or 0) has transfer cost 0 everywhere: the core charges its reads nothing either.

Costs are floats in Quincy's units; the network needs integers, so :data:`COST_SCALE`
multiplies them (1/100 of a unit: 0.02 s of waiting at omega 0.5) before rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.errors import UsageError

COST_SCALE = 100  # integer cost units per Quincy cost unit
MB_PER_GB = 1024.0
PREFERRED_FRACTION = 0.1  # Firmament's quincy_prefered_{machine,rack}_data_fraction


@dataclass(frozen=True)
class CostModel:
    """Quincy's three cost factors (per second waited, per GB via the ToR, via the core)."""

    omega: float = 0.5
    psi: float = 1.0
    xi: float = 2.0

    def __post_init__(self) -> None:
        """Refuse negative factors: a negative cost would reward transfers or waiting."""
        for name in ("omega", "psi", "xi"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise UsageError(f"policy 'quincy' parameter '{name}': must be a finite "
                                 f"cost >= 0, got {value!r}")


def machine_transfer_cost(input_gb: np.ndarray | float, on_machine_gb: np.ndarray | float,
                          on_rack_gb: np.ndarray | float, psi: float,
                          xi: float) -> np.ndarray | float:
    """Quincy's d for one machine: ``psi`` per GB read from its rack but not from itself,
    ``xi`` per GB read from other racks (``on_rack_gb`` includes ``on_machine_gb``)."""
    return psi * (on_rack_gb - on_machine_gb) + xi * (input_gb - on_rack_gb)


def to_int(cost: np.ndarray) -> np.ndarray:
    """Costs in integer units of 1/COST_SCALE (rounded to nearest)."""
    return np.rint(np.asarray(cost, dtype=np.float64) * COST_SCALE).astype(np.int64)


def waiting_int(model: CostModel, waited_s: np.ndarray) -> np.ndarray:
    """The arc to U_j, ``omega * waited`` in integer units, plus one unit so that a tie
    between waiting and a placement goes to the placement (a task with nothing to read
    starts at once instead of idling at cost 0 = 0)."""
    scaled = model.omega * np.maximum(np.asarray(waited_s, np.float64), 0.0) * COST_SCALE
    return np.floor(scaled).astype(np.int64) + 1


@dataclass
class Topology:
    """Static machine facts the costs need: rack code per machine slot (-1 none), machines
    per rack, and how many machines have no rack."""

    rack: np.ndarray
    per_rack: np.ndarray
    rackless: int

    @classmethod
    def of(cls, rack: np.ndarray) -> Topology:
        """The topology of node slots with rack codes ``rack``."""
        rack = np.asarray(rack, dtype=np.int64)
        n_racks = int(rack.max()) + 1 if len(rack) and rack.max() >= 0 else 0
        per_rack = np.bincount(rack[rack >= 0], minlength=n_racks).astype(np.int64)
        return cls(rack, per_rack, int(np.sum(rack < 0)))


@dataclass
class TaskArcs:
    """The data costs of a set of tasks (floats, Quincy units).

    ``x_cost`` (n,): alpha, the arc to X; ``m_task``/``m_node``/``m_cost``: arcs to
    preferred machines; ``r_task``/``r_rack``/``r_cost``: arcs to preferred racks;
    ``gb`` (n,): input size read; ``holders`` (n, W) distinct holder slots (-1 padded).
    """

    x_cost: np.ndarray
    m_task: np.ndarray
    m_node: np.ndarray
    m_cost: np.ndarray
    r_task: np.ndarray
    r_rack: np.ndarray
    r_cost: np.ndarray
    gb: np.ndarray
    holders: np.ndarray

    def cost_on(self, task: np.ndarray, node: np.ndarray, topo: Topology,
                model: CostModel) -> np.ndarray:
        """Quincy's d for each ``task`` on machine ``node`` (the running arc's base cost)."""
        if len(task) == 0:
            return np.zeros(0)
        rows = self.holders[task]
        on_machine = np.any(rows == node[:, None], axis=1)
        valid = rows >= 0
        holder_rack = np.where(valid, topo.rack[np.maximum(rows, 0)], -2)
        own_rack = topo.rack[node]
        in_rack = on_machine | np.any((holder_rack == own_rack[:, None]) & (own_rack >= 0)[:,
                                      None], axis=1)
        gb = self.gb[task]
        return machine_transfer_cost(gb, np.where(on_machine, gb, 0.0),
                                     np.where(in_rack, gb, 0.0), model.psi, model.xi)


def _distinct_rows(values: np.ndarray) -> np.ndarray:
    """Each row's distinct non-negative values, -1 padded (order not kept)."""
    out = np.sort(np.where(values >= 0, values, np.iinfo(np.int64).max), axis=1)
    dup = np.zeros(out.shape, dtype=np.bool_)
    dup[:, 1:] = out[:, 1:] == out[:, :-1]
    out[dup | (out == np.iinfo(np.int64).max)] = -1
    return out


def task_arcs(inputs: np.ndarray, input_mb: np.ndarray, topo: Topology,
              model: CostModel) -> TaskArcs:
    """Data costs of tasks whose input replicas are on ``inputs`` (node slots, -1 padded)
    and who read ``input_mb`` MiB (see the module docstring for the replica model)."""
    n = len(input_mb)
    gb = np.nan_to_num(np.asarray(input_mb, np.float64), nan=0.0) / MB_PER_GB
    gb = np.maximum(gb, 0.0)
    slots = np.asarray(inputs, np.int64)
    width = slots.shape[-1] if slots.ndim == 2 else (slots.size // n if n else 1)
    holders = _distinct_rows(slots.reshape(n, width))
    holders[gb <= 0] = -1  # nothing to read: no preferences, every cost 0
    valid = holders >= 0
    # preferred machines: a replica holds all the input (>= PREFERRED_FRACTION of it)
    m_task, col = np.nonzero(valid)
    m_node = holders[m_task, col]
    m_cost = machine_transfer_cost(gb[m_task], gb[m_task], gb[m_task], model.psi, model.xi)
    # preferred racks: distinct (task, rack) pairs of the holders, with holder counts
    hr = np.where(valid, topo.rack[np.maximum(holders, 0)], -1)
    racks = _distinct_rows(hr)
    r_task, rcol = np.nonzero(racks >= 0)
    r_rack = racks[r_task, rcol]
    held = np.sum(hr[r_task] == r_rack[:, None], axis=1)
    full = held >= topo.per_rack[r_rack]  # every machine of the rack holds a replica
    worst_rack = np.where(full, gb[r_task], 0.0)  # data on the rack's worst machine
    r_cost = machine_transfer_cost(gb[r_task], worst_rack, gb[r_task], model.psi, model.xi)
    x_cost = _worst_machine_cost(gb, holders, hr, racks, topo, model)
    return TaskArcs(x_cost, m_task.astype(np.int64), m_node.astype(np.int64), m_cost,
                    r_task.astype(np.int64), r_rack.astype(np.int64), r_cost, gb, holders)


def _worst_machine_cost(gb: np.ndarray, holders: np.ndarray, hr: np.ndarray,
                        racks: np.ndarray, topo: Topology, model: CostModel) -> np.ndarray:
    """alpha: the cost on the worst machine of the cluster (one outside every rack holding a
    replica, else one of such a rack without a replica, else 0)."""
    n_machines = len(topo.rack)
    n_holders = np.sum(holders >= 0, axis=1)
    rack_sizes = np.append(topo.per_rack, 0)[racks].sum(axis=1)  # -1 pads: the 0 at the end
    rackless_holders = np.sum((holders >= 0) & (hr < 0), axis=1)
    covered = rack_sizes + rackless_holders  # machines reading at most through their ToR
    worst_rack_gb = np.where(n_holders < n_machines, gb, 0.0)
    return np.where(covered < n_machines,
                    machine_transfer_cost(gb, 0.0, 0.0, model.psi, model.xi),
                    machine_transfer_cost(gb, gb - worst_rack_gb, gb, model.psi, model.xi))
