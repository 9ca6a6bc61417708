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
  the same slow machines.  (Contention that comes and goes is not modelled yet.)
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.errors import UsageError
from pipeline.sim.cluster import ClusterSpec

SLOW_STREAM = 0x5105  # the seed's sub-stream that picks slow machines


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
