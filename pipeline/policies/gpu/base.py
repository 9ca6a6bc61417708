"""The interface of a GPU placement policy and the simulator's tie-breaking rule.

Tie-breaking (simulator ``pkg/simulator/simulator.go`` ``syncClusterResourceList`` and the
vendored kube-scheduler ``core/generic_scheduler.go`` ``selectHost``): at start-up the nodes,
sorted by name, get the prefixes ``%04d-`` of one seeded random permutation; among nodes with
the highest score the lexicographically smallest name wins.  So ties go to the node with
the smallest rank in one permutation drawn once per run.  Here that permutation is drawn
from the run's generator on the scorer's first decision and kept for its lifetime: use one
scorer instance per run.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from pipeline.policies.gpu.devices import GpuNodes, Pod, choose_devices, feasible

MAX_SCORE = 100  # kube-scheduler framework.MaxNodeScore


@runtime_checkable
class GpuScorer(Protocol):
    """Chooses a node and devices for one pod; never mutates ``nodes``."""

    name: ClassVar[str]

    def choose(self, nodes: GpuNodes, pod: Pod,
               rng: np.random.Generator) -> tuple[int, tuple[int, ...]] | None:
        """(node, devices) for ``pod``, or None when no node can host it."""
        ...

    def placed(self, node: int, pod: Pod) -> None:
        """Told after the driver bound ``pod`` to ``node`` (stateful policies track it)."""
        ...


class ScorerBase:
    """Common parts: the no-op ``placed``, picking the best-scored node (ties by rank), and
    ``choose`` for a policy that scores nodes (``scores``) and binds the tightest devices."""

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self.rank_: np.ndarray | None = None

    def placed(self, node: int, pod: Pod) -> None:
        """Stateless policies ignore binds."""

    def choose(self, nodes: GpuNodes, pod: Pod,
               rng: np.random.Generator) -> tuple[int, tuple[int, ...]] | None:
        """The feasible node with the highest ``scores`` (ties by the run's node order), on
        the devices a non-FGD policy binds (:func:`choose_devices`)."""
        ok = feasible(nodes, pod)
        if not ok.any():
            return None
        node = self.pick(self.scores(nodes, pod, ok), ok, rng)
        assert node is not None
        return node, choose_devices(nodes, node, pod)

    def scores(self, nodes: GpuNodes, pod: Pod, ok: np.ndarray) -> np.ndarray:
        """Integer score per node (read on the feasible nodes ``ok`` only; some exist)."""
        raise NotImplementedError(f"{type(self).__name__} scores no nodes")

    def tie_rank(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Each node's rank in the run's seeded node order (drawn on first use)."""
        if self.rank_ is None or len(self.rank_) != n:
            self.rank_ = rng.permutation(n)
        return self.rank_

    def pick(self, scores: np.ndarray, ok: np.ndarray, rng: np.random.Generator) -> int | None:
        """The feasible node with the highest score, ties to the smallest rank."""
        if not ok.any():
            return None
        rank = self.tie_rank(len(scores), rng)
        best = scores[ok].max()
        tied = ok & (scores == best)
        return int(np.argmin(np.where(tied, rank, len(scores))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def min_max_normalize(scores: np.ndarray) -> np.ndarray:
    """Rescale integer scores to 0-100 as the simulator's ``NormalizeScore`` (all 0 if equal)."""
    lowest, highest = scores.min(), scores.max()
    if highest == lowest:
        return np.zeros_like(scores)
    return (scores - lowest) * MAX_SCORE // (highest - lowest)


def trunc_div(a: np.ndarray, b: int) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` on int64."""
    q = np.abs(a) // abs(b)
    return np.where((a < 0) != (b < 0), -q, q)

