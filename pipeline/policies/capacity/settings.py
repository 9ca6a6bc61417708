"""What a capacity-scheduler.xml decides, as effective settings (see
:mod:`pipeline.policies.settings`).

With ``config`` set, the inline parameters ``queues``, ``mappings``, ``user_limit_factor``,
``minimum_user_limit_percent``, ``ordering``, ``resource_calculator``,
``max_am_resource_percent``, ``maximum_applications``, ``preemption`` and the three
locality delays are not used: the
file's properties (or Hadoop 3.3's defaults where the file is silent) are.  Per-queue
properties are shown as one value when every leaf has the same, else per leaf.  With
preemption on, the ProportionalCapacityPreemptionPolicy knobs are listed too.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from pipeline.policies.capacity import config as cfg
from pipeline.policies.capacity.reader import read_properties
from pipeline.policies.settings import Setting, from_file, per_queue

MONITOR = "yarn.resourcemanager.scheduler.monitor.enable"
# PreemptionSettings field (its name carries the unit) -> property of yarn-site.xml
PREEMPTION_PROPS = {
    "observe_only": "observe_only", "interval_s": "monitoring_interval",
    "wait_before_kill_s": "max_wait_before_kill", "per_round": "total_preemption_per_round",
    "dead_zone": "max_ignored_over_capacity",
    "natural_termination": "natural_termination_factor",
}


def capacity_file_settings(path: str, node_labels: str) -> dict[str, Setting]:
    """The settings ``capacity-scheduler.xml`` at ``path`` decides, with their sources."""
    props = read_properties(Path(path))
    conf = cfg.from_xml(Path(path), node_labels)
    tree = conf.tree
    leaves = [tree.paths[int(i)] for i in tree.leaves]

    def leaf_values(key: str, default: object) -> object:
        return per_queue(leaves, tree.leaf_prop(key, default))

    def prop(name: str, value: object) -> Setting:
        return from_file(value, path, name, name in props)

    def queue_prop(suffix: str, key: str, default: object) -> Setting:
        present = any(k.startswith(cfg.P) and k.endswith("." + suffix) for k in props)
        return from_file(leaf_values(key, default), path,
                         f"{cfg.P}<queue>.{suffix}", present)

    # each leaf's guarantee and maximum as percentages of the cluster
    shares = {tree.paths[int(i)]: f"{100 * tree.abs_cap[i]:.4g}% (max "
                                  f"{100 * tree.abs_max[i]:.4g}%)" for i in tree.leaves}
    out: dict[str, Setting] = {
        "queues": from_file(shares, path, f"{cfg.P}<queue>.capacity"),
        "mappings": prop(cfg.P + "queue-mappings", props.get(cfg.P + "queue-mappings", "")),
        "user_limit_factor": queue_prop("user-limit-factor", "user_limit_factor", 1.0),
        "minimum_user_limit_percent": queue_prop("minimum-user-limit-percent",
                                                 "minimum_user_limit_percent", 100.0),
        "ordering": queue_prop("ordering-policy", "ordering", "fifo"),
        "resource_calculator": prop(cfg.P + "resource-calculator", conf.calculator),
        "max_am_resource_percent": from_file(
            leaf_values("max_am_percent", conf.max_am_percent), path,
            f"{cfg.P}[<queue>.]maximum-am-resource-percent",
            any(k.endswith("maximum-am-resource-percent") for k in props)),
        "maximum_applications": prop(cfg.P + "maximum-applications",
                                     conf.max_applications),
        "preemption": prop(MONITOR, conf.preemption.enabled),
        "node_locality_delay": prop(cfg.P + "node-locality-delay", conf.locality.node_delay),
        "rack_locality_additional_delay": prop(cfg.P + "rack-locality-additional-delay",
                                               conf.locality.rack_additional_delay),
        "rack_locality_full_reset": prop(cfg.P + "rack-locality-full-reset",
                                         conf.locality.full_reset),
    }
    if conf.preemption.enabled:
        values = asdict(conf.preemption)
        for field, name in PREEMPTION_PROPS.items():
            out[f"preemption.{field}"] = prop(cfg.PRE + name, values[field])
    return out
