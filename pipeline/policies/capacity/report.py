"""The capacity-scheduler's own ``queues.parquet`` columns for labels and absolute capacities.

With node labels every queue gets ``accessible_node_labels`` (the labels it can use, a
comma list, possibly empty), ``default_node_label`` (leaves; empty = DEFAULT) and ``label_capacity``
(``label=guaranteed/maximum;...`` as fractions of each label's partition, absolute queues
as ``absolute``).  With absolute capacities the shared columns (``guaranteed_share``,
``max_share``, ``guaranteed_<r>``, ``max_<r>``) hold the effective values for the
cluster size given, and ``capacity_mode`` says ``absolute``/``percent``/``weight``.
Which partition a container ran in is not a column: it is the label of its machine
(``node_labels`` is deterministic for a run).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.policies.capacity.formulas import DEFAULT, DOMINANT, ratio
from pipeline.policies.capacity.partitions import Partitions
from pipeline.policies.capacity.resources import QueueCaps
from pipeline.policies.queues.report import RESOURCES


def label_columns(caps: QueueCaps, total: np.ndarray, calc: int,
                  parts: Partitions | None) -> dict[str, list[Any]]:
    """Columns to add to (or replace in) the shared queue rows."""
    cols: dict[str, list[Any]] = {}
    if caps.n_parts > 1:
        cols.update(_label_info(caps))
    if caps.any_absolute:
        cols.update(_absolute(caps, _default_total(total, parts), calc))
    return cols


def _label_info(caps: QueueCaps) -> dict[str, list[Any]]:
    t, names = caps.tree, caps.names
    access, default, shares = [], [], []
    leaf_pos = {int(q): i for i, q in enumerate(t.leaves)}
    for q in range(t.n_queues):
        access.append(",".join(names[x] for x in range(1, caps.n_parts) if caps.access[x, q]))
        pos = leaf_pos.get(q)
        default.append(None if pos is None else names[int(caps.leaf_part[pos])])
        shares.append(";".join(
            f"{names[x]}=absolute" if caps.absolute[q] else
            f"{names[x]}={caps.abs_cap[x, q]:.6g}/{caps.abs_max[x, q]:.6g}"
            for x in range(1, caps.n_parts)))
    return {"accessible_node_labels": access, "default_node_label": default,
            "label_capacity": shares}


def _default_total(total: np.ndarray, parts: Partitions | None) -> np.ndarray:
    """DEFAULT's share of ``total``: the whole of it without labels, else in proportion to
    the capacity of the DEFAULT nodes (once labels are on the nodes)."""
    if parts is None or parts.slot_cap is None:
        return total
    all_cap = parts.slot_cap.sum(axis=0)
    default = parts.slot_cap[parts.node_part == 0].sum(axis=0)
    return total * np.divide(default, all_cap, out=np.zeros(3), where=all_cap > 0)


def _absolute(caps: QueueCaps, total: np.ndarray, calc: int) -> dict[str, list[Any]]:
    guar, maxi = caps.effective(0, total, calc)
    name = DOMINANT if calc else DEFAULT
    t = caps.tree
    cols: dict[str, list[Any]] = {
        "guaranteed_share": [ratio(g, total, total, name) if total.any() else 0.0
                             for g in guar],
        "max_share": [ratio(m, total, total, name) if total.any() else 0.0 for m in maxi],
        "capacity_mode": ["absolute" if caps.absolute[q] else
                          "weight" if t.configs[q].mode == "weight" else "percent"
                          for q in range(t.n_queues)],
    }
    for r, res in enumerate(RESOURCES):
        cols[f"guaranteed_{res}"] = guar[:, r].tolist()
        cols[f"max_{res}"] = maxi[:, r].tolist()
    return cols
