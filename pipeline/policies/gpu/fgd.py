"""``fgd``: Fragmentation Gradient Descent, placing each pod where fragmentation drops most.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC 2023; simulator hkust-adsl/kubernetes-scheduler-
simulator (snapshot 8f3d641), ``pkg/simulator/plugin/fgd_score.go`` and ``pkg/utils/frag.go``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.policies.gpu.base import MAX_SCORE, ScorerBase
from pipeline.policies.gpu.devices import GpuNodes, Pod, choose_devices, feasible
from pipeline.policies.gpu.frag import fgd_scores
from pipeline.policies.gpu.typical import TypicalPods


class FragmentationGradientDescent(ScorerBase):
    """``fgd``: score = int(100 sigmoid((frag before - frag after) / 1000)), highest wins.

    Fragmentation is measured against ``typical`` (the original workload's typical pods).
    A sharing pod is scored on each device that fits it and bound to the best one (ties:
    lowest index); whole GPUs take the lowest-indexed fully free devices and CPU-only pods
    take CPU only (``NodeResource.Sub``).  A pod requesting nothing scores 100 everywhere.
    Ties between nodes go to the run's seeded node order (see ``base``).

    Source: Weng et al., USENIX ATC'23 ("Beware of Fragmentation"); simulator 8f3d641,
    ``pkg/simulator/plugin/fgd_score.go``, ``pkg/utils/frag.go``.
    """

    name: ClassVar[str] = "fgd"

    def __init__(self, typical: TypicalPods) -> None:
        super().__init__()
        self.typical = typical

    def choose(self, nodes: GpuNodes, pod: Pod,
               rng: np.random.Generator) -> tuple[int, tuple[int, ...]] | None:
        """The feasible node (and device) with the largest fragmentation drop."""
        ok = feasible(nodes, pod)
        if not ok.any():
            return None
        if pod.cpu == 0 and pod.mem == 0 and pod.num_gpu == 0:
            scores, devices = np.full(nodes.n, MAX_SCORE, dtype=np.int64), None
        else:
            scores, devices = fgd_scores(nodes, pod, self.typical, ok)
        node = self.pick(scores, ok, rng)
        assert node is not None
        if pod.is_sharing and devices is not None:
            return node, (int(devices[node]),)
        return node, choose_devices(nodes, node, pod)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(typical=<{len(self.typical)} typical pods>)"
