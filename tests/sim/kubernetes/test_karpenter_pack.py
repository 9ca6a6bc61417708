"""Karpenter's compiled scheduling simulation against its plain-Python reference, and a
worked case of the instance-type options narrowing as pods join a claim."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.sim.kubernetes import karpenter_pack_reference
from pipeline.sim.kubernetes.karpenter_pack import Offer, karpenter_order, pack

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

AMOUNTS = [0.0, 0.5, 1.0, 2.0, 3.0]
CAP = np.array([[2.0, 8.0, 0.0], [4.0, 4.0, 0.0], [4.0, 16.0, 0.0], [8.0, 32.0, 1.0]])
PRICE = np.array([0.1, 0.15, 0.2, 0.5])


@settings(max_examples=300, deadline=None)
@given(req=st.lists(st.tuples(*[st.sampled_from(AMOUNTS)] * 2, st.sampled_from([0.0, 1.0])),
                    max_size=25),
       free=st.lists(st.tuples(*[st.sampled_from(AMOUNTS)] * 3), max_size=4),
       allowed=st.lists(st.booleans(), min_size=4, max_size=4),
       room=st.sampled_from([np.inf, 16.0, 6.0]), max_new=st.sampled_from([-1, 0, 1, 3]))
def test_compiled_pack_matches_the_reference(req: list, free: list, allowed: list,
                                             room: float, max_new: int) -> None:
    r = np.array(req, dtype=np.float64).reshape(-1, 3)
    r = r[karpenter_order(r)]
    f = np.array(free, dtype=np.float64).reshape(-1, 3)
    offer = Offer(CAP, PRICE, np.array(allowed), np.array([room, room * 4, np.inf]), max_new)
    got = pack(r, f, offer)
    want = karpenter_pack_reference.pack(r, f, offer)
    assert got.where.tolist() == want.where.tolist()
    assert got.claim_type.tolist() == want.claim_type.tolist()


def test_options_narrow_and_the_cheapest_launches() -> None:
    req = np.array([[3.0, 1.0, 0.0], [2.0, 1.0, 0.0], [1.0, 10.0, 0.0]])
    # every type allowed: a new claim may be any type, so all three join the first claim
    # (6 cpu, 12 GiB), whose only option left is the 8-cpu type
    out = pack(req, np.zeros((0, 3)), Offer(CAP, PRICE, np.ones(4, bool),
                                            np.full(3, np.inf), -1))
    assert out.where.tolist() == [0, 0, 0] and out.claim_type.tolist() == [3]
    # without it: the 3-cpu pod opens a claim of the 4-cpu types; the 2-cpu pod cannot
    # join (5 cpu) and opens a second (2-cpu type included); the 10-GiB pod joins the
    # first, narrowing it to 4 cpu / 16 GiB (0.2); the second launches 2 cpu / 8 GiB (0.1)
    allowed = np.array([True, True, True, False])
    out = pack(req, np.zeros((0, 3)), Offer(CAP, PRICE, allowed, np.full(3, np.inf), -1))
    assert out.where.tolist() == [0, 1, 0] and out.claim_type.tolist() == [2, 0]
    # an existing node with 3 cpu free takes the first pod; one claim at most: the rest
    # share it or stay unplaced
    out = pack(req, np.array([[3.0, 4.0, 0.0]]), Offer(CAP, PRICE, allowed,
                                                       np.full(3, np.inf), 1))
    assert out.where.tolist() == [0, 1, 1] and out.claim_type.tolist() == [2]
