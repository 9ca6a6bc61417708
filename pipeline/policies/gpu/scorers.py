"""Registry of GPU placement policies: ``SCORERS`` maps a name to a class.

Every policy implements :class:`GpuScorer`; constructors only store parameters (``fgd``
takes ``typical``), so ``(name, params)`` rebuilds a policy exactly.
"""

from __future__ import annotations

from typing import Any

from pipeline.policies.gpu.base import GpuScorer, ScorerBase
from pipeline.policies.gpu.baselines import (
    BestFit,
    DotProduct,
    GpuClustering,
    GpuPacking,
    RandomFit,
)
from pipeline.policies.gpu.fgd import FragmentationGradientDescent

SCORERS: dict[str, type[ScorerBase]] = {
    cls.name: cls for cls in (FragmentationGradientDescent, BestFit, DotProduct, GpuPacking,
                              GpuClustering, RandomFit)
}


def make_scorer(name: str, **params: Any) -> GpuScorer:
    """A new scorer registered as ``name`` (ValueError naming the known ones otherwise)."""
    if name not in SCORERS:
        raise ValueError(f"unknown GPU scorer {name!r} (known: {', '.join(sorted(SCORERS))})")
    return SCORERS[name](**params)


__all__ = ["SCORERS", "BestFit", "DotProduct", "FragmentationGradientDescent", "GpuClustering",
           "GpuPacking", "GpuScorer", "RandomFit", "make_scorer"]
