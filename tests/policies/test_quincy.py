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
