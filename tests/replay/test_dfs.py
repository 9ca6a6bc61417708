"""The HDFS layout model follows BlockPlacementPolicyDefault and the one-file-per-job rule."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import UsageError
from pipeline.replay.dfs import (
    DfsModel,
    lay_out,
    max_replicas_per_rack,
    place_blocks,
    rack_codes,
)


def racks_of(sizes: list[int]) -> np.ndarray:
    """Rack codes for machines in racks of ``sizes``, interleaved so racks are not contiguous."""
    rack = np.repeat(np.arange(len(sizes)), sizes)
    return np.random.default_rng(len(sizes)).permutation(rack).astype(np.int32)


def check_hdfs_rules(replicas: np.ndarray, rack: np.ndarray, replication: int) -> None:
    """Every block obeys BlockPlacementPolicyDefault's rules for a non-datanode writer."""
    n, n_racks = len(rack), len(np.unique(rack))
    size = np.bincount(rack)
    assert replicas.shape[1] == min(replication, n)
    assert replicas.min() >= 0 and replicas.max() < n
    ordered = np.sort(replicas, axis=1)
    assert np.all(ordered[:, 1:] != ordered[:, :-1]), "two replicas of a block on one node"
    if n_racks == 1 or replicas.shape[1] < 2:
        return
    r = rack[replicas]
    assert np.all(r[:, 1] != r[:, 0]), "replica 2 on replica 1's rack"
    if replicas.shape[1] >= 3:
        near2, near1 = size[r[:, 1]] >= 2, size[r[:, 0]] >= 2
        assert np.all(r[near2, 2] == r[near2, 1]), "replica 3 off replica 2's rack"
        fallback = ~near2 & near1
        assert np.all(r[fallback, 2] == r[fallback, 0]), "replica 3 fallback off replica 1's rack"
    cap = max_replicas_per_rack(replicas.shape[1], n_racks)
    if np.minimum(size, cap).sum() >= replicas.shape[1]:
        per_rack = (r[:, :, None] == r[:, None, :]).sum(axis=2)
        assert per_rack.max() <= cap, "a rack holds more replicas than maxNodesPerRack"


def reference_placement(rack: list[int], replication: int, rnd: random.Random) -> tuple:
    """One block placed node by node, reading chooseTargetInOrder literally (slow, small)."""
    nodes, chosen = range(len(rack)), []
    reps = min(replication, len(rack))
    n_racks, cap = len(set(rack)), reps  # getMaxNodesPerRack, spelled out
    if n_racks > 1 and reps > 1:
        cap = (reps - 1) // n_racks + 2
        cap = cap - 1 if cap == reps else cap

    def pick(scope: list[int] | range) -> int | None:
        ok = [m for m in scope if m not in chosen
              and sum(rack[c] == rack[m] for c in chosen) < cap]
        return rnd.choice(ok) if ok else None

    def on(r: int) -> list[int]:
        return [m for m in nodes if rack[m] == r]

    def off(r: int) -> list[int]:
        return [m for m in nodes if rack[m] != r]

    chosen.append(rnd.randrange(len(rack)))
    if reps >= 2:
        d0 = chosen[0]
        chosen.append(pick(off(rack[d0])) if off(rack[d0]) else pick(on(rack[d0])))
    if reps >= 3:
        d0, d1 = chosen
        if rack[d0] == rack[d1]:
            third = pick(on(rack[d0]))
        else:
            third = pick(on(rack[d1]))
            third = pick(on(rack[d0])) if third is None else third
            third = pick(nodes) if third is None else third
        chosen.append(third)
    for _ in range(3, reps):
        further = pick(nodes)
        chosen.append(rnd.choice([m for m in nodes if m not in chosen])
                      if further is None else further)
    return tuple(chosen)


# --- DfsModel ---------------------------------------------------------------------------


def test_model_defaults_are_hdfs_and_quincy() -> None:
    assert DfsModel() == DfsModel(block_mb=128.0, replication=3, rack_size=30)


@pytest.mark.parametrize(("field", "value"), [
    ("block_mb", 0), ("block_mb", -1.0), ("block_mb", float("nan")), ("block_mb", "128"),
    ("replication", 0), ("replication", 2.5), ("replication", True),
    ("rack_size", 0), ("rack_size", -3),
])
def test_model_rejects_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(UsageError) as caught:
        DfsModel(**{field: value})
    assert caught.value.field == field


@pytest.mark.parametrize(("replication", "n_racks", "limit"), [
    (3, 1, 3), (3, 2, 2), (3, 8, 2), (2, 2, 1), (1, 4, 1), (4, 2, 3), (5, 2, 4), (6, 3, 3),
    (10, 3, 5),
])
def test_max_replicas_per_rack_is_hadoops_getmaxnodesperrack(replication: int, n_racks: int,
                                                              limit: int) -> None:
    assert max_replicas_per_rack(replication, n_racks) == limit


# --- rack_codes -------------------------------------------------------------------------


def test_rack_codes_keep_trace_racks_and_fill_the_rest_in_groups() -> None:
    codes, names = rack_codes(["b", None, "a", None, "", "b", None, None, None], rack_size=2)
    assert names == ["a", "b", "dfs-rack-0000", "dfs-rack-0001", "dfs-rack-0002"]
    assert codes.dtype == np.int32
    assert codes.tolist() == [1, 2, 0, 2, 3, 1, 3, 4, 4]


def test_rack_codes_default_is_thirty_machines_per_rack() -> None:
    codes, names = rack_codes([None] * 75)
    assert np.bincount(codes).tolist() == [30, 30, 15]
    assert names == ["dfs-rack-0000", "dfs-rack-0001", "dfs-rack-0002"]


def test_rack_codes_accept_arrow_arrays() -> None:
    values = ["r2", None, "r1", None]
    expected = rack_codes(values, rack_size=1)
    for arrow in (pa.array(values), pa.chunked_array([values[:1], values[1:]])):
        codes, names = rack_codes(arrow, rack_size=1)
        assert codes.tolist() == expected[0].tolist() and names == expected[1]


def test_synthetic_rack_names_never_collide_with_trace_names() -> None:
    codes, names = rack_codes(["dfs-rack-0000", None, None], rack_size=1)
    assert len(set(names)) == len(names) == 3
    assert names[codes[0]] == "dfs-rack-0000" and len(set(codes.tolist())) == 3


def test_rack_codes_reject_bad_rack_size() -> None:
    with pytest.raises(UsageError) as caught:
        rack_codes([None], rack_size=0)
    assert caught.value.field == "rack_size"


# --- place_blocks -----------------------------------------------------------------------


def test_placement_rules_hold_on_every_block() -> None:
    rack = racks_of([30] * 8 + [3])
    replicas = place_blocks(np.array([2000, 0, 1000]), rack, DfsModel(), seed=1)
    assert replicas.shape == (3000, 3) and replicas.dtype == np.int32
    check_hdfs_rules(replicas, rack, 3)


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(1, 7), min_size=1, max_size=6),
       replication=st.integers(1, 7), n_blocks=st.integers(1, 120),
       seed=st.integers(0, 2**32))
def test_placement_rules_hold_on_random_rack_layouts(sizes: list[int], replication: int,
                                                     n_blocks: int, seed: int) -> None:
    rack = racks_of(sizes)
    replicas = place_blocks(np.array([n_blocks]), rack, DfsModel(replication=replication), seed)
    assert len(replicas) == n_blocks
    check_hdfs_rules(replicas, rack, replication)


def test_single_rack_gives_distinct_random_nodes() -> None:
    rack = np.zeros(5, dtype=np.int32)
    replicas = place_blocks(np.array([5000]), rack, DfsModel(replication=4), seed=3)
    check_hdfs_rules(replicas, rack, 4)
    assert set(np.unique(replicas[:, 2]).tolist()) == set(range(5))


@pytest.mark.parametrize(("sizes", "replication", "width"), [
    ([1], 3, 1), ([2], 3, 2), ([1, 1], 3, 2), ([1, 1, 1], 3, 3), ([1, 2], 3, 3),
    ([2, 1], 5, 3), ([1, 1, 4], 6, 6),
])
def test_tiny_clusters_cap_replication_and_keep_nodes_distinct(
        sizes: list[int], replication: int, width: int) -> None:
    rack = racks_of(sizes)
    replicas = place_blocks(np.array([300]), rack, DfsModel(replication=replication), seed=0)
    assert replicas.shape == (300, width)
    check_hdfs_rules(replicas, rack, replication)


def test_third_replica_falls_back_to_first_replicas_rack() -> None:
    rack = np.array([0, 0, 0, 1], dtype=np.int32)  # rack 1 has a single node
    replicas = place_blocks(np.array([2000]), rack, DfsModel(), seed=5)
    lone = replicas[:, 1] == 3
    assert lone.any()
    assert np.all(rack[replicas[lone, 2]] == rack[replicas[lone, 0]])


def test_no_blocks_or_no_machines() -> None:
    assert place_blocks(np.array([0, 0]), np.arange(4), DfsModel(), 1).shape == (0, 3)
    with pytest.raises(ValueError, match="no machines"):
        place_blocks(np.array([1]), np.empty(0, np.int32), DfsModel(), 1)


@pytest.mark.parametrize(("rack", "replication"), [
    ([0, 1, 1, 2], 4), ([0, 0, 0, 1, 1], 5), ([0, 1, 1, 1, 1], 3), ([0, 0, 0, 0], 3),
])
def test_placement_matches_a_literal_reading_of_hadoop(rack: list[int], replication: int
                                                       ) -> None:
    n_blocks, rnd = 20_000, random.Random(2)
    ours = Counter(map(tuple, place_blocks(np.array([n_blocks]), np.array(rack),
                                           DfsModel(replication=replication), 1).tolist()))
    theirs = Counter(reference_placement(rack, replication, rnd) for _ in range(n_blocks))
    assert set(ours) == set(theirs)
    distance = sum(abs(ours[k] - theirs[k]) for k in theirs) / (2 * n_blocks)
    assert distance < 0.05  # total variation; sampling noise here is about 0.01


def test_first_replica_is_uniform_over_machines() -> None:
    rack = racks_of([30, 10, 5, 5])  # 50 machines on uneven racks
    n_blocks = 50_000
    counts = np.bincount(place_blocks(np.array([n_blocks]), rack, DfsModel(), 11)[:, 0],
                         minlength=50)
    expected = n_blocks / 50
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 85.4  # chi-square, 49 degrees of freedom, p = 0.001


def test_second_replica_is_uniform_off_the_first_rack() -> None:
    rack = racks_of([20, 20, 20])
    replicas = place_blocks(np.array([60_000]), rack, DfsModel(), 12)
    off = replicas[rack[replicas[:, 0]] == 0, 1]
    counts = np.bincount(off, minlength=60)[rack != 0]
    expected = len(off) / 40
    assert float(((counts - expected) ** 2 / expected).sum()) < 73.4  # 39 dof, p = 0.001


def test_placement_is_deterministic_by_seed() -> None:
    rack, counts = racks_of([4, 4, 4]), np.array([50, 50])
    same = [place_blocks(counts, rack, DfsModel(), 9) for _ in range(2)]
    assert np.array_equal(same[0], same[1])
    assert not np.array_equal(same[0], place_blocks(counts, rack, DfsModel(), 10))


# --- lay_out ----------------------------------------------------------------------------


def test_shared_files_give_jobs_the_same_block_locations() -> None:
    # Jobs 7 and 3 read file 42 (3 and 5 maps: 5 blocks); job 5 reads its own file.
    jobs = np.array([7, 3, 7, 3, 5, 3, 7, 3, 3, 5, 7])
    files = np.array([42, 42, 42, 42, -1, 42, 42, 42, 42, -1, -1])
    is_map = np.array([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0], dtype=bool)
    rack = racks_of([3, 3, 3])
    indptr, machines = lay_out(jobs, files, is_map, rack, DfsModel(), seed=4)
    lists = [machines[indptr[i]:indptr[i + 1]].tolist() for i in range(len(jobs))]
    job7 = [lists[i] for i in (0, 2, 6)]
    job3 = [lists[i] for i in (1, 3, 5, 7, 8)]
    assert job7 == job3[:3]
    assert lists[10] == []
    assert all(len(x) == 3 for x in lists[:10])


def test_reduces_get_no_inputs_and_csr_is_well_formed() -> None:
    rng = np.random.default_rng(0)
    jobs = rng.integers(0, 40, 2000)
    is_map = rng.random(2000) < 0.7
    indptr, machines = lay_out(jobs, np.full(2000, -1), is_map, racks_of([10] * 5),
                               DfsModel(), seed=2)
    assert indptr.dtype == np.int64 and machines.dtype == np.int32
    assert len(indptr) == 2001 and indptr[0] == 0 and indptr[-1] == len(machines)
    sizes = np.diff(indptr)
    assert np.all(sizes[~is_map] == 0) and np.all(sizes[is_map] == 3)
    check_hdfs_rules(machines.reshape(-1, 3), racks_of([10] * 5), 3)


def test_kth_map_of_a_job_reads_block_k() -> None:
    # Two jobs share file 0; the one with more maps defines its block count. A task order
    # that interleaves jobs must still count each job's maps in task order.
    jobs = np.array([1, 2, 1, 2, 2])
    files = np.zeros(5, dtype=np.int64)
    _, machines = lay_out(jobs, files, np.ones(5, bool), racks_of([6, 6]), DfsModel(), seed=8)
    blocks = place_blocks(np.array([3]), racks_of([6, 6]), DfsModel(), seed=8)
    rows = machines.reshape(-1, 3)
    assert rows[[0, 2]].tolist() == blocks[:2].tolist()
    assert rows[[1, 3, 4]].tolist() == blocks.tolist()


def test_layout_is_deterministic_by_seed() -> None:
    rng = np.random.default_rng(1)
    jobs, files = rng.integers(0, 30, 500), rng.integers(-1, 5, 500)
    args = (jobs, files, np.ones(500, bool), racks_of([8] * 4), DfsModel())
    a, b, c = lay_out(*args, seed=3), lay_out(*args, seed=3), lay_out(*args, seed=4)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])


def test_layout_of_no_tasks_and_mismatched_lengths() -> None:
    indptr, machines = lay_out(np.empty(0, np.int64), np.empty(0, np.int64),
                               np.empty(0, bool), np.arange(3), DfsModel(), 0)
    assert indptr.tolist() == [0] and len(machines) == 0
    with pytest.raises(ValueError, match="differ in length"):
        lay_out(np.zeros(2), np.zeros(1), np.ones(2, bool), np.arange(3), DfsModel(), 0)
