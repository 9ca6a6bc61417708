"""Fit and bind rules: golden cases from the brief and the simulator, and bind's checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from pipeline.policies.gpu.devices import MILLI, GpuNodes, Pod, bind, choose_devices, feasible
from tests.policies.gpu.strategies import clusters, pods

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


def one_node(*free: int, cpu: float = 64000, model: str = "A") -> GpuNodes:
    """One GPU node with the given free shares."""
    nodes = GpuNodes.build([cpu], [262144], [len(free)], [model])
    nodes.gpu_free[0, :] = free
    return nodes


def test_build_pads_missing_devices_and_codes_models_by_name() -> None:
    nodes = GpuNodes.build([1000, 2000, 3000], [1, 2, 3], [2, 0, 1], ["T4", None, "A10"])
    assert nodes.models == ("A10", "T4")
    assert nodes.model.tolist() == [1, -1, 0]
    assert nodes.gpu_free.tolist() == [[1000, 1000], [-1, -1], [1000, -1]]
    assert nodes.gpu_capacity == 3000 and nodes.gpu_allocated == 0
    copy = nodes.copy()
    copy.gpu_free[0, 0] = 0
    assert nodes.gpu_free[0, 0] == 1000 and copy.gpu_allocated == 1000


def test_build_rejects_gpu_node_without_model() -> None:
    with pytest.raises(ValueError, match="node 0"):
        GpuNodes.build([1000], [1], [2], [None])


@pytest.mark.parametrize("bad", [dict(num_gpu=0, gpu_milli=500), dict(num_gpu=2, gpu_milli=500),
                                 dict(num_gpu=1, gpu_milli=1500), dict(num_gpu=1, gpu_milli=0)])
def test_pod_rejects_inexpressible_requests(bad: dict) -> None:
    with pytest.raises(ValueError):
        Pod(1000, 0, **bad)


def test_best_fit_halves_then_share_then_whole_gpu() -> None:
    """Brief golden: 0.5, 0.5 on device 0, 0.6 on device 1, then 1 whole GPU fits nowhere."""
    nodes = one_node(MILLI, MILLI)
    for pod, expected in [(Pod(100, 0, 1, 500), (0,)), (Pod(100, 0, 1, 500), (0,)),
                          (Pod(100, 0, 1, 600), (1,))]:
        assert feasible(nodes, pod).all()
        devices = choose_devices(nodes, 0, pod)
        assert devices == expected
        bind(nodes, 0, pod, devices)
    assert nodes.gpu_free.tolist() == [[0, 400]]
    whole = Pod(100, 0, 1, MILLI)
    assert not feasible(nodes, whole).any()
    with pytest.raises(ValueError, match="device 1 has 400"):
        bind(nodes, 0, whole, (1,))


def test_share_never_spans_devices() -> None:
    nodes = one_node(300, 300)
    pod = Pod(100, 0, 1, 600)
    assert not feasible(nodes, pod).any()
    with pytest.raises(ValueError):
        bind(nodes, 0, pod, (0,))
    with pytest.raises(ValueError, match="distinct devices"):
        bind(nodes, 0, pod, (0, 1))


def test_tightest_device_ties_to_lowest_index() -> None:
    nodes = one_node(MILLI, 700, 300, 700)
    assert choose_devices(nodes, 0, Pod(0, 0, 1, 500)) == (1,)
    assert choose_devices(nodes, 0, Pod(0, 0, 1, 200)) == (2,)
    assert choose_devices(nodes, 0, Pod(0, 0, 1, MILLI)) == (0,)


def test_whole_gpus_take_lowest_fully_free_devices() -> None:
    nodes = one_node(500, MILLI, MILLI, 0, MILLI)
    assert choose_devices(nodes, 0, Pod(0, 0, 2, MILLI)) == (1, 2)
    assert not feasible(nodes, Pod(0, 0, 4, MILLI)).any()
    assert choose_devices(nodes, 0, Pod(0, 0)) == ()


def test_model_constraints() -> None:
    nodes = GpuNodes.build([8000, 8000, 8000], [1, 1, 1], [1, 1, 0], ["A", "B", None])
    assert feasible(nodes, Pod(0, 0, 1, 500, frozenset({1}))).tolist() == [False, True, False]
    assert not feasible(nodes, Pod(0, 0, 1, 500, frozenset({7}))).any()  # no such model
    assert feasible(nodes, Pod(0, 0, 1, 500)).tolist() == [True, True, False]
    # a CPU-only pod goes anywhere, GPU nodes included, whatever models it names
    assert feasible(nodes, Pod(1000, 0, 0, 0, frozenset({7}))).all()
    with pytest.raises(ValueError, match="model code 0"):
        bind(nodes, 0, Pod(0, 0, 1, 500, frozenset({1})), (0,))


def test_cpu_and_memory_filter() -> None:
    nodes = GpuNodes.build([4000, 8000], [100, 50], [1, 1], ["A", "A"])
    assert feasible(nodes, Pod(6000, 10, 1, 500)).tolist() == [False, True]
    assert feasible(nodes, Pod(1000, 80, 1, 500)).tolist() == [True, False]
    with pytest.raises(ValueError, match="cpu 6000"):
        bind(nodes, 0, Pod(6000, 0), ())


@settings(max_examples=150, deadline=None)
@given(clusters(), pods())
def test_feasible_matches_bind(nodes: GpuNodes, pod: Pod) -> None:
    """A node is feasible exactly when binding the policy devices there succeeds."""
    ok = feasible(nodes, pod)
    for i in range(nodes.n):
        trial = nodes.copy()
        if ok[i]:
            bind(trial, i, pod, choose_devices(trial, i, pod))
            live = trial.gpu_free[trial.gpu_free >= 0]
            assert ((live >= 0) & (live <= MILLI)).all()
            assert trial.cpu_free[i] >= 0 and trial.mem_free[i] >= 0
            assert trial.gpu_allocated - nodes.gpu_allocated == pod.gpu_total_milli
        else:
            with pytest.raises(ValueError):
                bind(trial, i, pod, choose_devices_or_empty(trial, i, pod))
            assert np.array_equal(trial.gpu_free, nodes.gpu_free)


def choose_devices_or_empty(nodes: GpuNodes, node: int, pod: Pod) -> tuple[int, ...]:
    """Policy devices, or any plausible tuple when none fit (bind must then refuse)."""
    try:
        return choose_devices(nodes, node, pod)
    except ValueError:
        return tuple(range(pod.num_gpu))
