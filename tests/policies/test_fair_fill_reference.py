"""The FairScheduler's compiled fill decides exactly what its plain-Python reference decides.

:func:`pipeline.policies.fair.fill_reference.fair_fill_reference` is the reference; the
kernel (:func:`pipeline.policies.fair.kernel.fair_fill`, through ``fair_fill_plain`` as the
policy calls it, without a node offer) must make the same placements in the same order and
leave the same usage, AM state and node allocation, on small random states: random queue
trees with fair/drf/fifo policies, weights (some 0), minimum and maximum resources,
applications already holding resources, the AM check on or off, up and down nodes, GPU
model constraints, and the node index answering from its segment tree or its treap.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.drf import Nodes, Placements, group_by_code, inverse_capacity
from pipeline.policies.fair.fill_reference import DRF, FAIR, FIFO, fair_fill_reference
from pipeline.policies.fair.fill_state import AmCheck, FillTree, Pending
from pipeline.policies.fair.kernel import fair_fill_plain
from pipeline.policies.locality.gate import no_offer
from pipeline.policies.models import NO_BITS, NO_MASK
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.sim.interface import NodeView, readonly

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

INF = np.inf
NODE_SHAPES = [(4.0, 8.0, 0.0), (8.0, 8.0, 1.0), (2.0, 16.0, 0.0), (6.0, 6.0, 2.0)]
FILLED = [0.0, 0.0, 0.0, 0.25, 0.5, 1.0]
SIZES = [(1.0, 4.0, 0.0), (3.0, 1.0, 0.0), (0.5, 0.5, 0.0), (2.0, 2.0, 0.0), (1.0, 1.0, 1.0),
         (0.0, 1.0, 0.0), (7.0, 1.0, 0.0), (1.5, 0.2, 2.0)]
HELD = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (1.0, 2.0, 0.0), (2.0, 1.0, 0.0), (0.5, 4.0, 1.0)]
WEIGHTS = [1.0, 1.0, 2.0, 0.5, 0.0]
MIN_SHARES = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (2.0, 4.0, 0.0), (8.0, 2.0, 0.0),
              (1.0, 16.0, 1.0)]
MAX_SHARES = [(INF, INF, INF), (INF, INF, INF), (6.0, 12.0, INF), (4.0, 8.0, 1.0),
              (INF, 5.0, INF), (2.0, 2.0, 0.0)]  # below the root
AM_LIMITS = [(INF, INF, INF), (INF, INF, INF), (2.0, 4.0, INF), (1.0, 1.0, 0.0),
             (4.0, 8.0, 1.0)]
MODEL_BITS, MASKS = [0, 1, 2, 4], [0, 0, 1, 2, 3, 4, 6]


def pick(rng: np.random.Generator, choices: list, size: int) -> np.ndarray:
    """``size`` entries drawn from ``choices`` (rows, for a list of tuples)."""
    return np.array(choices, dtype=np.float64)[rng.integers(0, len(choices), size)]


def subtree_sums(parent: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Each tree node's ``own`` rows summed over its subtree (parents before children)."""
    out = own.copy()
    for q in range(len(parent) - 1, 0, -1):
        out[parent[q]] += out[q]
    return out


def queue_tree(rng: np.random.Generator, nq: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Random queue parents (each before its children), policies, and the leaf queues."""
    parent = np.array([-1] + [int(rng.integers(0, q)) for q in range(1, nq)], np.int64)
    leaves = [q for q in range(nq) if q not in set(parent[1:].tolist())]
    kind = np.array([int(rng.choice([FAIR, DRF, FIFO] if q in leaves else [FAIR, DRF]))
                     for q in range(nq)], np.int64)
    return parent, kind, leaves


@st.composite
def fill_case(draw: st.DrawFn) -> dict:
    """A small queue tree with applications, pending requests, AM state and nodes.

    Hypothesis draws the sizes and a seed; the entries come from the seeded generator.
    """
    nq, na, m = draw(st.integers(1, 5)), draw(st.integers(0, 6)), draw(st.integers(0, 20))
    n = draw(st.integers(1, 8))
    models, am_on = draw(st.booleans()), draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    parent, kind, leaves = queue_tree(rng, nq)
    na = max(na, 1) if m else 0
    app_leaf = np.array([leaves[int(rng.integers(0, len(leaves)))] for _ in range(na)],
                        np.int64)
    t = nq + na
    node_of_req = nq + rng.integers(0, max(na, 1), m).astype(np.int64)
    req = pick(rng, SIZES, m).reshape(-1, 3)
    full_parent = np.concatenate([parent, app_leaf]).astype(np.int64)
    child_ptr, child_idx = group_by_code(full_parent[1:], t)
    held = np.vstack([np.zeros((nq, 3)), pick(rng, HELD, na).reshape(-1, 3)])
    asked = np.zeros((t, 3))
    np.add.at(asked, node_of_req, req)
    usage = subtree_sums(full_parent, held)
    first = np.full(t, float(m))
    for i in range(m - 1, -1, -1):
        first[node_of_req[i]] = float(i)
    cap = pick(rng, NODE_SHAPES, n)
    state = np.where(rng.random(n) < 0.85, 2, 0).astype(np.int8)
    tree = FillTree(
        full_parent, child_ptr, child_idx + 1, np.concatenate([kind, np.zeros(na, np.int64)]),
        np.concatenate([pick(rng, WEIGHTS, nq), np.ones(na)]),
        np.vstack([pick(rng, MIN_SHARES, nq), np.zeros((na, 3))]),
        np.vstack([np.full((1, 3), INF), pick(rng, MAX_SHARES, nq - 1).reshape(-1, 3),
                   np.full((na, 3), INF)]), usage,
        usage + subtree_sums(full_parent, asked),
        np.concatenate([np.zeros(nq), first[nq:]]), inverse_capacity(cap, state), nq)
    indptr, order = group_by_code(node_of_req, t)
    am = AmCheck(am_on, np.concatenate([np.ones(nq, np.bool_), rng.random(na) < 0.5]),
                 pick(rng, [(0.0, 0.0, 0.0), (1.0, 2.0, 0.0)], nq).reshape(-1, 3),
                 pick(rng, AM_LIMITS, nq).reshape(-1, 3))
    return {"tree": tree, "pending": Pending(req, indptr, order), "am": am, "cap": cap,
            "alloc": cap * pick(rng, FILLED, n)[:, None], "state": state,
            "bits": pick(rng, MODEL_BITS, n).astype(np.int64) if models else NO_BITS,
            "allow": pick(rng, MASKS, m).astype(np.int64) if models else NO_MASK}


def node_index(case: dict, treap: bool) -> NodeIndex:
    """The policy's node index, refreshed from the case's nodes."""
    n = len(case["cap"])
    ncont = (case["alloc"].sum(axis=1) > 0).astype(np.int32)
    view = NodeView(cap=readonly(case["cap"]), alloc=readonly(case["alloc"]),
                    used=readonly(np.zeros((n, 2))), n_containers=readonly(ncont),
                    state=readonly(case["state"]), speed=readonly(np.ones(n)),
                    rack=readonly(np.zeros(n, np.int32)), changed=readonly(np.arange(n)),
                    gpu_model=None)
    index = NodeIndex(n)
    index.refresh(view)
    if treap:
        index.use_treap()
    return index


def copied(x: tuple) -> tuple:
    """A NamedTuple with each array copied (the kernel changes some in place)."""
    return type(x)(*(v.copy() if isinstance(v, np.ndarray) else v for v in x))


@settings(max_examples=300, deadline=None)
@given(case=fill_case(), treap=st.booleans())
def test_kernel_fills_as_the_reference(case: dict, treap: bool) -> None:
    """Same (request, node) pairs in the same order, and the same state after."""
    ix = node_index(case, treap)
    tree, pending, am = case["tree"], case["pending"], case["am"]
    want = fair_fill_reference(tree, pending, am, case["cap"], ix.alloc, ix.up, ix.ncont,
                               case["allow"], case["bits"])
    tree_k, am_k = copied(tree), copied(am)
    nodes = Nodes(case["cap"], ix.alloc, ix.ncont, ix.up, ix.key, ix.val, ix.pri, ix.left,
                  ix.right, ix.parent, ix.agg, ix.member, ix.root, ix.skey, ix.sfree, ix.cnt,
                  ix.stack, case["bits"])
    m = len(pending.req)
    out = Placements(np.empty(m, np.int64), np.empty(m, np.int64))
    c = fair_fill_plain(tuple(tree_k), tuple(pending), tuple(am_k), tuple(nodes),
                        no_offer(case["allow"], case["bits"]), tuple(out))
    assert list(zip(out.req[:c].tolist(), out.node[:c].tolist(), strict=True)) == want.placed
    assert np.array_equal(tree_k.usage, want.usage)
    assert np.array_equal(am_k.started, want.started)
    assert np.array_equal(am_k.used, want.am_used)
    assert np.array_equal(ix.alloc, want.alloc)
    assert np.array_equal(ix.ncont, want.ncont)


def test_reference_prefers_the_needy_queue() -> None:
    """FairSharePolicy: a queue below its minimum share goes first, whatever its weight."""
    parent = np.array([-1, 0, 0, 1, 2], np.int64)
    child_ptr, child_idx = group_by_code(parent[1:], 5)
    tree = FillTree(parent, child_ptr, child_idx + 1, np.zeros(5, np.int64),
                    np.array([1.0, 9.0, 1.0, 1.0, 1.0]),
                    np.array([[0, 0, 0], [0, 0, 0], [0, 8, 0], [0, 0, 0], [0, 0, 0.0]]),
                    np.full((5, 3), INF), np.zeros((5, 3)), np.full((5, 3), 4.0),
                    np.array([0, 0, 0, 0, 1.0]), np.array([0.125, 0.0625, 0.0]), 3)
    req = np.array([[1.0, 2.0, 0.0], [1.0, 2.0, 0.0]])
    indptr, order = group_by_code(np.array([3, 4], np.int64), 5)
    am = AmCheck(False, np.ones(5, np.bool_), np.zeros((3, 3)), np.full((3, 3), INF))
    got = fair_fill_reference(tree, Pending(req, indptr, order), am,
                              np.array([[8.0, 16.0, 0.0]]), np.zeros((1, 3)),
                              np.ones(1, np.bool_), np.zeros(1, np.int32), NO_MASK, NO_BITS)
    assert got.placed == [(1, 0), (0, 0)]
