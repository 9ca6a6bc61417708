"""The simulator's baseline GPU placement policies, scored exactly as its Go plugins score.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC 2023; simulator hkust-adsl/kubernetes-scheduler-
simulator (snapshot 8f3d641), ``pkg/simulator/plugin/*_score.go``.  Scores are integers
(Go ``int64`` truncation where the plugin truncates), since ties decide placements; the
experiment's settings come from ``experiments/run_scripts/generate_run_scripts.py``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.gpu.base import MAX_SCORE, ScorerBase, min_max_normalize, trunc_div
from pipeline.policies.gpu.devices import MILLI, GpuNodes, Pod, choose_devices, feasible

MAX_SPEC_CPU = 128_000.0  # milli-cores (open-gpu-share utils/const.go MaxSpecCpu)
MAX_SPEC_GPU = 8_000  # milli-GPU (MaxSpecGpu)
Choice = tuple[int, tuple[int, ...]] | None


class BestFit(ScorerBase):
    """``gpu-best-fit``: least CPU and GPU left after placement, half weight each.

    ``best_fit_score.go``: score = int(100 * (1 - (0.5 (cpu_free - cpu) / 128 cores +
    0.5 (gpu_free - gpu) / 8 GPUs))), min-max normalised to 0-100 over the feasible nodes
    (``NormalizeScore``, integer division; all 0 when equal).  GPUs: tightest fit.

    Source: Weng et al., USENIX ATC'23 ("Beware of Fragmentation"); simulator 8f3d641,
    ``pkg/simulator/plugin/best_fit_score.go``.
    """

    name: ClassVar[str] = "gpu-best-fit"

    def scores(self, nodes: GpuNodes, pod: Pod, ok: np.ndarray) -> np.ndarray:
        """Best-fit score, min-max normalised over the feasible nodes."""
        cpu_term = (nodes.cpu_free - pod.cpu) / MAX_SPEC_CPU * 0.5
        gpu_term = (nodes.gpu_idle_per_node - pod.gpu_total_milli) / float(MAX_SPEC_GPU) * 0.5
        raw = np.trunc((1.0 - (cpu_term + gpu_term)) * MAX_SCORE).astype(np.int64)
        scores = np.zeros(nodes.n, dtype=np.int64)
        scores[ok] = min_max_normalize(raw[ok])
        return scores


class DotProduct(ScorerBase):
    """``gpu-dot-product``: Tetris-style alignment, smaller free·request dot product wins.

    ``dot_product_score.go`` with the experiment's ``merge`` dimensions and ``max`` norm:
    vectors [CPU, total GPU] over [128 cores, 8 GPUs]; score = int(100 (1 - dot / 2)); no
    normalisation.  GPUs: tightest fit (GPU selection ``best``).

    Source: Weng et al., USENIX ATC'23 ("Beware of Fragmentation"); simulator 8f3d641,
    ``pkg/simulator/plugin/dot_product_score.go``.
    """

    name: ClassVar[str] = "gpu-dot-product"

    def scores(self, nodes: GpuNodes, pod: Pod, ok: np.ndarray) -> np.ndarray:
        """Dot-product score."""
        pod_cpu = pod.cpu / MAX_SPEC_CPU
        pod_gpu = pod.gpu_total_milli / float(MAX_SPEC_GPU)
        dot = (nodes.cpu_free / MAX_SPEC_CPU) * pod_cpu
        dot = dot + (nodes.gpu_idle_per_node / float(MAX_SPEC_GPU)) * pod_gpu
        return np.trunc(MAX_SCORE * (1.0 - dot / 2.0)).astype(np.int64)


class GpuPacking(ScorerBase):
    """``gpu-packing``: prefer partly used GPUs, then partly used nodes, then idle nodes.

    ``gpu_packing_score.go``: a node whose GPUs are all free scores max(33 - free GPUs,
    free GPUs); a pod that must use fully free GPUs on a used node scores max(50 - those
    GPUs, 33); a share on a used GPU scores max(100 - (free% of that GPU) // 10, 50).
    CPU-only pods score 0 everywhere.  GPUs: tightest fit.

    Source: Weng et al., USENIX ATC'23 ("Beware of Fragmentation"); simulator 8f3d641,
    ``pkg/simulator/plugin/gpu_packing_score.go``.
    """

    name: ClassVar[str] = "gpu-packing"

    def scores(self, nodes: GpuNodes, pod: Pod, ok: np.ndarray) -> np.ndarray:
        """GPU-packing score."""
        return packing_scores(nodes, pod)


def packing_scores(nodes: GpuNodes, pod: Pod) -> np.ndarray:
    """GPU-packing score per node (meaningful on feasible nodes only)."""
    if pod.num_gpu == 0:
        return np.zeros(nodes.n, dtype=np.int64)
    free = nodes.gpu_free
    fully_free = (free == MILLI).sum(axis=1)
    idle_node = fully_free == nodes.n_devices
    idle_scores = np.maximum(MAX_SCORE // 3 - fully_free, fully_free)
    if pod.is_sharing:  # the tightest fitting device is the one used
        tightest = np.where(free >= pod.gpu_milli, free, MILLI + 1).min(axis=1)
        used_scores = np.where(
            tightest >= MILLI, np.maximum(MAX_SCORE // 2 - 1, MAX_SCORE // 3),
            np.maximum(MAX_SCORE - (tightest * 100 // MILLI) // 10, MAX_SCORE // 2))
    else:  # whole GPUs always take fully free devices
        used_scores = np.full(nodes.n, max(MAX_SCORE // 2 - pod.num_gpu, MAX_SCORE // 3))
    return np.where(idle_node, idle_scores, used_scores).astype(np.int64)


def affinity_kind(pod: Pod) -> int:
    """The simulator's GPU-affinity tag as an int: 0 = share, k = k whole GPUs, -1 = none."""
    if pod.num_gpu == 0:
        return -1
    return 0 if pod.is_sharing else pod.num_gpu


class GpuClustering(ScorerBase):
    """``gpu-clustering``: prefer nodes holding pods of the same GPU-request kind.

    ``gpu_clustering_score.go``: kinds are share, k-GPU (CPU-only pods have none).  With
    b = 25 (8000 - node's free GPU) // 8000: b + 75 if the node holds only this kind, b + 50
    if this kind among others, b + 25 if it holds no GPU pods, b otherwise; CPU-only pods
    score 0 everywhere.  GPUs: tightest fit.  ``placed`` records each bound pod's kind.

    Source: Weng et al., USENIX ATC'23 ("Beware of Fragmentation"); simulator 8f3d641,
    ``pkg/simulator/plugin/gpu_clustering_score.go``.
    """

    name: ClassVar[str] = "gpu-clustering"

    def __init__(self) -> None:
        super().__init__()
        self.kinds_: dict[int, set[int]] = {}  # node -> kinds of the GPU pods it holds

    def placed(self, node: int, pod: Pod) -> None:
        """Remember the kind of a GPU pod bound to ``node``."""
        kind = affinity_kind(pod)
        if kind >= 0:
            self.kinds_.setdefault(int(node), set()).add(kind)

    def scores(self, nodes: GpuNodes, pod: Pod, ok: np.ndarray) -> np.ndarray:
        """Clustering score."""
        kind = affinity_kind(pod)
        if kind < 0:
            return np.zeros(nodes.n, dtype=np.int64)
        n_kinds = np.zeros(nodes.n, dtype=np.int64)
        same = np.zeros(nodes.n, dtype=bool)
        for node, kinds in self.kinds_.items():
            n_kinds[node] = len(kinds)
            same[node] = kind in kinds
        base = trunc_div((MAX_SCORE // 4) * (MAX_SPEC_GPU - nodes.gpu_idle_per_node),
                         MAX_SPEC_GPU)
        bonus = np.select([same & (n_kinds == 1), same, n_kinds == 0],
                          [MAX_SCORE * 3 // 4, MAX_SCORE * 2 // 4, MAX_SCORE // 4], 0)
        return base + bonus


class RandomFit(ScorerBase):
    """``gpu-random``: a feasible node uniformly at random, a fitting GPU at random.

    ``random_score.go`` (PreScore draws one of the feasible nodes) with the experiment's
    GPU selection ``random`` (``allocateGpuIdBasedOnRandomFit``: a share goes to a uniformly
    random fitting device; whole GPUs to the lowest-indexed fully free ones).

    Source: Weng et al., USENIX ATC'23 ("Beware of Fragmentation"); simulator 8f3d641,
    ``pkg/simulator/plugin/random_score.go`` and ``open_gpu_share.go``.
    """

    name: ClassVar[str] = "gpu-random"

    def choose(self, nodes: GpuNodes, pod: Pod, rng: np.random.Generator) -> Choice:
        """One feasible node and device drawn from ``rng``."""
        candidates = np.flatnonzero(feasible(nodes, pod))
        if len(candidates) == 0:
            return None
        node = int(candidates[rng.integers(len(candidates))])
        if not pod.is_sharing:
            return node, choose_devices(nodes, node, pod)
        fitting = np.flatnonzero(nodes.gpu_free[node] >= pod.gpu_milli)
        return node, (int(fitting[rng.integers(len(fitting))]),)
