"""First-fit packing in plain Python: the reference :func:`pipeline.sim.binpack.first_fit`
is tested against (``tests/sim/test_binpack.py``).  Written for reading, not speed.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.binpack import FIT_EPS


def first_fit(req: np.ndarray, cap: np.ndarray, limit: int,
              stop_when_full: bool) -> tuple[int, list[bool]]:
    """How many nodes of room ``cap`` first-fit packing of the rows of ``req`` opens (at most
    ``limit``), and which requests found a node."""
    rooms: list[list[float]] = []
    placed = [False] * len(req)
    if limit <= 0:
        return 0, placed
    for i, r in enumerate(req.tolist()):
        if any(r[k] > cap[k] + FIT_EPS for k in range(3)):
            continue  # larger than an empty node
        node = next((j for j, room in enumerate(rooms)
                     if all(r[k] <= room[k] + FIT_EPS for k in range(3))), None)
        if node is None:
            if len(rooms) == limit:
                if stop_when_full:
                    break
                continue
            rooms.append([float(c) for c in cap])
            node = len(rooms) - 1
        for k in range(3):
            rooms[node][k] -= r[k]
        placed[i] = True
    return len(rooms), placed
