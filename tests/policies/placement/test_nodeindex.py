"""The compiled node index picks exactly what a brute-force reading of the rules picks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.placement.nodeindex import SLACK, TIE, NodeIndex
from pipeline.sim.interface import NodeView, readonly

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


def _fits(cap: np.ndarray, alloc: np.ndarray, r: np.ndarray) -> bool:
    return bool(np.all(alloc + r <= cap * (1 + SLACK) + 0.5e-12))


def _key(cap: np.ndarray, alloc: np.ndarray) -> float:
    return alloc[1] / cap[1] + TIE * alloc[0] / cap[0]


def reference(cap, alloc, ncont, up, req, u, packing, thr) -> list[tuple[int, int]]:
    """The placement rules of nodeindex, one node at a time (O(n) per request)."""
    alloc, ncont, out = alloc.copy(), ncont.copy(), []
    n = len(cap)
    for i, r in enumerate(req):
        fit = [nd for nd in range(n) if up[nd] and _fits(cap[nd], alloc[nd], r)]
        pick = None
        if packing:
            limit = [thr * cap[nd, 1] * (1 + SLACK) - alloc[nd, 1] for nd in range(n)]
            medium = [nd for nd in fit if ncont[nd] > 0 and limit[nd] >= 0 and limit[nd] >= r[1]]
            if medium:  # highest key, ties to the higher slot
                pick = max(medium, key=lambda nd: (_key(cap[nd], alloc[nd]), nd))
            else:
                low = [nd for nd in range(n) if up[nd] and ncont[nd] == 0]
                if low:
                    start = low[min(int(u[i] * len(low)), len(low) - 1)]
                    order = [nd for nd in range(start, n)] + list(range(start))
                    pick = next((nd for nd in order if nd in low and nd in fit), None)
                if pick is None:
                    busy = [nd for nd in fit if ncont[nd] > 0]
                    pick = min(busy, key=lambda nd: (_key(cap[nd], alloc[nd]), nd),
                               default=None)
        else:
            pick = min(fit, key=lambda nd: (_key(cap[nd], alloc[nd]), nd), default=None)
        if pick is not None:
            alloc[pick] += r
            ncont[pick] += 1
            out.append((i, pick))
    return out


@st.composite
def scenario(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 24))
    cap = np.array([draw(st.sampled_from([(4.0, 8.0, 0.0), (8.0, 8.0, 1.0), (2.0, 16.0, 0.0)]))
                    for _ in range(n)])
    up = np.array([draw(st.booleans()) or draw(st.booleans()) for _ in range(n)])
    sizes = st.sampled_from([(0.5, 1.0, 0.0), (1.0, 0.5, 0.0), (2.0, 2.0, 0.0),
                             (0.0, 1.0, 0.0), (1.0, 1.0, 1.0), (3.0, 6.0, 0.0)])
    rounds = [[np.array(draw(sizes)) for _ in range(draw(st.integers(0, 12)))]
              for _ in range(draw(st.integers(1, 3)))]
    frees = [draw(st.lists(st.integers(0, n - 1), max_size=4)) for _ in rounds]
    return {"cap": cap, "up": up, "rounds": rounds, "frees": frees,
            "thr": draw(st.sampled_from([0.3, 0.6, 0.8, 1.0])), "seed": draw(st.integers(0, 9))}


@settings(max_examples=150, deadline=None)
@given(case=scenario(), packing=st.booleans(), treap=st.booleans())
def test_index_matches_reference(case: dict, packing: bool, treap: bool) -> None:
    """The index places as the one-node-at-a-time reference, whether least-allocated
    searches use the segment tree or (``treap``: switched on after the first refresh, as
    :meth:`NodeIndex.refresh` does once searches get expensive) the all-node treap."""
    cap, up = case["cap"], case["up"]
    n = len(cap)
    alloc, ncont = np.zeros((n, 3)), np.zeros(n, dtype=np.int32)
    placed: list[list[np.ndarray]] = [[] for _ in range(n)]
    index = NodeIndex(n, case["thr"], busy=packing)
    rng = np.random.default_rng(case["seed"])
    changed = np.arange(n)
    for reqs, frees in zip(case["rounds"], case["frees"], strict=True):
        state = np.where(up, 2, 0).astype(np.int8)
        # read-only arrays, as the core hands them (and the same compiled kernels)
        view = NodeView(cap=readonly(cap), alloc=readonly(alloc.copy()),
                        used=readonly(np.zeros((n, 2))), n_containers=readonly(ncont.copy()),
                        state=readonly(state), speed=readonly(np.ones(n)),
                        rack=readonly(np.zeros(n, np.int32)), changed=readonly(changed))
        index.refresh(view)
        if treap:
            index.use_treap()
        req = readonly(np.array(reqs).reshape(-1, 3))
        u = rng.random(len(req))
        got_r, got_n = index.place(view, req, u, packing)
        want = reference(cap, alloc, ncont, up, req, u, packing, case["thr"])
        assert list(zip(got_r.tolist(), got_n.tolist(), strict=True)) == want
        for i, nd in want:  # the core applies them, then some containers finish
            alloc[nd] += req[i]
            ncont[nd] += 1
            placed[nd].append(req[i])
        changed = np.array(sorted({nd for _, nd in want} | set(frees)), dtype=np.int64)
        for nd in frees:
            if placed[nd]:
                alloc[nd] -= placed[nd].pop(0)
                ncont[nd] -= 1
                if ncont[nd] == 0:
                    alloc[nd] = 0.0


def test_least_allocated_searches_switch_to_the_treap_once_expensive() -> None:
    """The index counts what its segment-tree searches cost and switches to the all-node
    treap (same answers) only after enough expensive ones; cheap ones never switch it."""
    from pipeline.policies.placement import nodetree as ni

    index = NodeIndex(8)
    index.root[ni.VISITS], index.root[ni.SEARCHES] = 30 * 2000, 2000
    index._adapt()
    assert not index.root[ni.ON_ALL]
    assert index.root[ni.SEARCHES] == 1000  # halved: recent searches weigh most
    index.root[ni.VISITS], index.root[ni.SEARCHES] = (ni.ADAPT_VISITS + 1) * 10, 10
    index._adapt()
    assert not index.root[ni.ON_ALL]  # too few searches to judge
    index.root[ni.VISITS], index.root[ni.SEARCHES] = ((ni.ADAPT_VISITS + 1) * ni.ADAPT_MIN,
                                                      ni.ADAPT_MIN)
    index._adapt()
    assert index.root[ni.ON_ALL]
