"""Reference replays: not schedulers, but what a trace itself recorded (the real cluster)."""

from pipeline.policies.reference.recorded import RecordedCluster

__all__ = ["RecordedCluster"]
