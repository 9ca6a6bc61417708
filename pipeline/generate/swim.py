"""Synthetic SWIM workload in the layout of SWIM's FB-2010 file with input paths.

File: ``swim_synthetic_withInputPaths.tsv``, laid out like the published
``FB-2010_samples_24_times_1hr_withInputPaths_0.tsv``: tab-separated, one job per row, no
header, ``jobN``, submit second, gap to the previous submission, map input, shuffle and
reduce output bytes, ``inputPathN``, then two empty fields (the published rows end in two
tabs).  ``generated.json`` (written by :func:`pipeline.generate.generate`) states the window
and the machines the workload was sized for, so the SWIM adapter scales nothing.

Shape ([S] measured on the published FB-2010 sample, 25,428 jobs, rounded; [A] assumed):

- sizes: map input, shuffle and output bytes through the sample's quantiles of each
  (input: median 10 MB, a quarter under 20 KB, 1 % over 1 TB) [S], coupled by a Gaussian
  copula with the sample's rank correlations (input-shuffle 0.78, shuffle-output 0.67,
  map-only input-output 0.68) [S]; 4 % of jobs read nothing and are data loads (map-only,
  output drawn on its own) [S]/[A]; a third of jobs are map-only [S]; 4.6 % write nothing
  [S].  Sizes are drawn at the FB-2010 cluster's scale (3,000 machines) and scaled to
  ``machines`` as SWIM scales a workload to a replay cluster (bytes x machines / 3,000).
- input paths: two jobs in three read a new path [S: 17,158 paths for 25,428 jobs]; the rest
  re-read an earlier one with probability 1/rank of its first use (Zipf, exponent 1) [A] (the
  sample's most read path: 721 jobs), and read the path's size [S: jobs of one path read the
  same bytes].  Paths are numbered in order of first use, like the sample's.
- arrivals: SWIM concatenates randomly sampled hours, so the rate jumps from hour to hour: a
  Poisson process per hour at a log-normal multiple (sigma 0.4) of the mean rate [A] (the
  sample's hours: median 1,110 jobs, up to 1,688); whole seconds.
- rate: jobs arrive at the rate that makes the offered load -- compute slot-seconds under the
  SWIM adapter's mapping (:mod:`pipeline.ingest.swim_tasks`) over machines x 8 slots x window
  -- equal ``load`` in expectation (Little's law), measured on a pilot sample of sizes.  Job
  sizes are heavy-tailed, so one window's load varies; the summary reports it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.ingest import swim_tasks as st
from pipeline.ingest.swim import FB2010_MACHINES

FILE = "swim_synthetic_withInputPaths.tsv"
HOUR_S = 3600.0
PILOT_JOBS = 50_000
# (cumulative probability, log10 value) knots of inverse CDFs [S], FB-2010 sample
INPUT_LOG10 = ((0.0, 0.0), (0.05, 2.5), (0.10, 2.8), (0.25, 4.2), (0.50, 7.0), (0.75, 9.4),
               (0.90, 10.5), (0.95, 11.3), (0.99, 12.0), (0.999, 12.7), (1.0, 13.3))
SHUFFLE_LOG10 = ((0.0, 1.3), (0.05, 1.6), (0.10, 1.7), (0.25, 3.1), (0.50, 5.7), (0.75, 8.3),
                 (0.90, 9.5), (0.95, 10.5), (0.99, 11.7), (0.999, 12.5), (1.0, 13.1))
REDUCE_OUTPUT_LOG10 = ((0.0, 1.3), (0.05, 2.1), (0.10, 2.4), (0.25, 2.9), (0.50, 4.7),
                       (0.75, 7.4), (0.90, 8.9), (0.95, 9.8), (0.99, 11.4), (0.999, 12.1),
                       (1.0, 12.6))
MAP_ONLY_OUTPUT_LOG10 = ((0.0, 1.3), (0.05, 2.6), (0.10, 3.0), (0.25, 4.5), (0.50, 5.8),
                         (0.75, 7.3), (0.90, 9.4), (0.95, 10.3), (0.99, 11.6), (0.999, 12.7),
                         (1.0, 13.1))
RHO_SHUFFLE = 0.8  # normal-score correlation for the sample's rank correlation 0.78 [S]
RHO_OUTPUT = 0.7  # for 0.67 / 0.68 [S]
NO_INPUT = 0.04  # [S] 1,020 of 25,428 jobs
MAP_ONLY = 1 / 3  # [S] 8,489 of 25,428 jobs (the no-input jobs among them)
NO_OUTPUT = 0.046  # [S]
NEW_PATH = 0.675  # [S] 17,158 / 25,428
HOUR_SIGMA = 0.4  # [A]


def generate_swim(out: Path, machines: int = 200, hours: float = 24.0, seed: int = 0,
                  load: float = 0.65) -> dict:
    """Write a synthetic SWIM workload for ``machines`` machines into ``out``; a summary."""
    out = Path(out)
    window_s = hours * HOUR_S
    rng, rng_pilot = (np.random.default_rng(s)
                      for s in np.random.SeedSequence([seed, 2010]).spawn(2))
    pilot = job_sizes(rng_pilot, PILOT_JOBS, machines)
    mean_work_s = float(st.job_work_s(st.job_shapes(*pilot, machines, machines)).mean())
    rate = load * machines * st.SLOTS_PER_MACHINE / mean_work_s
    submit = arrivals(rng, rate, window_s)
    inp, shuffle, output, path = job_rows(rng, submit.size, machines)
    work = st.job_work_s(st.job_shapes(inp, shuffle, output, machines, machines)).sum()
    gap = np.diff(submit, prepend=0)
    lines = [f"job{k}\t{t}\t{g}\t{i}\t{s}\t{o}\tinputPath{p}\t\t\n"
             for k, (t, g, i, s, o, p) in enumerate(zip(
                 submit.tolist(), gap.tolist(), inp.tolist(), shuffle.tolist(),
                 output.tolist(), path.tolist(), strict=True))]
    (out / FILE).write_text("".join(lines))
    return {
        "format": "swim", "machines": machines, "hours": hours, "jobs": int(submit.size),
        "offered_load": float(work) / (machines * st.SLOTS_PER_MACHINE * window_s),
        "input_paths": int(np.unique(path).size), "rows": {"workload": int(submit.size)},
        "files": [FILE],
    }


def arrivals(rng: np.random.Generator, rate: float, window_s: float) -> np.ndarray:
    """Whole-second submit times, sorted: Poisson per hour at a varying rate (at least one)."""
    starts = np.arange(0.0, window_s, HOUR_S)
    lengths = np.minimum(HOUR_S, window_s - starts)
    level = rng.lognormal(0.0, HOUR_SIGMA, starts.size)
    level /= np.average(level, weights=lengths)
    counts = rng.poisson(rate * level * lengths)
    times = np.concatenate([rng.uniform(s, s + n_s, c) for s, n_s, c
                            in zip(starts, lengths, counts, strict=True)])
    times = np.sort(np.floor(times).astype(np.int64))
    return times if times.size else np.zeros(1, np.int64)


def job_sizes(rng: np.random.Generator, n: int, machines: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input, shuffle and output bytes of ``n`` independent jobs, scaled to ``machines``."""
    z = rng.standard_normal(n)
    return _bytes(rng, z, _inputs(rng, z), machines)


def job_rows(rng: np.random.Generator, n: int, machines: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bytes and input path numbers of ``n`` jobs in submit order, paths shared by popularity."""
    path = path_numbers(rng, n)
    z = rng.standard_normal(n)
    inp = _inputs(rng, z)
    first = np.unique(path, return_index=True)[1][path - 1]  # the job that first read the path
    return (*_bytes(rng, z[first], inp[first], machines), path)  # a path's jobs read its size


def path_numbers(rng: np.random.Generator, n: int) -> np.ndarray:
    """Input path number (1 = first used) of each job: new, or an earlier one by Zipf rank."""
    new = rng.random(n) < NEW_PATH
    new[:1] = True
    before = np.cumsum(new) - new  # paths in use before each job
    rank = np.floor(np.maximum(before, 1) ** rng.random(n)).astype(np.int64)
    return np.where(new, before + 1, np.clip(rank, 1, np.maximum(before, 1)))


def _inputs(rng: np.random.Generator, z: np.ndarray) -> np.ndarray:
    """Map input bytes at the FB-2010 scale for size scores ``z`` (0 for no-input loads)."""
    size = 10.0 ** _quantiles(_uniform(z), INPUT_LOG10)
    return np.where(rng.random(z.size) < NO_INPUT, 0.0, np.floor(size))


def _bytes(rng: np.random.Generator, z_in: np.ndarray, inp: np.ndarray, machines: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle and output for each input (FB-2010 scale), all three scaled to ``machines``.

    A Gaussian copula couples the sizes with the sample's rank correlations [S] (input-shuffle
    0.78, shuffle-output 0.67, map-only input-output 0.68): big jobs are big throughout.
    """
    n = inp.size
    map_only = (inp == 0) | (rng.random(n) < (MAP_ONLY - NO_INPUT) / (1 - NO_INPUT))
    z_shuffle = _coupled(rng, z_in, RHO_SHUFFLE)
    shuffle = np.where(map_only, 0.0, np.maximum(1.0, np.floor(
        10.0 ** _quantiles(_uniform(z_shuffle), SHUFFLE_LOG10))))
    z_out = np.where(map_only, _coupled(rng, z_in, RHO_OUTPUT),
                     _coupled(rng, z_shuffle, RHO_OUTPUT))
    z_out = np.where(inp == 0, rng.standard_normal(n), z_out)  # loads: no input to follow
    u_out = _uniform(z_out)
    output = np.where(map_only, 10.0 ** _quantiles(u_out, MAP_ONLY_OUTPUT_LOG10),
                      10.0 ** _quantiles(u_out, REDUCE_OUTPUT_LOG10))
    output = np.where(rng.random(n) < NO_OUTPUT, 0.0, np.floor(output))
    scale = machines / FB2010_MACHINES
    scaled = [np.floor(b * scale).astype(np.int64) for b in (inp, shuffle, output)]
    scaled[1] = np.where(map_only, 0, np.maximum(scaled[1], 1))  # a reduce job stays one
    return scaled[0], scaled[1], scaled[2]


def _coupled(rng: np.random.Generator, z: np.ndarray, rho: float) -> np.ndarray:
    """Standard normal scores correlated ``rho`` with ``z``."""
    return rho * z + np.sqrt(1.0 - rho * rho) * rng.standard_normal(z.size)


def _uniform(z: np.ndarray) -> np.ndarray:
    """Scores to probabilities by their ranks: evenly spread, so every batch of jobs holds its
    share of the rare huge ones and its load varies less than with independent draws."""
    return (np.argsort(np.argsort(z, kind="stable"), kind="stable") + 0.5) / max(z.size, 1)


def _quantiles(u: np.ndarray, knots: tuple[tuple[float, float], ...]) -> np.ndarray:
    """Values at probabilities ``u`` of an inverse CDF given as (probability, value) knots."""
    p, v = zip(*knots, strict=True)
    return np.interp(u, p, v)
