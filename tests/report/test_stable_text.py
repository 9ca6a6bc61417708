"""The report's text does not depend on the order rows arrive in: lists built from sets
or groups are sorted on a full key, and sums are taken in a fixed order (the same
warehouse gives the same bytes on every machine)."""

from __future__ import annotations

import json

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.report.assumptions import cluster_lines
from pipeline.report.kubernetes import per_type
from pipeline.report.observations import observations

FIXED = {"kind": "fixed", "price_per_hour": 0.192, "billing_s": 1.0}
CA = {"kind": "cluster-autoscaler", "label": "CA m5.xlarge, no eviction", "safe_to_evict": False,
      "autoscaler_flags": "--nodes=0:2000:m5.xlarge", "catalog": "configs/x.csv",
      "boot_delay_s": 120.0, "vcpu_per_unit": 8.0, "gib_per_unit": 32.0, "billing_s": 1.0}
KARPENTER = {"kind": "karpenter", "label": "Karpenter Balanced", "nodepool": "configs/np.yaml",
             "catalog": "configs/x.csv", "boot_delay_s": 60.0, "vcpu_per_unit": 4.0,
             "gib_per_unit": 16.0, "billing_s": 1.0}
ELASTIC = {"kind": "elastic", "price_per_hour": 0.192, "billing_s": 1.0}


def _clusters(order: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    specs = [FIXED, KARPENTER, CA, ELASTIC]
    runs = pl.DataFrame({"run_id": [f"r{i}" for i in order],
                         "cluster": [json.dumps(specs[i]) for i in order]})
    summary = pl.DataFrame({"run_id": [f"r{i}" for i in order],
                            "evictions": [float(10 * i) for i in order]})
    return runs, summary


@given(st.permutations(range(4)))
@settings(max_examples=20, deadline=None)
def test_cluster_lines_name_each_kind_in_one_order(order: list[int]) -> None:
    lines = cluster_lines(*_clusters(order))
    assert lines == cluster_lines(*_clusters([0, 1, 2, 3]))
    assert [line.split(" ")[0] for line in lines] == ["Fixed", "Elastic", "Cluster", "Karpenter"]
    ca, karpenter = lines[2], lines[3]
    assert ca.startswith("Cluster Autoscaler (CA m5.xlarge, no eviction): node groups from "
                         "--nodes=0:2000:m5.xlarge, every pod annotated safe-to-evict")
    assert "8 vCPU" in ca and "32 GiB" in ca and "ready 2.0 min later" in ca
    assert ca.endswith("Up to 20 pod evictions per run here.")
    assert karpenter.startswith("Karpenter (Karpenter Balanced): NodePool configs/np.yaml")
    assert karpenter.endswith("Up to 10 pod evictions per run here.")
    assert "Fixed cluster" not in ca + karpenter and "`" not in "".join(lines)
    assert "no task was evicted" in lines[0]


def _summary(order: list[int]) -> pl.DataFrame:
    rows = [("fixed", "a", 10.0), ("karpenter", "k1", 120.0), ("karpenter", "k2", 125.0),
            ("cluster-autoscaler", "c1", 30.0), ("cluster-autoscaler", "c2", 90.0),
            ("elastic", "e1", 5.0), ("elastic", "e2", 50.0)]
    picked = [rows[i] for i in order]
    return pl.DataFrame({"run_id": [r[1] for r in picked], "label": [r[1] for r in picked],
                         "cluster_mode": [r[0] for r in picked],
                         "wait_p95_s": [r[2] for r in picked],
                         "preemptions": [0] * len(picked),
                         "backlog_tasks": [0] * len(picked),
                         "backlog_task_s": [0.0] * len(picked)})


@given(st.permutations(range(7)))
@settings(max_examples=20, deadline=None)
def test_observations_come_fixed_first_then_by_cluster_name(order: list[int]) -> None:
    lines = observations(_summary(order), pl.DataFrame())
    assert lines == observations(_summary(list(range(7))), pl.DataFrame())
    assert [line.split(" ")[2] for line in lines] == [
        "cluster-autoscaler", "elastic", "karpenter"]


@given(st.permutations(range(6)))
@settings(max_examples=20, deadline=None)
def test_cost_shares_are_the_same_bytes_whatever_the_row_order(order: list[int]) -> None:
    costs = [0.1, 0.2, 0.3, 0.7, 1.1, 1e-3]  # their sum's last digits depend on its order
    types = pl.DataFrame({"run_id": ["r"] * 6, "instance_type": [f"t{i}" for i in range(6)],
                          "instances": [1.0] * 6, "node_hours": [1.0] * 6,
                          "cost_usd": costs})
    runs = pl.DataFrame({"run_id": ["r"], "scoring": ["LeastAllocated"],
                         "cluster_label": ["Karpenter"]})
    shuffled = per_type(types[order], runs)
    assert shuffled.equals(per_type(types, runs))
