"""CapacityScheduler formulas (Hadoop 3.3), as pure functions on (cpu, mem, gpu) vectors.

Resource calculators (apache/hadoop ``hadoop-yarn-common`` ``util/resource``):
``DefaultResourceCalculator`` "only uses Memory" for comparisons and ratios;
``DominantResourceCalculator`` compares dominant shares of the cluster, then the second
largest (javadoc: "the maximum share that the entity has been allocated of any resource").
Vectors here are ``(cpu, mem, gpu)`` in the trace's units; ``minimum`` holds the minimum
allocation per resource (0 = no rounding for that resource).
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT = "default"
DOMINANT = "dominant"
EPS = 1e-9


def _round_up(x: np.ndarray, step: np.ndarray) -> np.ndarray:
    safe = np.where(step > 0, step, 1.0)
    return np.where(step > 0, np.ceil(x / safe - EPS) * safe, x)


def _round_down(x: np.ndarray, step: np.ndarray) -> np.ndarray:
    safe = np.where(step > 0, step, 1.0)
    return np.where(step > 0, np.floor(x / safe + EPS) * safe, x)


def normalize(req: np.ndarray, minimum: np.ndarray, calculator: str = DEFAULT) -> np.ndarray:
    """Requests rounded up to multiples of the minimum allocation (never below it).

    ``DefaultResourceCalculator.normalize``: ``roundUp(max(request, minimum), minimum)``
    for memory only; ``DominantResourceCalculator`` does every resource with a minimum.
    ``req`` may be one vector or an (m, 3) array.  The maximum allocation is not applied:
    the core already marks requests no machine can hold as unschedulable.
    """
    req = np.asarray(req, dtype=np.float64)
    step = np.asarray(minimum, dtype=np.float64).copy()
    if calculator == DEFAULT and req.ndim == 2:  # fast path: one column
        out = req.copy()
        if step[1] > 0:
            out[:, 1] = np.ceil(np.maximum(req[:, 1], step[1]) / step[1] - EPS) * step[1]
        return out
    if calculator == DEFAULT:
        step[[0, 2]] = 0.0
    out = _round_up(np.maximum(req, step), step)
    return np.where(req > 0, out, np.where(step > 0, step, req)) if calculator == DEFAULT \
        else np.where((req > 0) | (step > 0), out, req)


def ratio(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calculator: str) -> float:
    """``rc.divide(cluster, a, b)``: memory ratio, or dominant share of a over that of b."""
    if calculator == DEFAULT:
        return float(a[1] / b[1]) if b[1] > 0 else math.inf
    sb = dominant_share(b, cluster)
    return dominant_share(a, cluster) / sb if sb > 0 else math.inf


def dominant_share(x: np.ndarray, cluster: np.ndarray) -> float:
    """Largest share of the cluster over resources the cluster has."""
    has = cluster > 0
    return float(np.max(x[has] / cluster[has])) if has.any() else 0.0


def greater(a: np.ndarray, b: np.ndarray, cluster: np.ndarray, calculator: str) -> bool:
    """``Resources.greaterThan(rc, cluster, a, b)``."""
    if calculator == DEFAULT:
        return bool(a[1] > b[1] + EPS)
    has = cluster > 0
    sa = np.sort(a[has] / cluster[has])[::-1]
    sb = np.sort(b[has] / cluster[has])[::-1]
    for x, y in zip(sa, sb, strict=True):
        if abs(x - y) > EPS:
            return bool(x > y)
    return False


def user_specific_limit(limit: np.ndarray, weight: float, minimum: np.ndarray,
                        calculator: str = DEFAULT) -> np.ndarray:
    """``normalizeDown(userLimit * weight, minimum)`` (UsersManager); the user limit itself
    is :func:`pipeline.policies.capacity.vectors.user_limit`."""
    return _round_down(limit * weight, _step(minimum, calculator))


def _step(minimum: np.ndarray, calculator: str) -> np.ndarray:
    step = np.asarray(minimum, dtype=np.float64).copy()
    if calculator == DEFAULT:
        step[[0, 2]] = 0.0
    return step


def am_limit(queue_usable: np.ndarray, max_am_percent: float, minimum: np.ndarray,
             calculator: str = DEFAULT) -> np.ndarray:
    """AM resource limit of a leaf: ``normalizeUp(queueUsable * maxAMResourcePercent)``."""
    return _round_up(queue_usable * max_am_percent, _step(minimum, calculator))


def max_applications(system_max: int, abs_capacity: float, mulp: float,
                     ulf: float) -> tuple[int, int]:
    """(per-queue, per-user) maximum applications (LeafQueue ``setupQueueConfigs``)."""
    per_queue = int(system_max * abs_capacity)
    return per_queue, per_user_applications(per_queue, mulp, ulf)


def per_user_applications(per_queue: int, mulp: float, ulf: float) -> int:
    """``maxApplicationsPerUser``: the queue's maximum applications times the minimum user
    limit percent and the user limit factor (1 where the factor is off, -1), at most the
    queue's own maximum."""
    factor = ulf if ulf > 0 else 1.0
    return min(per_queue, int(per_queue * mulp / 100.0 * factor))


# YARN's defaults (yarn.scheduler.minimum-allocation-mb 1024, -vcores 1) in trace units.
_MEM_MINIMUM = (("mib", 1024.0), ("mb", 1024.0), ("gib", 1.0), ("gb", 1.0))
_CPU_MINIMUM = (("core", 1.0), ("vcore", 1.0))


def minimum_allocation(
    units: dict[str, str], cpu: float | None, mem: float | None
) -> tuple[float, float]:
    """The (cpu, mem) minimum allocation in the trace's units.

    Explicit values win.  Otherwise YARN's defaults (1 vcore, 1024 MB) are translated through
    the manifest's unit descriptions; in normalized units (a fraction of the largest
    machine, as in the Google and Alibaba traces) an absolute size has no meaning, so no
    rounding is applied (0) and the user may set one.
    """
    return (_default(cpu, units.get("cpu", ""), _CPU_MINIMUM),
            _default(mem, units.get("mem", ""), _MEM_MINIMUM))


def _default(value: float | None, unit: str, table: tuple[tuple[str, float], ...]) -> float:
    if value is not None:
        return float(value)
    text = unit.lower()
    if "normalized" in text:
        return 0.0
    return next((v for key, v in table if key in text), 0.0)


_MB_PER_UNIT = (("mib", 1.0), ("mb", 1.0), ("gib", 1024.0), ("gb", 1024.0),
                ("tib", 1024.0**2), ("tb", 1024.0**2))


def mb_per_unit(units: dict[str, str], explicit: float | None) -> float | None:
    """MB per trace memory unit, for absolute capacities given in MB (``[memory=10240]``).

    An explicit value wins; otherwise it follows the manifest's memory unit (MiB/MB: 1,
    GiB/GB: 1024, TiB/TB: 1024^2).  Normalized or unknown units have no MB equivalent:
    ``None``, and the caller asks for ``mem_unit_mb``.
    """
    if explicit is not None:
        return float(explicit)
    text = units.get("mem", "").lower()
    if "normalized" in text:
        return None
    return next((v for key, v in _MB_PER_UNIT if key in text), None)
