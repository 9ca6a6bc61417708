"""Machine speeds for a replay: the trace's own, speeds by machine platform, and a share of
machines slowed down (heterogeneous and straggling machines, for speculative execution).

A task's run time on a machine is its work divided by the machine's ``speed``
(:mod:`pipeline.sim.kernels`).  Where the trace records no heterogeneity, a replay may ask for
it (cluster options):

- ``platform_speed`` ``"PLATFORM=SPEED;..."`` sets the speed of the machines of each named
  platform (Google 2011's ``platform`` hashes, Alibaba's machine types): the mapping the
  user asks for, since the traces publish classes, not speeds.  A name the trace's machines
  do not carry is an error naming the known ones.
- ``slow_fraction`` of the machines (rounded to the nearest whole machine) run
  ``slow_factor`` times slower, fixed for the whole replay.  The default factor, 2.5, is
  what the LATE paper measured between EC2 virtual machines (Zaharia et al., OSDI 2008).
  Which machines are slow depends only on the run's seed, so every policy of a sweep meets
  the same slow machines.
- ``contention_share`` > 0: contention that comes and goes (noisy neighbours, the LATE
  paper's transient stragglers).  Each machine alternates between normal periods and
  contended ones, during which it runs ``contention_factor`` times slower; periods are
  exponential, contended ones ``contention_mean_s`` long on average and normal ones long
  enough that a machine spends ``contention_share`` of its time contended (a two-state
  Markov process, started in its steady state).  Drawn over the trace's window from the
  run's seed (the same periods for every policy); a period still open at the window's end
  ends there (a drained replay runs on at normal speeds).  The core re-times the runs in
  flight at each change (:mod:`pipeline.sim.contention`).
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.errors import UsageError
from pipeline.sim.cluster import ClusterSpec

SLOW_STREAM = 0x5105  # the seed's sub-stream that picks slow machines
CONTENTION_STREAM = 0x5106  # the seed's sub-stream that draws contention periods


def parse_platform_speed(text: str) -> dict[str, float]:
    """``"A=1.0;B=0.5"`` -> ``{"A": 1.0, "B": 0.5}`` (speeds > 0)."""
    out: dict[str, float] = {}
    for item in (part.strip() for part in text.replace(",", ";").split(";")):
        if not item:
            continue
        name, sep, value = item.rpartition("=")
        try:
            speed = float(value)
        except ValueError:
            speed = float("nan")
        if not sep or not name or not speed > 0 or not np.isfinite(speed):
            raise UsageError(f"cluster option 'platform_speed': {item!r} is not "
                             "PLATFORM=SPEED with a speed > 0")
        out[name.strip()] = speed
    return out


def machine_speeds(spec: ClusterSpec, base: np.ndarray, platforms: list[str | None] | None,
                   seed: int) -> np.ndarray:
    """Each machine's speed: ``base`` (the trace's, 1.0 where absent), then the platform
    mapping, then the slowed share."""
    speed = np.asarray(base, dtype=np.float64).copy()
    if spec.platform_speed:
        mapping = parse_platform_speed(spec.platform_speed)
        names = [p or "" for p in (platforms or [None] * len(speed))]
        known = sorted({p for p in names if p})
        missing = sorted(set(mapping) - set(known))
        if missing:
            shown = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "")
            raise UsageError(f"cluster option 'platform_speed': no machine has platform "
                             f"{missing[0]!r} (platforms: {shown or 'none in the trace'})")
        for i, name in enumerate(names):
            if name in mapping:
                speed[i] = mapping[name]
    k = math.floor(spec.slow_fraction * len(speed) + 0.5)  # nearest, halves up
    if k:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), SLOW_STREAM]))
        slow = np.sort(rng.permutation(len(speed))[:k])
        speed[slow] /= spec.slow_factor
    return speed


def contention_changes(spec: ClusterSpec, speed: np.ndarray, seed: int, until_s: float
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Speed changes ``(time, node, new speed)`` in time order (then node order) from the
    contention options, over ``[0, until_s)``; None when contention is off.  ``speed``: each
    node's speed outside contention."""
    share = float(spec.contention_share)
    if share <= 0 or not until_s > 0:
        return None
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), CONTENTION_STREAM]))
    mean = {True: float(spec.contention_mean_s),
            False: float(spec.contention_mean_s) * (1.0 - share) / share}
    times: list[float] = []
    nodes: list[int] = []
    speeds: list[float] = []
    for i, base in enumerate(np.asarray(speed, dtype=np.float64).tolist()):
        slow = base / float(spec.contention_factor)
        on = bool(rng.random() < share)
        t = 0.0
        if on:
            times.append(0.0), nodes.append(i), speeds.append(slow)
        while True:
            t += float(rng.exponential(mean[on]))  # (memoryless: from the steady state)
            if t >= until_s:
                break
            on = not on
            times.append(t), nodes.append(i), speeds.append(slow if on else base)
        if on:  # beyond the window (a drained replay) the machine runs at its own speed
            times.append(float(until_s)), nodes.append(i), speeds.append(base)
    order = np.lexsort((np.asarray(nodes), np.asarray(times)))
    return (np.asarray(times)[order], np.asarray(nodes, dtype=np.int64)[order],
            np.asarray(speeds)[order])
