"""Resource vectors of the compiled CapacityScheduler pass, and its user limit.

``(cpu, mem, gpu)`` vectors as tuples of three floats (the kernel's) or arrays (the array
forms, for Python callers and tests): Hadoop 3.3's ``ResourceCalculator`` comparisons and
ratios (``calc`` 0: ``DefaultResourceCalculator``, memory only; 1:
``DominantResourceCalculator``), rounding to the minimum allocation, and the user limit of
``UsersManager.computeUserLimit`` (:func:`user_limit` / :func:`user_limit_of`), the one
definition the kernel (:mod:`.kernel`) and the pending-demand accounting (:mod:`.pending`)
both use.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.sim.jit import helper

EPS = 1e-9


# Vectors inside the kernel are 3-tuples of floats, read from rows by index: a row *view*
# (``a[i]``) is a new array whose creation and release each cost an atomic reference count
# update, and in the per-container loop those updates were most of the kernel's time.

@helper
def row(a: np.ndarray, i: int) -> tuple[float, float, float]:
    return (a[i, 0], a[i, 1], a[i, 2])


@helper
def vec(a: np.ndarray) -> tuple[float, float, float]:
    return (a[0], a[1], a[2])


@helper
def plus(a: tuple, b: tuple) -> tuple[float, float, float]:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@helper
def exceeds(a: tuple, b: tuple, cluster: np.ndarray, calc: int) -> bool:
    """``Resources.greaterThan``: memory, or shares compared largest first (DRC)."""
    if calc == 0:
        return a[1] > b[1] + EPS
    return _shares_greater(a[0], a[1], a[2], b[0], b[1], b[2], cluster)


@njit(cache=True)
def greater(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calc: int) -> bool:
    """:func:`exceeds` of two arrays."""
    return exceeds(vec(a), vec(b), cluster, calc)


@helper
def _share(x: float, total: float) -> float:
    return x / total if total > 0 else 0.0


@helper
def _descending(x: float, y: float, z: float) -> tuple[float, float, float]:
    """Three numbers largest first (a sorting network: no array, no allocation)."""
    if x < y:
        x, y = y, x
    if y < z:
        y, z = z, y
    if x < y:
        x, y = y, x
    return x, y, z


@helper
def _shares_greater(a0: float, a1: float, a2: float, b0: float, b1: float, b2: float,
                    cluster: np.ndarray) -> bool:
    """DRC's comparison of two vectors given by their entries: the shares of the cluster,
    largest first, compared in turn (the first that differs decides)."""
    sa = _descending(_share(a0, cluster[0]), _share(a1, cluster[1]), _share(a2, cluster[2]))
    sb = _descending(_share(b0, cluster[0]), _share(b1, cluster[1]), _share(b2, cluster[2]))
    for r in range(3):
        if abs(sa[r] - sb[r]) > EPS:
            return sa[r] > sb[r]
    return False


@helper
def ratio_of(a: tuple, b: tuple, cluster: np.ndarray, calc: int) -> float:
    """``rc.divide``: memory ratio, or dominant share ratio."""
    if calc == 0:
        return a[1] / b[1] if b[1] > 0 else np.inf
    da = 0.0
    db = 0.0
    for r in range(3):
        if cluster[r] > 0:
            da = max(da, a[r] / cluster[r])
            db = max(db, b[r] / cluster[r])
    return da / db if db > 0 else np.inf


@njit(cache=True)
def ratio(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calc: int) -> float:
    """:func:`ratio_of` of two arrays."""
    return ratio_of(vec(a), vec(b), cluster, calc)


@helper
def _round1(x: float, step: float, on: bool, up: bool) -> float:
    if step > 0 and on:
        q = x / step
        return (np.ceil(q - EPS) if up else np.floor(q + EPS)) * step
    return x


@helper
def rounded(x: tuple, minimum: np.ndarray, calc: int, up: bool) -> tuple[float, float, float]:
    """``x`` rounded to multiples of the minimum allocation (memory only with the default
    calculator)."""
    return (_round1(x[0], minimum[0], calc == 1, up), _round1(x[1], minimum[1], True, up),
            _round1(x[2], minimum[2], calc == 1, up))


@njit(cache=True)
def user_limit(cap: np.ndarray, queue_used: np.ndarray, active_used: np.ndarray,
               active_w: float, mulp: float, ulf: float, qmax: np.ndarray,
               minimum: np.ndarray, cluster: np.ndarray, calc: int) -> np.ndarray:
    """The active-users user limit of a leaf queue (``UsersManager.computeUserLimit``,
    Hadoop 3.3): the one definition, shared by the assignment loop (:func:`user_limit_of`),
    the preemption monitor's pending demand (:mod:`.pending`) and the tests.

    ``cap`` is the queue's guaranteed resource, ``queue_used`` what all its users use,
    ``active_used`` what its active users (with pending requests) use and ``active_w`` the
    sum of their weights; ``mulp`` minimum-user-limit-percent, ``ulf`` user-limit-factor
    (< 0: off, capped by the queue's maximum ``qmax``).  As in Hadoop 3.3 the request is
    assumed to be one minimum allocation; per user, multiply by the user's weight and round
    *down* (:func:`~pipeline.policies.capacity.formulas.user_specific_limit`).
    """
    lim = user_limit_of(vec(cap), vec(queue_used), vec(active_used), active_w, mulp, ulf,
                      vec(qmax), minimum, cluster, calc)
    out = np.empty(3)
    out[0], out[1], out[2] = lim
    return out


@helper
def user_limit_of(cap: tuple, queue_used: tuple, active_used: tuple, active_w: float,
                mulp: float, ulf: float, qmax: tuple, minimum: np.ndarray,
                cluster: np.ndarray, calc: int) -> tuple[float, float, float]:
    """:func:`user_limit` of 3-tuples (the kernel computes it once per container)."""
    mn = vec(minimum)
    c = mn if exceeds(mn, cap, cluster, calc) else cap  # "miniscule capacity"
    current = c if exceeds(c, queue_used, cluster, calc) else plus(queue_used, mn)
    w = max(active_w, EPS)
    f = mulp / 100.0
    # divideAndCeil rounds to whole MB/vcores; in the trace's float units that is a no-op
    # next to the final round-up to the minimum allocation.
    by_users = ((active_used[0] + mn[0]) / w, (active_used[1] + mn[1]) / w,
                (active_used[2] + mn[2]) / w)
    by_pct = (current[0] * f, current[1] * f, current[2] * f)
    limit = by_pct if exceeds(by_pct, by_users, cluster, calc) else by_users
    mx = qmax if ulf < 0 else (c[0] * ulf, c[1] * ulf, c[2] * ulf)
    if exceeds(limit, mx, cluster, calc):
        limit = mx
    return rounded(limit, minimum, calc, True)
