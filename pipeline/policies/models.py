"""GPU model constraints as the placement searches take them (:mod:`pipeline.sim.models`).

The core gives each pending task a mask of the GPU models it may use
(``view.pending.gpu_allow``, 0: any) and each node its model's bit
(``view.nodes.gpu_model``); the compiled searches test ``may_use`` at each candidate node.
These helpers hand them over cheaply: when the replay has no model constraints nothing is
gathered, and the searches get an empty mask array, which means "any node" for every
request.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.interface import NodeView, SchedView, _TaskColumns
from pipeline.sim.jit import helper

NO_MASK = np.zeros(0, np.int64)
NO_BITS = np.zeros(1, np.int64)


@helper
def may_use(mask, bits, nd):  # pragma: no cover - compiled
    """Whether a request allowing the GPU models ``mask`` (0: any) may use node ``nd``
    (the nodes' model bits ``bits``)."""
    return mask == 0 or (bits[nd] & mask) != 0


def pending_allow(view: SchedView, rows: np.ndarray | None = None) -> np.ndarray | None:
    """The pending requests' GPU model masks (positions ``rows``, None: all), or None when
    the replay has no model constraints (nothing is gathered then)."""
    allow = task_allow(view, view.pending)
    return allow if allow is None or rows is None else allow[rows]


def model_masks(nodes: NodeView, allow: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(allow, bits)`` as the compiled searches take them: the requests' GPU model masks
    (empty: all allow any node) and the nodes' model bits (:mod:`pipeline.sim.models`)."""
    if nodes.gpu_model is None or allow is None or not np.any(allow):
        return NO_MASK, NO_BITS
    return np.ascontiguousarray(allow, np.int64), np.ascontiguousarray(nodes.gpu_model)


def task_allow(view: SchedView, tasks: _TaskColumns) -> np.ndarray | None:
    """The GPU model masks of ``tasks`` (a pending or running view, or a subset), or None
    when the replay has no model constraints."""
    return None if view.nodes.gpu_model is None else np.asarray(tasks.gpu_allow)
