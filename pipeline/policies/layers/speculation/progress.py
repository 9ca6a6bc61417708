"""Progress score, progress rate and estimated time left of running tasks (LATE, section 4).

Zaharia et al., "Improving MapReduce Performance in Heterogeneous Environments", OSDI 2008,
define the progress score PS in [0, 1] as Hadoop reports it: a map's PS is the fraction of
its input read; a reduce has three phases, copy (shuffle), sort and reduce, each worth 1/3,
and within a phase the fraction of that phase's data processed.  Progress rate = PS / T
(T: time running) and estimated time left = (1 - PS) / rate.

The replay knows the fraction of each attempt's *work* done (its run time, speed-adjusted).
A map or one-phase task reads at a constant rate, so PS is that fraction.  A reduce spends
fractions ``(c, s, r)`` of its run time in copy, sort and reduce (``spec_reduce_phases``,
default ``0.5,0.25,0.25``): the project's read model (:data:`pipeline.sim.core.READ_MB_S`)
moves shuffle data across the core at 64 MiB/s, while a sort pass and a reduce pass each go
through local disk at 128 MiB/s, so a MiB costs copy:sort:reduce = 2:1:1 in time.  The
reduce's PS is then piecewise linear in its work fraction, reaching 1/3 and 2/3 at the
phase boundaries.
"""

from __future__ import annotations

import numpy as np

from pipeline.errors import UsageError
from pipeline.sim.tasks import KIND_REDUCE

DEFAULT_PHASES = "0.5,0.25,0.25"
PHASE_SUM_TOL = 1e-6


def parse_phases(text: str | tuple[float, ...], name: str = "spec_reduce_phases"
                 ) -> tuple[float, float, float]:
    """The reduce phases ``"c,s,r"`` as three fractions of run time adding up to 1."""
    try:
        parts = text.split(",") if isinstance(text, str) else list(text)
        values = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        raise UsageError(f"parameter '{name}': expected three numbers 'copy,sort,reduce', "
                         f"got {text!r}") from None
    if len(values) != 3 or not all(np.isfinite(values)):
        raise UsageError(f"parameter '{name}': expected three numbers 'copy,sort,reduce', "
                         f"got {text!r}")
    if min(values) < 0:
        raise UsageError(f"parameter '{name}': phase fractions must not be negative, "
                         f"got {text!r}")
    if abs(sum(values) - 1.0) > PHASE_SUM_TOL:
        raise UsageError(f"parameter '{name}': phase fractions must add up to 1, got "
                         f"{text!r} (sum {sum(values):g})")
    return values[0], values[1], values[2]


def reduce_score(fraction: np.ndarray, phases: tuple[float, float, float]) -> np.ndarray:
    """A reduce's PS from the fraction of its run time done: each phase adds 1/3, linearly
    over its share of the run time (a zero-length phase is done as soon as it starts)."""
    f = np.clip(np.asarray(fraction, dtype=np.float64), 0.0, 1.0)
    score = np.zeros_like(f)
    start = 0.0
    for width in phases:
        # PS gained in this phase: 1/3 of the share of the phase done (all of it once past)
        done = (np.clip((f - start) / width, 0.0, 1.0) if width > 0
                else (f >= start).astype(np.float64))
        score += done / 3.0
        start += width
    return np.clip(score, 0.0, 1.0)


def progress_score(kind: np.ndarray, fraction: np.ndarray,
                   phases: tuple[float, float, float]) -> np.ndarray:
    """PS of each task: its work fraction for maps and one-phase tasks, the three-phase
    score for reduces."""
    f = np.clip(np.asarray(fraction, dtype=np.float64), 0.0, 1.0)
    reduce = np.asarray(kind) == KIND_REDUCE
    if not reduce.any():
        return f
    out = f.copy()
    out[reduce] = reduce_score(f[reduce], phases)
    return out


def progress_rate(score: np.ndarray, elapsed_s: np.ndarray) -> np.ndarray:
    """PS per second running (0 for a task that has not run yet)."""
    t = np.asarray(elapsed_s, dtype=np.float64)
    out = np.zeros(np.broadcast(score, t).shape, dtype=np.float64)
    np.divide(score, t, out=out, where=t > 0)
    return out


def time_left_s(score: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Estimated seconds left, (1 - PS) / rate (infinite where the rate is 0)."""
    r = np.asarray(rate, dtype=np.float64)
    out = np.full(np.broadcast(score, r).shape, np.inf)
    np.divide(1.0 - np.asarray(score, dtype=np.float64), r, out=out, where=r > 0)
    return out
