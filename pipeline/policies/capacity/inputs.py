"""The named state the CapacityScheduler's assignment loop reads and updates.

:func:`~pipeline.policies.capacity.kernel.allocate` takes one value of each class below
(built by :func:`~pipeline.policies.capacity.batch.kernel_inputs` for a scheduling point and
by :class:`~pipeline.policies.capacity.passes._Call` for one partition pass), plus the
locality gate's :class:`~pipeline.policies.locality.gate.GateState`.  They are NamedTuples
of numpy arrays and scalars, so numba compiles attribute reads by name; arrays marked
*updated* are written in place by the kernel (copy them when the caller needs the
original).  Vectors are ``(cpu, mem, gpu)`` rows in the trace's units.

Index spaces: *request* = row of the pending requests; *app* = application in kernel order
(grouped by leaf, then the leaf's FIFO order); *pair* = ``leaf * n_users + user`` (YARN's
``UsersManager`` is per queue); *leaf* = position in ``QueueTree.leaves``; *queue* = node
of the queue tree (0 the root).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Apps(NamedTuple):
    """The applications with requests that may be served, and their requests."""

    req: np.ndarray  # (n_requests, 3) normalised pending requests (request index)
    req_idx: np.ndarray  # (n,) int64 request indices grouped by application, arrival order
    lo: np.ndarray  # (n_apps,) int64 first position of the app's requests in req_idx
    hi: np.ndarray  # (n_apps,) int64 one past its last position
    pair: np.ndarray  # (n_apps,) int64 the app's (leaf, user) pair
    started: np.ndarray  # (n_apps,) bool: AM allocated (activated); updated
    used_mem: np.ndarray  # (n_apps,) memory used (fair ordering; zeros otherwise); updated
    demand_mem: np.ndarray  # (n_apps,) memory used + pending (fair size-based weight)
    leaf_lo: np.ndarray  # (n_leaves,) int64 first app of each leaf
    leaf_hi: np.ndarray  # (n_leaves,) int64 one past its last app


class Users(NamedTuple):
    """Per (leaf, user) pair (``pair = leaf * n_users + user``)."""

    used: np.ndarray  # (n_pairs, 3) normalised use; updated
    w: np.ndarray  # (n_pairs,) user weight
    left: np.ndarray  # (n_pairs,) int64 pending requests left (> 0: active user); updated
    apps: np.ndarray  # (n_pairs,) int64 started applications alive; updated


class Leaves(NamedTuple):
    """Per leaf queue (position in ``QueueTree.leaves``)."""

    q: np.ndarray  # (n_leaves,) int64 the leaf's queue index
    cap: np.ndarray  # (n_leaves, 3) effective guarantee
    max: np.ndarray  # (n_leaves, 3) effective maximum capacity
    mulp: np.ndarray  # (n_leaves,) minimum-user-limit-percent (0..100)
    ulf: np.ndarray  # (n_leaves,) user-limit-factor (< 0: off, capped by the maximum)
    fair: np.ndarray  # (n_leaves,) bool: fair ordering policy (else FIFO)
    sbw: np.ndarray  # (n_leaves,) bool: fair ordering's size-based weight
    active_used: np.ndarray  # (n_leaves, 3) use of the active users; updated
    active_w: np.ndarray  # (n_leaves,) sum of the active users' weights; updated
    apps: np.ndarray  # (n_leaves,) int64 started applications alive; updated
    max_apps: np.ndarray  # (n_leaves,) maximum-applications
    user_max_apps: np.ndarray  # (n_leaves,) maximum applications per user
    am_used: np.ndarray  # (n_leaves, 3) resources of the alive AMs; updated
    am_limit: np.ndarray  # (n_leaves, 3) AM resource limit


class Queues(NamedTuple):
    """Per queue of the tree (0 the root)."""

    used: np.ndarray  # (n_queues, 3) normalised use (a parent: sum of its leaves); updated
    guar: np.ndarray  # (n_queues, 3) effective guarantee
    max: np.ndarray  # (n_queues, 3) effective maximum capacity
    parent: np.ndarray  # (n_queues,) int64 parent queue (-1: the root)
    kids_lo: np.ndarray  # (n_queues + 1,) int64 CSR offsets of the children in kids
    kids: np.ndarray  # int64 children, configuration order
    prio: np.ndarray  # (n_queues,) queue priority
    use_prio: np.ndarray  # (n_queues,) bool: its children use priority-utilization
    leaf: np.ndarray  # (n_queues,) int64 leaf position of a leaf queue (-1 otherwise)
    access: np.ndarray  # (n_queues,) bool: can access the partition (all true: DEFAULT)


class Room(NamedTuple):
    """What there is to hand out, and how resources compare."""

    free: np.ndarray  # (3,) free resources of the up nodes (partition); updated
    cluster: np.ndarray  # (3,) total resources of the up nodes (partition)
    minimum: np.ndarray  # (3,) minimum allocation
    calc: int  # resource calculator: 0 default (memory), 1 dominant
    zero_am: bool  # an app also starts when its leaf's AM use is zero (labelled passes)


class Inputs(NamedTuple):
    """The kernel's state for one pass, minus the gate (what the offer loop carries)."""

    apps: Apps
    users: Users
    leaves: Leaves
    queues: Queues
    room: Room
