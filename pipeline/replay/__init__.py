"""The replay stage: canonical trace + policy -> run directory (see :mod:`.stage`)."""

from pipeline.replay.stage import RunResult, replay

__all__ = ["RunResult", "replay"]
