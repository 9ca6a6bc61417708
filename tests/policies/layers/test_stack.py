"""Layers stack: opportunistic containers and speculation on one base policy, in either
order, through ``tracereplay replay`` (:mod:`pipeline.policies.layers.stack`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.bench.workload import write_trace
from pipeline.cli import app
from pipeline.policies import make_policy
from pipeline.policies.layers import stack as layer_stack
from pipeline.policies.layers.opportunistic import Opportunistic
from pipeline.policies.layers.speculation import Speculation
from pipeline.policies.layers.stack import ORDER, stack
from pipeline.sim.interface import ClusterInfo
from pipeline.sim.needs import Needs, NMOptions

CLUSTER = ClusterInfo("fixed", 4, None, None, 1, ("u",), ("default",))
BOTH = {"opp_by": "priority", "opp_max_priority": 0, "spec": "hadoop", "spec_lag_s": 30}


def test_make_policy_stacks_speculation_over_opportunistic() -> None:
    policy = make_policy("yarn-uniform", BOTH)
    assert isinstance(policy, Speculation) and isinstance(policy.inner, Opportunistic)
    needs = policy.setup(CLUSTER, np.random.default_rng(0))
    assert needs.running and needs.job_stats and isinstance(needs.node_managers, NMOptions)
    assert needs.heartbeat_s is None
    assert {"opp_by", "spec", "spec_lag_s"} <= set(policy.get_params())


def test_a_layer_adds_to_the_needs_of_what_it_wraps() -> None:
    policy = make_policy("capacity-scheduler", {"spec": "late", "node_locality_delay": 40})
    needs = policy.setup(CLUSTER, np.random.default_rng(0))
    inner = policy.inner.setup(CLUSTER, np.random.default_rng(0))
    assert inner.heartbeat_s == 1.0  # delay scheduling on: the scheduler's heartbeats
    assert needs == Needs(heartbeat_s=1.0, running=True, job_stats=True)


def test_stack_refuses_unknown_layers_and_orders() -> None:
    base = make_policy("yarn-uniform")
    with pytest.raises(ValueError, match="no layer 'gang'"):
        stack(base, {"gang": {}})
    with pytest.raises(ValueError, match="must list each layer"):
        stack(base, {"speculation": {}}, order=("opportunistic",))


def _trace(root: Path) -> Path:
    """Four machines with room for 4 one-cpu containers, m0 at quarter speed.  Job j0: 8
    guaranteed maps of 200 s (priority 1), 2 per machine; job j1, a second later: 8
    opportunistic ones of 1,000 s (priority 0), which fill every machine's other 2 slots."""
    machines = [{"machine_id": f"m{i}", "cpu": 4.0, "mem": 4.0, "rack": "r0",
                 "speed": 0.25 if i == 0 else 1.0} for i in range(4)]
    tasks = [{"task_id": f"g{i}", "job_id": "j0", "submit_s": 0.0, "duration_s": 200.0,
              "cpu": 1.0, "mem": 1.0, "task_kind": "map", "priority": 1} for i in range(8)]
    tasks += [{"task_id": f"o{i}", "job_id": "j1", "submit_s": 1.0, "duration_s": 1000.0,
               "cpu": 1.0, "mem": 1.0, "task_kind": "map", "priority": 0} for i in range(8)]
    return write_trace(root / "trace", machines, tasks, window_end_s=5000.0)


@pytest.mark.parametrize("order", [ORDER, ORDER[::-1]], ids=["spec-outside", "opp-outside"])
def test_a_copy_reclaims_an_opportunistic_container_for_its_room(
        tmp_path: Path, order: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """m0's two maps run at a quarter of the speed (800 s).  At t=73 Hadoop's rule copies
    both onto fast machines, which are full (2 guaranteed + 2 opportunistic): a copy is a
    guaranteed container, so each one's NodeManager kills its most recently started
    opportunistic container (``startGuaranteedContainers``), which lost 72 s of work and
    goes back to the RM.  The copies finish at 273 s and win; nothing is copied of the
    opportunistic job."""
    monkeypatch.setattr(layer_stack, "ORDER", order)
    args = ["replay", str(_trace(tmp_path)), "--policy", "yarn-uniform", "--drain",
            "--out", str(tmp_path / "run"), "--no-progress"]
    for key, value in BOTH.items():
        args += ["--set", f"{key}={value}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    runs = {r["task_id"]: r for r in
            pl.read_parquet(tmp_path / "run" / "task_runs.parquet").to_dicts()}
    assert {r["outcome"] for r in runs.values()} == {"finished"}
    slow = [t for t, r in runs.items() if t.startswith("g") and r["machine_id"] == "m0"]
    assert len(slow) == 2
    for t in slow:
        r = runs[t]
        assert r["spec_copies"] == 1 and r["spec_won"] and r["spec_start_s"] == 73.0
        assert r["spec_machine_id"] != "m0" and r["end_s"] == 273.0
    assert sum(r["spec_copies"] for r in runs.values()) == 2
    killed = [r for r in runs.values() if r["opp_kills"] > 0]
    assert len(killed) == 2 and all(r["opportunistic"] for r in killed)
    assert all(r["wasted_s"] == 72.0 for r in killed)  # started at 1 s, killed at 73 s
    assert not any(r["spec_copies"] for r in runs.values() if r["opportunistic"])
