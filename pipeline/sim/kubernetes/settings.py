"""What the Kubernetes cluster models run with: Cluster Autoscaler's node groups and flags
(v1.31 defaults), and a Karpenter NodePool (``karpenter.sh/v1`` defaults).

Sources: kubernetes/autoscaler ``cluster-autoscaler/FAQ.md`` ("What are the parameters to
CA?") and ``main.go`` of cluster-autoscaler-release-1.31; kubernetes-sigs/karpenter v1.14
``pkg/apis/v1/nodepool.go``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

EXPANDERS = ("random", "most-pods", "least-waste", "price")


@dataclass(frozen=True)
class NodeGroup:
    """``--nodes=MIN:MAX:NAME``: a node group of one instance type (NAME, from the catalog)."""

    name: str
    min_size: int
    max_size: int


@dataclass(frozen=True)
class AutoscalerSettings:
    """Cluster Autoscaler's settings, each its flag's default unless the user set it."""

    groups: tuple[NodeGroup, ...] = ()
    expanders: tuple[str, ...] = ("random",)  # --expander (a chain: each narrows the last)
    scan_interval_s: float = 10.0  # --scan-interval
    scale_down_enabled: bool = True  # --scale-down-enabled
    threshold: float = 0.5  # --scale-down-utilization-threshold
    gpu_threshold: float = 0.5  # --scale-down-gpu-utilization-threshold
    unneeded_s: float = 600.0  # --scale-down-unneeded-time
    delay_after_add_s: float = 600.0  # --scale-down-delay-after-add
    delay_after_delete_s: float = 10.0  # --scale-down-delay-after-delete (= scan interval)
    new_pod_delay_s: float = 0.0  # --new-pod-scale-up-delay
    max_nodes_total: int = 0  # --max-nodes-total (0: no limit)
    max_scale_down_parallelism: int = 10  # --max-scale-down-parallelism
    max_drain_parallelism: int = 1  # --max-drain-parallelism
    non_empty_candidates: int = 30  # --scale-down-non-empty-candidates-count
    # the pods' cluster-autoscaler.kubernetes.io/safe-to-evict annotation: False ("false"
    # on every pod, as batch users set it) leaves only empty nodes to scale-down
    safe_to_evict: bool = True


POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")  # consolidationPolicy
REASONS = ("Empty", "Underutilized", "Drifted")  # disruption reasons budgets may name


@dataclass(frozen=True)
class Budget:
    """``nodes``: a count, or a percent of the pool's nodes when ``percent``; ``reasons``:
    the disruption reasons it limits (empty: all)."""

    nodes: float
    percent: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodePool:
    """What a replay needs of one NodePool: the catalog types it may launch (mask over the
    catalog), its limits (vCPUs, GiB; inf: none) and its disruption settings."""

    name: str
    allowed: np.ndarray
    limit_cpu: float = math.inf
    limit_gib: float = math.inf
    policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after_s: float = 0.0
    budgets: tuple[Budget, ...] = (Budget(10.0, True),)
