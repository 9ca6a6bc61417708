"""Every GPU scorer through one contract, then each policy on an example its definition decides."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.gpu.base import GpuScorer
from pipeline.policies.gpu.devices import MILLI, GpuNodes, Pod, bind, feasible
from pipeline.policies.gpu.scorers import SCORERS, make_scorer
from pipeline.policies.gpu.typical import TypicalPods
from tests.policies.gpu.strategies import clusters, pods, typicals


def any_typical(n_models: int) -> TypicalPods:
    """Half-GPU and whole-GPU typical pods of any model."""
    return TypicalPods(np.array([1000.0, 4000.0]), np.array([1, 1]), np.array([500, MILLI]),
                       np.array([0.5, 0.5]), np.ones((2, max(n_models, 1)), bool))


def build(name: str, typical: TypicalPods) -> GpuScorer:
    return make_scorer(name, typical=typical) if name == "fgd" else make_scorer(name)


def run(name: str, nodes: GpuNodes, typical: TypicalPods, sequence: list[Pod],
        seed: int) -> list[tuple[int, tuple[int, ...]] | None]:
    """Place ``sequence`` one pod at a time, checking each choice; the choices made."""
    scorer, rng, choices = build(name, typical), np.random.default_rng(seed), []
    for pod in sequence:
        before = nodes.copy()
        choice = scorer.choose(nodes, pod, rng)
        assert np.array_equal(before.gpu_free, nodes.gpu_free)  # scorers never mutate
        ok = feasible(nodes, pod)
        assert (choice is None) == (not ok.any())
        if choice is not None:
            node, devices = choice
            assert ok[node]
            bind(nodes, node, pod, devices)  # raises if the devices do not fit
            scorer.placed(node, pod)
            live = nodes.gpu_free[nodes.gpu_free >= 0]
            assert ((live >= 0) & (live <= MILLI)).all()
        choices.append(choice)
    return choices


def test_registry_names_and_protocol() -> None:
    assert set(SCORERS) == {"fgd", "gpu-best-fit", "gpu-dot-product", "gpu-packing",
                            "gpu-clustering", "gpu-random"}
    for name, cls in SCORERS.items():
        assert cls.name == name
        assert "ATC'23" in cls.__doc__ and "8f3d641" in cls.__doc__  # cites its source
        assert isinstance(build(name, any_typical(1)), GpuScorer)
    with pytest.raises(ValueError, match="known"):
        make_scorer("nope")


@pytest.mark.parametrize("name", sorted(SCORERS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_contract(name: str, data: st.DataObject) -> None:
    """Only feasible nodes and fitting devices; same seed, same choices."""
    nodes = data.draw(clusters())
    typical = data.draw(typicals(len(nodes.models)))
    sequence = data.draw(st.lists(pods(len(nodes.models)), min_size=1, max_size=12))
    seed = data.draw(st.integers(0, 2**16))
    first = run(name, nodes.copy(), typical, sequence, seed)
    assert run(name, nodes.copy(), typical, sequence, seed) == first


def cluster(*rows: tuple[float, list[int]]) -> GpuNodes:
    """Model-"A" nodes from (cpu, free shares per device) rows."""
    width = max(len(free) for _, free in rows)
    nodes = GpuNodes.build([c for c, _ in rows], [262144] * len(rows),
                           [len(f) for _, f in rows], ["A" if f else None for _, f in rows])
    for i, (_, free) in enumerate(rows):
        nodes.gpu_free[i, :len(free)] = free
        nodes.gpu_free[i, len(free):width] = -1
    return nodes


def choose(name: str, nodes: GpuNodes, pod: Pod, typical: TypicalPods | None = None,
           seed: int = 0) -> tuple[int, tuple[int, ...]] | None:
    return build(name, typical or any_typical(1)).choose(nodes, pod, np.random.default_rng(seed))


def test_fgd_picks_largest_fragmentation_drop() -> None:
    """Typical pod: 1 core + 0.6 GPU.  A 0.5-GPU pod on
    node 0 [1000]: leaves 500, too small for 0.6 -> fragment 0 -> 500, sigmoid(-0.5) -> 37;
    node 1 [500, 1000]: on device 0 the stranded 500 is used up -> 500 -> 0, score 62
    (device 1 would strand 1000 -> 37);
    node 2 [700]: leaves 200 -> fragment 0 -> 200, score 45.  FGD: node 1, device 0."""
    typical = TypicalPods(np.array([1000.0]), np.array([1]), np.array([600]), np.array([1.0]),
                          np.ones((1, 1), bool))
    nodes = cluster((8000, [1000]), (8000, [500, 1000]), (8000, [700]))
    for seed in range(5):
        assert choose("fgd", nodes, Pod(1000, 0, 1, 500), typical, seed) == (1, (0,))


def test_fgd_keeps_cpu_for_typical_pods() -> None:
    """Typical pod: 4 cores + 1 GPU.  A 2-core CPU-only pod on node 0 (5 cores) would leave
    its idle GPU unusable (score 26); on node 1 (20 cores) nothing changes (50)."""
    typical = TypicalPods(np.array([4000.0]), np.array([1]), np.array([MILLI]), np.array([1.0]),
                          np.ones((1, 1), bool))
    nodes = cluster((5000, [1000]), (20000, [1000]))
    assert choose("fgd", nodes, Pod(2000, 0), typical) == (1, ())


def test_best_fit_prefers_least_left() -> None:
    """Raw scores int(100 (1 - left)): node 0 78, node 1 81 -> normalised 0 and 100."""
    nodes = cluster((32000, [1000, 1000]), (32000, [1000, 500]))
    assert choose("gpu-best-fit", nodes, Pod(1000, 0, 1, 500)) == (1, (1,))


def test_dot_product_prefers_smaller_free_dot_request() -> None:
    """32 cores + 1 GPU: node 0 (64 cores, 2 GPUs) int(100 (1 - 0.15625/2)) = 92,
    node 1 (32 cores, 1 GPU) int(100 (1 - 0.078125/2)) = 96."""
    nodes = cluster((64000, [1000, 1000]), (32000, [1000]))
    assert choose("gpu-dot-product", nodes, Pod(32000, 0, 1, MILLI)) == (1, (0,))


def test_packing_prefers_used_gpu_then_used_node_then_idle_node() -> None:
    """A 0.3 share: node 1's 400-free GPU scores 100 - 4 = 96; node 2 (used, but only a
    full GPU fits) 49; idle node 0 max(33 - 2, 2) = 31.  A whole GPU: used node 1 49 > 31."""
    nodes = cluster((8000, [1000, 1000]), (8000, [1000, 400]), (8000, [1000, 1000, 1000, 200]))
    assert choose("gpu-packing", nodes, Pod(0, 0, 1, 300)) == (1, (1,))
    assert choose("gpu-packing", nodes, Pod(0, 0, 1, MILLI)) == (1, (0,))
    del_used = cluster((8000, [1000, 1000]), (8000, [1000, 1000, 1000, 200]))
    assert choose("gpu-packing", del_used, Pod(0, 0, 1, 300)) == (1, (0,))


def test_clustering_follows_pod_kinds() -> None:
    nodes = cluster((8000, [1000, 1000, 1000]), (8000, [1000, 1000, 1000]),
                    (8000, [1000, 1000, 1000]))
    scorer, rng = make_scorer("gpu-clustering"), np.random.default_rng(0)
    share, one, two = Pod(0, 0, 1, 500), Pod(0, 0, 1, MILLI), Pod(0, 0, 2, MILLI)
    for node, pod in [(0, share), (1, one)]:
        devices = (0,)
        bind(nodes, node, pod, devices)
        scorer.placed(node, pod)
    assert scorer.choose(nodes, share, rng) == (0, (0,))  # only shares there: 75 + base
    assert scorer.choose(nodes, one, rng) == (1, (1,))
    assert scorer.choose(nodes, two, rng) == (2, (0, 1))  # idle node 25 + 0 beats 0 + 5


def test_random_draws_feasible_nodes_and_fitting_devices_uniformly() -> None:
    nodes = cluster((8000, [1000, 700, 100]), (8000, [1000]), (0, [1000]))
    scorer, rng = make_scorer("gpu-random"), np.random.default_rng(1)
    seen = {scorer.choose(nodes, Pod(1000, 0, 1, 500), rng) for _ in range(200)}
    assert seen == {(0, (0,)), (0, (1,)), (1, (0,))}


def test_ties_follow_one_seeded_node_order_per_run() -> None:
    """Equal scores: the node first in the run's permutation, the same for every pod."""
    nodes = cluster(*[(8000, [1000, 1000])] * 6)
    pod = Pod(0, 0)  # CPU-only: packing and clustering score 0 everywhere
    for name in ("gpu-packing", "gpu-clustering"):
        scorer, rng = make_scorer(name), np.random.default_rng(7)
        first = scorer.choose(nodes, pod, rng)
        assert all(scorer.choose(nodes, pod, rng) == first for _ in range(5))
        rank = np.random.default_rng(7).permutation(6)
        assert first == (int(np.argmin(rank)), ())
