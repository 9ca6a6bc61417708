"""Opportunistic containers beside any guaranteed policy (YARN-2877, YARN-1011):
:mod:`.layer` (the RM side composed over a policy), :mod:`.loadmonitor` (least-loaded
nodes and queue limits), :mod:`.types` (which requests are opportunistic), :mod:`.params`
(the ``opp_*`` parameters).  The NodeManager side is the core's
(:mod:`pipeline.sim.nodemanager`)."""

from pipeline.policies.layers.opportunistic.layer import Opportunistic
from pipeline.policies.layers.opportunistic.loadmonitor import LoadMonitor, queue_limit
from pipeline.policies.layers.opportunistic.params import OPP_PARAMS, resolve, split

__all__ = ["OPP_PARAMS", "LoadMonitor", "Opportunistic", "queue_limit", "resolve", "split"]
