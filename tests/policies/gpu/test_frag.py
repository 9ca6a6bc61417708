"""Fragmentation (semantics §6) on hand-computed nodes, and the kernels against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.gpu.devices import MILLI, GpuNodes, Pod, feasible
from pipeline.policies.gpu.frag import (
    cluster_fragmentation,
    fgd_scores,
    fragmentation_ratio,
    node_fragmentation,
)
from pipeline.policies.gpu.typical import TypicalPods
from tests.policies.gpu import reference
from tests.policies.gpu.strategies import clusters, pods, typicals

# A: 4 cores + half a GPU of any model; B: CPU-only 2 cores; C: 8 cores + 2 GPUs of model 1
TYPICAL = TypicalPods(cpu=np.array([4000.0, 2000.0, 8000.0]), num_gpu=np.array([1, 0, 2]),
                      gpu_milli=np.array([500, 0, 1000]), weight=np.array([0.5, 0.25, 0.25]),
                      models=np.array([[True, True], [True, True], [False, True]]))


def hand_cluster() -> GpuNodes:
    """X (model 0): partial GPUs; Y (model 1): CPU lacking for A and C; Z (model 1): C lacks
    GPUs; W: CPU-only."""
    nodes = GpuNodes.build([6000, 3000, 10000, 32000], [1, 1, 1, 1], [3, 2, 2, 0],
                           ["m0", "m1", "m1", None])
    nodes.gpu_free[0, :3] = [1000, 300, 700]
    nodes.gpu_free[2, :2] = [400, 1000]
    return nodes


def test_node_fragmentation_by_hand() -> None:
    # X: A fits -> the 300 below A's share (0.5 x 300); B CPU-only -> all 2000 (0.25 x 2000);
    #    C model not allowed -> all (0.25 x 2000).                       150 + 500 + 500
    # Y: A fits on GPUs but CPU lacks -> all (0.5 x 2000); B 500; C CPU lacks -> 500.
    # Z: A fits -> 400 below 500 (0.5 x 400); B 0.25 x 1400; C one whole GPU only -> all.
    # W: no GPUs, nothing idle.
    frag = node_fragmentation(hand_cluster(), TYPICAL)
    assert frag.tolist() == pytest.approx([1150.0, 2000.0, 900.0, 0.0])
    assert node_fragmentation(hand_cluster(), TYPICAL, idx=np.array([2])).tolist() == \
        pytest.approx([900.0])
    assert cluster_fragmentation(hand_cluster(), TYPICAL) == pytest.approx(4050.0)
    assert fragmentation_ratio(hand_cluster(), TYPICAL) == pytest.approx(4050.0 / 5400.0)


def test_fully_free_node_has_no_fragment_for_fitting_gpu_pods() -> None:
    typ = TypicalPods(np.array([1000.0]), np.array([1]), np.array([500]), np.array([1.0]),
                      np.ones((1, 1), bool))
    nodes = GpuNodes.build([8000], [1], [4], ["A"])
    assert node_fragmentation(nodes, typ).tolist() == [0.0]
    nodes.gpu_free[0] = [0, 0, 0, 0]
    assert fragmentation_ratio(nodes, typ) == 0.0  # nothing idle


def test_model_columns_must_match_cluster() -> None:
    nodes = GpuNodes.build([8000], [1], [1], ["A"])
    with pytest.raises(ValueError, match="model columns"):
        node_fragmentation(nodes, TYPICAL)


def as_lists(nodes: GpuNodes, i: int) -> list[int]:
    row = nodes.gpu_free[i]
    return [int(f) for f in row[row >= 0]]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_kernel_equals_reference(data: st.DataObject) -> None:
    nodes = data.draw(clusters())
    typ = data.draw(typicals(len(nodes.models)))
    got = node_fragmentation(nodes, typ)
    want = [reference.node_frag(float(nodes.cpu_free[i]), as_lists(nodes, i),
                                int(nodes.model[i]), typ) for i in range(nodes.n)]
    assert got.tolist() == want  # same additions in the same order: bit-identical


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fgd_kernel_equals_reference(data: st.DataObject) -> None:
    nodes = data.draw(clusters())
    typ = data.draw(typicals(len(nodes.models)))
    pod = data.draw(pods(len(nodes.models)))
    ok = feasible(nodes, pod)
    scores, devices = fgd_scores(nodes, pod, typ, ok)
    for i in range(nodes.n):
        if not ok[i]:
            assert scores[i] == -1
            continue
        want = reference.fgd_node_score(float(nodes.cpu_free[i]), as_lists(nodes, i),
                                        int(nodes.model[i]), typ, pod.cpu, pod.num_gpu,
                                        pod.gpu_milli)
        assert (int(scores[i]), int(devices[i])) == want


def test_whole_gpu_after_state_matches_least_sufficient_rule() -> None:
    """Whole GPUs empty the lowest fully free devices; fragmentation follows from that."""
    typ = TypicalPods(np.array([0.0]), np.array([1]), np.array([MILLI]), np.array([1.0]),
                      np.ones((1, 1), bool))
    nodes = GpuNodes.build([8000], [1], [3], ["A"])
    nodes.gpu_free[0] = [600, 1000, 1000]
    scores, _ = fgd_scores(nodes, Pod(0, 0, 1, MILLI), typ, np.array([True]))
    # before: 600 below a whole GPU; after [600, 0, 1000]: still 600 -> delta 0 -> 50
    assert scores.tolist() == [50]
