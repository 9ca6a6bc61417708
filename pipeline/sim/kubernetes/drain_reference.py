"""Plain-Python reference of Cluster Autoscaler's drain simulation (:mod:`.drain`).

Source: cluster-autoscaler-release-1.31 ``simulator/cluster.go`` (``FindNodesToRemove``):
candidates are tried in turn; a candidate is removable when every pod on it fits on a node
that is up, is not the candidate and is not already chosen for removal, first fit in slot
order; the pods of a removable candidate stay on their new nodes for the candidates after
it (the snapshot is committed), those of an unremovable one do not.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-9


def removable(free: np.ndarray, up: np.ndarray, candidates: np.ndarray,
              pod_node: np.ndarray, pod_req: np.ndarray) -> np.ndarray:
    """Which ``candidates`` can be drained; ``free`` (n, 3) is updated with the moves."""
    out = np.zeros(len(candidates), dtype=np.bool_)
    gone = np.zeros(len(free), dtype=np.bool_)
    for c, node in enumerate(candidates.tolist()):
        trial = free.copy()
        ok = True
        for p in np.flatnonzero(pod_node == node).tolist():
            dest = -1
            for d in range(len(free)):
                if d != node and up[d] and not gone[d] and candidates_ok(trial[d], pod_req[p]):
                    dest = d
                    break
            if dest < 0:
                ok = False
                break
            trial[dest] -= pod_req[p]
        if ok:
            out[c] = True
            gone[node] = True
            free[:] = trial
    return out


def candidates_ok(room: np.ndarray, req: np.ndarray) -> bool:
    """Whether a pod asking ``req`` fits a node with ``room`` free (float slack)."""
    return bool(np.all(req <= room + EPS))
