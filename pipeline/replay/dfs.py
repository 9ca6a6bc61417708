"""HDFS-style input layout: which machines hold each map task's input block.

Google, Alibaba, generated and SWIM traces do not record where a task's input data lives.
With ``--set dfs=hdfs`` a replay lays each job's input out as an HDFS file of blocks, so
delay scheduling and Quincy have real locality choices to make.  This module is pure and
vectorized: arrays in, arrays out, the same seed gives the same layout.

What is modelled
  * Racks (:func:`rack_codes`): the trace's racks where it names them; the other machines
    are grouped, in machine order, into synthetic racks of ``rack_size`` machines.  The
    default of 30 is Quincy's test cluster: 243 computers in 8 racks of "between 29 and 31
    computers" (Isard et al., "Quincy: Fair Scheduling for Distributed Computing
    Clusters", SOSP 2009, §6 experimental setup; Firmament's ``quincy_cost_model.cc``
    uses the same 30 for the same reason).
  * Files (:func:`lay_out`): each job reads one file, either a shared one named by the
    trace (SWIM FB-2010 input paths: popular files are read by many jobs) or one of its
    own.  A file has as many blocks as the most map tasks of any job reading it; the k-th
    map task of a job (in task order) reads block k.  One block per map task is Hadoop's
    default split (FileInputFormat: split size = block size), so ``block_mb`` (HDFS
    ``dfs.blocksize``, 128 MB since Hadoop 2) is what a map reads when the trace gives
    no ``input_mb``; the layout itself does not depend on it.  Reduces read shuffle
    output, not the DFS, so they get no input machines.
  * Replicas (:func:`place_blocks`): HDFS's default placement for a writer that is not a
    datanode (the trace does not say who wrote the data), read in apache/hadoop
    ``BlockPlacementPolicyDefault`` (trunk, 3.4 line, as stored at commit 004e3db2;
    ``chooseTargetInOrder`` and ``getMaxNodesPerRack`` are unchanged since the 2.7.3
    release, also read).  Replica 1 on a uniformly random node; replica 2 on a random node
    of another rack; replica 3 on another node of replica 2's rack (if that rack has no
    other node: of replica 1's rack, else anywhere); replicas 4 and up on random unchosen
    nodes of racks holding fewer than ``maxNodesPerRack = (r - 1) // racks + 2`` replicas
    (minus one if that equals r).  With one rack: distinct random nodes.  Replication above
    the cluster size is capped at the number of machines, as HDFS does.

Deliberately not modelled
  * No re-replication, no balancer, no decommissioning: a layout is fixed for the replay.
  * Node failures and removals do not move or lose blocks; a replica on a down machine is
    simply not readable there (the caller decides what that means).
  * No storage types, capacity, load (``considerLoad``), stale or slow nodes.
  * Elastic nodes booted by an autoscaler hold no data: reads from them are remote, as on
    cloud object storage.  This module never sees them; the caller handles that.
  * One deviation, in clusters too lopsided for the rule: where the per-rack limit leaves a
    block no allowed node for a 4th+ replica (HDFS would leave it under-replicated), the
    limit is dropped for that replica so every block has exactly min(r, machines) replicas.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.errors import UsageError

# Machines per synthetic rack: Quincy's test cluster (Isard et al., SOSP 2009, §6).
QUINCY_RACK_SIZE = 30
SYNTHETIC_RACK_PREFIX = "dfs-rack-"
# Mixed into the seed so the DFS layout is its own random stream, apart from the replay's.
_STREAM = 0xDF5


@dataclass(frozen=True)
class DfsModel:
    """HDFS parameters: block size (MB), replication factor, machines per synthetic rack."""

    block_mb: float = 128.0
    replication: int = 3
    rack_size: int = QUINCY_RACK_SIZE

    def __post_init__(self) -> None:
        """Reject values HDFS could not have, naming the field."""
        mb = self.block_mb
        if isinstance(mb, bool) or not isinstance(mb, numbers.Real) or not np.isfinite(mb) \
                or mb <= 0:
            raise UsageError(f"must be a positive number of MB, got {mb!r}", field="block_mb")
        for name in ("replication", "rack_size"):
            _check_count(getattr(self, name), name)


def _check_count(value: object, name: str) -> None:
    """Raise a UsageError naming ``name`` unless ``value`` is a whole number ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise UsageError(f"must be a whole number >= 1, got {value!r}", field=name)


def rack_codes(
    racks: Sequence[str | None] | pa.Array | pa.ChunkedArray,
    rack_size: int = QUINCY_RACK_SIZE,
) -> tuple[np.ndarray, list[str]]:
    """An int32 rack code per machine and the rack names the codes index.

    Trace racks keep their name (codes 0.. in sorted name order); machines with a null or
    empty rack fill synthetic racks ``dfs-rack-NNNN`` of ``rack_size`` machines, in machine
    order, coded after the trace's.  The default of 30 machines per rack is Quincy's setup
    (Isard et al., SOSP 2009, §6: racks of 29 to 31 computers).
    """
    _check_count(rack_size, "rack_size")
    names = _string_array(racks)
    missing = pc.fill_null(pc.equal(names, ""), True)
    given = pa.array(sorted(pc.unique(pc.filter(names, pc.invert(missing))).to_pylist()),
                     pa.string())
    found = pc.fill_null(pc.index_in(names, value_set=given), -1)
    codes = found.to_numpy(zero_copy_only=False).astype(np.int32)
    hole = missing.to_numpy(zero_copy_only=False)
    n_missing = int(hole.sum())
    codes[hole] = len(given) + np.arange(n_missing, dtype=np.int32) // rack_size
    taken = given.to_pylist()
    return codes, taken + _synthetic_names(-(-n_missing // rack_size), set(taken))


def _string_array(racks: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> pa.Array:
    """``racks`` as one pyarrow string array."""
    if isinstance(racks, pa.ChunkedArray):
        racks = racks.combine_chunks()
    if isinstance(racks, pa.Array):
        return racks.cast(pa.string())
    return pa.array(list(racks), pa.string())


def _synthetic_names(n: int, taken: set[str]) -> list[str]:
    """``n`` synthetic rack names, with a longer prefix until none is a trace rack's name."""
    prefix = SYNTHETIC_RACK_PREFIX
    while True:
        names = [f"{prefix}{i:04d}" for i in range(n)]
        if taken.isdisjoint(names):
            return names
        prefix += "x-"


def effective_replication(model: DfsModel, n_machines: int) -> int:
    """Replicas per block: ``model.replication`` capped at the cluster size, as HDFS caps it."""
    return min(model.replication, n_machines)


def max_replicas_per_rack(replication: int, n_racks: int) -> int:
    """HDFS's per-rack limit (``getMaxNodesPerRack``): no limit with one rack or replica."""
    if n_racks <= 1 or replication <= 1:
        return replication
    limit = (replication - 1) // n_racks + 2
    return limit - 1 if limit == replication else limit


@dataclass(frozen=True)
class _Topology:
    """Machines sorted by rack, so each rack is one contiguous segment of positions."""

    machine_at: np.ndarray  # machine index at each sorted position
    rack_of_pos: np.ndarray  # rack of the machine at each position
    start: np.ndarray  # first position of each rack
    size: np.ndarray  # machines in each rack

    @classmethod
    def of(cls, rack: np.ndarray) -> _Topology:
        """The topology of machines whose rack codes are ``rack`` (any integers)."""
        _, dense = np.unique(np.asarray(rack), return_inverse=True)
        machine_at = np.argsort(dense, kind="stable")
        size = np.bincount(dense).astype(np.int64)
        start = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
        return cls(machine_at, dense[machine_at].astype(np.int64), start, size)


def _pick(rng: np.random.Generator, lo: np.ndarray, length: np.ndarray,
          ex_lo: np.ndarray, ex_len: np.ndarray) -> np.ndarray:
    """A uniform position per row in ``[lo, lo + length)`` outside the excluded intervals.

    Row i excludes the disjoint intervals ``[ex_lo[i, e], ex_lo[i, e] + ex_len[i, e])``
    (clipped to its segment; a zero length excludes nothing) and must keep a free position.
    Drawing an index among the free positions and stepping it over each interval, lowest
    first, makes the draw exact with one random number per row and no rejection.
    """
    a = np.clip(ex_lo - lo[:, None], 0, length[:, None])
    b = np.clip(ex_lo + ex_len - lo[:, None], 0, length[:, None])
    a, width = np.where(b > a, a, length[:, None]), np.maximum(b - a, 0)
    if a.shape[1] > 1:
        by_start = np.argsort(a, axis=1)
        a, width = np.take_along_axis(a, by_start, 1), np.take_along_axis(width, by_start, 1)
    v = rng.integers(0, length - width.sum(axis=1))
    for e in range(a.shape[1]):
        v += width[:, e] * (v >= a[:, e])
    return lo + v


def place_blocks(n_blocks_per_file: np.ndarray, rack: np.ndarray, model: DfsModel,
                 seed: int) -> np.ndarray:
    """Machine indices (int32, one row per block, files in order) of each block's replicas.

    Follows HDFS ``BlockPlacementPolicyDefault`` for a writer that is not a datanode (see
    the module docstring); the shape is ``(total blocks, min(replication, machines))``:
    replication above the cluster size is capped, as HDFS caps it.  Column j is replica
    j + 1; the replicas of a block are always distinct machines.
    """
    counts = np.asarray(n_blocks_per_file, dtype=np.int64)
    if counts.size and counts.min() < 0:
        raise ValueError("n_blocks_per_file must be >= 0")
    n_blocks, topo = int(counts.sum()), _Topology.of(rack)
    n_machines = len(topo.machine_at)
    reps = effective_replication(model, n_machines)
    if n_blocks == 0:
        return np.empty((0, reps), dtype=np.int32)
    if n_machines == 0:
        raise ValueError(f"no machines to place {n_blocks} blocks on")
    rng = np.random.default_rng([seed, _STREAM])
    pos = np.empty((n_blocks, reps), dtype=np.int64)
    pos[:, 0] = rng.integers(0, n_machines, n_blocks)
    if reps >= 2:
        pos[:, 1] = _second(rng, topo, pos[:, 0])
    if reps >= 3:
        pos[:, 2] = _third(rng, topo, pos[:, 0], pos[:, 1])
    cap = max_replicas_per_rack(reps, len(topo.size))
    for j in range(3, reps):
        pos[:, j] = _further(rng, topo, pos[:, :j], cap)
    return topo.machine_at[pos].astype(np.int32)


def _second(rng: np.random.Generator, topo: _Topology, first: np.ndarray) -> np.ndarray:
    """Replica 2: a random node off replica 1's rack (``chooseRemoteRack``).

    With a single rack HDFS falls back to replica 1's rack: any other node.
    """
    n = len(topo.machine_at)
    k = topo.rack_of_pos[first]
    zero, whole = np.zeros_like(first), np.full_like(first, n)
    if len(topo.size) > 1:
        return _pick(rng, zero, whole, topo.start[k][:, None], topo.size[k][:, None])
    return _pick(rng, zero, whole, first[:, None], np.ones((len(first), 1), np.int64))


def _third(rng: np.random.Generator, topo: _Topology, first: np.ndarray,
           second: np.ndarray) -> np.ndarray:
    """Replica 3: another node of replica 2's rack (``chooseLocalRack``), with HDFS's fallbacks.

    If replica 2's rack has no other node, replica 1's rack; if neither has, any other node
    (also the single-rack case, where replicas 1 and 2 share the only rack).
    """
    n = len(topo.machine_at)
    k1, k2 = topo.rack_of_pos[first], topo.rack_of_pos[second]
    chosen, one = np.stack([first, second], axis=1), np.ones((len(first), 2), np.int64)
    lo, length = np.zeros_like(first), np.full_like(first, n)
    near2, near1 = topo.size[k2] >= 2, topo.size[k1] >= 2
    use2 = (k1 != k2) & near2
    use1 = (k1 != k2) & ~near2 & near1
    lo = np.where(use2, topo.start[k2], np.where(use1, topo.start[k1], lo))
    length = np.where(use2, topo.size[k2], np.where(use1, topo.size[k1], length))
    return _pick(rng, lo, length, chosen, one)


def _further(rng: np.random.Generator, topo: _Topology, chosen: np.ndarray,
             cap: int) -> np.ndarray:
    """Replica 4 and up: a random unchosen node on a rack below the per-rack limit.

    A rack at the limit is excluded whole (once, via its first chosen replica); its other
    chosen nodes then need no interval of their own.  Rows left with no allowed node (HDFS
    would stop short) drop the limit and only avoid the chosen nodes.
    """
    n_blocks, n_machines = len(chosen), len(topo.machine_at)
    rk = topo.rack_of_pos[chosen]
    same = rk[:, :, None] == rk[:, None, :]
    on_rack = same.sum(axis=2)
    first_on_rack = ~np.tril(same, k=-1).any(axis=2)
    full = on_rack >= cap
    ex_lo = np.where(full, topo.start[rk], chosen)
    ex_len = np.where(full, np.where(first_on_rack, topo.size[rk], 0), 1)
    stuck = (n_machines - ex_len.sum(axis=1) <= 0)[:, None]
    ex_lo, ex_len = np.where(stuck, chosen, ex_lo), np.where(stuck, 1, ex_len)
    lo, length = np.zeros(n_blocks, np.int64), np.full(n_blocks, n_machines, np.int64)
    return _pick(rng, lo, length, ex_lo, ex_len)


def lay_out(job_codes: np.ndarray, file_codes: np.ndarray, is_map: np.ndarray,
            rack: np.ndarray, model: DfsModel, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The machines holding each task's input block, as CSR ``(indptr int64, machines int32)``.

    Arrays are per task, in task order.  A job reads the file of its tasks' ``file_codes``
    (>= 0: a shared file; if a job's tasks name several, the smallest code) or, when all
    are -1, a file of its own.  A file has as many blocks as the most map tasks of any job
    reading it, and the k-th map task of a job reads block k, so jobs sharing a file read
    the same replicas.  Map-like tasks (``is_map``; pass all true for a trace without task
    kinds) list their block's ``min(replication, machines)`` replica machines (indices into
    ``rack``); other tasks (reduces) list none.
    """
    jobs = np.asarray(job_codes)
    files = np.asarray(file_codes, dtype=np.int64)
    maps = np.asarray(is_map, dtype=bool)
    n_tasks = len(jobs)
    if len(files) != n_tasks or len(maps) != n_tasks:
        raise ValueError(f"job_codes, file_codes and is_map differ in length "
                         f"({n_tasks}, {len(files)}, {len(maps)})")
    job, map_rank, n_jobs = _job_and_map_rank(jobs, maps)
    file_of_job, n_blocks = _job_files(job, files, maps, n_jobs)
    replicas = place_blocks(n_blocks, rack, model, seed)
    first_block = np.concatenate([[0], np.cumsum(n_blocks)[:-1]]).astype(np.int64)
    block = first_block[file_of_job[job[maps]]] + map_rank[maps]
    indptr = np.zeros(n_tasks + 1, dtype=np.int64)
    np.cumsum(maps * replicas.shape[1], out=indptr[1:])
    return indptr, replicas[block].reshape(-1)


def _job_and_map_rank(jobs: np.ndarray, maps: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense job index per task, each map task's rank among its job's maps, and job count.

    One stable sort groups each job's tasks in task order; ranks are counts of earlier maps
    in the group.
    """
    order = np.argsort(jobs, kind="stable")
    grouped = jobs[order]
    new_job = np.ones(len(jobs), dtype=bool)
    new_job[1:] = grouped[1:] != grouped[:-1]
    starts, dense_sorted = np.flatnonzero(new_job), np.cumsum(new_job) - 1
    maps_before = np.cumsum(maps[order]) - maps[order]
    rank_sorted = maps_before - maps_before[starts][dense_sorted]
    job, rank = np.empty(len(jobs), np.int64), np.empty(len(jobs), np.int64)
    job[order], rank[order] = dense_sorted, rank_sorted
    return job, rank, len(starts)


def _job_files(job: np.ndarray, files: np.ndarray, maps: np.ndarray,
               n_jobs: int) -> tuple[np.ndarray, np.ndarray]:
    """Each job's file index and each file's block count.

    Files 0.. are the distinct shared codes in sorted order, then one private file per job
    (empty for jobs that read a shared file).
    """
    none = np.iinfo(np.int64).max
    named = np.full(n_jobs, none, dtype=np.int64)
    np.minimum.at(named, job, np.where(files >= 0, files, none))
    shared = named != none
    codes, shared_file = np.unique(named[shared], return_inverse=True)
    file_of_job = len(codes) + np.arange(n_jobs, dtype=np.int64)
    file_of_job[shared] = shared_file
    n_maps = np.bincount(job[maps], minlength=n_jobs)
    n_blocks = np.zeros(len(codes) + n_jobs, dtype=np.int64)
    np.maximum.at(n_blocks, file_of_job, n_maps)
    return file_of_job, n_blocks
