"""Cluster Autoscaler's scale-up choice: one option per node group, then the expanders.

Source: cluster-autoscaler-release-1.31: ``estimator/binpacking_estimator.go`` (pods sorted
by score cpu/node_cpu + mem/node_mem, largest first, each onto the first new node it fits,
a new node opened when none fits, up to the group's room), ``expander/random``,
``expander/mostpods``, ``expander/waste/waste.go`` and ``expander/price/price.go`` with
``preferred.go`` (formulas in ``docs/families/cluster-autoscaler.md``).  An ``--expander``
chain narrows the options expander by expander; more than one left is settled at random.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.sim.binpack import first_fit

# GCE's pricing model (cloudprovider/gce/gce_price_model.go), which the price expander
# prices pods with: USD per vCPU-hour, per GiB-hour, per GPU-hour
CPU_PRICE, MEM_PRICE, GPU_PRICE = 0.033174, 0.004446, 0.700
STABILIZATION_POD = (0.5, 500 / 1024, 0.0)  # vCPU, GiB, GPUs: priceStabilizationPod
GPU_UNFITNESS = 1000.0


@dataclass(frozen=True)
class Option:
    """Growing node group ``group`` by ``count`` nodes would schedule pods ``pods``
    (indices into the pending pods considered)."""

    group: int
    count: int
    pods: np.ndarray


def estimate(req: np.ndarray, cap: np.ndarray, limit: int) -> tuple[int, np.ndarray]:
    """Nodes of allocatable ``cap`` the binpacking estimator opens for pods ``req`` (at most
    ``limit``) and which pods they take (bool, in ``req``'s order)."""
    score = np.zeros(len(req))
    for r in range(2):
        if cap[r] > 0:
            score += req[:, r] / cap[r]
    order = np.argsort(-score, kind="stable")
    placed = np.zeros(len(req), dtype=np.bool_)
    used = first_fit(np.ascontiguousarray(req[order], dtype=np.float64),
                     np.asarray(cap, np.float64), int(limit), placed, False)
    out = np.zeros(len(req), dtype=np.bool_)
    out[order] = placed
    return used, out


@dataclass(frozen=True)
class Groups:
    """What the expanders know of each node group: allocatable and capacity in vCPU / GiB /
    GPUs (``alloc``, ``capacity``, (G, 3)) and the price per node-hour."""

    alloc: np.ndarray
    capacity: np.ndarray
    price: np.ndarray


def choose(options: list[Option], expanders: tuple[str, ...], groups: Groups,
           pod_req: np.ndarray, cluster_size: int, rng: np.random.Generator) -> Option | None:
    """The option the ``expanders`` chain picks (``pod_req`` in vCPU / GiB / GPUs)."""
    left = list(options)
    for name in expanders:
        if len(left) <= 1:
            break
        left = _EXPANDERS[name](left, groups, pod_req, cluster_size)
    if not left:
        return None
    return left[0] if len(left) == 1 else left[int(rng.integers(len(left)))]


def _random(options: list[Option], *_: object) -> list[Option]:
    return options


def _most_pods(options: list[Option], *_: object) -> list[Option]:
    best = max(len(o.pods) for o in options)
    return [o for o in options if len(o.pods) == best]


def waste(option: Option, groups: Groups, pod_req: np.ndarray) -> float:
    """least-waste's score: the cpu and the memory left unrequested on the new nodes'
    capacity, each as a fraction, summed."""
    asked = pod_req[option.pods].sum(axis=0) if len(option.pods) else np.zeros(3)
    avail = groups.capacity[option.group] * option.count
    return float((avail[0] - asked[0]) / avail[0] + (avail[1] - asked[1]) / avail[1])


def _least_waste(options: list[Option], groups: Groups, pod_req: np.ndarray,
                 _size: int) -> list[Option]:
    scores = [waste(o, groups, pod_req) for o in options]
    best = min(scores)
    return [o for o, s in zip(options, scores, strict=True) if s == best]


def preferred_vcpu(cluster_size: int) -> float:
    """The price expander's preferred node: its vCPUs double each time the cluster triples."""
    for limit, cpu in ((2, 1), (6, 2), (20, 4), (60, 8), (200, 16)):
        if cluster_size <= limit:
            return float(cpu)
    return 32.0


def pod_price(req: np.ndarray) -> float:
    """An hour of the requests ``req`` (rows of vCPU, GiB, GPUs) at GCE's prices."""
    req = np.asarray(req, dtype=np.float64).reshape(-1, 3)
    return float(req[:, 0].sum() * CPU_PRICE + req[:, 1].sum() * MEM_PRICE
                 + req[:, 2].sum() * GPU_PRICE)


def price_score(option: Option, groups: Groups, pod_req: np.ndarray, cluster_size: int) -> float:
    """The price expander's score (lower is better)."""
    stab = pod_price(np.array(STABILIZATION_POD))
    nodes = groups.price[option.group] * option.count
    ratio = (nodes + stab) / (pod_price(pod_req[option.pods]) + stab)
    cpu, pref = groups.capacity[option.group, 0], preferred_vcpu(cluster_size)
    unfit = max(pref / cpu, cpu / pref)
    suppressed = (unfit - 1.0) * (1.0 - math.tanh((option.count - 1) / 15.0)) + 1.0
    if groups.capacity[option.group, 2] > 0:
        suppressed = GPU_UNFITNESS
    return suppressed * ratio


def _price(options: list[Option], groups: Groups, pod_req: np.ndarray,
           size: int) -> list[Option]:
    scores = [price_score(o, groups, pod_req, size) for o in options]
    return [options[int(np.argmin(scores))]]  # the first of the lowest, as price.go keeps


_EXPANDERS = {"random": _random, "most-pods": _most_pods, "least-waste": _least_waste,
              "price": _price}
