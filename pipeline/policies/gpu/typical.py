"""Typical pods: the popular request shapes the fragmentation measure is taken against.

As the simulator's ``GetTypicalPods`` (``pkg/utils/frag.go``) with the experiment's settings
(``scripts/generate_config_and_run.py``: CPU-only pods included, popularity threshold 95 %,
increase step 1, no GPU weighting): group the original pods (before inflation) by
(CPU, per-GPU share, GPU count, GPU model), sort by count descending, take groups until
they cover at least 95 % of the pods, and renormalise their popularities to sum to 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.policies.gpu.devices import whole_milli


@dataclass
class TypicalPods:
    """k typical pod shapes and their popularity (``weight`` sums to 1).

    ``models[t, c]`` is True when typical pod ``t`` may run on GPU model code ``c`` (all
    True: any model); ``any_model[t]`` marks the unconstrained ones.
    """

    cpu: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    weight: np.ndarray
    models: np.ndarray

    def __post_init__(self) -> None:
        """Coerce to the dtypes the compiled kernels expect."""
        self.cpu = whole_milli(self.cpu)  # whole milli-cores, as the nodes' free CPU
        self.num_gpu = np.ascontiguousarray(self.num_gpu, dtype=np.int64)
        self.gpu_milli = np.ascontiguousarray(self.gpu_milli, dtype=np.int64)
        self.weight = np.ascontiguousarray(self.weight, dtype=np.float64)
        self.models = np.ascontiguousarray(self.models, dtype=np.bool_)
        k = len(self.cpu)
        if not (len(self.num_gpu) == len(self.gpu_milli) == len(self.weight) == k
                and self.models.ndim == 2 and self.models.shape[0] == k):
            raise ValueError(f"TypicalPods: array lengths differ (k={k}, models "
                             f"{self.models.shape})")

    @property
    def any_model(self) -> np.ndarray:
        """(k,) bool: the typical pod accepts every GPU model."""
        return self.models.all(axis=1)

    def __len__(self) -> int:
        return len(self.cpu)


def _model_key(mask: np.ndarray, model_names: Sequence[str] | None) -> str | tuple[int, ...]:
    """Tie-break key standing for the simulator's GPU-type string ("" = any model)."""
    if mask.all():
        return "" if model_names is not None else ()
    codes = tuple(int(c) for c in np.flatnonzero(mask))
    if model_names is None:
        return codes
    return "|".join(model_names[c] for c in codes)


def typical_pods(cpu: np.ndarray, num_gpu: np.ndarray, gpu_milli: np.ndarray,
                 model_masks: np.ndarray | None, coverage: float = 0.95,
                 model_names: Sequence[str] | None = None) -> TypicalPods:
    """The most popular pod shapes covering ``coverage`` of the original pods, renormalised.

    ``model_masks`` is (n_pods, n_models) bool over ``GpuNodes.models`` codes, all True for
    an unconstrained pod (None: all unconstrained, one column).  Equal counts are ordered as
    the simulator's ``sort.Reverse`` does: larger CPU, share, GPU count, then model string
    first (``model_names`` gives the strings; without it, code tuples stand in for them).
    """
    cpu = np.asarray(cpu, dtype=np.float64)
    n = len(cpu)
    if n == 0:
        raise ValueError("typical_pods: no pods")
    if not 0 < coverage <= 1:
        raise ValueError(f"typical_pods: coverage {coverage} outside (0, 1]")
    masks = (np.ones((n, 1), dtype=bool) if model_masks is None
             else np.asarray(model_masks, dtype=bool))
    counts: dict[tuple, int] = {}
    for c, g, m, mask in zip(cpu.tolist(), np.asarray(num_gpu).tolist(),
                             np.asarray(gpu_milli).tolist(), masks, strict=True):
        key = (c, int(m), int(g), mask.tobytes())
        counts[key] = counts.get(key, 0) + 1
    width = masks.shape[1]

    def mask_of(key: tuple) -> np.ndarray:
        return np.frombuffer(key[3], dtype=bool, count=width)

    order = sorted(counts, reverse=True, key=lambda k: (
        counts[k], k[0], k[1], k[2], _model_key(mask_of(k), model_names)))
    expected = round(coverage * 100, 9) * n / 100.0  # as frag.go: threshold% * total / 100
    chosen, cum = [], 0.0
    for key in order:
        if cum >= expected:
            break
        chosen.append(key)
        cum += counts[key]
    weight = np.array([(counts[k] / n) / (cum / n) for k in chosen], dtype=np.float64)
    return TypicalPods(
        cpu=np.array([k[0] for k in chosen], dtype=np.float64),
        num_gpu=np.array([k[2] for k in chosen], dtype=np.int64),
        gpu_milli=np.array([k[1] for k in chosen], dtype=np.int64),
        weight=weight,
        models=np.array([mask_of(k) for k in chosen], dtype=bool).reshape(len(chosen), width),
    )
