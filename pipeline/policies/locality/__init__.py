"""Locality-aware policies: delay scheduling (and, later, Quincy's flow scheduling)."""

from pipeline.policies.locality.delay import DelayScheduling

__all__ = ["DelayScheduling"]
