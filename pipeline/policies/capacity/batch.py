"""The kernel's inputs for one scheduling point: applications, users, leaves and queues.

Cost matters here (it runs at every scheduling point): the passes over all pending
requests and running containers are compiled (:mod:`.prepare`); only the pending requests
that can be served are sorted.  Requests of applications that cannot start now, because
their leaf has no AM room or is at its application limit, are left out before sorting;
they are not "active" either (in Hadoop a user becomes active through an activated application).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.policies.capacity.inputs import Apps, Inputs, Leaves, Queues, Room, Users
from pipeline.policies.capacity.prepare import (
    AliveCounts,
    admitted,
    alive_counts,
    keep_waiting,
    normalize_pending,
)
from pipeline.policies.capacity.runtime import CapacityState
from pipeline.policies.capacity.state import am_limits, dense_sum


@dataclass
class Admission:
    """Which pending requests can be served now, and the AM and application counts behind
    it (one scheduling point, DEFAULT partition)."""

    am_used: np.ndarray
    leaf_apps: np.ndarray
    pair_apps: np.ndarray
    q_guar: np.ndarray
    q_max: np.ndarray
    app_max: np.ndarray
    user_app_max: np.ndarray
    am_limit: np.ndarray
    sel: np.ndarray  # indices of the requests of applications running or allowed to start


def admission(st: CapacityState, jobs: np.ndarray, leaf: np.ndarray, run_job: np.ndarray,
              cluster: np.ndarray) -> Admission:
    """The started (activated) applications alive now, their AM use and counts, and the
    pending requests that can be served (see :func:`startable`)."""
    tree, s = st.tree, st.settings
    n_leaves, n_users = tree.n_leaves, st.n_users
    am_used = np.zeros((n_leaves, 3))
    leaf_apps = np.zeros(n_leaves, dtype=np.int64)
    pair_apps = np.zeros(n_leaves * n_users, dtype=np.int64)
    alive_counts(run_job, jobs, st.alive_apps(st.job_leaf),
                 AliveCounts(am_used, leaf_apps, pair_apps))
    q_guar, q_max = st.caps.effective(0, cluster, st.calc)
    app_max, user_app_max = st.app_limits(cluster[None, :], [q_guar])
    am_limit = am_limits(s, q_max[tree.leaves], st.minimum, "dominant" if st.calc else "default")
    closed = (leaf_apps > 0) & (
        (am_used[:, 1] + st.minimum[1] > am_limit[:, 1] + 1e-9) | (leaf_apps >= app_max))
    sel = startable(st, jobs, leaf_apps, app_max, st.job_leaf, closed)
    return Admission(am_used, leaf_apps, pair_apps, q_guar, q_max, app_max, user_app_max,
                     am_limit, sel)


def normalized(st: CapacityState, raw: np.ndarray, largest: np.ndarray,
               rows: np.ndarray | None) -> np.ndarray:
    """The pending requests ``raw`` normalised (capped at the largest node), row for row.

    Only ``rows`` (NaN elsewhere) when given: without heartbeats, reservations or
    preemption, nothing but the requests admission lets through (``Admission.sel``, ~1% of
    a long backlog) is read.  Those rows are written into a buffer kept between calls, all
    NaN but for the previous call's rows (set back to NaN first): a fresh (10^5, 3) array
    at every call cost more than the rows themselves.
    """
    n = len(raw)
    if rows is None:
        out = np.empty((n, 3))
        normalize_pending(raw, np.arange(n), st.minimum, st.calc, largest, out)
        return out
    if len(st.req_buf) < n:
        st.req_buf = np.full((max(n, 2 * len(st.req_buf)), 3), np.nan)
    else:
        st.req_buf[st.req_rows] = np.nan
    normalize_pending(raw, rows, st.minimum, st.calc, largest, st.req_buf)
    st.req_rows = rows
    return st.req_buf[:n]


def kernel_inputs(st: CapacityState, req: np.ndarray, jobs: np.ndarray,
                  leaf: np.ndarray, pair_used: np.ndarray, run_job: np.ndarray,
                  cluster: np.ndarray, free: np.ndarray, adm: Admission | None = None,
                  held: np.ndarray | None = None) -> Inputs:
    """The state :func:`~pipeline.policies.capacity.kernel.allocate` reads (all but the
    gate and ``out``; ``allocate(*inputs, gate, out)``).

    ``req`` are the normalised pending requests, ``jobs``/``leaf`` their applications and
    leaves, ``pair_used`` the normalised use per (leaf, user) pair (prepare.scan_running),
    ``cluster`` and ``free`` the up nodes' total and free resources (state.up_resources);
    ``adm``: :func:`admission` of this scheduling point when the caller has it already;
    ``held``: requests holding a reservation (:mod:`.reservations`): still asked for (their
    users stay active) but not handed out again.
    """
    tree, s = st.tree, st.settings
    n_leaves, n_users = tree.n_leaves, st.n_users
    n_pairs = n_leaves * n_users
    q_used = st.paths @ pair_used.reshape(n_leaves, n_users, 3).sum(axis=1)
    a = admission(st, jobs, leaf, run_job, cluster) if adm is None else adm
    leaf_cap, leaf_max = a.q_guar[tree.leaves], a.q_max[tree.leaves]
    sel = a.sel
    blocks = app_blocks(st, req, jobs, leaf,
                        sel if held is None or not len(held) else np.setdiff1d(sel, held))
    sorted_jobs, pend_mem = blocks[3], blocks[6]
    # per-job memory used by running containers and pending demand (fair ordering only)
    if s.fair.any():
        run_job_mem = st.job_mem[sorted_jobs]
        st.job_mem[run_job] = 0.0
    else:
        run_job_mem = np.zeros(len(sorted_jobs))
    pair_left = np.bincount(np.take(st.job_pair, jobs[sel]),
                            minlength=n_pairs).astype(np.int64)
    pair_w, leaf_active_used, leaf_active_w = active_users(st, pair_left, pair_used)
    req_idx, app_lo, app_hi, _, leaf_app_lo, leaf_app_hi, _ = blocks
    apps = Apps(np.ascontiguousarray(req), req_idx, app_lo, app_hi,
                st.job_pair[sorted_jobs].astype(np.int64), st.started[sorted_jobs].copy(),
                run_job_mem, pend_mem + run_job_mem, leaf_app_lo, leaf_app_hi)
    users = Users(pair_used, pair_w, pair_left, a.pair_apps)
    leaves = Leaves(tree.leaves.astype(np.int64), leaf_cap, leaf_max, s.mulp, s.ulf, s.fair,
                    s.size_weight, leaf_active_used, leaf_active_w, a.leaf_apps, a.app_max,
                    a.user_app_max, a.am_used, a.am_limit)
    queues = Queues(q_used, a.q_guar, a.q_max, tree.parent.astype(np.int64), s.q_kids_lo,
                    s.q_kids, s.q_prio, s.q_use_prio, s.q_leaf, st.all_access)
    room = Room(free, cluster.astype(np.float64), st.minimum, st.calc, False)
    return Inputs(apps, users, leaves, queues, room)


def app_blocks(st: CapacityState, req: np.ndarray, jobs: np.ndarray, leaf: np.ndarray,
               sel: np.ndarray) -> tuple[np.ndarray, ...]:
    """The kernel's application blocks for the requests ``sel``.

    Returns request indices grouped by application (kernel order), each application's
    ``[lo, hi)`` range in them, the applications' jobs, each leaf's ``[lo, hi)`` range of
    applications and each application's pending memory.
    """
    n_leaves = st.tree.n_leaves
    app_jobs, a_order, req_idx, counts = applications(st, jobs[sel], leaf[sel])
    req_idx = sel[req_idx].astype(np.int64)
    app_hi = np.cumsum(counts).astype(np.int64)
    app_lo = app_hi - counts
    sorted_jobs = app_jobs[a_order]
    sorted_leaf = st.job_leaf[sorted_jobs]
    leaf_app_lo = np.searchsorted(sorted_leaf, np.arange(n_leaves)).astype(np.int64)
    leaf_app_hi = np.searchsorted(sorted_leaf, np.arange(n_leaves), side="right")
    pend_mem = (np.add.reduceat(req[req_idx, 1], app_lo) if len(req_idx)
                else np.zeros(0))
    return (req_idx, app_lo, app_hi, sorted_jobs, leaf_app_lo,
            leaf_app_hi.astype(np.int64), pend_mem)


def active_users(st: CapacityState, pair_left: np.ndarray, pair_used: np.ndarray,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """User weights and, per leaf, the use and weight of its active users (those with a
    request left); users are per leaf, dense: pair = leaf * n_users + user (YARN's
    UsersManager is per queue)."""
    n_leaves, n_users = st.tree.n_leaves, st.n_users
    pair_leaf = np.repeat(np.arange(n_leaves), n_users)
    pair_w = st.weights.ravel()
    active = pair_left > 0
    leaf_active_used = dense_sum(pair_leaf[active], pair_used[active], n_leaves)
    leaf_active_w = np.bincount(pair_leaf[active], weights=pair_w[active], minlength=n_leaves)
    return pair_w, leaf_active_used, leaf_active_w.astype(np.float64)


def startable(st: CapacityState, jobs: np.ndarray, leaf_apps: np.ndarray,
              app_max: np.ndarray, job_key: np.ndarray, closed: np.ndarray) -> np.ndarray:
    """Indices of the pending requests whose application is running or may start now.

    ``closed[job_key[j]]`` tells whether application ``j``'s leaf has no AM room (in the
    partition the application asks for: ``job_key`` numbers leaves, or partitions and
    leaves) or is at its application limit.  Not started applications beyond
    the room under maximum-applications (the first ones in FIFO order are kept) or in a
    closed leaf cannot get a container in this call; dropping them early keeps a long
    backlog from being sorted at every call.
    """
    kept = np.empty(len(jobs), dtype=np.int64)
    cand = np.empty(len(jobs), dtype=np.int64)
    n_kept, n_cand = keep_waiting(jobs, st.started, job_key, closed, st.mark, kept, cand)
    kept, cand = kept[:n_kept], cand[:n_cand]
    if not len(cand):
        return kept
    cand_leaf = st.job_leaf[cand]
    room = np.maximum(app_max - leaf_apps, 0)
    if (np.bincount(cand_leaf, minlength=len(room)) <= room).all():
        return kept
    order = np.lexsort((cand, st.first_seen[cand], -st.job_prio[cand], cand_leaf))
    cand, cand_leaf = cand[order], cand_leaf[order]
    within = np.arange(len(cand)) - np.searchsorted(cand_leaf, cand_leaf)
    return admitted(jobs, st.started, kept, cand[within < room[cand_leaf]], st.mark)


def applications(st: CapacityState, jobs: np.ndarray, leaf: np.ndarray,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Applications in leaf order, then FIFO (priority desc, first seen, job code).

    Returns the unique jobs, their sorting order, the request indices grouped by
    application in that order (arrival order inside an application) and the number of
    requests of each application in that order.  One stable sort of the requests.
    """
    by_job = np.argsort(jobs, kind="stable")
    sj = jobs[by_job]
    starts = np.flatnonzero(np.r_[True, sj[1:] != sj[:-1]]) if len(sj) else np.zeros(0, int)
    app_jobs = sj[starts]
    counts = np.diff(np.r_[starts, len(sj)])
    first = by_job[starts]  # the earliest request of each job (stable sort)
    app_prio = st.job_prio[app_jobs]
    a_order = np.lexsort((app_jobs, st.first_seen[app_jobs], -app_prio, leaf[first]))
    lens = counts[a_order]
    offsets = np.cumsum(lens) - lens
    pos = np.repeat(starts[a_order] - offsets, lens) + np.arange(int(lens.sum()))
    return app_jobs, a_order, by_job[pos], lens
