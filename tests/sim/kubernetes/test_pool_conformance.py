"""The shared conformance invariants on the Kubernetes cluster models: kube-scheduler on
Cluster Autoscaler and on Karpenter, over the conformance suite's random traces (every task
accounted for, no node over its allocatable, every run inside one of its node's provisioned
intervals, node-hours at least the busy time, and the same run twice gives the same bytes).

The traces are stretched (submissions x10, durations x40, no horizon) and scale-down comes
after 30 s unneeded, so both autoscalers act: on 15 drawn cases, 5 Cluster Autoscaler and 12
Karpenter runs evicted pods (placed again elsewhere), and 7 to 13 deleted nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

from pipeline.replay import replay
from pipeline.replay.stage import RunResult
from tests.policies.test_conformance import _write, assert_same_tables, check_run, small_trace
from tests.sim.kubernetes.test_karpenter_replay import NODEPOOL

CATALOG = ("instance_type,cpu,memory_gib,price_per_hour\n"
           "n4,4,16,0.2\nn8,8,32,0.38\nn16,16,64,0.8\n")
CLUSTERS = [
    ("cluster-autoscaler", {"autoscaler_flags": "--nodes=0:6:n4 --nodes=0:3:n16 "
                            "--scale-down-unneeded-time=30s --scale-down-delay-after-add=0s "
                            "--expander=least-waste"}),
    ("cluster-autoscaler", {"autoscaler_flags": "--nodes=0:4:n8 --scale-down-unneeded-time=30s",
                            "safe_to_evict": False}),
    ("karpenter", {"nodepool": "WhenEmptyOrUnderutilized.yaml"}),
    ("karpenter", {"nodepool": "Balanced.yaml"}),
]


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pool")
    (root / "catalog.csv").write_text(CATALOG)
    for policy in ("WhenEmptyOrUnderutilized", "Balanced"):
        # consolidating at once, under the default budget (10% of the nodes)
        (root / f"{policy}.yaml").write_text(NODEPOOL.format(policy=policy, budget="10%"))
    return root


@pytest.mark.parametrize("scoring", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize(("kind", "options"), CLUSTERS,
                         ids=["ca-two-groups", "ca-no-eviction", "karpenter", "balanced"])
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=small_trace())
def test_pool_replay_invariants(kind: str, options: dict, scoring: str, case: dict,
                                configs: Path, tmp_path_factory: pytest.TempPathFactory
                                ) -> None:
    root = tmp_path_factory.mktemp("case")
    case = _stretched(case)
    trace = _write(case, root / "trace")
    opts = {**options, "catalog": str(configs / "catalog.csv"), "vcpu_per_unit": 1.0,
            "gib_per_unit": 1.0}
    if "nodepool" in opts:
        opts["nodepool"] = str(configs / opts["nodepool"])

    def run(out: Path) -> RunResult:
        return replay(trace, "kube-scheduler", {"scoring": scoring}, 7, out, cluster=kind,
                      cluster_options=opts, sched_interval_s=case["interval"],
                      horizon_s=case["horizon"])

    result = run(root / "a")
    check_run(case, root / "a", result.run["summary"]["end_s"])
    run(root / "b")
    assert_same_tables(root / "a", root / "b")
    metrics = pl.read_parquet(root / "a" / "metrics.parquet")
    assert not np.any(metrics["value"].drop_nulls().is_nan().to_numpy())
    if options.get("safe_to_evict") is False:  # only empty nodes go
        assert result.metrics["evictions_scale_down"] == 0


def _stretched(case: dict) -> dict:
    """``case`` on a time scale where nodes outlive their boot and go idle while others
    still run (the conformance traces last seconds; a node boots in 120 s)."""
    tasks = [{**t, "submit_s": t["submit_s"] * 10, "duration_s": t["duration_s"] * 40,
              "recorded_start_s": None, "recorded_machine_id": None} for t in case["tasks"]]
    return {**case, "tasks": tasks, "horizon": None}
