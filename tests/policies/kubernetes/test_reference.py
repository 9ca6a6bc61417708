"""The compiled kube-scheduler cycles make exactly the decisions of their reading reference.

:func:`pipeline.policies.kubernetes.reference.schedule` is the reference and
:func:`pipeline.policies.kubernetes.kernel.schedule` the kernel: on small random states
(nodes Ready or booting, partly allocated, pod slots nearly full, GPU models, each scoring
strategy, sampled or full filter walks, a moved start index, priorities some of which may
preempt) both must place the same pods on the same nodes in the same order, stop at the
same pods for preemption, leave the same allocations and the same start index, and draw
the tie-breaks from the generator alike.  The kernel keeps its filter and score memo
(:mod:`pipeline.policies.kubernetes.memo`) across calls; between calls some nodes change
(pods finish or land, nodes turn Ready or not, capacity moves), as they do between
scheduling points, and a stale entry would show as a different decision.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.kubernetes import kernel, reference
from pipeline.policies.kubernetes.kernel import Cycle, Nodes, Pods, Profile
from pipeline.policies.kubernetes.memo import NodeState, ScoreMemo
from pipeline.policies.kubernetes.scoring import to_units

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

SHAPES = [(4.0, 8.0, 0.0), (8.0, 8.0, 1.0), (2.0, 16.0, 0.0), (6.0, 6.0, 2.0), (4.0, 8.0, 0.0)]
SIZES = [(1.0, 2.0, 0.0), (0.5, 0.5, 0.0), (2.0, 1.0, 0.0), (0.25, 4.0, 0.0), (1.0, 1.0, 1.0),
         (3.0, 3.0, 0.0), (0.5, 1.0, 0.5)]
SHAPE_POINTS = [([0, 100], [0, 100]), ([0, 100], [100, 0]), ([0, 50, 100], [0, 80, 100])]


def pick(rng: np.random.Generator, choices: list, size: int) -> np.ndarray:
    return np.array(choices)[rng.integers(0, len(choices), size)]


@st.composite
def state(draw: st.DrawFn) -> tuple:
    n, m = draw(st.integers(1, 12)), draw(st.integers(0, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cap = pick(rng, SHAPES, n)
    models = draw(st.booleans())
    req = pick(rng, SIZES, m).reshape(-1, 3)
    pods = Pods(req, to_units(req),
                rng.permutation(m).astype(np.int64),
                pick(rng, [0, 0, 1, 2, 3], m).astype(np.int64) if models
                else np.zeros(0, np.int64),
                rng.integers(0, 3, m).astype(np.int64),
                draw(st.sampled_from([0, 1, 2, 2**62])))
    alloc = cap * pick(rng, [0.0, 0.0, 0.25, 0.5, 0.9], n)[:, None]
    nodes = Nodes(cap, alloc, to_units(cap), to_units(alloc),
                  rng.integers(0, 4, n).astype(np.int64), rng.random(n) < 0.8,
                  pick(rng, [0, 1, 2], n).astype(np.int64) if models else np.zeros(0, np.int64),
                  rng.permutation(n).astype(np.int64))
    u, s = SHAPE_POINTS[draw(st.integers(0, len(SHAPE_POINTS) - 1))]
    profile = Profile(pick(rng, [0, 1, 1, 2, 3], 3).astype(np.int64), rng.random(3) < 0.7,
                      np.array(u, np.int64), np.array(s, np.int64), draw(st.integers(0, 2)),
                      draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(1, 6)))
    return pods, nodes, profile, draw(st.integers(0, n - 1)), draw(st.integers(1, n)), \
        draw(st.integers(1, 2**31 - 2))


def _copy(nodes: Nodes) -> Nodes:
    return Nodes(*(a.copy() for a in nodes))


def _cycle(start: int, seed: int, m: int) -> Cycle:
    return Cycle(np.array([start], np.int64), np.array([seed], np.int64),
                 np.full(m, -1, np.int64), np.full(m, -1, np.int64), np.zeros((2, 3), np.int64),
                 np.zeros(2, np.int64))


def _state(nodes: Nodes) -> NodeState:
    return NodeState(nodes.cap, nodes.alloc, nodes.alloc_units, nodes.pods, nodes.ready,
                     nodes.bits)


def _one_call(pods: Pods, fast_nodes: Nodes, slow_nodes: Nodes, profile: Profile,
              fast: Cycle, slow: Cycle, to_find: int, memo: ScoreMemo) -> None:
    """One scheduling point through both, past each pod they stop at for preemption."""
    m = len(pods.order)
    state = _state(fast_nodes)
    call_memo = memo.for_call(pods.req, pods.allow, state)
    while True:  # past each pod the cycles stop at for preemption (none preempts here)
        c_fast = kernel.schedule(pods, fast_nodes, profile, fast, call_memo, to_find)
        c_slow = reference.schedule(pods, slow_nodes, profile, slow, to_find)
        assert c_fast == c_slow and fast.pos.tolist() == slow.pos.tolist()
        if fast.pos[0] == m:
            break
        i = pods.order[fast.pos[0]]
        assert pods.priority[i] > pods.preempt_above
        fast.pos[0] += 1
        slow.pos[0] += 1
    memo.remember(state)
    assert fast.out_req[:c_fast].tolist() == slow.out_req[:c_slow].tolist()
    assert fast.out_node[:c_fast].tolist() == slow.out_node[:c_slow].tolist()
    assert fast.start[0] == slow.start[0] and fast.rng[0] == slow.rng[0]
    assert np.array_equal(fast_nodes.alloc, slow_nodes.alloc)
    assert np.array_equal(fast_nodes.pods, slow_nodes.pods)


def _between_calls(nodes: Nodes, rng: np.random.Generator) -> Nodes:
    """The next scheduling point's snapshot: a few nodes changed, the rest as left."""
    cap, alloc, pods, ready = (nodes.cap.copy(), nodes.alloc.copy(), nodes.pods.copy(),
                               nodes.ready.copy())
    for nd in np.flatnonzero(rng.random(len(cap)) < 0.3):
        what = rng.integers(0, 4)
        if what == 0:  # pods finished
            alloc[nd] = alloc[nd] * rng.choice([0.0, 0.5])
            pods[nd] = max(pods[nd] - 1, 0)
        elif what == 1:
            ready[nd] = not ready[nd]
        elif what == 2:  # a pod slot freed, nothing else
            pods[nd] = max(pods[nd] - 1, 0)
        else:  # the node was replaced by another shape in the same slot
            cap[nd] = np.array(SHAPES)[rng.integers(0, len(SHAPES))]
            alloc[nd] = 0.0
    return Nodes(cap, alloc, to_units(cap), to_units(alloc), pods, ready, nodes.bits,
                 nodes.order)


@settings(max_examples=300, deadline=None)
@given(state(), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_kernel_matches_reference(case: tuple, calls: int, seed_between: int) -> None:
    pods, nodes, profile, start, to_find, seed = case
    m = len(pods.order)
    rng = np.random.default_rng(seed_between)
    memo = ScoreMemo()
    fast, slow = _cycle(start, seed, m), _cycle(start, seed, m)
    for _ in range(calls):
        fast_nodes, slow_nodes = _copy(nodes), _copy(nodes)
        fast = fast._replace(pos=np.zeros(2, np.int64))
        slow = slow._replace(pos=np.zeros(2, np.int64))
        _one_call(pods, fast_nodes, slow_nodes, profile, fast, slow, to_find, memo)
        nodes = _between_calls(fast_nodes, rng)
