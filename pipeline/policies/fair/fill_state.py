"""The named inputs of the FairScheduler's fill (:func:`~.kernel.fair_fill`).

Built once per scheduling call by :mod:`.policy` (and read by the plain-Python
:mod:`.fill_reference`); the compiled loop reads them by field.  "Tree node" is the fill's
index space: queues ``0..n_queues-1`` (root 0, parents before children), then the
applications (:class:`~.apps.AppTree`).  The nodes of the cluster and the output buffers are
DRF's :class:`~pipeline.policies.drf.Nodes` and :class:`~pipeline.policies.drf.Placements`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.policies.drf import Nodes


class FillTree(NamedTuple):
    """The queue tree with the applications below their leaf queues (per tree node)."""

    parent: np.ndarray  # (t,) int64: parent tree node (-1: the root)
    child_ptr: np.ndarray  # (t + 1,) int64: tree node -> its children (CSR) ...
    child_idx: np.ndarray  # ... the children, ascending
    kind: np.ndarray  # (t,) int64: the policy ordering its children (FAIR, DRF, FIFO)
    weight: np.ndarray  # (t,) float64: queue weight (applications: 1)
    min_share: np.ndarray  # (t, 3) float64: minResources (applications: 0)
    max_share: np.ndarray  # (t, 3) float64: maxResources (applications: inf)
    usage: np.ndarray  # (t, 3) float64: held over the subtree; placements added in place
    demand: np.ndarray  # (t, 3) float64: usage plus pending over the subtree
    rank: np.ndarray  # (t,) float64: FIFO order (an application's first request position)
    inv_total: np.ndarray  # (3,) float64: 1 / the cluster's capacity (0: none of it)
    n_queues: int  # tree nodes below this are queues, from it on applications


class Pending(NamedTuple):
    """The pending requests (row ``i`` is request ``i``), grouped by application."""

    req: np.ndarray  # (m, 3) float64: cpu, memory, gpu asked
    indptr: np.ndarray  # (t + 1,) int64: tree node -> its requests in ``order`` ...
    order: np.ndarray  # (m,) int64: ... request rows, queue order within each node


class AmCheck(NamedTuple):
    """The maxAMShare check (:mod:`.limits`): an application's first container is its AM."""

    on: bool  # check the AM limit at all (off: the arrays are placeholders)
    started: np.ndarray  # (t,) bool: has its AM (queues: True); set in place
    used: np.ndarray  # (n_queues, 3) float64: AM usage per leaf; added to in place
    limit: np.ndarray  # (n_queues, 3) float64: AM limit per leaf (inf: none)


class Fill(NamedTuple):
    """The fill's inputs besides the locality gate and the output buffers."""

    tree: FillTree
    pending: Pending
    am: AmCheck
    nodes: Nodes  # the node index (updated in place) and the nodes' GPU model bits
