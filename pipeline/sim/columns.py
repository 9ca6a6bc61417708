"""Named groups of the arrays the core's compiled passes take (:mod:`pipeline.sim.kernels`).

Each group is a ``NamedTuple`` over arrays the core's tables own, its field names the
owners' attribute names, so a compiled pass reads a field by name (``tasks.start[s]``) like
the Python around it, and a new feature adds a field, not a positional slot.  The tuples
hold the owners' arrays themselves: writes go to the owners' memory.

At the boundary a pass takes each group as a *plain* tuple in field order, read from the
owner at every call (``read_*`` below), and names it on entry: numba types a plain tuple
of arrays in C but a NamedTuple in Python.  Per call of the completion pass (~60 arrays,
measured on a loaded 2-core machine): 5-9 us for its former 62 positional arguments, 9-11
us as plain tuples, 12-24 us handed NamedTuples (kept between calls or not: building them
is not the cost).  Reading the tuples at every call means an owner that re-creates an
array (a table that grows) is never seen stale; keeping them would save about 1 us.
"""

from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

import numpy as np


class TaskCols(NamedTuple):
    """Per-slot task columns the kernels read and write (:class:`pipeline.sim.tasks.TaskTable`).

    - ``row``: trace row; ``job``: job code; ``kind``: task kind (``KINDS``);
    - ``ready``: when the task became ready; ``duration``: run time (s) at speed 1.0;
    - ``req``: (n, 3) cpu, mem, gpu requested; ``used``: (n, 2) measured cpu, mem in force
      (NaN: unmeasured, the request counts);
    - ``state``: slot state (``FREE`` ... ``NM_QUEUED``); ``node``: node slot (-1: none);
    - ``start``: current run's start; ``first_start``: first run's start;
      ``run_end``: when the current run ends (inf: censored, stopped by the core);
    - ``attempts``, ``preemptions``, ``evictions``: counts; ``wasted``: lost run time (s);
    - ``epoch``: bumped when a run ends (its heap entry goes stale); ``flags``: bits
      (``HAS_INPUTS`` ... ``SPEC``); ``last_preempted``: the last stop was a preemption;
    - ``locality``: 0 node, 1 rack, 2 off-rack (-1: not measured); ``inp``: (n, 8) node
      slots holding the input (-1 padded); ``input_mb``: MiB it reads; ``read``: (n, 2)
      MiB read from the rack and across racks;
    - ``extra``: (n, N_EXTRA) figures of TRACKED tasks (``EXTRA_NAMES``); ``work0``: work
      done before the current run (a resumed container); ``nmq_since``: when it joined a
      NodeManager's queue (NaN: not queued).  These three are empty (length 0) until the
      table's extras are on;
    - ``free_stack``: free slots (the top ``counters[FREE_TOP]`` of them);
      ``counters``: int64 counters shared by the heap, the records and the free stack
      (``HEAP_N``, ``HEAP_SEQ``, ``REC_N``, ``FREE_TOP``, ``N_DONE``).
    """

    row: np.ndarray
    job: np.ndarray
    kind: np.ndarray
    ready: np.ndarray
    duration: np.ndarray
    req: np.ndarray
    used: np.ndarray
    state: np.ndarray
    node: np.ndarray
    start: np.ndarray
    first_start: np.ndarray
    run_end: np.ndarray
    attempts: np.ndarray
    preemptions: np.ndarray
    evictions: np.ndarray
    wasted: np.ndarray
    epoch: np.ndarray
    flags: np.ndarray
    last_preempted: np.ndarray
    locality: np.ndarray
    inp: np.ndarray
    input_mb: np.ndarray
    read: np.ndarray
    extra: np.ndarray
    work0: np.ndarray
    nmq_since: np.ndarray
    free_stack: np.ndarray
    counters: np.ndarray


class NodeCols(NamedTuple):
    """Per-node-slot columns the kernels read and write (:class:`pipeline.sim.cluster.NodeState`).

    - ``cap``: (n, 3) capacity; ``alloc``: (n, 3) held by guaranteed containers (the RM's
      accounting); ``oalloc``: (n, 3) held by opportunistic ones (the NodeManager's);
    - ``used``: (n, 2) cpu, mem in use; ``ncont``: containers running;
    - ``state``: ``ABSENT``/``BOOTING``/``UP``/``DOWN``/``CORDONED``; ``speed``: machine speed (1.0:
      the trace's reference); ``rack``: rack code (-1: none);
    - ``idle_since``: when the last container left; ``dirty``: changed since the policy's
      last look; ``instance``: the node's current incarnation (what records name);
    - ``done``, ``done_s``: tasks finished on this incarnation and their summed run time.
    """

    cap: np.ndarray
    alloc: np.ndarray
    oalloc: np.ndarray
    used: np.ndarray
    ncont: np.ndarray
    state: np.ndarray
    speed: np.ndarray
    rack: np.ndarray
    idle_since: np.ndarray
    dirty: np.ndarray
    instance: np.ndarray
    done: np.ndarray
    done_s: np.ndarray


class RecordCols(NamedTuple):
    """The record buffer's columns the completion kernel fills, one row per finished task
    (:class:`pipeline.sim.tasks.Records`; ``counters[REC_N]`` rows are filled).

    Fields as in :class:`pipeline.sim.tasks.RecordChunk`: ``row``, ``instance`` (node
    incarnation), ``job``, ``ready``, ``first_start``, ``start``, ``end``, ``outcome``,
    ``attempts``, ``preemptions``, ``evictions``, ``wasted``, ``locality``, ``read``
    (n, 2), ``extra`` (n, N_EXTRA), ``kind``.
    """

    row: np.ndarray
    instance: np.ndarray
    job: np.ndarray
    ready: np.ndarray
    first_start: np.ndarray
    start: np.ndarray
    end: np.ndarray
    outcome: np.ndarray
    attempts: np.ndarray
    preemptions: np.ndarray
    evictions: np.ndarray
    wasted: np.ndarray
    locality: np.ndarray
    read: np.ndarray
    extra: np.ndarray
    kind: np.ndarray


class CompletionHeap(NamedTuple):
    """The completion heap's arrays (:class:`pipeline.sim.tasks.Heap`): entry ``i`` is a
    run of slot ``slot[i]`` ending at ``time[i]``, pushed as number ``seq[i]`` (ties break
    by it) while the slot's epoch was ``epoch[i]`` (another epoch now: the entry is stale).
    Its size is ``counters[HEAP_N]`` of the task table."""

    time: np.ndarray
    seq: np.ndarray
    slot: np.ndarray
    epoch: np.ndarray


class Finished(NamedTuple):
    """What the completion kernel hands back beside the records (the core owns the arrays).

    - ``follow_slot``, ``follow_end``: finished parents (``IS_PARENT``), kept in their
      slots (state ``DONE``) for the core to release their dependants; the kernel
      returns how many;
    - ``clock``: (1,) the last completion's end;
    - ``spec_slot``, ``spec_end``: completions of speculated tasks (``SPEC``), for
      :mod:`pipeline.sim.speculation` to settle; ``n_spec``: (1,) how many are listed.
    """

    follow_slot: np.ndarray
    follow_end: np.ndarray
    clock: np.ndarray
    spec_slot: np.ndarray
    spec_end: np.ndarray
    n_spec: np.ndarray


# An owner's arrays in a group's field order, as the plain tuple a compiled pass takes.
read_heap = attrgetter(*CompletionHeap._fields)
read_tasks = attrgetter(*TaskCols._fields)
read_nodes = attrgetter(*NodeCols._fields)
read_records = attrgetter(*RecordCols._fields)
