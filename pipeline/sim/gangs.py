"""Gang placement: tasks of one gang start in one scheduling round, or none of them does.

Distributed training (Alibaba PAI's multi-instance tasks: workers and parameter servers)
cannot run with part of its instances, so a trace marks them with a ``gang_id``.  The core
enforces it for every policy, the way a gang scheduler's all-or-nothing cycle does (e.g.
Kubernetes coscheduling's PodGroup ``minMember``, YuniKorn's and Volcano's gangs): when a
policy places some pending members of a gang in a call, the placements stand only if every
member of the gang has arrived and every pending member is placed in the same call;
otherwise they are held back (the members stay pending, their nodes are marked changed so
incremental indexes resync) and counted.  A policy asks for nothing: it places requests as
it always does, and one that wants a whole gang to land can place all pending members of it
together (the pending view's order keeps members side by side when they arrive together).
A member stopped later (preempted, its node lost) restarts on its own.
"""

from __future__ import annotations

import numpy as np


class Gangs:
    """Members per gang, members arrived so far, and placements held back."""

    def __init__(self, sizes: np.ndarray) -> None:
        self.size = np.asarray(sizes, dtype=np.int64)
        self.arrived = np.zeros(len(self.size), dtype=np.int64)
        self.held = 0  # placements held back because their gang was not placed whole

    def arrive(self, tasks: object, slots: np.ndarray, codes: np.ndarray) -> None:
        """Tasks ``slots`` arrived with gang ``codes`` (-1: none)."""
        tasks.gang[slots] = codes  # type: ignore[attr-defined]
        member = codes >= 0
        if np.any(member):
            self.arrived += np.bincount(codes[member], minlength=len(self.size))

    def whole(self, req: np.ndarray, node: np.ndarray, pending: np.ndarray, tasks: object,
              dirty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The placements ``(req, node)`` (indices into ``pending`` slots) without those of
        gangs not placed whole; bad indices are kept for the core's own check to report."""
        valid = (req >= 0) & (req < len(pending))
        gang = np.full(len(req), -1, dtype=np.int64)
        gang[valid] = tasks.gang[pending[req[valid]]]  # type: ignore[attr-defined]
        if not np.any(gang >= 0):
            return req, node
        n = len(self.size)
        placed = np.bincount(gang[gang >= 0], minlength=n)
        waiting = tasks.gang[pending]  # type: ignore[attr-defined]
        queued = np.bincount(waiting[waiting >= 0], minlength=n)
        whole = (placed == queued) & (self.arrived == self.size)
        keep = (gang < 0) | whole[np.maximum(gang, 0)]
        if keep.all():
            return req, node
        back = node[~keep]
        dirty[back[(back >= 0) & (back < len(dirty))]] = True
        self.held += int((~keep).sum())
        return req[keep], node[keep]
