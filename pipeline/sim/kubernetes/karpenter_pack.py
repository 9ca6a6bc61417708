"""Karpenter's scheduling simulation, compiled: pods onto existing nodes, then onto new
NodeClaims whose instance-type options narrow as pods join (the rules and their source:
:mod:`.karpenter_pack_reference`, the plain-Python twin the differential test holds this to).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

EPS = 1e-9


class Offer(NamedTuple):
    """What new nodes may be: per type allocatable ``cap`` (T, 3) and ``price`` (T,), the
    pool's ``allowed`` types, ``room`` left under its limits (3,), and ``max_new`` claims
    (-1: no limit)."""

    cap: np.ndarray
    price: np.ndarray
    allowed: np.ndarray
    room: np.ndarray
    max_new: int


class Packing(NamedTuple):
    """Where each pod went: ``where[i]`` an existing node's row (< E), ``E + c`` new claim
    ``c``, or -1 (nowhere); ``claim_type[c]``: the type launched for claim ``c``."""

    where: np.ndarray
    claim_type: np.ndarray


def pack(req: np.ndarray, free: np.ndarray, offer: Offer) -> Packing:
    """Simulate scheduling pods ``req`` (P, 3, already in Karpenter's order) onto existing
    nodes' ``free`` room (E, 3, in order) and new claims; ``free`` is not changed."""
    p = len(req)
    where = np.full(p, -1, dtype=np.int64)
    claim_type = np.full(max(p, 1), -1, dtype=np.int64)
    n = _pack(np.ascontiguousarray(req, np.float64).reshape(-1, 3),
              np.array(free, np.float64).reshape(-1, 3),
              np.ascontiguousarray(offer.cap, np.float64), np.asarray(offer.price, np.float64),
              np.asarray(offer.allowed, np.bool_), np.array(offer.room, np.float64),
              int(offer.max_new), where, claim_type)
    return Packing(where, claim_type[:n])


@njit(cache=True)
def _fits(a, b):
    return a[0] <= b[0] + EPS and a[1] <= b[1] + EPS and a[2] <= b[2] + EPS


@njit(cache=True)
def _pack(req, free, cap, price, allowed, room, max_new, where, claim_type):
    n_pods, n_free, n_types = req.shape[0], free.shape[0], cap.shape[0]
    total = np.zeros((max(n_pods, 1), 3))
    mask = np.zeros((max(n_pods, 1), n_types), dtype=np.bool_)
    claims = 0
    want = np.zeros(3)
    count = np.zeros(max(n_pods, 1), dtype=np.int64)  # pods per claim
    for i in range(n_pods):
        for e in range(n_free):
            if _fits(req[i], free[e]):
                for r in range(3):
                    free[e, r] -= req[i, r]
                where[i] = e
                break
        if where[i] >= 0:
            continue
        # claims with the fewest pods first (scheduler.go sorts them so before each pod)
        order = np.argsort(count[:claims], kind="mergesort")
        for j in range(claims):
            c = order[j]
            for r in range(3):
                want[r] = total[c, r] + req[i, r]
            ok = False
            for t in range(n_types):
                if mask[c, t] and _fits(want, cap[t]):
                    ok = True
                    break
            if ok:
                for t in range(n_types):
                    mask[c, t] = mask[c, t] and _fits(want, cap[t])
                for r in range(3):
                    total[c, r] = want[r]
                count[c] += 1
                where[i] = n_free + c
                break
        if where[i] >= 0 or claims == max_new:
            continue
        best = -1
        for t in range(n_types):
            mask[claims, t] = allowed[t] and _fits(req[i], cap[t]) and _fits(cap[t], room)
            if mask[claims, t] and (best < 0 or price[t] < price[best]):
                best = t
        if best < 0:
            continue
        for r in range(3):
            total[claims, r] = req[i, r]
            room[r] -= cap[best, r]  # the limits count the claim at its cheapest type
        count[claims] = 1
        where[i] = n_free + claims
        claims += 1
    for c in range(claims):
        best = -1
        for t in range(n_types):
            if mask[c, t] and (best < 0 or price[t] < price[best]):
                best = t
        claim_type[c] = best
    return claims


def karpenter_order(req: np.ndarray) -> np.ndarray:
    """Karpenter's pod order: cpu requests descending, then memory descending (stable)."""
    return np.lexsort((-req[:, 1], -req[:, 0])).astype(np.int64)
