"""Cluster Autoscaler through ``tracereplay replay``: scale-up for pending pods, and a
scale-down that waits exactly ``--scale-down-unneeded-time`` (and the delay after add)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.replay import replay

CATALOG = "instance_type,cpu,memory_gib,price_per_hour\nn4,4,16,0.2\nn8,8,32,0.4\n"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ca")
    (root / "catalog.csv").write_text(CATALOG)
    tasks = [{"task_id": "a", "job_id": "j", "submit_s": 0.0, "duration_s": 95.0,
              "cpu": 2.0, "mem": 1.0},
             {"task_id": "b", "job_id": "j", "submit_s": 0.0, "duration_s": 5000.0,
              "cpu": 3.0, "mem": 1.0}]
    return write_trace(root / "trace", [], tasks, window_end_s=2000.0)


def _replay(trace: Path, out: Path, flags: str) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    result = replay(trace, "kube-scheduler", {}, 0, out, cluster="cluster-autoscaler",
                    cluster_options={"catalog": str(trace.parent / "catalog.csv"),
                                     "autoscaler_flags": flags, "vcpu_per_unit": 1.0,
                                     "gib_per_unit": 1.0})
    nodes = pl.read_parquet(out / "node_intervals.parquet").sort("machine_id")
    runs = pl.read_parquet(out / "task_runs.parquet").sort("task_id")
    return nodes, runs, result.metrics


def test_scale_up_then_down_after_exactly_the_unneeded_time(trace: Path, tmp_path: Path) -> None:
    nodes, runs, metrics = _replay(trace, tmp_path / "r", "--nodes=0:3:n4")
    # the 0 s loop: b (3 cpu) opens one n4, a (2 cpu) a second; ready at 120 s
    assert nodes["machine_id"].to_list() == ["n4-000000", "n4-000001"]
    assert nodes["up_s"].to_list() == [0.0, 0.0] and nodes["ready_s"].to_list() == [120.0] * 2
    assert runs["start_s"].to_list() == [120.0, 120.0]
    # a ends at 215 s; the 220 s loop finds its node empty; deleted 10 min later
    a_node = runs.filter(pl.col("task_id") == "a")["machine_id"].item()
    down = dict(zip(nodes["machine_id"], nodes["down_s"], strict=True))
    assert down[a_node] == 820.0
    assert down[runs.filter(pl.col("task_id") == "b")["machine_id"].item()] == 2000.0
    assert metrics["nodes_added"] == 2 and metrics["nodes_deleted"] == 1
    assert metrics["cost_usd"] == pytest.approx((820 + 2000) / 3600 * 0.2)


def test_delay_after_add_outlasts_a_short_unneeded_time(trace: Path, tmp_path: Path) -> None:
    nodes, runs, _ = _replay(trace, tmp_path / "r",
                             "--nodes=0:3:n4 --scale-down-unneeded-time=1m")
    a_node = runs.filter(pl.col("task_id") == "a")["machine_id"].item()
    # unneeded from 220 s, due at 280 s, but the 0 s scale-up holds deletion to 600 s
    assert nodes.filter(pl.col("machine_id") == a_node)["down_s"].item() == 600.0


def test_a_bad_flag_is_one_line(trace: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="n16"):
        _replay(trace, tmp_path / "r", "--nodes=0:3:n16")


def test_cost_per_instance_type_in_the_warehouse(trace: Path, tmp_path: Path) -> None:
    from pipeline.warehouse import load, sql

    _, _, metrics = _replay(trace, tmp_path / "r",
                            "--nodes=0:1:n4 --nodes=0:2:n8 --expander=price")
    # the 0 s loop: price prefers one n4 (unfitness 4 against 8) for b; a fits no room
    # left there, so the 10 s loop buys an n8 (n4 is at its maximum).  a starts on the n4
    # at 120 s, which is deleted at 820 s; b runs on the n8 from 130 s to the window's end
    nodes = pl.read_parquet(tmp_path / "r" / "node_intervals.parquet").sort("machine_id")
    assert nodes["instance_type"].to_list() == ["n4", "n8"]
    assert nodes["up_s"].to_list() == [0.0, 10.0]
    assert nodes["down_s"].to_list() == [820.0, 2000.0]
    load([tmp_path / "r"], tmp_path / "w.duckdb")
    _, rows = sql(tmp_path / "w.duckdb", "select instance_type, instances, node_hours, "
                  "cost_usd, cost_share from instance_type_cost")
    n8, n4 = 1990 / 3600 * 0.4, 820 / 3600 * 0.2
    assert rows == [("n8", 1, pytest.approx(1990 / 3600), pytest.approx(n8),
                     pytest.approx(n8 / (n8 + n4))),
                    ("n4", 1, pytest.approx(820 / 3600), pytest.approx(n4),
                     pytest.approx(n4 / (n8 + n4)))]
    assert metrics["cost_usd"] == pytest.approx(n8 + n4)
