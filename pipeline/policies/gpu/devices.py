"""Array-shaped GPU cluster state, pod requests, and the fit / bind rules every policy shares.

Semantics follow the authors' simulator (hkust-adsl/kubernetes-scheduler-simulator, snapshot
8f3d641): a node has free CPU, free memory and one free share per GPU device (milli-GPU, 1000
= a whole GPU).  A pod asks for CPU, memory and either nothing, a share (< 1000) of one GPU,
or ``num_gpu`` whole GPUs; a share never spans devices.  The filter is the simulator's
Open-Gpu-Share filter (``pkg/simulator/plugin/open_gpu_share.go``) plus kube-scheduler's
NodeResourcesFit for CPU and memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.sim.gpus import MILLI, device_mask

NO_DEVICE = -1  # gpu_free entry of a device slot the node does not have
CPU_ONLY = -1  # model code of a node without GPUs


def whole_milli(milli: Sequence[float] | np.ndarray | float) -> np.ndarray:
    """CPU in whole milli-cores, as Kubernetes and the FGD simulator count it: a finer value
    rounds up to the next 1m (``resource.Quantity``), after the float noise of a round trip
    (a trace's ``cpu_milli`` / 1000 * 1000) is dropped, so such values come back exactly and
    fits and sums are exact integer arithmetic (0.1 + 0.2 + 0.7 cores is 1000 m, not more)."""
    return np.ceil(np.round(np.asarray(milli, dtype=np.float64), 6)).astype(np.int64)


@dataclass
class GpuNodes:
    """Free resources of every node: CPU (whole milli-cores, int64), memory (MiB) and
    per-device GPU share.

    ``gpu_free[i, d]`` is the free milli-GPU of device ``d`` of node ``i`` (-1 where node ``i``
    has fewer than ``d + 1`` devices); ``model[i]`` indexes ``models`` (-1: CPU-only node).
    """

    cpu_free: np.ndarray
    mem_free: np.ndarray
    gpu_free: np.ndarray
    model: np.ndarray
    models: tuple[str, ...]

    @classmethod
    def build(cls, cpu_milli: Sequence[float] | np.ndarray, mem_mib: Sequence[float] | np.ndarray,
              n_gpu: Sequence[int] | np.ndarray,
              model_names: Sequence[str | None]) -> GpuNodes:
        """An idle cluster (CPU rounded to whole milli-cores, :func:`whole_milli`); model codes
        follow the sorted model names (code order = name order)."""
        cpu = whole_milli(cpu_milli)
        mem = np.asarray(mem_mib, dtype=np.float64).copy()
        counts = np.asarray(n_gpu, dtype=np.int64)
        n = len(cpu)
        if not (len(mem) == len(counts) == len(model_names) == n):
            raise ValueError(f"GpuNodes.build: lengths differ (cpu {n}, mem {len(mem)}, "
                             f"n_gpu {len(counts)}, model_names {len(model_names)})")
        if n and counts.min() < 0:
            raise ValueError(f"GpuNodes.build: negative GPU count at node {int(counts.argmin())}")
        for i, (count, name) in enumerate(zip(counts, model_names, strict=True)):
            if (count > 0) != bool(name):
                raise ValueError(f"GpuNodes.build: node {i} has {count} GPUs but model {name!r} "
                                 "(GPU nodes need a model name, CPU-only nodes none)")
        models = tuple(sorted({name for name in model_names if name}))
        code = {name: c for c, name in enumerate(models)}
        model = np.array([code[m] if m else CPU_ONLY for m in model_names], dtype=np.int32)
        width = int(counts.max()) if n else 0
        slots = np.arange(width)[None, :]
        gpu_free = np.where(slots < counts[:, None], MILLI, NO_DEVICE).astype(np.int64)
        return cls(cpu, mem, gpu_free, model, models)

    def copy(self) -> GpuNodes:
        """An independent copy (arrays copied, model names shared)."""
        return GpuNodes(self.cpu_free.copy(), self.mem_free.copy(), self.gpu_free.copy(),
                        self.model.copy(), self.models)

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.cpu_free)

    @property
    def n_devices(self) -> np.ndarray:
        """GPU devices per node (n,)."""
        return (self.gpu_free >= 0).sum(axis=1)

    @property
    def gpu_capacity(self) -> int:
        """Milli-GPU of all devices in the cluster."""
        return int(self.n_devices.sum()) * MILLI

    @property
    def gpu_idle_per_node(self) -> np.ndarray:
        """Free milli-GPU of each node (n,), summed over its devices."""
        return np.where(self.gpu_free > 0, self.gpu_free, 0).sum(axis=1)

    @property
    def gpu_idle(self) -> int:
        """Free milli-GPU summed over all devices."""
        return int(self.gpu_idle_per_node.sum())

    @property
    def gpu_allocated(self) -> int:
        """Allocated milli-GPU summed over all devices."""
        return self.gpu_capacity - self.gpu_idle

    def model_code(self, name: str) -> int:
        """The code of GPU model ``name`` (ValueError naming the known models otherwise)."""
        if name not in self.models:
            raise ValueError(f"unknown GPU model {name!r} (known: {', '.join(self.models)})")
        return self.models.index(name)


@dataclass(frozen=True)
class Pod:
    """One pod's request: CPU (whole milli-cores; a finer value rounds up, as
    :func:`whole_milli`), memory (MiB), GPUs and allowed GPU models.

    ``gpu_milli`` is the share per GPU: < 1000 only for a one-GPU sharing pod, 1000 for whole
    GPUs, 0 when ``num_gpu`` is 0.  ``models`` holds the allowed model codes (None: any).
    """

    cpu: int
    mem: float
    num_gpu: int = 0
    gpu_milli: int = 0
    models: frozenset[int] | None = None

    def __post_init__(self) -> None:
        """Reject requests the simulator cannot express (it panics on them)."""
        if self.cpu < 0 or self.mem < 0:
            raise ValueError(f"Pod: negative cpu {self.cpu} or mem {self.mem}")
        object.__setattr__(self, "cpu", int(whole_milli(self.cpu)))
        if self.num_gpu < 0:
            raise ValueError(f"Pod: negative num_gpu {self.num_gpu}")
        if self.num_gpu == 0 and self.gpu_milli != 0:
            raise ValueError(f"Pod: gpu_milli {self.gpu_milli} without GPUs (num_gpu 0)")
        if self.num_gpu > 0 and not 0 < self.gpu_milli <= MILLI:
            raise ValueError(f"Pod: gpu_milli {self.gpu_milli} outside (0, {MILLI}]")
        if self.num_gpu > 1 and self.gpu_milli != MILLI:
            raise ValueError(f"Pod: a share ({self.gpu_milli}) of {self.num_gpu} GPUs; "
                             "only one-GPU pods may share a GPU")

    @property
    def gpu_total_milli(self) -> int:
        """Milli-GPU requested in all."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_sharing(self) -> bool:
        """True for a pod asking for part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI


def model_allowed(nodes: GpuNodes, pod: Pod) -> np.ndarray:
    """(n,) bool: the node's GPU model suits the pod (CPU-only pods: every node)."""
    if pod.num_gpu == 0 or pod.models is None:
        return np.ones(nodes.n, dtype=bool)
    table = np.zeros(len(nodes.models) + 1, dtype=bool)  # slot 0 is CPU_ONLY (-1)
    for code in pod.models:
        if 0 <= code < len(nodes.models):
            table[code + 1] = True
    return table[nodes.model + 1]


def feasible(nodes: GpuNodes, pod: Pod) -> np.ndarray:
    """(n,) bool: the node can host the pod now (CPU, memory, model, enough fitting devices).

    CPU-only pods may go to any node, GPU nodes included (the simulator's GPU filter passes
    pods without a GPU request); a GPU pod needs ``num_gpu`` devices each with free share
    at least ``gpu_milli``, so whole GPUs need fully free devices.
    """
    ok = (nodes.cpu_free >= pod.cpu) & (nodes.mem_free >= pod.mem)
    if pod.num_gpu == 0:
        return ok
    fitting = (nodes.gpu_free >= pod.gpu_milli).sum(axis=1)
    return ok & (fitting >= pod.num_gpu) & model_allowed(nodes, pod)


def choose_devices(nodes: GpuNodes, node: int, pod: Pod) -> tuple[int, ...]:
    """Devices a non-FGD policy binds on ``node``: the tightest fit for a share, else the
    lowest-indexed fully free devices; () for a CPU-only pod.  The rule is the replay
    core's (:func:`pipeline.sim.gpus.device_mask`, the simulator's best-fit GPU selection
    ``allocateGpuIdBasedOnBestFit``; for whole GPUs it equals the least-sufficient-first
    rule of ``NodeResource.Sub``); ValueError when the devices are not free."""
    if pod.num_gpu == 0:
        return ()
    free = nodes.gpu_free[node]
    whole = not pod.is_sharing
    want = pod.num_gpu if whole else pod.gpu_milli
    bits = int(device_mask(np.ascontiguousarray(free, dtype=np.int64), want, whole))
    if bits == 0:
        what = f"{want} whole GPUs" if whole else f"a {want} milli-GPU share"
        raise ValueError(f"no devices free for {what} (free: {free.tolist()})")
    return tuple(d for d in range(len(free)) if (bits >> d) & 1)


def _bind_error(node: int, pod: Pod, devices: tuple[int, ...], nodes: GpuNodes) -> str | None:
    """Why ``pod`` cannot be bound to ``devices`` of ``node``, or None when it fits."""
    if not 0 <= node < nodes.n:
        return f"node {node} outside 0..{nodes.n - 1}"
    if nodes.cpu_free[node] < pod.cpu:
        return f"cpu {pod.cpu} > free {nodes.cpu_free[node]}"
    if nodes.mem_free[node] < pod.mem:
        return f"mem {pod.mem} > free {nodes.mem_free[node]}"
    if len(devices) != pod.num_gpu or len(set(devices)) != len(devices):
        return f"{pod.num_gpu} distinct devices needed, got {devices}"
    if pod.num_gpu and not model_allowed(nodes, pod)[node]:
        return f"model code {nodes.model[node]} not in {sorted(pod.models or ())}"
    width = nodes.gpu_free.shape[1]
    for d in devices:
        if not 0 <= d < width or nodes.gpu_free[node, d] < 0:
            return f"device {d} does not exist"
        if nodes.gpu_free[node, d] < pod.gpu_milli:
            return f"device {d} has {nodes.gpu_free[node, d]} milli free < {pod.gpu_milli}"
    return None


def bind(nodes: GpuNodes, node: int, pod: Pod, devices: tuple[int, ...]) -> None:
    """Take the pod's resources from ``node`` and ``devices`` (ValueError if they do not fit)."""
    devices = tuple(int(d) for d in devices)
    reason = _bind_error(node, pod, devices, nodes)
    if reason is not None:
        raise ValueError(f"cannot bind pod {pod} to node {node} devices {devices}: {reason}")
    nodes.cpu_free[node] -= pod.cpu
    nodes.mem_free[node] -= pod.mem
    for d in devices:
        nodes.gpu_free[node, d] -= pod.gpu_milli
