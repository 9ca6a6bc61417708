"""The shape of a task's measured usage over its run, for generated ``task_usage`` windows.

Sources (graded as in :mod:`pipeline.generate.shapes`):

- [P] Reiss et al., "Heterogeneity and dynamicity of clouds at scale: Google trace
  analysis", SoCC 2012: tasks use well below what they request (a task's mean usage is a
  fraction of its request: :func:`pipeline.generate.shapes.usage_fractions`); memory usage
  is much steadier than CPU usage, which varies over a task's life from one 5-minute
  measurement window to the next.
- [A] the process and its parameters, chosen to give that shape:

  * CPU: the task's mean fraction times ``exp(x_k - sigma^2 / 2)``, where ``x_k`` is a
    mean-reverting AR(1) walk over the task's windows ``k`` (``x_0`` drawn from the walk's
    stationary law N(0, sigma^2); ``x_k = phi x_{k-1} + sigma sqrt(1 - phi^2) e_k``), so the
    long-run mean is the drawn fraction and neighbouring windows are correlated.  CPU may
    exceed the request (CPU is compressible) but never the machine's capacity.
  * memory: the mean fraction, ramping up linearly from ``MEM_RAMP_FLOOR`` of it over the
    first ``MEM_RAMP_S`` of the run (a process filling its heap), then flat with small noise
    (+-``MEM_NOISE``); never above the request (a container above its memory limit is killed).
"""

from __future__ import annotations

import numpy as np

CPU_AR_PHI = 0.8  # [A] correlation of neighbouring 5-minute windows
CPU_AR_SIGMA = 0.3  # [A] stationary sd of log CPU around the task's mean
MEM_RAMP_S = 300.0  # [A] one measurement window
MEM_RAMP_FLOOR = 0.5  # [A] memory at the start, as a share of the task's steady level
MEM_NOISE = 0.02  # [A] relative noise of memory from window to window


def cpu_walk(rng: np.random.Generator, group: np.ndarray, state: np.ndarray,
             phi: float = CPU_AR_PHI, sigma: float = CPU_AR_SIGMA
             ) -> tuple[np.ndarray, np.ndarray]:
    """AR(1) steps of log CPU for windows in time order within each group.

    ``group`` is each window's interval index (windows of one interval contiguous and in
    time order); ``state`` the last ``x`` of each interval (NaN: no window yet).  Returns
    each window's multiplier ``exp(x - sigma^2 / 2)`` (mean 1) and the updated state.
    """
    n = group.size
    eps = rng.standard_normal(n)
    state = state.copy()
    x = np.empty(n)
    if not n:
        return x, state
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    counts = np.diff(np.r_[starts, n])
    innovation = sigma * np.sqrt(1.0 - phi * phi)
    for j in range(int(counts.max())):
        idx = starts[counts > j] + j
        prev = state[group[idx]]
        x[idx] = np.where(np.isnan(prev), sigma * eps[idx], phi * prev + innovation * eps[idx])
        state[group[idx]] = x[idx]
    return np.exp(x - sigma * sigma / 2.0), state


def mem_profile(rng: np.random.Generator, since_start_s: np.ndarray) -> np.ndarray:
    """Memory as a share of the task's steady level, at ``since_start_s`` into its run."""
    ramp = MEM_RAMP_FLOOR + (1.0 - MEM_RAMP_FLOOR) * np.clip(since_start_s / MEM_RAMP_S, 0, 1)
    return ramp * rng.uniform(1.0 - MEM_NOISE, 1.0 + MEM_NOISE, since_start_s.size)
