"""Flow-based scheduling: Quincy's min-cost flow network (Isard et al., SOSP 2009)."""

from pipeline.policies.flow.policy import Quincy

__all__ = ["Quincy"]
