"""Typical pods: grouping, the popularity cutoff, tie order and renormalisation (frag.go)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.policies.gpu.typical import typical_pods


def shapes(*rows: tuple[float, int, int, int]) -> tuple[np.ndarray, ...]:
    """(cpu, num_gpu, gpu_milli, masks) arrays from (cpu, num, milli, repeat) rows."""
    cpu, num, milli = [], [], []
    for c, g, m, times in rows:
        cpu += [c] * times
        num += [g] * times
        milli += [m] * times
    return np.array(cpu, float), np.array(num), np.array(milli), None


def test_groups_sorted_by_count_until_coverage_then_renormalised() -> None:
    cpu, num, milli, masks = shapes((1000, 1, 500, 5), (0, 0, 0, 3), (8000, 2, 1000, 1),
                                    (4000, 1, 1000, 1))
    typ = typical_pods(cpu, num, milli, masks, coverage=0.8)  # 5 + 3 = 8 of 10 pods
    assert typ.cpu.tolist() == [1000, 0] and typ.num_gpu.tolist() == [1, 0]
    assert typ.gpu_milli.tolist() == [500, 0]
    assert typ.weight == pytest.approx([5 / 8, 3 / 8])
    assert typ.any_model.all()


def test_equal_counts_take_larger_cpu_first() -> None:
    cpu, num, milli, masks = shapes((1000, 1, 500, 5), (0, 0, 0, 3), (4000, 1, 1000, 1),
                                    (8000, 2, 1000, 1))
    typ = typical_pods(cpu, num, milli, masks, coverage=0.85)  # needs 8.5 pods: one more group
    assert typ.cpu.tolist() == [1000, 0, 8000]
    assert typ.weight == pytest.approx([5 / 9, 3 / 9, 1 / 9])
    assert typ.weight.sum() == pytest.approx(1.0)


def test_default_coverage_keeps_all_small_workloads_and_models_split_groups() -> None:
    cpu = np.array([1000.0] * 4)
    num = np.array([1] * 4)
    milli = np.array([500] * 4)
    masks = np.array([[True, True], [True, True], [False, True], [True, False]])
    typ = typical_pods(cpu, num, milli, masks, model_names=["A", "B"])
    assert len(typ) == 3
    assert typ.models.tolist() == [[True, True], [False, True], [True, False]]  # 2, then "B" > "A"
    assert typ.any_model.tolist() == [True, False, False]
    assert typ.weight == pytest.approx([0.5, 0.25, 0.25])


def test_rejects_empty_and_bad_coverage() -> None:
    with pytest.raises(ValueError):
        typical_pods(np.array([]), np.array([]), np.array([]), None)
    with pytest.raises(ValueError):
        typical_pods(np.array([1.0]), np.array([0]), np.array([0]), None, coverage=0)
