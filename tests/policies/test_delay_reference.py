"""The compiled delay-scheduling kernel against its plain-Python reference
(:mod:`pipeline.policies.locality.delay_reference`): on small random clusters, pending
tasks, job states and heartbeat sequences, in both modes (Algorithm 2 skip counts and Hadoop
1's two-level waits), both must make the same placements and leave the same node room and
job state (running, skip counts, levels, waits, skipped marks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.locality.delay_reference import delay_schedule_reference
from pipeline.policies.locality.delay_state import Jobs, Offers, Pending, Rule
from pipeline.policies.locality.kernel import delay_schedule

pytestmark = pytest.mark.nojit

WIDTH = 2  # data holders per task
N_CODES = 4  # job codes


@st.composite
def calls(draw: Any) -> dict[str, Any]:
    """One call's inputs, as plain arrays (times and sizes whole numbers, so sums of waits
    are exact whatever order they are added in)."""
    n_nodes = draw(st.integers(1, 4))
    n_tasks = draw(st.integers(0, 8))
    n_hb = draw(st.integers(0, 10))
    ints = st.integers

    def arr(elem: Any, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape))
        return np.array(draw(st.lists(elem, min_size=size, max_size=size)),
                        dtype=float).reshape(shape)

    inputs = np.full((n_tasks, WIDTH), -1, np.int64)
    for i in range(n_tasks):
        holders = draw(st.lists(ints(0, n_nodes - 1), max_size=WIDTH, unique=True))
        inputs[i, :len(holders)] = holders
    gpu = draw(st.booleans())
    return {
        "rack": arr(ints(-1, 1), (n_nodes,)).astype(np.int64),
        "free": arr(ints(0, 3), (n_nodes, 3)),
        "req": np.column_stack([arr(ints(0, 2), (n_tasks, 2)), np.zeros(n_tasks)]),
        "ready": arr(ints(0, 6), (n_tasks,)),
        "job": arr(ints(0, N_CODES - 1), (n_tasks,)).astype(np.int64),
        "inputs": inputs,
        "hb_node": arr(ints(0, n_nodes - 1), (n_hb,)).astype(np.int64),
        "hb_time": np.sort(arr(ints(0, 8), (n_hb,))),
        "allow": arr(ints(0, 3), (n_tasks,)).astype(np.int64) if gpu else np.zeros(0, np.int64),
        "bits": (1 << arr(ints(0, 1), (n_nodes,)).astype(np.int64)) if gpu
        else np.zeros(0, np.int64),
        "shapes": draw(st.booleans()),
        "running": arr(ints(0, 2), (N_CODES,)).astype(np.int64),
        "skip": arr(ints(0, 3), (N_CODES,)).astype(np.int64),
        "level": arr(ints(0, 2), (N_CODES,)).astype(np.int64),
        "wait": arr(ints(0, 5), (N_CODES,)),
        "skipped": np.array(draw(st.lists(st.booleans(), min_size=N_CODES, max_size=N_CODES)),
                            dtype=bool),
        "rule": Rule(draw(st.sampled_from([0, 1])), draw(ints(0, 3)), float(draw(ints(0, 4))),
                     float(draw(ints(0, 4)))),
        "last_hb": float(draw(ints(-3, 0))),
    }


def build(c: dict[str, Any]) -> tuple[Offers, Pending, Jobs]:
    """Fresh kernel structures (copies) for one run, as ``DelayScheduling`` builds them."""
    req = c["req"].copy()
    if c["shapes"] and len(req):
        shapes, shape_of = np.unique(req, axis=0, return_inverse=True)
    else:
        shapes, shape_of = np.full((1, 3), np.inf), np.full(len(req), -1)
    jobs = Jobs(c["running"].copy(), c["skip"].copy(), c["level"].copy(), c["wait"].copy(),
                c["skipped"].copy(), np.full(N_CODES, -1, np.int64))
    codes = np.unique(c["job"])
    order = codes[np.lexsort((codes, jobs.running[codes]))].astype(np.int64)
    offers = Offers(c["hb_node"].copy(), c["hb_time"].copy(), c["free"].copy(),
                    c["rack"].copy())
    pending = Pending(c["ready"].copy(), req, c["job"].copy(), c["inputs"].copy(),
                      c["inputs"][:, 0] >= 0, order, np.ascontiguousarray(shapes, np.float64),
                      np.asarray(shape_of, np.int64).ravel(), c["allow"].copy(),
                      c["bits"].copy())
    return offers, pending, jobs


def run(fn: Any, c: dict[str, Any]) -> dict[str, Any]:
    """Run ``fn`` (kernel or reference) on fresh copies; what it decided and left."""
    offers, pending, jobs = build(c)
    n_t = len(pending.ready)
    out_req, out_node = np.full(n_t, -9, np.int64), np.full(n_t, -9, np.int64)
    n, last_hb = fn(offers, pending, jobs, c["rule"], c["last_hb"], out_req, out_node)
    # the waits and skipped marks are the two-level rule's (mode 1) state; with skip counts
    # (mode 0) nothing reads them (the kernel may mark jobs after skipped heartbeats there)
    fields = Jobs._fields if c["rule"].mode == 1 else ("running", "skip", "level", "slot")
    return {"placed": list(zip(out_req[:n].tolist(), out_node[:n].tolist(), strict=True)),
            "last_hb": float(last_hb), "free": offers.free.tolist(),
            **{name: getattr(jobs, name).tolist() for name in fields}}


@settings(max_examples=300, deadline=None)
@given(calls())
def test_kernel_decides_as_the_reference(c: dict[str, Any]) -> None:
    """Same placements (in order), same room left, same job state."""
    assert run(delay_schedule, c) == run(delay_schedule_reference, c)


def test_a_node_local_task_launches_before_an_earlier_job_waits() -> None:
    """A tiny golden case: job 0 (fewer running) has data elsewhere and is skipped (D = 1);
    job 1 has data on the node and launches; the node, offered again, goes to job 0
    off-node, its skip count now at D."""
    c = {"rack": np.array([-1, -1]), "free": np.full((2, 3), 4.0),
         "req": np.array([[1.0, 1, 0], [1, 1, 0]]), "ready": np.zeros(2),
         "job": np.array([0, 1]), "inputs": np.array([[1, -1], [0, -1]]),
         "hb_node": np.array([0, 0]), "hb_time": np.array([1.0, 2.0]),
         "allow": np.zeros(0, np.int64), "bits": np.zeros(0, np.int64), "shapes": False,
         "running": np.zeros(N_CODES, np.int64), "skip": np.zeros(N_CODES, np.int64),
         "level": np.zeros(N_CODES, np.int64), "wait": np.zeros(N_CODES),
         "skipped": np.zeros(N_CODES, bool), "rule": Rule(0, 1, 0.0, 0.0), "last_hb": 0.0}
    got = run(delay_schedule, c)
    assert got["placed"] == [(1, 0), (0, 0)]
    assert got["skip"][0] == 1
    assert got == run(delay_schedule_reference, c)


def test_rack_local_is_allowed_once_the_wait_reaches_w1_exactly() -> None:
    """Hadoop 1.x ``getAllowedLocalityLevel``: a job whose last launch was node-local may
    launch rack-local once it has waited ``W1`` (``>=``, not ``>``): here it waited exactly
    W1 = 2 s, its task's data is on the other node of the same rack, and it launches."""
    c = {"rack": np.array([0, 0]), "free": np.full((2, 3), 4.0),
         "req": np.array([[1.0, 1, 0]]), "ready": np.zeros(1),
         "job": np.array([0]), "inputs": np.array([[1, -1]]),
         "hb_node": np.array([0]), "hb_time": np.array([1.0]),
         "allow": np.zeros(0, np.int64), "bits": np.zeros(0, np.int64), "shapes": False,
         "running": np.zeros(N_CODES, np.int64), "skip": np.zeros(N_CODES, np.int64),
         "level": np.zeros(N_CODES, np.int64), "wait": np.array([2.0] + [0.0] * (N_CODES - 1)),
         "skipped": np.zeros(N_CODES, bool), "rule": Rule(1, 0, 2.0, 5.0), "last_hb": 1.0}
    got = run(delay_schedule, c)
    assert got["placed"] == [(0, 0)]
    assert got["level"][0] == 1  # RACK: the launched task's locality
    assert got["wait"][0] == 0.0
    assert got == run(delay_schedule_reference, c)


def test_a_job_skipped_in_the_previous_call_waits_before_joining_a_skipped_run() -> None:
    """Found by the differential test: job 0 was skipped at the previous call's last
    heartbeat (t = -1), so at this call's first heartbeat with room (t = 0) it has waited
    1 s = W1 + W2 and may launch anywhere.  Its task with data on node 0 is ready only at
    t = 1, after a run of heartbeats at which no job could launch; at t = 1 node 1 (same
    rack) takes it rack-local.  The kernel once computed the job's deadline before adding
    that first second and skipped it."""
    c = {"rack": np.array([0, 0, 0]), "free": np.zeros((3, 3)), "req": np.zeros((2, 3)),
         "ready": np.array([1.0, 0.0]), "job": np.array([0, 0]),
         "inputs": np.array([[0, -1], [-1, -1]]), "hb_node": np.array([0, 0, 0, 0, 0, 1]),
         "hb_time": np.array([0.0, 0, 0, 0, 0, 1]), "allow": np.zeros(2, np.int64),
         "bits": np.ones(3, np.int64), "shapes": False,
         "running": np.zeros(N_CODES, np.int64), "skip": np.zeros(N_CODES, np.int64),
         "level": np.zeros(N_CODES, np.int64), "wait": np.zeros(N_CODES),
         "skipped": np.array([True] + [False] * (N_CODES - 1)), "rule": Rule(1, 0, 1.0, 0.0),
         "last_hb": -1.0}
    got = run(delay_schedule, c)
    assert got["placed"] == [(1, 0), (0, 1)]
    assert got["level"][0] == 1  # RACK
    assert got == run(delay_schedule_reference, c)
