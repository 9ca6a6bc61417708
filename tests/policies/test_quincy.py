"""quincy: the golden cases of Quincy's network and costs (Isard et al., SOSP 2009), through
replay where the project's data model can express them, plus bad input and feasibility."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies import make_policy
from pipeline.policies.flow import network as nw
from pipeline.policies.flow.bounds import VARIANTS, job_bounds, waterfill
from pipeline.policies.flow.costs import (
    CostModel,
    Topology,
    machine_transfer_cost,
    task_arcs,
)
from pipeline.replay import replay

GB = 1024.0  # MiB


def _task(tid: str, job: str, submit: float, data: list[str] | None = None,
          gb: float = 10.0, duration: float = 500.0) -> dict:
    return {"task_id": tid, "job_id": job, "submit_s": submit, "duration_s": duration,
            "cpu": 1.0, "mem": 1.0, "inputs": data, "input_mb": gb * GB if data else None}


def _machines(racks: list[str]) -> list[dict]:
    return [{"machine_id": f"m{i}", "cpu": 1.0, "mem": 1.0, "rack": r}
            for i, r in enumerate(racks)]


def _replay(tmp: Path, machines: list[dict], tasks: list[dict], params: dict,
            horizon: float = 100.0) -> dict[str, dict]:
    trace = write_trace(tmp / "trace", machines, tasks, window_end_s=horizon)
    result = replay(trace, "quincy", params, 0, tmp / "run", sched_interval_s=0.0)
    rows = pl.read_parquet(tmp / "run" / "task_runs.parquet").iter_rows(named=True)
    return {"result": result, **{r["task_id"]: r for r in rows}}


@pytest.mark.parametrize("variant", ["QF", "QFP"])
def test_structure_golden(tmp_path: Path, variant: str) -> None:
    """Gleave's figure: 4 machines in 2 racks, K = 1; job 0 has 3 tasks, one running on
    machine 1; job 1 has 2, one preferring machine 3 (and its rack).  F_j = 4 / 2 = 2:
    4 tasks run, one job-0 task waits, job 1's task is on machine 3 and the running task
    stays on machine 1."""
    tasks = [_task("a0", "j0", 0.0, ["m1"], gb=1.0), _task("a1", "j0", 5.0),
             _task("a2", "j0", 5.0), _task("b0", "j1", 5.0, ["m3"], gb=1.0),
             _task("b1", "j1", 5.0)]
    tr = _replay(tmp_path, _machines(["r0", "r0", "r1", "r1"]), tasks,
                 {"variant": variant, "K": 1})
    started = [t for t in ("a0", "a1", "a2", "b0", "b1") if tr[t]["start_s"] is not None]
    assert len(started) == 4
    assert sum(t.startswith("a") for t in started) == 2
    assert tr["b0"]["machine_id"] == "m3" and tr["b0"]["locality"] == "node"
    assert tr["a0"]["machine_id"] == "m1" and tr["a0"]["start_s"] == 0.0
    assert tr["a0"]["preemptions"] == 0
    metrics = tr["result"].metrics
    assert metrics["solver_rounds"] >= 2 and metrics["preemptions"] == 0
    timings = json.loads((tmp_path / "run" / "provenance.json").read_text())["policy_timings"]
    assert timings["solver_ms_p50"] >= 0 and timings["solver_ms_p99"] >= timings["solver_ms_p50"]


def test_cost_arithmetic() -> None:
    """10 GB of input, 4 GB on m and 7 GB in m's rack: 1 * (7 - 4) + 2 * (10 - 7) = 9 on m;
    20 on a machine of another rack with none of it; waiting 30 s at omega 0.5 costs 15,
    so the task prefers m (9 < 15) and waits rather than go remote (15 < 20) until it has
    waited 40 s.  (Partial data per machine is Firmament's general model; the project's
    layouts hold whole replicas, covered below.)"""
    assert machine_transfer_cost(10.0, 4.0, 7.0, 1.0, 2.0) == 9.0
    assert machine_transfer_cost(10.0, 0.0, 0.0, 1.0, 2.0) == 20.0
    model = CostModel()
    assert model.omega * 30.0 == 15.0 and 9.0 < 15.0 < 20.0
    # replicas: a 10 GB input on m0 (rack r0 = m0, m1; r1 = m2, m3)
    topo = Topology.of(np.array([0, 0, 1, 1]))
    a = task_arcs(np.array([[0, -1]]), np.array([10.0 * GB]), topo, model)
    assert list(zip(a.m_node, a.m_cost, strict=True)) == [(0, 0.0)]
    assert list(zip(a.r_rack, a.r_cost, strict=True)) == [(0, 10.0)]  # worst: m1
    assert a.x_cost[0] == 20.0
    assert list(a.cost_on(np.zeros(4, np.int64), np.arange(4), topo, model)) == [
        0.0, 10.0, 20.0, 20.0]


def test_waits_then_goes_remote_after_40_s(tmp_path: Path) -> None:
    """The task's data is on m0, held by another job; its only free machine is in the other
    rack (cost 20): it still waits at 30 s (cost 15) and is placed there once it has waited
    40 s (Q: no fair bound forcing it)."""
    tasks = [_task("block", "other", 0.0, ["m0"], gb=1.0),
             _task("t", "j", 1.0, ["m0"], gb=10.0)]
    tr = _replay(tmp_path, _machines(["r0", "r1"]), tasks, {"variant": "Q", "K": 1})
    assert tr["block"]["machine_id"] == "m0"
    t = tr["t"]
    assert t["machine_id"] == "m1" and t["locality"] == "any"
    assert 40.0 < t["start_s"] - 1.0 < 40.1


def test_rack_local_wins_once_waiting_costs_more(tmp_path: Path) -> None:
    """Same, with a free machine in the data's rack (cost psi * 10 = 10 for whole replicas):
    the task goes there once its wait costs more than 10 (20 s), not to the other rack."""
    tasks = [_task("block", "other", 0.0, ["m0"], gb=1.0),
             _task("t", "j", 1.0, ["m0"], gb=10.0)]
    tr = _replay(tmp_path, _machines(["r0", "r0", "r1"]), tasks, {"variant": "Q", "K": 1})
    t = tr["t"]
    assert t["machine_id"] == "m1" and t["locality"] == "rack"
    assert 20.0 < t["start_s"] - 1.0 < 20.1


@pytest.mark.parametrize("variant", ["QF", "QFP"])
def test_fair_bound(tmp_path: Path, variant: str) -> None:
    """J = 4 jobs with 5 pending tasks each on M * K = 4 * 2 slots, E_j = F_j = 2: exactly 2
    tasks per job run, although each costs 2 * 100 GB = 200 anywhere but m0 and waiting
    costs 0 at first."""
    machines = [{"machine_id": f"m{i}", "cpu": 2.0, "mem": 2.0, "rack": f"r{i}"}
                for i in range(4)]
    tasks = [_task(f"{j}{k}", f"j{j}", 0.0, ["m0"], gb=100.0) for j in range(4)
             for k in range(5)]
    tr = _replay(tmp_path, machines, tasks, {"variant": variant, "K": 2}, horizon=5.0)
    running = pl.DataFrame([r for k, r in tr.items() if k != "result"]).filter(
        pl.col("start_s").is_not_null()).group_by("job_id").len()
    assert sorted(running["len"].to_list()) == [2, 2, 2, 2]


def test_waterfill() -> None:
    assert list(waterfill(8, np.array([5, 5, 5, 5]))) == [2, 2, 2, 2]
    assert list(waterfill(8, np.array([1, 5, 5]))) == [1, 4, 3]  # remainder to the first
    assert list(waterfill(3, np.array([0, 1, 1]))) == [0, 1, 1]


@pytest.mark.parametrize(("params", "field"), [
    ({"omega": -0.5}, "omega"), ({"psi": -1}, "psi"), ({"xi": -2.0}, "xi"), ({"K": 0}, "K"),
    ({"slot_cpu": 0}, "slot_cpu"), ({"variant": "G"}, "variant")])
def test_bad_parameters(params: dict, field: str) -> None:
    with pytest.raises(UsageError) as err:
        make_policy("quincy", params)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_trace_without_inputs_warns_once_and_runs(tmp_path: Path) -> None:
    tasks = [{"task_id": f"t{i}", "job_id": f"j{i % 2}", "submit_s": float(i),
              "duration_s": 3.0, "cpu": 1.0, "mem": 1.0} for i in range(6)]
    trace = write_trace(tmp_path / "trace", _machines(["r0", "r1"]), tasks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = replay(trace, "quincy", {}, 0, tmp_path / "run", drain=True)
    assert len([w for w in caught if "no input data" in str(w.message)]) == 1
    assert result.metrics["tasks_finished"] == 6


@st.composite
def small_network(draw: st.DrawFn) -> tuple:
    """A random cluster (machines, racks, capacities, some down) and tasks with random
    data arcs, jobs, running tasks and waits."""
    n_machines = draw(st.integers(1, 6))
    rack = np.array([draw(st.sampled_from([-1, 0, 1, 2])) for _ in range(n_machines)])
    k = draw(st.integers(1, 3))
    cap = np.array([draw(st.integers(0, k)) for _ in range(n_machines)], np.int64)
    n_jobs = draw(st.integers(1, 4))
    pending = np.array([draw(st.integers(0, 6)) for _ in range(n_jobs)], np.int64)
    running = np.array([draw(st.integers(0, 3)) for _ in range(n_jobs)], np.int64)
    variant = draw(st.sampled_from(VARIANTS))
    costs = st.integers(-500, 5000)
    arcs = []
    for job in range(n_jobs):
        arcs += [(job, draw(st.lists(st.tuples(st.integers(0, n_machines - 1), costs),
                                     max_size=3)), draw(costs), draw(costs))
                 for _ in range(pending[job] + (running[job] if variant == "QFP" else 0))]
    return rack, k, cap, pending, running, variant, arcs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=small_network())
def test_network_always_feasible(case: tuple) -> None:
    """Whatever the cluster, tasks and costs, the bounds leave a feasible network, and the
    assignment read from the flow respects machine capacities and job bounds."""
    rack, k, cap, pending, running, variant, arcs = case
    preemptive = variant == "QFP"
    slots = k * int(np.sum(cap > 0))
    graph_cap = cap if preemptive else np.maximum(cap - 1, 0)
    bounds = job_bounds(variant, pending, running, slots, int(graph_cap.sum()), preemptive)
    task, kind, to, cost = [], [], [], []
    for i, (job, prefs, wait, alpha) in enumerate(arcs):
        task += [i, i]
        kind += [nw.TO_U, nw.TO_X]
        to += [job, 0]
        cost += [abs(wait), alpha]
        for node, c in prefs:
            task.append(i)
            kind.append(nw.TO_MACHINE)
            to.append(node)
            cost.append(c)
    arc_set = nw.TaskArcSet(*(np.array(x, np.int64) for x in (task, kind, to, cost)))
    net = nw.build(arc_set, len(arcs), bounds, graph_cap, rack)
    dest, _ = nw.assign(net, nw.solve(net))
    assert np.all(np.bincount(dest[dest >= 0], minlength=len(cap)) <= graph_cap)
    jobs = np.array([a[0] for a in arcs], np.int64)
    placed = np.bincount(jobs[dest >= 0], minlength=len(pending))
    assert np.all(placed <= bounds.upper) and np.all(placed >= bounds.lower)


def _move_case(tmp: Path, variant: str) -> dict[str, dict]:
    """hold (another job, 1 GB on m1) runs on m1 from 0 to 9 s (8 s reading, 1 s work); t
    (3 GB on m1: 24 s reading it locally, 20 s of work) arrives at 5 s: its job's fair
    share is one machine, and staying costs hold 0 - 5 s run while moving it to m0 would
    cost 2, so t starts on m0 (reading across the core costs 2 x 3 = 6)."""
    tasks = [_task("hold", "other", 0.0, ["m1"], gb=1.0, duration=9.0),
             _task("t", "j", 5.0, ["m1"], gb=3.0, duration=44.0)]
    return _replay(tmp, _machines(["r0", "r1"]), tasks, {"variant": variant, "K": 1})


def test_qfp_moves_a_task_back_when_its_machine_frees(tmp_path: Path) -> None:
    """Rounds run whenever the network changes (Isard et al., SOSP 2009, section 2; one
    solve per change in Firmament): when m1 frees at 9 s nothing waits, yet the network
    changed: t staying on m0 costs 6 - 4 s run, moving to m1 costs 0, so QFP preempts t and
    places it on m1 at the next round (10 s; it then reads its 3 GB locally in 24 s), not
    whenever something else arrives (here: never, so t would never run again)."""
    tr = _move_case(tmp_path, "QFP")
    t = tr["t"]
    assert tr["hold"]["machine_id"] == "m1" and tr["hold"]["end_s"] == 9.0
    assert t["first_start_s"] == 5.0 and t["preemptions"] == 1
    assert t["start_s"] == 10.0 and t["machine_id"] == "m1" and t["locality"] == "node"
    assert t["outcome"] == "finished" and t["end_s"] == pytest.approx(54.0)


def test_qf_keeps_a_started_task_where_it_runs(tmp_path: Path) -> None:
    """QF keeps running tasks out of the network: t stays on m0 (48 s reading across the
    core, 20 s of work)."""
    tr = _move_case(tmp_path, "QF")
    assert tr["t"]["machine_id"] == "m0" and tr["t"]["preemptions"] == 0
    assert tr["t"]["end_s"] == pytest.approx(73.0)
