"""The YARN FairScheduler (Hadoop 3.3) as a tracereplay policy; see :mod:`.policy`."""

from pipeline.policies.fair.policy import FairScheduler
from pipeline.policies.fair.shares import compute_shares, tree_shares

__all__ = ["FairScheduler", "compute_shares", "tree_shares"]
