"""The queue configuration of a run as rows for ``queues.parquet`` (one row per queue).

Columns: ``queue`` (full path), ``parent`` (null for root), ``leaf``, ``depth``,
``weight`` (share of the parent's guarantee, 0..1), ``guaranteed_share`` and ``max_share``
(fractions of the cluster), and ``guaranteed_<r>``/``max_<r>`` per resource (cpu, mem,
gpu) in the trace's units for the cluster size given (the fixed cluster's capacity; for an
elastic cluster its size at setup).  Policies add columns of their own through ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pipeline.policies.queues.tree import QueueTree

RESOURCES = ("cpu", "mem", "gpu")


def queue_rows(tree: QueueTree, total: np.ndarray,
               extra: Mapping[str, Sequence[Any]] | None = None) -> dict[str, list[Any]]:
    """Column -> values for every queue of ``tree``; ``total`` is the cluster (cpu, mem, gpu)."""
    n = tree.n_queues
    cols: dict[str, list[Any]] = {
        "queue": list(tree.paths),
        "parent": [tree.paths[p] if p >= 0 else None for p in tree.parent.tolist()],
        "leaf": tree.is_leaf.tolist(),
        "depth": tree.depth.tolist(),
        "weight": tree.share.tolist(),
        "guaranteed_share": tree.abs_cap.tolist(),
        "max_share": tree.abs_max.tolist(),
    }
    for r, name in enumerate(RESOURCES):
        cols[f"guaranteed_{name}"] = (tree.abs_cap * float(total[r])).tolist()
        cols[f"max_{name}"] = (tree.abs_max * float(total[r])).tolist()
    for key, values in (extra or {}).items():
        if len(values) != n:
            raise ValueError(f"queue column {key!r} has {len(values)} values for {n} queues")
        cols[key] = list(values)
    return cols
