"""Locality-aware policies: delay scheduling and the locality gate shared with YARN's
queue schedulers (Quincy's flow scheduling is its own family: :mod:`pipeline.policies.flow`)."""

from pipeline.policies.locality.delay import DelayScheduling

__all__ = ["DelayScheduling"]
