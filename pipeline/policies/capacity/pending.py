"""Pending demand as the preemption monitor counts it (Hadoop 3.3, YARN-3769).

``TempQueuePerPartition`` takes a leaf's pending from ``LeafQueue.
getTotalPendingResourcesConsideringUserLimit`` (apache/hadoop 3.3): over the leaf's
*active* applications only (``getApplications()``, the ordering policy's entities; those
still waiting for activation under the AM limit or maximum-applications are not there), per
user, ``min(headroom, the user's pending)`` resource by resource, where ``headroom =
max(0, getResourceLimitForActiveUsers(user) - user's use)`` (the active-users user limit
times the user's weight, rounded down to the minimum allocation).  Demand a user may not
get because of its user limit therefore never drives preemption: without this, a queue
whose only waiting user is at its limit would have containers of other queues preempted
for it round after round, and the room would go back to where it came from.

tracereplay's active applications are those the assignment could serve now
(:func:`~pipeline.policies.capacity.batch.startable`: started, or allowed to start by the
leaf's AM and application limits).
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.capacity.batch import active_users
from pipeline.policies.capacity.formulas import DEFAULT, DOMINANT, user_specific_limit
from pipeline.policies.capacity.runtime import CapacityState
from pipeline.policies.capacity.state import dense_sum
from pipeline.policies.capacity.vectors import user_limit


def leaf_pending(st: CapacityState, req: np.ndarray, jobs: np.ndarray, sel: np.ndarray,
                 pair_used: np.ndarray, guar: np.ndarray, maxi: np.ndarray,
                 cluster: np.ndarray) -> np.ndarray:
    """(n_leaves, 3) pending demand the monitor sees in one partition.

    ``req``/``jobs``: the normalised pending requests and their applications; ``sel``: the
    requests of active applications asking for this partition; ``pair_used``: normalised
    use per (leaf, user) in the partition; ``guar``/``maxi``: (n_queues, 3) effective
    guarantees and maxima there; ``cluster``: the partition's resource.
    """
    tree, s = st.tree, st.settings
    n_leaves, n_users = tree.n_leaves, st.n_users
    n_pairs = n_leaves * n_users
    pair = np.take(st.job_pair, jobs[sel])
    want = dense_sum(pair, np.take(req, sel, axis=0), n_pairs)
    pair_left = np.bincount(pair, minlength=n_pairs).astype(np.int64)
    pair_w, active_used, active_w = active_users(st, pair_left, pair_used)
    q_used = st.paths @ pair_used.reshape(n_leaves, n_users, 3).sum(axis=1)
    limits = np.zeros((n_leaves, 3))
    for pos, q in enumerate(tree.leaves.tolist()):
        if active_w[pos] > 0:
            limits[pos] = user_limit(guar[q], q_used[q], active_used[pos], active_w[pos],
                                     s.mulp[pos], s.ulf[pos], maxi[q], st.minimum,
                                     np.asarray(cluster, dtype=np.float64), st.calc)
    per_user = user_specific_limit(np.repeat(limits, n_users, axis=0), pair_w[:, None],
                                   st.minimum, DOMINANT if st.calc else DEFAULT)
    headroom = np.maximum(per_user - pair_used, 0.0)
    return np.minimum(headroom, want).reshape(n_leaves, n_users, 3).sum(axis=1)
