"""The compiled assignment loop decides as the plain-Python reference does.

:func:`pipeline.policies.capacity.kernel.allocate` (without a node offer) against
:func:`pipeline.policies.capacity.assign_reference.assign_containers` on small random
states: a few leaves (flat or under a parent queue), users, applications and requests;
the same requests in the same order, and the same state after.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.capacity.assign_reference import assign_containers
from pipeline.policies.capacity.inputs import Apps, Inputs, Leaves, Queues, Room, Users
from pipeline.policies.capacity.kernel import allocate
from pipeline.policies.locality.gate import no_offer

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

HALVES = st.integers(0, 12).map(lambda x: x / 2)  # resources in steps of 0.5: ties happen


def _vectors(draw: st.DrawFn, n: int, top: int, gpu: bool) -> np.ndarray:
    """(n, 3) random vectors, entries multiples of 0.5 up to ``top``."""
    out = np.zeros((n, 3))
    for i in range(n):
        for r in range(3 if gpu else 2):
            out[i, r] = draw(st.integers(0, 2 * top)) / 2
    return out


def _tree(nested: bool, n_leaves: int) -> tuple[np.ndarray, list[int]]:
    """Queue parents and the leaf queues: root 0 with the leaves, or with a parent queue
    holding the first two leaves."""
    if not nested or n_leaves < 2:
        return np.array([-1] + [0] * n_leaves), list(range(1, n_leaves + 1))
    parent = [-1, 0, 1, 1] + [0] * (n_leaves - 2)
    return np.array(parent), [2, 3, *range(4, n_leaves + 2)]


@st.composite
def states(draw: st.DrawFn) -> Inputs:
    """A random state for one pass of the kernel."""
    n_leaves = draw(st.integers(1, 3))
    n_users = draw(st.integers(1, 3))
    gpu = draw(st.booleans())
    calc = draw(st.integers(0, 1))
    parent, leaf_q = _tree(draw(st.booleans()), n_leaves)
    n_q = len(parent)
    kids = [c for q in range(n_q) for c in range(n_q) if parent[c] == q]
    kids_lo = np.searchsorted(np.sort(parent[parent >= 0]), np.arange(n_q + 1))
    q_leaf = np.full(n_q, -1)
    q_leaf[leaf_q] = np.arange(n_leaves)
    cluster = np.array([draw(st.integers(4, 24)), draw(st.integers(4, 40)),
                        draw(st.integers(1, 4)) if gpu else 0], dtype=np.float64)
    guar = _vectors(draw, n_q, 20, gpu)
    maxi = guar + _vectors(draw, n_q, 20, gpu)
    guar[0], maxi[0] = cluster, cluster
    # applications, grouped by leaf, and their requests
    app_leaf = sorted(draw(st.lists(st.integers(0, n_leaves - 1), min_size=1, max_size=6)))
    n_apps = len(app_leaf)
    pair = np.array([lf * n_users + draw(st.integers(0, n_users - 1)) for lf in app_leaf])
    counts = np.array([draw(st.integers(1, 4)) for _ in range(n_apps)])
    hi = np.cumsum(counts)
    lo = hi - counts
    n_req = int(hi[-1])
    req = _vectors(draw, n_req, 6, gpu)
    req[:, 1] = np.maximum(req[:, 1], 0.5)
    req_idx = np.array(draw(st.permutations(range(n_req))), dtype=np.int64)
    pend_mem = np.add.reduceat(req[req_idx, 1], lo)
    used_mem = np.array([draw(HALVES) for _ in range(n_apps)])
    n_pairs = n_leaves * n_users
    pair_used = _vectors(draw, n_pairs, 6, gpu)
    pair_w = np.array([draw(st.sampled_from([0.5, 1.0, 2.0])) for _ in range(n_pairs)])
    left = np.bincount(pair, weights=counts, minlength=n_pairs).astype(np.int64)
    users = Users(pair_used, pair_w, left, np.array(
        [draw(st.integers(0, 2)) for _ in range(n_pairs)], dtype=np.int64))
    q_used = np.zeros((n_q, 3))
    pair_leaf = np.repeat(np.arange(n_leaves), n_users)
    for pr in range(n_pairs):
        q = leaf_q[pair_leaf[pr]]
        while q >= 0:
            q_used[q] += pair_used[pr]
            q = parent[q]
    active = left > 0
    active_used = np.zeros((n_leaves, 3))
    np.add.at(active_used, pair_leaf[active], pair_used[active])
    active_w = np.bincount(pair_leaf[active], weights=pair_w[active], minlength=n_leaves)
    lq = np.array(leaf_q)
    leaves = Leaves(
        lq.astype(np.int64), guar[lq], maxi[lq],
        np.array([draw(st.sampled_from([25.0, 50.0, 100.0])) for _ in lq]),
        np.array([draw(st.sampled_from([-1.0, 1.0, 2.0])) for _ in lq]),
        np.array([draw(st.booleans()) for _ in lq]), np.array([draw(st.booleans()) for _ in lq]),
        active_used, active_w.astype(np.float64),
        np.array([draw(st.integers(0, 2)) for _ in lq], dtype=np.int64),
        np.array([draw(st.integers(1, 4)) for _ in lq], dtype=np.int64),
        np.array([draw(st.integers(1, 3)) for _ in lq], dtype=np.int64),
        _vectors(draw, n_leaves, 3, gpu), _vectors(draw, n_leaves, 8, gpu))
    queues = Queues(q_used, guar, maxi, parent.astype(np.int64), kids_lo.astype(np.int64),
                    np.array(kids, dtype=np.int64),
                    np.array([draw(st.integers(0, 2)) for _ in range(n_q)], dtype=np.int64),
                    np.array([draw(st.booleans()) for _ in range(n_q)]),
                    q_leaf.astype(np.int64), np.array([draw(st.booleans()) for _ in range(n_q)]))
    leaf_lo = np.searchsorted(app_leaf, np.arange(n_leaves)).astype(np.int64)
    leaf_hi = np.searchsorted(app_leaf, np.arange(n_leaves), side="right").astype(np.int64)
    apps = Apps(req, req_idx, lo.astype(np.int64), hi.astype(np.int64), pair.astype(np.int64),
                np.array([draw(st.booleans()) for _ in range(n_apps)]), used_mem,
                used_mem + pend_mem, leaf_lo, leaf_hi)
    minimum = np.array([draw(st.sampled_from([0.0, 1.0])), draw(st.sampled_from([0.5, 1.0])),
                        0.0])
    free = np.minimum(cluster, _vectors(draw, 1, 24, gpu)[0])
    room = Room(free, cluster, minimum, calc, draw(st.booleans()))
    return Inputs(apps, users, leaves, queues, room)


@settings(max_examples=300, deadline=None)
@given(states())
def test_kernel_assigns_as_the_reference(state: Inputs) -> None:
    mine = copy.deepcopy(state)
    out = np.empty(len(state.apps.req), dtype=np.int64)
    n = allocate(*state, no_offer(), out)
    expected = assign_containers(*mine)
    assert out[:n].tolist() == expected
    for name, compiled, reference in zip(Inputs._fields, state, mine, strict=True):
        for field, a, b in zip(compiled._fields, compiled, reference, strict=True):
            assert np.array_equal(a, b), f"{name}.{field}"
