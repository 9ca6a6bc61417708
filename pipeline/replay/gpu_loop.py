"""The workload-inflation experiment of the FGD paper, as a policy-blind loop.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC'23, and its simulator (hkust-adsl/kubernetes-scheduler-simulator):
the trace's pods are shuffled by a seed, then copies of pods drawn at random from the trace
are appended until one more would take the requested GPU above ``target`` (1.3: 130 %) of
the cluster's GPU capacity.  Time is ignored: pods arrive one by one and never leave.  Each
pod goes where the placement policy (a :class:`~pipeline.policies.gpu.scorers.GpuScorer`)
says; the loop checks the choice (:func:`~pipeline.policies.gpu.devices.bind` refuses a node
or device without room, so no policy can overcommit) and a pod no node can host is dropped,
not retried.  After every pod it logs the arrived workload (GPU requested so far over
capacity), the GPU allocation ratio, and the cluster's fragmentation (milli-GPU and ratio,
:mod:`pipeline.policies.gpu.frag`) against the typical pods of the original trace.

The loop knows no policy by name and does no I/O (:mod:`pipeline.replay.inflation` reads the
trace and writes the run directory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.policies.gpu.devices import GpuNodes, Pod, bind
from pipeline.policies.gpu.frag import node_fragmentation
from pipeline.policies.gpu.typical import TypicalPods


@dataclass(frozen=True)
class Workload:
    """The original pods of the trace (before inflation), as arrays of ``n`` rows."""

    cpu: np.ndarray  # whole milli-cores (int64)
    mem: np.ndarray  # MiB
    num_gpu: np.ndarray  # int
    gpu_milli: np.ndarray  # int share per GPU (1000 whole, 0 without GPU)
    models: list[frozenset[int] | None]  # allowed GPU model codes (None: any)

    @property
    def n(self) -> int:
        """Number of pods."""
        return len(self.cpu)

    def pod(self, i: int) -> Pod:
        """Pod ``i``."""
        return Pod(int(self.cpu[i]), float(self.mem[i]), int(self.num_gpu[i]),
                   int(self.gpu_milli[i]), self.models[i])

    def gpu_request(self) -> np.ndarray:
        """Milli-GPU each pod asks for."""
        return self.num_gpu.astype(np.int64) * self.gpu_milli.astype(np.int64)


@dataclass(frozen=True)
class Arrivals:
    """What happened to each arriving pod, in arrival order (``m`` rows)."""

    pod: np.ndarray  # int64: the original pod's row
    copy: np.ndarray  # bool: an appended copy (inflation), not the pod's own arrival
    node: np.ndarray  # int64 node slot, -1: dropped (no node could host it)
    devices: np.ndarray  # int64 bit mask of the GPU devices bound (bit d = device d)
    arrived: np.ndarray  # float64: GPU requested so far / GPU capacity (after this pod)
    allocated: np.ndarray  # float64: GPU allocated / capacity (after this pod)
    frag_milli: np.ndarray  # float64: cluster fragmentation, milli-GPU (after this pod)
    frag_ratio: np.ndarray  # float64: fragmentation / idle GPU (0 when none is idle)
    first_fail: int  # arrival index of the first dropped pod, -1: none


def arrival_order(workload: Workload, capacity_milli: int, target: float,
                  rng: np.random.Generator, shuffle: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The pods in arrival order: the trace shuffled (``shuffle``; else in its order), then
    random copies appended while the requested GPU stays within ``target`` x capacity.
    Returns (pod rows, is copy).

    The paper's simulator (``tuneUpPods``) compares each copy's GPU share per device, not
    its whole request, with what is left below the target; here a copy's whole request
    counts, so a multi-GPU copy cannot overshoot the target.
    """
    order = rng.permutation(workload.n) if shuffle else np.arange(workload.n)
    request = workload.gpu_request()
    total = int(request.sum())
    limit = target * capacity_milli
    copies: list[int] = []
    gpu_pods = np.flatnonzero(request > 0)
    while len(gpu_pods) and total < limit:
        draws = rng.integers(0, workload.n, size=1024)
        for i in draws:
            if total + request[i] > limit:
                total = limit  # the next pod would pass the target: stop here
                break
            copies.append(int(i))
            total += int(request[i])
    rows = np.concatenate([order, np.asarray(copies, dtype=np.int64)])
    is_copy = np.concatenate([np.zeros(workload.n, bool), np.ones(len(copies), bool)])
    return rows.astype(np.int64), is_copy


def run_inflation(nodes: GpuNodes, workload: Workload, typical: TypicalPods, scorer: object,
                  rng: np.random.Generator, target: float = 1.3,
                  shuffle: bool = True) -> Arrivals:
    """Place the inflated workload pod by pod with ``scorer``; log the cluster after each."""
    capacity = int(nodes.gpu_capacity)
    if capacity <= 0:
        raise ValueError("the cluster has no GPU: the inflation experiment needs GPU nodes")
    rows, is_copy = arrival_order(workload, capacity, target, rng, shuffle)
    m = len(rows)
    node_of = np.full(m, -1, dtype=np.int64)
    mask = np.zeros(m, dtype=np.int64)
    logs = np.zeros((4, m))
    frag = node_fragmentation(nodes, typical)
    request = workload.gpu_request()
    requested = allocated = 0
    first_fail = -1
    for k, row in enumerate(rows):
        pod = workload.pod(int(row))
        requested += int(request[row])
        choice = scorer.choose(nodes, pod, rng)  # type: ignore[attr-defined]
        if choice is None:
            first_fail = k if first_fail < 0 else first_fail
        else:
            node, devices = int(choice[0]), tuple(int(d) for d in choice[1])
            bind(nodes, node, pod, devices)
            scorer.placed(node, pod)  # type: ignore[attr-defined]
            node_of[k] = node
            mask[k] = sum(1 << d for d in devices)
            allocated += pod.gpu_total_milli
            frag[node] = node_fragmentation(nodes, typical, np.array([node]))[0]
        idle = capacity - allocated
        total_frag = float(frag.sum())
        logs[:, k] = (requested / capacity, allocated / capacity, total_frag,
                      total_frag / idle if idle > 0 else 0.0)
    return Arrivals(rows, is_copy, node_of, mask, logs[0], logs[1], logs[2], logs[3],
                    first_fail)
