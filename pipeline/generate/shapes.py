"""Vectorized samplers for synthetic cluster workloads, shaped on published trace figures.

Every function here is pure: it takes a :class:`numpy.random.Generator` (when it draws) and
sizes, and returns arrays; nothing here knows a file format.  Each docstring names its source:

- [P] a published number (``docs/semantics.md`` section 5 quotes and grades the sources);
- [S] measured on the real clusterdata-2011-2 sample (first ``task_events``/``job_events``
  part; per-job counts from its rows stamped 0, i.e. the jobs alive at the window start);
- [A] our own assumption, chosen to give the qualitative shape the sources describe.
"""

from __future__ import annotations

import base64

import numpy as np

DAY_S = 86_400.0
FREE, MIDDLE, PRODUCTION = 0, 1, 2  # priority tiers (0-1 free, 2-8 middle, 9-11 production)

# [P] Reiss et al., SoCC 2012, Table 1: normalized (CPU, memory) and share of machines.
GOOGLE_MACHINE_CLASSES: tuple[tuple[float, float, float], ...] = (
    (0.50, 0.50, 0.5347), (0.50, 0.25, 0.3074), (0.50, 0.75, 0.0795), (1.00, 1.00, 0.0632),
    (0.25, 0.25, 0.0099), (0.50, 0.12, 0.0043), (0.50, 0.03, 0.0004), (0.50, 0.97, 0.0003),
    (1.00, 0.50, 0.0002), (0.50, 0.06, 0.0001),
)

# [S] The 24 most common per-job requests (value as printed in the trace, jobs having it);
# together they cover ~89% (cpu), ~60% (memory) and ~65% (disk) of the sample's jobs.
GOOGLE_CPU_REQUESTS: tuple[tuple[str, int], ...] = (
    ("0.0625", 690), ("0.006248", 637), ("0.03125", 457), ("0.0125", 256), ("0.01874", 216),
    ("0.125", 180), ("0.003124", 129), ("0.0006247", 117), ("0.01562", 62), ("0.09375", 60),
    ("0.03748", 59), ("0.1875", 57), ("0.009369", 51), ("0.02499", 50), ("0.05627", 40),
    ("0.04688", 38), ("0", 37), ("0.06567", 34), ("0.04999", 33), ("0.06873", 33),
    ("0.04376", 32), ("0.0813", 31), ("0.1125", 26), ("0.07495", 25),
)
GOOGLE_MEM_REQUESTS: tuple[tuple[str, int], ...] = (
    ("0.003109", 289), ("0.0159", 217), ("0.0318", 184), ("0.007767", 158), ("0.004662", 110),
    ("0.04773", 106), ("0.001554", 105), ("0.02332", 94), ("0.01553", 92), ("0.00795", 90),
    ("0.006218", 86), ("0.0636", 86), ("0.003883", 76), ("0.003975", 75), ("0.002331", 63),
    ("0.01088", 51), ("0.009323", 47), ("0.02386", 43), ("0.03107", 40), ("0.05316", 38),
    ("0.0007772", 36), ("0.01244", 35), ("0.03979", 30), ("0.00544", 29),
)
GOOGLE_DISK_REQUESTS: tuple[tuple[str, int], ...] = (
    ("3.815e-05", 667), ("1.907e-05", 314), ("0.0001926", 252), ("3.815e-06", 174),
    ("7.725e-05", 172), ("1.144e-05", 159), ("7.629e-06", 142), ("0.0003862", 89),
    ("0.0001154", 79), ("1.526e-05", 69), ("9.537e-06", 55), ("4.768e-06", 51),
    ("1.907e-06", 49), ("0.000308", 47), ("1.335e-05", 45), ("2.289e-05", 40),
)

# [S] Priorities of the jobs alive at the window start (jobs per priority).  Not sampled:
# the generators' population at the start emerges from the arrivals (length-biased towards
# long production services); the tests compare it with this.
PRIORITIES_AT_START: dict[int, float] = {0: 292, 1: 772, 2: 87, 8: 143, 9: 2048, 10: 446, 11: 4}
# [A] Priorities of arriving jobs: most jobs are free or batch (middle), few are production
# (the trace documentation: 0-1 free, 9-11 production; production jobs are few but long).
PRIORITIES_ARRIVING: dict[int, float] = {
    0: 0.35, 1: 0.05, 2: 0.08, 3: 0.01, 4: 0.30, 5: 0.02, 6: 0.02, 7: 0.01, 8: 0.06,
    9: 0.07, 10: 0.02, 11: 0.01,
}
# [S] Scheduling class 0-3 of jobs alive at the start, per priority tier (jobs per class).
SCHED_CLASS_BY_TIER: tuple[tuple[int, ...], ...] = (
    (375, 143, 274, 272), (56, 56, 85, 33), (94, 991, 814, 599),
)


def shares(weights: object) -> np.ndarray:
    """Normalize weights (a sequence or the values of a mapping) to probabilities."""
    values = np.asarray(list(weights.values()) if isinstance(weights, dict) else weights, float)
    return values / values.sum()


def categorical(rng: np.random.Generator, n: int, probs: np.ndarray) -> np.ndarray:
    """``n`` category indices drawn with probabilities ``probs`` (inverse CDF, vectorized)."""
    cdf = np.cumsum(probs)
    idx = np.searchsorted(cdf / cdf[-1], rng.random(n), side="right")
    return np.minimum(idx, len(probs) - 1)


def machine_classes(rng: np.random.Generator, n: int) -> np.ndarray:
    """Class index into ``GOOGLE_MACHINE_CLASSES`` for ``n`` machines.

    [P] Shares of Reiss et al. Table 1, allotted by largest remainder (so a 12.5k-machine
    cluster reproduces the published counts) and shuffled.
    """
    share = np.array([c[2] for c in GOOGLE_MACHINE_CLASSES])
    exact = share / share.sum() * n
    counts = np.floor(exact).astype(np.int64)
    rest = n - counts.sum()
    counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1
    return rng.permutation(np.repeat(np.arange(len(share)), counts))


def user_count(machines: int) -> int:
    """Number of users: [A] one per 20 machines, at least 5 (the sample's 3,792 jobs alive at
    the start belong to 500 users)."""
    return max(5, round(machines / 20))


def zipf_weights(n: int, exponent: float = 1.0) -> np.ndarray:
    """Activity share of ``n`` users ranked 1..n: [A] Zipf with exponent 1.

    [P] Job and task counts per user are Zipf-like in the Alibaba 2018 trace; the Google
    sample is as skewed (its top user holds 14% of the jobs alive at the start).
    """
    weights = 1.0 / np.arange(1, n + 1) ** exponent
    return weights / weights.sum()


def hashed_strings(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` STRING_HASH values like the trace's: base64 of 32 random bytes (44 characters)."""
    raw = rng.bytes(32 * n)
    return [base64.b64encode(raw[32 * k : 32 * k + 32]).decode() for k in range(n)]


def unique_ids(rng: np.random.Generator, n: int, low: int, high: int) -> np.ndarray:
    """``n`` distinct random integers in ``[low, high)``, sorted (large, non-dense ids)."""
    ids = np.unique(rng.integers(low, high, size=n + n // 8 + 16))
    while ids.size < n:
        ids = np.unique(np.concatenate([ids, rng.integers(low, high, size=n)]))
    return np.sort(rng.choice(ids, size=n, replace=False))


def diurnal_cumulative(t_s: np.ndarray, peak_to_trough: float = 2.0,
                       peak_at_s: float = 19 * 3600.0) -> np.ndarray:
    """Integral from 0 to ``t_s`` of the relative arrival rate ``1 + a sin(...)`` (mean 1).

    [A] A 24 h sinusoid with peak/trough ratio 2 ([P] both traces show a daily cycle); the
    Google window opens at 19:00 local time, so the peak (14:00) is 19 h in.
    """
    a = (peak_to_trough - 1.0) / (peak_to_trough + 1.0)
    w = 2.0 * np.pi / DAY_S
    phase = peak_at_s - DAY_S / 4.0
    t = np.asarray(t_s, dtype=float)
    return t - a / w * (np.cos(w * (t - phase)) - np.cos(w * -phase))


def arrival_times(rng: np.random.Generator, n: int, start_s: float, end_s: float,
                  peak_to_trough: float = 2.0) -> np.ndarray:
    """``n`` sorted arrival times in ``[start_s, end_s)`` with the diurnal density."""
    grid = np.linspace(start_s, end_s, max(2, int((end_s - start_s) / 60.0) + 2))
    cum = diurnal_cumulative(grid, peak_to_trough)
    u = cum[0] + rng.random(n) * (cum[-1] - cum[0])
    return np.sort(np.interp(u, cum, grid))


def diurnal_bounds(window_s: float, parts: int, step_s: float) -> np.ndarray:
    """Edges splitting ``[0, window_s]`` into at most ``parts`` spans of equal expected
    arrivals, on a ``step_s`` grid (first edge 0, last ``window_s``)."""
    grid = np.linspace(0.0, window_s, 4096)
    cum = diurnal_cumulative(grid)
    cuts = np.interp(np.linspace(0, cum[-1], parts + 1)[1:-1], cum, grid)
    cuts = np.unique(np.round(cuts / step_s) * step_s)
    cuts = cuts[(cuts > 0) & (cuts < window_s)]
    return np.concatenate([[0.0], cuts, [window_s]])


def alive_at_instant(rng: np.random.Generator, life_s: np.ndarray,
                     n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws (indices into ``life_s``, ages) of jobs alive at a random instant.

    In a steady state a job is alive at a given instant with probability proportional to
    its lifetime (length bias), caught at an age uniform over that lifetime.
    """
    pick = rng.choice(life_s.size, size=n, p=life_s / life_s.sum())
    return pick, rng.random(n) * life_s[pick]


def measurement_windows(start_s: np.ndarray, end_s: np.ndarray, lo: float, hi: float,
                        period_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut run intervals into measurement windows of a ``period_s`` grid starting in
    ``[lo, hi)`` (``lo`` on the grid): interval index, window start and end of each piece."""
    s, e = np.maximum(start_s, lo), np.minimum(end_s, hi)
    k0 = np.floor(s / period_s).astype(np.int64)
    counts = np.where(e > s, np.ceil(e / period_s).astype(np.int64) - k0, 0)
    row, off = expand(counts)
    k = k0[row] + off
    ws = np.maximum(start_s[row], k * period_s)
    we = np.minimum(end_s[row], (k + 1) * period_s)
    keep = we > ws
    return row[keep], ws[keep], we[keep]


def tasks_per_job_pmf(cap: int, p_single: float = 0.59, tail: float = 1.6) -> np.ndarray:
    """Probabilities of 1..cap tasks per job.

    [S] 59% of jobs have one task; p90 25 and p99 ~400 tasks (mean 32) in the sample.
    [A] A discrete power law ``k^-1.6`` for k >= 2 matches those quantiles; the cap is the
    caller's (the public trace has jobs of tens of thousands of tasks).
    """
    k = np.arange(2, max(cap, 2) + 1, dtype=float)
    tail_p = k**-tail
    tail_p *= (1.0 - p_single) / tail_p.sum()
    pmf = np.concatenate([[p_single], tail_p])
    return pmf[:cap] / pmf[:cap].sum()


JOB_CPU_SHARE = 0.05


def capped_widths(n_tasks: np.ndarray, cpu: np.ndarray, max_job_cpu: float) -> np.ndarray:
    """Tasks per job, cut so a job requests at most ``max_job_cpu`` in all.

    [A] Jobs of thousands of tasks have small tasks: no job asks for more than
    ``JOB_CPU_SHARE`` (5%) of the cell's cpu, or one job would swing a small cell's load.
    """
    limit = np.floor(max_job_cpu / np.where(cpu > 0, cpu, np.inf))
    return np.maximum(np.minimum(n_tasks, limit), 1).astype(np.int64)


def mean_widths(pmf: np.ndarray, cpu_values: np.ndarray, cpu_p: np.ndarray,
                max_job_cpu: float) -> tuple[float, float]:
    """Exact ``E[tasks per job]`` and ``E[tasks x cpu]`` under :func:`capped_widths`."""
    k = np.arange(1, pmf.size + 1)
    widths = capped_widths(k[None, :], cpu_values[:, None], max_job_cpu) @ pmf
    return float(cpu_p @ widths), float(cpu_p @ (cpu_values * widths))


def priority_tier(priority: np.ndarray) -> np.ndarray:
    """[P] 0-1 free, 2-8 middle, 9-11 production (ClusterData2011_2.md)."""
    return np.where(priority <= 1, FREE, np.where(priority <= 8, MIDDLE, PRODUCTION))


def priorities(rng: np.random.Generator, n: int, table: dict[int, float]) -> np.ndarray:
    """``n`` priorities drawn from ``table`` (priority -> weight)."""
    keys = np.array(list(table), dtype=np.int64)
    return keys[categorical(rng, n, shares(table))]


def scheduling_classes(rng: np.random.Generator, tier: np.ndarray) -> np.ndarray:
    """Scheduling class 0-3 given the priority tier ([S] ``SCHED_CLASS_BY_TIER``)."""
    out = np.empty(tier.size, dtype=np.int64)
    for t, counts in enumerate(SCHED_CLASS_BY_TIER):
        hit = tier == t
        out[hit] = categorical(rng, int(hit.sum()), shares(counts))
    return out


# [A] Job duration classes per tier: (short batch, long batch, service) shares.
DURATION_MIX: tuple[tuple[float, float, float], ...] = (
    (0.82, 0.17, 0.01), (0.85, 0.14, 0.01), (0.45, 0.25, 0.30),
)
SHORT_MEDIAN_S, SHORT_SIGMA = 300.0, 1.4
LONG_MIN_S, LONG_ALPHA, LONG_MAX_S = 3600.0, 1.3, 7 * DAY_S
SERVICE_MIN_S, SERVICE_ALPHA, SERVICE_MAX_S = 43_200.0, 1.35, 30 * DAY_S
TASK_JITTER_SIGMA = 0.3
KILL_SHARE = 0.2


def job_durations(rng: np.random.Generator, tier: np.ndarray) -> np.ndarray:
    """Typical task duration (s) of each job.

    [P] Many short jobs; long-running services hold resources for the whole trace (Reiss et
    al.).  [A] Short batch: lognormal, median 5 min, sigma 1.4 (p99 ~2 h); long batch: Pareto
    from 1 h, alpha 1.3, at most 7 days; services: Pareto from 12 h, alpha 1.35, at most 30
    days (the trace's length), so jobs alive at a snapshot mostly outlive a 1-day window; the
    mix depends on the tier (``DURATION_MIX``): production jobs are far more often services.
    The caps keep the means finite and realized, so the workload has a steady state
    (:func:`mean_job_duration`).
    """
    mix = np.array(DURATION_MIX)[tier]
    u = rng.random(tier.size)
    short = SHORT_MEDIAN_S * np.exp(SHORT_SIGMA * rng.standard_normal(tier.size))
    long = _pareto(rng, tier.size, LONG_MIN_S, LONG_ALPHA, LONG_MAX_S)
    service = _pareto(rng, tier.size, SERVICE_MIN_S, SERVICE_ALPHA, SERVICE_MAX_S)
    return np.where(u < mix[:, 0], short, np.where(u < mix[:, 0] + mix[:, 1], long, service))


def _pareto(rng: np.random.Generator, n: int, low: float, alpha: float,
            high: float) -> np.ndarray:
    """Pareto(``low``, ``alpha``) draws clipped at ``high``."""
    return np.minimum(low * (1.0 - rng.random(n)) ** (-1.0 / alpha), high)


def _pareto_mean(low: float, alpha: float, high: float) -> float:
    """Mean of ``min(X, high)`` for X ~ Pareto(``low``, ``alpha``), alpha != 1."""
    return low + low * (1.0 - (high / low) ** (1.0 - alpha)) / (alpha - 1.0)


def mean_job_duration(priority_table: dict[int, float]) -> float:
    """Mean of :func:`job_durations` for jobs with priorities drawn from ``priority_table``."""
    tiers = priority_tier(np.array(list(priority_table)))
    tier_p = np.bincount(tiers, weights=shares(priority_table), minlength=3)
    means = np.array([
        SHORT_MEDIAN_S * np.exp(SHORT_SIGMA**2 / 2),
        _pareto_mean(LONG_MIN_S, LONG_ALPHA, LONG_MAX_S),
        _pareto_mean(SERVICE_MIN_S, SERVICE_ALPHA, SERVICE_MAX_S),
    ])
    return float(tier_p @ np.array(DURATION_MIX) @ means)


def task_durations(rng: np.random.Generator, job_duration_s: np.ndarray) -> np.ndarray:
    """Per-task durations around their job's typical duration ([A] lognormal jitter 0.3)."""
    jitter = np.exp(TASK_JITTER_SIGMA * rng.standard_normal(job_duration_s.size))
    return np.maximum(job_duration_s * jitter, 1.0)


def run_time_factor() -> float:
    """Mean task run time over mean job duration: task jitter, and job kills cutting runs.

    A kill at ``U * 1.5 d`` shortens a run ``d`` to ``2d/3`` on average.
    """
    return float(np.exp(TASK_JITTER_SIGMA**2 / 2) * (1.0 - KILL_SHARE / 3.0))


def schedule_waits(rng: np.random.Generator, tier: np.ndarray) -> np.ndarray:
    """Seconds from SUBMIT to SCHEDULE: [A] lognormal, median 10/3/1 s (free/middle/prod).

    [P] Most tasks are placed within seconds; free-tier work waits longest.
    """
    median = np.array([10.0, 3.0, 1.0])[tier]
    return median * np.exp(1.2 * rng.standard_normal(tier.size))


# Attempt outcomes (Google event codes) and [A] per-tier probabilities of ending an attempt by
# EVICT (free work is evicted most), FAIL and LOST; the rest FINISH.  [S] In the sample's
# first 1.5 h, terminal events are ~74% FINISH, 18% KILL, 7% EVICT, 1% FAIL (kills come from
# job kills, see ``job_kill_delays``).
EVICT, FAIL, FINISH, KILL, LOST = 2, 3, 4, 5, 6
EVICT_P = np.array([0.08, 0.03, 0.005])
FAIL_P, LOST_P, FLAKY_FAIL_P = 0.02, 0.002, 0.85


def attempt_outcomes(rng: np.random.Generator, tier: np.ndarray, flaky: np.ndarray) -> np.ndarray:
    """How each attempt ends: EVICT, FAIL, LOST or FINISH (KILL is applied by job kills).

    [A] Tasks of flaky jobs (``flaky_jobs``) crash-loop: each attempt fails with p 0.85.
    """
    u = rng.random(tier.size)
    fail = np.where(flaky, FLAKY_FAIL_P, FAIL_P)
    evict = EVICT_P[tier]
    return np.select(
        [u < fail, u < fail + evict, u < fail + evict + LOST_P], [FAIL, EVICT, LOST], FINISH,
    ).astype(np.int64)


def flaky_jobs(rng: np.random.Generator, n: int, share: float = 0.1) -> np.ndarray:
    """Which jobs crash-loop: [A] 10% (their tasks fail and are re-submitted again and again).

    With this share a task averages ~4.7 task_events rows (3 for a task that runs once),
    which also makes the event stream exercise long FAIL / re-SUBMIT histories.
    """
    return rng.random(n) < share


def job_kill_delays(rng: np.random.Generator, job_duration_s: np.ndarray) -> np.ndarray:
    """Seconds after submit at which each job is killed by its user, ``inf`` if never.

    [S] ~30% of jobs ending in the sample's first 1.5 h were KILLed.  [A] 20% of jobs are
    killed, uniformly within 1.5x their typical duration.
    """
    n = job_duration_s.size
    delay = rng.random(n) * 1.5 * job_duration_s
    return np.where(rng.random(n) < KILL_SHARE, delay, np.inf)


def usage_fractions(rng: np.random.Generator, n: int, low: float = 0.3,
                    high: float = 0.7) -> np.ndarray:
    """Mean usage as a fraction of the request: [A] uniform 30-70%.

    [P] Measured CPU and memory usage stay well below the allocation in the Google trace
    (Reiss et al., SoCC 2012).  The shape over a run: :mod:`pipeline.generate.usage`.
    """
    return rng.uniform(low, high, n)


def expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For groups of sizes ``counts``: each member's group index and index within its group."""
    group = np.repeat(np.arange(counts.size), counts)
    starts = np.cumsum(counts) - counts
    return group, np.arange(group.size) - starts[group]


# --- Alibaba cluster-trace-v2018 (batch workload) ---------------------------------------

ALIBABA_CORES = 96  # [P] homogeneous machines, 96 cores, memory normalized to 100
# [A] plan_cpu (100 = 1 core) and plan_mem (normalized 0-100) palettes: mostly 0.5-2 cores
# and well under 1% of a machine's memory per instance.
ALIBABA_PLAN_CPU: tuple[tuple[int, float], ...] = (
    (50, 0.25), (100, 0.45), (150, 0.05), (200, 0.12), (300, 0.05), (400, 0.05), (600, 0.02),
    (800, 0.01),
)
ALIBABA_PLAN_MEM: tuple[tuple[str, float], ...] = (
    ("0.2", 0.15), ("0.3", 0.2), ("0.39", 0.2), ("0.59", 0.15), ("0.78", 0.1), ("0.98", 0.08),
    ("1.18", 0.05), ("1.57", 0.04), ("1.96", 0.02), ("3.92", 0.01),
)


def dag_sizes(rng: np.random.Generator, n: int, cap: int = 40) -> np.ndarray:
    """Tasks per Alibaba job: [A] half single-task, the rest a ``k^-1.8`` tail up to ``cap``.

    [P] Batch job/task/instance counts are Zipf-like (semantics.md 5.2).
    """
    return 1 + categorical(rng, n, tasks_per_job_pmf(cap, p_single=0.5, tail=1.8))


def dag_parents(rng: np.random.Generator, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parents (1-based task numbers, 0 = none) of every task of jobs with ``sizes`` tasks.

    Returns ``(first, second)`` per task, flattened in job order, ``first < second`` when a
    task has two.  [A] Task k > 1 depends on one (70%) or two (20%) of the three tasks just
    before it, or on none (10%), which yields chains and fan-ins as in the documented
    example (M1, M2_1, M3_1, R4_2, M5_3_4).
    """
    _, number = expand(sizes)
    number = number + 1
    u = rng.random(number.size)
    width = np.minimum(number - 1, 3)
    a = number - 1 - (rng.random(number.size) * width).astype(np.int64)
    b = number - 1 - (rng.random(number.size) * width).astype(np.int64)
    one = (number > 1) & (u >= 0.1)
    two = one & (u >= 0.8) & (a != b)
    first = np.where(one, np.where(two, np.minimum(a, b), a), 0)
    second = np.where(two, np.maximum(a, b), 0)
    return first, second


def instance_counts(rng: np.random.Generator, n: int, cap: int = 2000) -> np.ndarray:
    """Instances per task: [A] 30% one instance, the rest a ``k^-1.5`` tail up to ``cap``."""
    return 1 + categorical(rng, n, tasks_per_job_pmf(cap, p_single=0.3, tail=1.5))


def instance_durations(rng: np.random.Generator, task_median_s: np.ndarray) -> np.ndarray:
    """Instance run times (s) around their task's median ([A] lognormal jitter 0.4, >= 1 s)."""
    jitter = np.exp(0.4 * rng.standard_normal(task_median_s.size))
    return np.maximum(np.rint(task_median_s * jitter), 1.0)


def alibaba_task_medians(rng: np.random.Generator, n: int) -> np.ndarray:
    """Typical instance duration of each task: [A] lognormal, median 60 s, sigma 1.3.

    [P] Batch instances of the 2018 trace mostly run for seconds to minutes.
    """
    return 60.0 * np.exp(1.3 * rng.standard_normal(n))
