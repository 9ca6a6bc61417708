"""Speculative execution beside any placement policy: :mod:`.layer` (the layer composed over
a policy), the rules :mod:`.hadoop` (Hadoop 0.20 native), :mod:`.late` (LATE, OSDI 2008,
and Hadoop 0.21's variant) and :mod:`.mrv2` (Hadoop 2/3 DefaultSpeculator), the progress
score in :mod:`.progress`, copy placement in :mod:`.placement`, and the ``spec_*``
parameters in :mod:`.params`.  The copies themselves (launch, first-to-finish wins) are
the core's (:mod:`pipeline.sim.speculation`)."""

from pipeline.policies.layers.speculation.layer import Speculation, make_rule
from pipeline.policies.layers.speculation.params import SPEC_PARAMS, resolve, split
from pipeline.policies.layers.speculation.progress import (
    parse_phases,
    progress_rate,
    progress_score,
    time_left_s,
)

__all__ = ["SPEC_PARAMS", "Speculation", "make_rule", "parse_phases", "progress_rate",
           "progress_score", "resolve", "split", "time_left_s"]
