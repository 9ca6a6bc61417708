"""Fair-share and min-share preemption of ``fair-scheduler`` (Hadoop 3.3, paraphrased).

Source: FairScheduler.md ("If the queue waits fairSharePreemptionTimeout without receiving
fairSharePreemptionThreshold*fairShare resources, it is allowed to preempt containers to
take resources from other queues"; minSharePreemptionTimeout likewise for the minimum
share) and ``FSLeafQueue``/``FSAppAttempt``/``FSPreemptionThread`` (apache/hadoop 3.3).

Per leaf queue, with instantaneous fair share ``F``, demand ``D`` (running + pending) and
usage ``U`` (memory only for ``fair``/``fifo`` leaves, every resource for ``drf``):

- fair-share starved while ``U < min(threshold * F, D)``; after ``fairSharePreemptionTimeout``
  seconds of that, it may claim ``min(threshold * F, D) - U``;
- min-share starved while ``U < min(minShare, D)``; after ``minSharePreemptionTimeout`` it
  may claim ``min(minShare, D) - U``; the claim is the larger of the two.

Preemption runs only while cluster allocation (the larger of the cpu and memory ratios) is
at least ``cluster-utilization-threshold`` (0.8).  Victims come from leaves that allow
preemption, never from a starved leaf, and only while the victim's queue stays at or above
its own fair share afterwards (``canContainerBePreempted``); youngest containers first.
tracereplay choices: queue-level (not per-application) starvation; victims are chosen over
the whole cluster, not node by node; they stop at once (no ``waitTimeBeforeKill``), and a
queue that preempted waits its timeout again before the next claim.
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.fair.kernel import DRF
from pipeline.sim.interface import RunningView


def starved_claims(now: float, leaves: np.ndarray, kind: np.ndarray, usage: np.ndarray,
                   demand: np.ndarray, fair: np.ndarray, min_share: np.ndarray,
                   threshold: np.ndarray, fs_timeout: np.ndarray, ms_timeout: np.ndarray,
                   since: np.ndarray) -> tuple[np.ndarray, float | None]:
    """Claims ``(n_leaves, 3)`` due now, updating ``since`` (n_leaves, 2); and next wake-up."""
    q = leaves
    dims = np.where((kind[q] == DRF)[:, None], True, np.array([False, True, False]))
    claims = np.zeros((len(q), 3))
    wake = np.inf
    for col, (target, timeout) in enumerate((
            (np.minimum(threshold[q, None] * fair[q], demand[q]), fs_timeout[q]),
            (np.minimum(min_share[q], demand[q]), ms_timeout[q]))):
        short = np.where(dims, np.maximum(target - usage[q], 0.0), 0.0)
        below = (short > 1e-9 * np.maximum(target, 1.0)).any(axis=1) & np.isfinite(timeout)
        since[~below, col] = np.nan
        since[below & np.isnan(since[:, col]), col] = now
        due = below & (now - since[:, col] >= timeout)
        claims[due] = np.maximum(claims[due], short[due])
        since[due, col] = now  # wait the timeout again before the next claim
        if below.any():
            wake = min(wake, float((since[below, col] + timeout[below]).min()))
    return claims, (wake if np.isfinite(wake) else None)


def choose_victims(running: RunningView, leaf: np.ndarray, claims: np.ndarray,
                   usage: np.ndarray, fair: np.ndarray, kind: np.ndarray,
                   preemptable: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """Running indices to preempt so the claims are met (youngest first, see module doc)."""
    need = claims.sum(axis=0)
    if not (need > 0).any() or len(leaf) == 0:
        return np.zeros(0, dtype=np.int64)
    q = leaves[leaf]  # each container's queue index
    starved = np.zeros(len(kind), dtype=bool)
    starved[leaves[(claims > 0).any(axis=1)]] = True
    ok = preemptable[q] & ~starved[q]
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return idx
    # within each victim queue, youngest first, only while it stays >= its fair share
    order = idx[np.lexsort((idx, -running.start_s[idx], q[idx]))]
    qq = q[order]
    req = running.req[order]
    cum = np.cumsum(req, axis=0)
    starts = np.r_[0, np.flatnonzero(np.diff(qq)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(qq)]))
    base = np.where(first[:, None] > 0, cum[np.maximum(first - 1, 0)], 0.0)
    taken = cum - base
    surplus = usage[qq] - fair[qq]
    dims = np.where((kind[qq] == DRF)[:, None], True, np.array([False, True, False]))
    allowed = (~dims | (taken <= surplus + 1e-9)).all(axis=1)
    cand = order[allowed]
    cand = cand[np.lexsort((cand, -running.start_s[cand]))]
    if len(cand) == 0:
        return cand
    got = np.cumsum(running.req[cand], axis=0)
    covered = ((got >= need - 1e-9) | (need <= 0)).all(axis=1)
    stop = int(np.argmax(covered)) + 1 if covered.any() else len(cand)
    return np.sort(cand[:stop]).astype(np.int64)
