"""Parameters of the speculative-execution layer (``spec_*``), accepted by every policy.

A run turns the layer on with ``spec`` other than ``none``; the names map onto the rules'
sources:

==================================  ==========================================================
``spec``                            the rule: ``none``, ``hadoop`` (Hadoop 0.20 native),
                                    ``late`` (Zaharia et al., OSDI 2008), ``mrv2`` (Hadoop 2/3
                                    MapReduce AM DefaultSpeculator)
``spec_interval_s``                 how often hadoop/late look while tasks run (3 s: Hadoop
                                    1's minimum TaskTracker heartbeat)
``spec_reduce_phases``              run-time shares of a reduce's copy, sort and reduce
                                    phases (:mod:`.progress`)
``spec_gap``, ``spec_lag_s``        TaskInProgress SPECULATIVE_GAP (0.2), SPECULATIVE_LAG
                                    (60 s; late keeps it, as Hadoop 0.21 does)
``spec_speculative_cap``            LATE SpeculativeCap / 0.21 ``speculativecap`` (0.1)
``spec_thresholds``                 ``percentile`` (the paper) or ``stddev`` (Hadoop 0.21)
``spec_slow_node_pct``/``task_pct`` the paper's SlowNodeThreshold/SlowTaskThreshold (25)
``spec_slow_node_threshold``        0.21 ``slownodethreshold`` in std devs (1.0)
``spec_slow_task_threshold``        0.21 ``slowtaskthreshold`` in std devs (1.0)
``spec_retry_after_no_speculate_ms`` MRv2 ``retry-after-no-speculate`` (1000 ms)
``spec_retry_after_speculate_ms``   MRv2 ``retry-after-speculate`` (15000 ms)
``spec_minimum_allowed_tasks``      MRv2 ``minimum-allowed-tasks`` (10)
``spec_cap_total_tasks``            MRv2 ``speculative-cap-total-tasks`` (0.01)
``spec_cap_running_tasks``          MRv2 ``speculative-cap-running-tasks`` (0.1)
==================================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies.base import Param
from pipeline.policies.layers.base import split_params, typed_params
from pipeline.policies.layers.speculation.progress import DEFAULT_PHASES, parse_phases

PREFIX = "spec"
RULES = ("none", "hadoop", "late", "mrv2")
SPEC_PARAMS: dict[str, Param] = {
    "spec": Param("none", "speculative copies of slow tasks: none, hadoop, late, mrv2", str,
                  choices=RULES),
    "spec_interval_s": Param(3.0, "seconds between looks for slow tasks while tasks run "
                             "(hadoop, late)", float, 0.001),
    "spec_reduce_phases": Param(DEFAULT_PHASES, "run-time shares of a reduce's copy, sort "
                                "and reduce phases (three numbers adding up to 1)", str),
    "spec_gap": Param(0.2, "hadoop: speculate a task this far behind its job's average "
                      "progress", float, 0.0, 1.0),
    "spec_lag_s": Param(60.0, "hadoop, late: seconds a task runs before it may be "
                        "speculated", float, 0.0),
    "spec_speculative_cap": Param(0.1, "late: copies running at most, as a share of the task "
                                  "slots (stddev: of a job's running tasks)", float, 0.0, 1.0),
    "spec_thresholds": Param("percentile", "late: slow nodes and tasks by percentile (the "
                             "paper) or by standard deviations (Hadoop 0.21)", str,
                             choices=("percentile", "stddev")),
    "spec_slow_node_pct": Param(25.0, "late percentile: nodes below this percentile of "
                                "total progress get no copies", float, 0.0, 100.0),
    "spec_slow_task_pct": Param(25.0, "late percentile: tasks below this percentile of "
                                "progress rates are slow", float, 0.0, 100.0),
    "spec_slow_node_threshold": Param(1.0, "late stddev: a node is slow when its tasks' mean "
                                      "run time exceeds the mean by this many std devs",
                                      float),
    "spec_slow_task_threshold": Param(1.0, "late stddev: a task is slow when its rate is "
                                      "this many std devs below its job's mean (clamped "
                                      ">= 0)", float),
    "spec_retry_after_no_speculate_ms": Param(1000.0, "mrv2: ms between a job's speculator "
                                              "passes", float, 1.0),
    "spec_retry_after_speculate_ms": Param(15000.0, "mrv2: ms after a pass that launched a "
                                           "copy", float, 1.0),
    "spec_minimum_allowed_tasks": Param(10, "mrv2: speculations a job kind may always have",
                                        int, 0),
    "spec_cap_total_tasks": Param(0.01, "mrv2: speculations allowed per task of the kind",
                                  float, 0.0, 1.0),
    "spec_cap_running_tasks": Param(0.1, "mrv2: speculations allowed per running task of "
                                    "the kind", float, 0.0, 1.0),
}


# The parameters each rule reads (a run records only these: another rule's keys, given in a
# sweep grid over several rules, are ignored for this one).
RULE_KEYS: dict[str, tuple[str, ...]] = {
    "none": (),
    "hadoop": ("spec_interval_s", "spec_reduce_phases", "spec_gap", "spec_lag_s"),
    "late": ("spec_interval_s", "spec_reduce_phases", "spec_lag_s", "spec_speculative_cap",
             "spec_thresholds", "spec_slow_node_pct", "spec_slow_task_pct",
             "spec_slow_node_threshold", "spec_slow_task_threshold"),
    "mrv2": ("spec_reduce_phases", "spec_retry_after_no_speculate_ms",
             "spec_retry_after_speculate_ms", "spec_minimum_allowed_tasks",
             "spec_cap_total_tasks", "spec_cap_running_tasks"),
}


def _is_spec(key: str) -> bool:
    return key == PREFIX or key.startswith(PREFIX + "_")


def split(params: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``params`` split into the rest and the layer's (``spec``, ``spec_*``)."""
    return split_params(params, _is_spec)


def resolve(policy: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The layer's parameters checked and typed (defaults filled in only when some are
    given, so runs without the layer keep their parameters and identity)."""
    if not raw:
        return {}
    out = typed_params(policy, raw, SPEC_PARAMS, "speculation")
    try:
        phases = parse_phases(out["spec_reduce_phases"])
    except UsageError as err:
        raise UsageError(f"policy '{policy}' {err.reason}") from None
    out["spec_reduce_phases"] = ",".join(f"{x:g}" for x in phases)
    return {k: v for k, v in out.items() if k == PREFIX or k in RULE_KEYS[out[PREFIX]]}
