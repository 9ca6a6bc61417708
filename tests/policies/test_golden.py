"""The Qubole container-packing example (docs/semantics.md section 4), end to end through
the public ``replay``: 10 machines of 10 equal containers, 20 one-hour one-container tasks
submitted at once, threshold 80%."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay

PARAMS = {"container-packing": {"high_memory_threshold": 0.8}, "yarn-uniform": {}}
# Elastic, min 0, idle nodes released at once; the cluster starts as the trace's 10 nodes.
ELASTIC = {"min_nodes": 0, "initial_nodes": 10, "max_nodes": 10, "idle_s": 0.0}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    machines = [{"machine_id": f"m{i}", "cpu": 10.0, "mem": 10.0} for i in range(10)]
    tasks = [{"task_id": f"t{i}", "job_id": "j0", "submit_s": 0.0, "duration_s": 3600.0,
              "cpu": 1.0, "mem": 1.0} for i in range(20)]
    return write_trace(tmp_path_factory.mktemp("golden") / "trace", machines, tasks)


def _containers_per_machine(run_dir: Path) -> list[int]:
    tr = pl.read_parquet(run_dir / "task_runs.parquet")
    assert (tr["outcome"] == "finished").all()
    return sorted(tr.group_by("machine_id").len()["len"].to_list(), reverse=True)


@pytest.mark.parametrize(("policy", "expected"), [
    ("container-packing", [8, 8, 4]), ("yarn-uniform", [2] * 10)])
def test_fixed_cluster_placement(trace: Path, tmp_path: Path, policy: str,
                                 expected: list[int]) -> None:
    replay(trace, policy, PARAMS[policy], 0, tmp_path / "run")
    assert _containers_per_machine(tmp_path / "run") == expected


@pytest.mark.parametrize(("policy", "node_hours", "util"), [
    ("container-packing", 3.0, 20 / 30), ("yarn-uniform", 10.0, 0.2)])
def test_elastic_node_hours_and_utilization(trace: Path, tmp_path: Path, policy: str,
                                            node_hours: float, util: float) -> None:
    result = replay(trace, policy, PARAMS[policy], 0, tmp_path / "run", cluster="elastic",
                    cluster_options=ELASTIC)
    assert result.metrics["node_hours"] == pytest.approx(node_hours)
    assert result.metrics["util_alloc_mem"] == pytest.approx(util)
    assert result.metrics["util_alloc_cpu"] == pytest.approx(util)
    assert result.metrics["cost_usd"] == pytest.approx(node_hours * 0.192)


def test_packing_seed_only_moves_the_random_low_pick(trace: Path, tmp_path: Path) -> None:
    for seed in (1, 2):
        replay(trace, "container-packing", PARAMS["container-packing"], seed,
               tmp_path / f"s{seed}")
        assert _containers_per_machine(tmp_path / f"s{seed}") == [8, 8, 4]


def test_packing_falls_back_to_uniform_below_min_nodes(trace: Path, tmp_path: Path) -> None:
    replay(trace, "container-packing", {"high_memory_threshold": 0.8,
                                          "packing_min_nodes": 11}, 0,
           tmp_path / "run")
    assert _containers_per_machine(tmp_path / "run") == [2] * 10


def test_packing_is_off_at_the_elastic_minimum_size(trace: Path, tmp_path: Path) -> None:
    options = dict(ELASTIC, min_nodes=10)
    result = replay(trace, "container-packing", PARAMS["container-packing"], 0,
                    tmp_path / "run", cluster="elastic", cluster_options=options)
    assert _containers_per_machine(tmp_path / "run") == [2] * 10
    assert result.metrics["node_hours"] == pytest.approx(10.0)
