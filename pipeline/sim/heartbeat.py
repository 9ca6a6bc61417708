"""Node heartbeats: the scheduling opportunities of heartbeat-driven schedulers.

Hadoop's schedulers place work when a node reports in: a TaskTracker heartbeat (Hadoop 1,
every ``mapred.heartbeat`` interval, at least 3 s) or a NodeManager heartbeat (YARN,
``yarn.resourcemanager.nodemanagers.heartbeat-interval-ms``, 1 s by default).  Delay
scheduling counts these reports: a job "skipped" at a heartbeat, or a YARN "missed
scheduling opportunity", is one node report that offered room the job declined.  So the
core models them, once, for every policy that declares a ``heartbeat_s`` interval.

Model: every up node reports once per interval.  Interval ``p`` covers ``[p*H, (p+1)*H)``
and its ``M`` reports are evenly spaced (the ``i``-th at ``(p + (i + 0.5)/M) * H``) in an
order that changes from interval to interval: node ``(a_p * i + b_p) mod M`` reports ``i``-th,
with ``a_p`` coprime to ``M`` and ``b_p`` drawn from the run's seed and ``p``, so no node is
always first and the same seed gives the same reports.  (Real nodes drift in phase; a
per-interval permutation gives the same "offers come from uniformly random nodes" that the
delay-scheduling analysis assumes, at O(1) cost per report.)  A call covering ``(t0, t1]``
gets the reports in that window in time order; the policy places at ``t1``, so a placement
lags its report by less than the gap between calls (at most ``H`` when the policy asks to
be woken every interval, as heartbeat-driven policies do while work waits).
"""

from __future__ import annotations

import math

import numpy as np

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64: a well-mixed 64-bit value from ``x`` (deterministic, platform-free)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class Heartbeats:
    """Report times and order of ``n_nodes`` node slots every ``interval_s`` seconds."""

    def __init__(self, n_nodes: int, interval_s: float, seed: int = 0) -> None:
        if not (interval_s > 0 and math.isfinite(interval_s)):
            raise ValueError(f"heartbeat interval must be > 0 s, got {interval_s}")
        self.n = int(n_nodes)
        self.h = float(interval_s)
        self.seed = int(seed) & _MASK

    def _affine(self, period: int) -> tuple[int, int]:
        n = self.n
        if n <= 1:
            return 1, 0
        r = _mix(self.seed ^ _mix(period & _MASK))
        a = 1 + r % (n - 1)
        while math.gcd(a, n) != 1:
            a = a % (n - 1) + 1
        return a, _mix(r) % n

    def order(self, period: int, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Node slots reporting ``lo``-th to ``hi - 1``-th in interval ``period``."""
        a, b = self._affine(period)
        i = np.arange(lo, self.n if hi is None else hi, dtype=np.int64)
        return (a * i + b) % self.n if self.n else i

    def between(self, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
        """``(nodes, times)`` of the reports in ``(t0, t1]``, in time order."""
        n, h = self.n, self.h
        if n == 0 or not t1 > t0:
            return np.zeros(0, np.int64), np.zeros(0)
        t0 = max(t0, -h)  # the first call covers at most one interval back
        nodes, times = [], []
        for p in range(math.floor(t0 / h), math.floor(t1 / h) + 1):
            # report i is at (p + (i + 0.5) / n) * h: those in (t0, t1], computed, not scanned
            lo = max(math.floor((t0 / h - p) * n - 0.5) + 1, 0)
            hi = min(math.floor((t1 / h - p) * n - 0.5), n - 1)
            if lo <= hi:
                nodes.append(self.order(p, lo, hi + 1))
                times.append((p + (np.arange(lo, hi + 1) + 0.5) / n) * h)
        if not nodes:
            return np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(nodes), np.concatenate(times)
