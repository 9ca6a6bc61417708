"""The ``capacity-scheduler`` policy (Hadoop 3.3 CapacityScheduler); see ``policy``."""

from pipeline.policies.capacity.policy import CapacityScheduler

__all__ = ["CapacityScheduler"]
