"""The compiled first-fit packing (:func:`pipeline.sim.binpack.first_fit`) against its
plain-Python reference (:mod:`pipeline.sim.binpack_reference`): on random requests with
many ties and requests larger than a node, with and without a node limit, both must open the
same number of nodes and place the same requests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim import binpack_reference
from pipeline.sim.autoscaler import bins_needed
from pipeline.sim.binpack import first_fit

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

AMOUNTS = [0.0, 0.5, 1.0, 1.5, 2.0, 4.0, 5.0]  # few values: exact fits and ties are common


@settings(max_examples=200, deadline=None)
@given(req=st.lists(st.tuples(*[st.sampled_from(AMOUNTS)] * 3), max_size=40),
       limit=st.integers(0, 12), stop=st.booleans())
def test_compiled_packing_matches_the_reference(req: list[tuple[float, float, float]],
                                                limit: int, stop: bool) -> None:
    arr = np.array(req, dtype=np.float64).reshape(-1, 3)
    cap = np.array([4.0, 4.0, 1.0])
    placed = np.zeros(len(arr), dtype=np.bool_)
    used = first_fit(arr, cap, limit, placed, stop)
    want_used, want_placed = binpack_reference.first_fit(arr, cap, limit, stop)
    assert (used, placed.tolist()) == (want_used, want_placed)


def test_worked_packing() -> None:
    # 3, 2, 1 and 2 vCPU onto 4-vCPU nodes: {3, 1}, {2, 2}; the 5 fits no node
    req = np.array([[3.0, 1, 0], [2, 1, 0], [5, 1, 0], [1, 1, 0], [2, 1, 0]])
    cap = np.array([4.0, 8.0, 0.0])
    placed = np.zeros(5, dtype=np.bool_)
    assert first_fit(req, cap, 10, placed, False) == 2
    assert placed.tolist() == [True, True, False, True, True]
    # one node allowed: the 1 still joins the 3, as Cluster Autoscaler's estimator goes on
    placed[:] = False
    assert first_fit(req, cap, 1, placed, False) == 1
    assert placed.tolist() == [True, False, False, True, False]
    assert bins_needed(req[[0, 1, 3, 4]], cap, 1) == 1
    assert bins_needed(req[[0, 1, 3, 4]], cap, 5) == 2
