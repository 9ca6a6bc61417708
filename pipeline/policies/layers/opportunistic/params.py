"""Parameters of the opportunistic-container layer (``opp_*``), accepted by every policy.

A run turns the layer on by giving any ``opp_*`` parameter with ``opp_by`` other than
``none``; the names map onto Hadoop's settings (Hadoop 3.3 unless noted):

==========================  ================================================================
``opp_by``                  which requests are opportunistic (replay setting): ``priority``
                            (at most ``opp_max_priority``: Google's free tier is 0-1),
                            ``queue`` (trace queues named in ``opp_queues``: Alibaba batch
                            beside online services), ``percent`` (the first ``opp_percent``
                            of every 100 map requests of each job, as MapReduce's
                            ``mapreduce.job.num-opportunistic-maps-percent``: :mod:`.types`)
``opp_nodes_used``          ``opportunistic-container-allocation.nodes-used`` (k = 10)
``opp_sort_interval_s``     ``nm-container-queuing.sorting-nodes-interval-ms`` (1000 ms)
``opp_load``                ``nm-container-queuing.load-comparator``: ``queue_length`` or
                            ``queue_wait_time``
``opp_queue_stdev``         ``nm-container-queuing.queue-limit-stdev`` (1.0)
``opp_min_queue``/``max``   ``nm-container-queuing.min/max-queue-length`` (5, 15)
``opp_nm_queue``            ``nodemanager.opportunistic-containers-max-queue-length``
                            (Hadoop's default 0 turns queuing off; 10 is what the docs
                            suggest to experiment with, and the default here)
``opp_pause``               ``opportunistic-containers-use-pause-for-preemption`` (false)
``opp_overalloc_cpu/mem``   YARN-1011 ``overallocation.{cpu,memory}-utilization-threshold``
                            (0: over-allocation off; both set together)
``opp_preempt_cpu/mem``     YARN-1011 ``overallocation.{cpu,memory}-preemption-threshold``
``opp_preempt_cpu_count``   YARN-1011 ``NM_OVERALLOCATION_PREEMPTION_CPU_COUNT``: CPU is
                            reclaimed once above its threshold on more than this many
                            consecutive checks (the branch's tests set 2, the default
                            here; its own default is in no copy read)
``opp_monitor_s``           ``container-monitor.interval-ms`` (3000 ms): utilization checks
==========================  ================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies.base import Param
from pipeline.policies.layers.base import split_params, typed_params

PREFIX = "opp_"
OPP_PARAMS: dict[str, Param] = {
    "opp_by": Param("none", "which requests run opportunistic: none, priority, queue, percent",
                    str, choices=("none", "priority", "queue", "percent")),
    "opp_percent": Param(50.0, "of every 100 map requests of a job, the first this many run "
                         "opportunistic (opp_by=percent)", float, 0.0, 100.0),
    "opp_max_priority": Param(1, "highest priority run opportunistic (opp_by=priority)", int),
    "opp_queues": Param("batch", "comma-separated trace queues run opportunistic "
                        "(opp_by=queue)", str),
    "opp_nodes_used": Param(10, "k least-loaded nodes the RM spreads opportunistic "
                            "containers over", int, 1),
    "opp_sort_interval_s": Param(1.0, "seconds between re-sorts of the least-loaded nodes",
                                 float, 0.0),
    "opp_load": Param("queue_length", "node load: queued containers, or the wait of the "
                      "oldest queued one", str, choices=("queue_length", "queue_wait_time")),
    "opp_queue_stdev": Param(1.0, "k of the NM queue limit mean + k*stdev", float, 0.0),
    "opp_min_queue": Param(5, "lowest NM queue limit the RM pushes", int, 0),
    "opp_max_queue": Param(15, "highest NM queue limit the RM pushes", int, 0),
    "opp_nm_queue": Param(10, "opportunistic containers a NodeManager queues at most", int, 0),
    "opp_pause": Param(False, "pause opportunistic containers instead of killing them", bool),
    "opp_overalloc_cpu": Param(0.0, "over-allocate while measured cpu use is below this "
                               "share of capacity (0: off)", float, 0.0, 1.0),
    "opp_overalloc_mem": Param(0.0, "over-allocate while measured memory use is below this "
                               "share of capacity (0: off)", float, 0.0, 1.0),
    "opp_preempt_cpu": Param(1.0, "kill opportunistic containers above this cpu use share",
                             float, 0.0, 1.0),
    "opp_preempt_mem": Param(1.0, "kill opportunistic containers above this memory use share",
                             float, 0.0, 1.0),
    "opp_preempt_cpu_count": Param(2, "cpu is reclaimed once above its threshold on more "
                                   "than this many consecutive checks", int, 0),
    "opp_monitor_s": Param(3.0, "seconds between NodeManager utilization checks", float,
                           0.001),
}


def split(params: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``params`` split into the policy's own and the layer's (``opp_*``)."""
    return split_params(params, lambda k: k.startswith(PREFIX))


def resolve(policy: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The layer's parameters checked and typed (defaults filled in only when some are
    given, so runs without the layer keep their parameters and identity)."""
    if not raw:
        return {}
    out = typed_params(policy, raw, OPP_PARAMS, "opportunistic")
    over = (out["opp_overalloc_cpu"], out["opp_overalloc_mem"])
    if (over[0] > 0) != (over[1] > 0):
        raise UsageError(f"policy '{policy}': set opp_overalloc_cpu and opp_overalloc_mem "
                         "together (over-allocation needs both thresholds)")
    for r in ("cpu", "mem"):  # (Hadoop turns over-allocation off rather than run so)
        if over[0] > 0 and out[f"opp_preempt_{r}"] <= out[f"opp_overalloc_{r}"]:
            raise UsageError(f"policy '{policy}': opp_preempt_{r} "
                             f"({out[f'opp_preempt_{r}']:g}) is not above opp_overalloc_{r} "
                             f"({out[f'opp_overalloc_{r}']:g}); the preemption threshold "
                             "must be above the over-allocation threshold")
    if out["opp_min_queue"] > out["opp_max_queue"]:
        raise UsageError(f"policy '{policy}': opp_min_queue is above opp_max_queue")
    return out
