"""Karpenter through ``tracereplay replay``: provisioning the cheapest types that fit, and
consolidation replacing two underused nodes with one cheaper node (the case of
``designs/consolidation.md``), as each consolidation policy allows."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.replay import replay

CATALOG = "instance_type,cpu,memory_gib,price_per_hour\nn4,4,16,0.2\nn2,2,8,0.11\n"
NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values: [on-demand]
  disruption:
    consolidationPolicy: {policy}
    consolidateAfter: 0s
    budgets:
    - nodes: "{budget}"
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("karpenter")
    (root / "catalog.csv").write_text(CATALOG)
    for policy in ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"):
        (root / f"{policy}.yaml").write_text(NODEPOOL.format(policy=policy, budget="2"))
        (root / f"{policy}-10.yaml").write_text(NODEPOOL.format(policy=policy, budget="10%"))
    # two 3-cpu pods for 1,000 s and two 1-cpu pods for 5,000 s, all at 0 s
    tasks = [{"task_id": t, "job_id": "j", "submit_s": 0.0, "duration_s": d, "cpu": c,
              "mem": 1.0}
             for t, d, c in (("a", 1000.0, 3.0), ("b", 1000.0, 3.0), ("c", 5000.0, 1.0),
                             ("d", 5000.0, 1.0))]
    return write_trace(root / "trace", [], tasks, window_end_s=8000.0)


def _replay(trace: Path, out: Path, policy: str) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    result = replay(trace, "kube-scheduler", {}, 0, out, cluster="karpenter",
                    cluster_options={"catalog": str(trace.parent / "catalog.csv"),
                                     "nodepool": str(trace.parent / f"{policy}.yaml"),
                                     "vcpu_per_unit": 1.0, "gib_per_unit": 1.0})
    nodes = pl.read_parquet(out / "node_intervals.parquet").sort("up_s", "machine_id")
    runs = pl.read_parquet(out / "task_runs.parquet").sort("task_id")
    return nodes, runs, result.metrics


@pytest.mark.parametrize("policy", ["WhenEmptyOrUnderutilized", "Balanced"])
def test_two_underused_nodes_are_replaced_by_one_cheaper(trace: Path, tmp_path: Path,
                                                         policy: str) -> None:
    nodes, runs, metrics = _replay(trace, tmp_path / "r", policy)
    # the 0 s loop packs a+c and b+d onto two n4 (n2 holds no 3-cpu pod); Ready at 120 s
    assert nodes["instance_type"].to_list() == ["n4", "n4", "n2"]
    assert nodes["up_s"].to_list()[:2] == [0.0, 0.0]
    # a and b end at 1,120 s: that loop finds both nodes at 1 of 4 cpu; multi-node
    # consolidation moves c and d to one n2 ($0.11 < $0.40); validated 15 s later (the
    # 1,140 s loop), the n2 is launched, Ready at 1,260 s, when the two n4 go
    assert nodes["up_s"][2] == 1140.0 and nodes["down_s"].to_list()[:2] == [1260.0, 1260.0]
    cd = runs.filter(pl.col("task_id").is_in(["c", "d"]))
    assert cd["machine_id"].to_list() == [nodes["machine_id"][2]] * 2
    assert cd["start_s"].to_list() == [1260.0, 1260.0]  # restarted: 1,140 s each lost
    assert metrics["evictions_consolidation"] == 2 and metrics["consolidation_replaces"] == 1
    assert metrics["wasted_task_s"] == pytest.approx(2 * 1140.0)


@pytest.mark.parametrize(("policy", "replaced"), [("WhenEmptyOrUnderutilized", True),
                                                 ("Balanced", False)])
def test_the_default_budget_disrupts_one_node_of_two(trace: Path, tmp_path: Path, policy: str,
                                                     replaced: bool) -> None:
    """10% of two nodes is one (rounded up): no multi-node move.  Single-node deletes the
    first n4 at 1,140 s (found at 1,120 s: c fits the other); d and c then share the other,
    which only WhenEmptyOrUnderutilized replaces by an n2: Balanced scores it (0.09 / 0.20
    saved) / (3 / 3 disrupted) = 0.45 < 1/2."""
    nodes, _, metrics = _replay(trace, tmp_path / "r", f"{policy}-10")
    assert nodes["down_s"][0] == 1140.0
    assert nodes["instance_type"].to_list() == ["n4", "n4"] + (["n2"] if replaced else [])
    # the second delete: the last node once c and d end (emptiness)
    assert metrics["consolidation_deletes"] == 2
    assert metrics["consolidation_replaces"] == (1 if replaced else 0)


def test_when_empty_keeps_underused_nodes(trace: Path, tmp_path: Path) -> None:
    nodes, _, metrics = _replay(trace, tmp_path / "r", "WhenEmpty")
    assert nodes["instance_type"].to_list() == ["n4", "n4"]
    # c and d end at 5,120 s; that loop finds both nodes empty; validated 15 s later, the
    # 5,140 s loop deletes them
    assert nodes["down_s"].to_list() == [5140.0, 5140.0]
    assert metrics["evictions_consolidation"] == 0 and metrics["wasted_task_s"] == 0


def test_nodepool_errors_are_one_line(trace: Path, tmp_path: Path) -> None:
    bad = trace.parent / "bad.yaml"
    bad.write_text(NODEPOOL.format(policy="WhenIdle", budget="2"))
    with pytest.raises(UsageError, match="consolidationPolicy"):
        replay(trace, "kube-scheduler", {}, 0, tmp_path / "r", cluster="karpenter",
               cluster_options={"catalog": str(trace.parent / "catalog.csv"),
                                "nodepool": str(bad), "vcpu_per_unit": 1.0,
                                "gib_per_unit": 1.0})


def test_a_bad_duration_and_a_foreign_option_are_one_line(trace: Path, tmp_path: Path) -> None:
    bad = trace.parent / "after.yaml"
    bad.write_text(NODEPOOL.format(policy="WhenEmpty", budget="2").replace(
        "consolidateAfter: 0s", "consolidateAfter: 5"))
    options = {"catalog": str(trace.parent / "catalog.csv"), "vcpu_per_unit": 1.0,
               "gib_per_unit": 1.0}
    with pytest.raises(UsageError, match=r"not a duration or Never") as err:
        replay(trace, "kube-scheduler", {}, 0, tmp_path / "a", cluster="karpenter",
               cluster_options={**options, "nodepool": str(bad)})
    assert err.value.field == "spec.disruption.consolidateAfter"
    with pytest.raises(UsageError, match="applies to the karpenter cluster only"):
        replay(trace, "kube-scheduler", {}, 0, tmp_path / "b", cluster="cluster-autoscaler",
               cluster_options={**options, "nodepool": str(bad)})
