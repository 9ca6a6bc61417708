"""Karpenter's scheduling simulation in plain Python: the reference
:func:`pipeline.sim.kubernetes.karpenter_pack.pack` is tested against
(``tests/sim/kubernetes/test_karpenter_pack.py``).  Written for reading, not speed.

Source: kubernetes-sigs/karpenter v1.14 ``pkg/controllers/provisioning/scheduling``
(``scheduler.go``, ``nodeclaim.go``), as provisioning and consolidation both run it:

1. Pods come in Karpenter's order (cpu descending, then memory).
2. A pod goes to the first existing node (in the order given) with room for it.
3. Otherwise to the first new NodeClaim, fewest pods first (ties: the older first), that
   still has an instance-type option holding all its pods plus this one; the claim's
   options narrow to those that do.
4. Otherwise a new NodeClaim opens (unless ``max_new`` claims are open already) with the
   pool's allowed types that hold the pod and fit what the pool's limits leave; the
   limits count it at its cheapest option.  No such type: the pod stays unplaced.
5. Each claim launches its cheapest remaining option (the first listed on a tie), as the
   cloud provider's lowest-price allocation does for on-demand capacity.
"""

from __future__ import annotations

import numpy as np

from pipeline.sim.kubernetes.karpenter_pack import EPS, Offer, Packing


def _fits(a: list[float], b: list[float]) -> bool:
    return all(x <= y + EPS for x, y in zip(a, b, strict=True))


def pack(req: np.ndarray, free: np.ndarray, offer: Offer) -> Packing:
    """Where each pod goes and which type each new claim launches (see the module)."""
    rooms = [list(map(float, f)) for f in np.asarray(free).reshape(-1, 3)]
    caps = [list(map(float, c)) for c in np.asarray(offer.cap).reshape(-1, 3)]
    price = [float(x) for x in offer.price]
    room = [float(x) for x in offer.room]
    claims: list[tuple[list[float], set[int]]] = []  # (requests so far, options)
    members: list[int] = []  # pods per claim
    where = []
    for pod in np.asarray(req).reshape(-1, 3).tolist():
        node = next((e for e, r in enumerate(rooms) if _fits(pod, r)), None)
        if node is not None:
            rooms[node] = [r - x for r, x in zip(rooms[node], pod, strict=True)]
            where.append(node)
            continue
        joined = None
        by_size = sorted(range(len(claims)), key=lambda c: (members[c], c))
        for c in by_size:
            total, options = claims[c]
            want = [a + b for a, b in zip(total, pod, strict=True)]
            holding = {t for t in options if _fits(want, caps[t])}
            if holding:
                claims[c] = (want, holding)
                members[c] += 1
                joined = c
                break
        if joined is not None:
            where.append(len(rooms) + joined)
            continue
        if len(claims) == offer.max_new:
            where.append(-1)
            continue
        options = {t for t in range(len(caps)) if offer.allowed[t] and _fits(pod, caps[t])
                   and _fits(caps[t], room)}
        if not options:
            where.append(-1)
            continue
        cheapest = min(options, key=lambda t: (price[t], t))
        room = [r - c for r, c in zip(room, caps[cheapest], strict=True)]
        claims.append((list(pod), options))
        members.append(1)
        where.append(len(rooms) + len(claims) - 1)
    types = [min(options, key=lambda t: (price[t], t)) for _, options in claims]
    return Packing(np.array(where, dtype=np.int64), np.array(types, dtype=np.int64))
