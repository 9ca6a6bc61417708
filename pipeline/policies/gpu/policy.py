"""GPU placement policies as registered policies: names, parameters, sources.

Each class names a scorer of :mod:`pipeline.policies.gpu.scorers` and the settings of the
experiment it runs in.  They run in the FGD paper's workload-inflation experiment
(:mod:`pipeline.replay.gpu_loop`; ``mode = "inflation"``): ``tracereplay replay TRACE --policy
fgd --seed 3 --out RUN`` replays the trace's pods that way.  The event-driven replay binds
GPU devices for every policy (:mod:`pipeline.sim.gpus`); these scorers, which rank nodes by
fragmentation and device state, are not event-replay policies yet: they run only here.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pipeline.policies.base import Param, PolicyBase

PAPER = ("Weng et al., \"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with "
         "Fragmentation Gradient Descent\", USENIX ATC 2023; simulator "
         "hkust-adsl/kubernetes-scheduler-simulator")


class GpuPlacement(PolicyBase):
    """A GPU placement policy in the workload-inflation experiment (base class)."""

    mode: ClassVar[str] = "inflation"
    clusters: ClassVar[tuple[str, ...]] = ("fixed",)
    scorer: ClassVar[str] = ""
    PARAMS: ClassVar[dict[str, Param]] = {
        "target": Param(1.3, "inflate the workload (random copies of trace pods) until GPU "
                        "requests reach this share of the cluster's GPU capacity (the paper: "
                        "1.3)", float, 0.01, 10.0),
        "coverage": Param(0.95, "typical pods: the most popular request kinds that cover this "
                          "share of the trace's pods (the paper: 0.95)", float, 0.01, 1.0),
        "gpu_nodes_only": Param(True, "replay on the trace's GPU nodes only (the paper's "
                                "experiment leaves CPU-only nodes out)", bool),
        "shuffle": Param(True, "pods arrive in an order drawn by the seed (the paper); false: "
                         "in the trace's order (submit time), to replay a given sequence",
                         bool),
    }

    def experiment(self) -> dict[str, Any]:
        """The experiment's settings, as run.json records them."""
        return {"mode": self.mode, "scorer": self.scorer, **self.get_params()}


class Fgd(GpuPlacement):
    """Fragmentation Gradient Descent: place where the node's expected fragmentation,
    against the trace's typical pods, drops most (the paper's policy)."""

    name = "fgd"
    scorer = "fgd"
    summary = "FGD: place a pod where GPU fragmentation drops most (GPU sharing)"
    source = PAPER + " (pkg/simulator/plugin/fgd_score.go, pkg/utils/frag.go)"


class GpuBestFit(GpuPlacement):
    """Best fit: least CPU and GPU left on the node after placement (the paper's baseline)."""

    name = "gpu-best-fit"
    scorer = "gpu-best-fit"
    summary = "GPU best fit: least CPU and GPU left after placement"
    source = PAPER + " (pkg/simulator/plugin/best_fit_score.go)"


class GpuDotProduct(GpuPlacement):
    """Dot product of the node's free vector and the pod's request, smaller is better."""

    name = "gpu-dot-product"
    scorer = "gpu-dot-product"
    summary = "GPU dot product: smallest free-vector x request product"
    source = PAPER + " (pkg/simulator/plugin/dot_product_score.go)"


class GpuPacking(GpuPlacement):
    """Packing: partly used GPUs first, then partly used nodes, then idle nodes."""

    name = "gpu-packing"
    scorer = "gpu-packing"
    summary = "GPU packing: partly used GPUs, then partly used nodes, then idle ones"
    source = PAPER + " (pkg/simulator/plugin/gpu_packing_score.go)"


class GpuClustering(GpuPlacement):
    """Clustering: nodes already holding pods of the same GPU-request kind first."""

    name = "gpu-clustering"
    scorer = "gpu-clustering"
    summary = "GPU clustering: nodes holding pods of the same GPU-request kind first"
    source = PAPER + " (pkg/simulator/plugin/gpu_clustering_score.go)"


class GpuRandom(GpuPlacement):
    """Random: one feasible node at random (the paper's baseline)."""

    name = "gpu-random"
    scorer = "gpu-random"
    summary = "GPU random: one feasible node at random"
    source = PAPER + " (pkg/simulator/plugin/random_score.go)"


GPU_POLICIES: dict[str, type[GpuPlacement]] = {
    cls.name: cls for cls in (Fgd, GpuBestFit, GpuDotProduct, GpuPacking, GpuClustering,
                              GpuRandom)
}
