"""What a fair-scheduler.xml allocation file decides, as effective settings (see
:mod:`pipeline.policies.settings`).

With ``allocation_file`` set, the queues, scheduling policies, preemption timeouts and
thresholds and application limits come from the file (its per-queue elements, inherited
down the tree, else its top-level ``default...``/``queueMax...Default`` elements, else the
parameters of the same meaning); ``preemption`` is yarn-site.xml's switch and stays a
parameter.  Per-queue values are shown as one value when every leaf has the same.
"""

from __future__ import annotations

import numpy as np

from pipeline.policies.fair.config import NEVER, UNLIMITED, QueueSetup
from pipeline.policies.settings import Setting, from_file, per_queue

KIND_NAMES = ("fair", "drf", "fifo")


def fair_file_settings(path: str, qs: QueueSetup) -> dict[str, Setting]:
    """The settings the allocation file at ``path`` decides (``qs``: its queue setup)."""
    tree = qs.tree
    leaves = [int(i) for i in tree.leaves]
    names = [tree.paths[i] for i in leaves]

    def leaf_values(values: np.ndarray, never: float | None = None,
                    to: float | int | None = None) -> object:
        out = [to if never is not None and v >= never else v for v in values[leaves]]
        return per_queue(names, out)

    weights = {tree.paths[i]: float(qs.weight[i]) for i in leaves}
    return {
        "queues": from_file(weights, path, "<queue><weight>"),
        "default_policy": from_file(per_queue(names, [KIND_NAMES[k] for k in qs.kind[leaves]]),
                                    path, "<queue><schedulingPolicy> / "
                                          "<defaultQueueSchedulingPolicy>"),
        "fair_share_preemption_timeout_s": from_file(
            leaf_values(qs.fs_timeout, NEVER, -1.0), path,
            "<fairSharePreemptionTimeout> / <defaultFairSharePreemptionTimeout> (-1: never)"),
        "fair_share_preemption_threshold": from_file(
            leaf_values(qs.fs_threshold), path,
            "<fairSharePreemptionThreshold> / <defaultFairSharePreemptionThreshold>"),
        "max_running_apps": from_file(leaf_values(qs.max_apps, UNLIMITED, -1), path,
                                      "<maxRunningApps> / <queueMaxAppsDefault> (-1: none)"),
        "user_max_apps": from_file(-1 if qs.user_max_default >= UNLIMITED
                                   else qs.user_max_default, path,
                                   "<userMaxAppsDefault> (-1: none)"),
        "max_am_share": from_file(leaf_values(qs.am_share), path,
                                  "<maxAMShare> / <queueMaxAMShareDefault>"),
    }
