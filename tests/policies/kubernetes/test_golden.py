"""kube-scheduler's worked examples end to end through the public ``replay``.

The scoring case is the one Kubernetes' own tests use for ``NodeResourcesFit`` and
``NodeResourcesBalancedAllocation`` (``least_allocated_test.go``, ``most_allocated_test.go``,
``balanced_allocation_test.go``, "nothing scheduled, resources requested, differently sized
nodes"): a pod asking 3 cpu and 5 memory units, node ``m0`` with 4 cpu and 10 memory,
``m1`` with 6 and 10.  LeastAllocated gives ``m0`` (25 + 50) / 2 = 37 and ``m1`` 50;
MostAllocated ``m0`` (75 + 50) / 2 = 62 and ``m1`` 50; BalancedAllocation ``m0``
(1 - |0.75 - 0.5| / 2) * 100 = 87 and ``m1`` 100.  Totals with both plugins at weight 1:
LeastAllocated 124 vs 150 and MostAllocated 149 vs 150, so ``m1`` wins both; with
BalancedAllocation disabled, MostAllocated picks ``m0`` (62 vs 50).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.replay import replay

MOST_ONLY = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 1
"""


def _trace(root: Path, machines: list[tuple[float, float]], pods: list[dict],
           window_end_s: float | None = None) -> Path:
    rows = [{"machine_id": f"m{i}", "cpu": c, "mem": m} for i, (c, m) in enumerate(machines)]
    tasks = [{"task_id": f"t{i}", "job_id": "j0", "duration_s": 3600.0, **p}
             for i, p in enumerate(pods)]
    return write_trace(root / "trace", rows, tasks, window_end_s=window_end_s)


def _runs(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "task_runs.parquet").sort("task_id")


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _trace(tmp_path_factory.mktemp("k8s"), [(4.0, 10.0), (6.0, 10.0)],
                  [{"submit_s": 0.0, "cpu": 3.0, "mem": 5.0}])


@pytest.mark.parametrize(("params", "machine"), [
    ({}, "m1"),  # LeastAllocated 37 + 87 < 50 + 100
    ({"scoring": "MostAllocated"}, "m1"),  # 62 + 87 = 149 < 50 + 100
])
def test_default_plugins_score_as_upstream(two_nodes: Path, tmp_path: Path, params: dict,
                                           machine: str) -> None:
    for seed in (0, 1, 2):  # no tie: the seed cannot move it
        replay(two_nodes, "kube-scheduler", params, seed, tmp_path / f"r{seed}")
        assert _runs(tmp_path / f"r{seed}")["machine_id"].to_list() == [machine]


def test_configuration_file_sets_strategy_and_plugins(two_nodes: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text(MOST_ONLY)
    replay(two_nodes, "kube-scheduler", {"config": str(cfg)}, 0, tmp_path / "run")
    assert _runs(tmp_path / "run")["machine_id"].to_list() == ["m0"]  # 62 vs 50
    # run.json names the strategy the file set (the warehouse's params show it)
    used = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]["scoring"]
    assert used["value"] == "MostAllocated" and used["source"].startswith(str(cfg))
    replay(two_nodes, "kube-scheduler", {}, 0, tmp_path / "plain")
    used = json.loads((tmp_path / "plain" / "run.json").read_text())["settings"]["scoring"]
    assert used == {"value": "LeastAllocated", "source": "default"}


def test_configuration_errors_name_the_file_and_field(two_nodes: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(MOST_ONLY.replace("name: memory", "name: ephemeral-storage"))
    with pytest.raises(UsageError, match=r"bad\.yaml: resource 'ephemeral-storage'"):
        replay(two_nodes, "kube-scheduler", {"config": str(bad)}, 0, tmp_path / "a")
    other = tmp_path / "other.yaml"
    other.write_text("kind: Pod\n")
    with pytest.raises(UsageError, match=r"other\.yaml: not a KubeSchedulerConfiguration"):
        replay(two_nodes, "kube-scheduler", {"config": str(other)}, 0, tmp_path / "b")


def test_max_pods_filters_a_full_node(tmp_path: Path) -> None:
    """One roomy node with ``max_pods=2``: the third pod waits for the first to end."""
    trace = _trace(tmp_path, [(64.0, 64.0)],
                   [{"submit_s": 0.0, "cpu": 1.0, "mem": 1.0} for _ in range(3)],
                   window_end_s=8000.0)
    replay(trace, "kube-scheduler", {"max_pods": 2}, 0, tmp_path / "run")
    starts = sorted(_runs(tmp_path / "run")["start_s"].to_list())
    assert starts[:2] == [0.0, 0.0] and starts[2] == pytest.approx(3600.0, abs=1.0)


@pytest.mark.parametrize(("n_nodes", "to_find"), [(200, 100), (1000, 420), (6000, 300)])
def test_adaptive_percentage_decides_which_nodes_are_scored(tmp_path: Path, n_nodes: int,
                                                            to_find: int) -> None:
    """Identical empty nodes and one small pod per scheduling point: each pod's filter
    walk starts where the last one stopped and ends after ``to_find`` feasible nodes
    (adaptive ``percentageOfNodesToScore``: 200 nodes 49% -> at least 100; 1000 nodes
    42%; 6000 nodes 5%), and the pod lands on one of those (ties drawn)."""
    pods = [{"submit_s": 10.0 * j, "cpu": 0.1, "mem": 0.1} for j in range(6)]
    trace = _trace(tmp_path, [(8.0, 8.0)] * n_nodes, pods)
    replay(trace, "kube-scheduler", {}, 0, tmp_path / "run")
    nodes = [int(m[1:]) for m in _runs(tmp_path / "run")["machine_id"].to_list()]
    for j, nd in enumerate(nodes):
        assert (nd - j * to_find) % n_nodes < to_find, (j, nd)
    assert len(set(nodes)) == len(nodes)  # an empty node outscores the used one


@pytest.mark.parametrize(("text", "field"), [
    ("profiles:\n- plugins: [1, 2]\n", "plugins must be a mapping"),
    ("percentageOfNodesToScore: lots\n", "percentageOfNodesToScore 'lots'"),
    ("profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: [x]\n",
     "NodeResourcesFit args must be a mapping"),
    ("profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
     "      scoringStrategy:\n        resources: [cpu, memory]\n",
     "resources must be a list of mappings"),
    ("profiles:\n- plugins:\n    score:\n      enabled: [NodeResourcesFit]\n",
     r"plugins\.score\.enabled must be a list of mappings"),
    ("profiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodeResourcesFit\n"
     "        weight: true\n", "plugin NodeResourcesFit weight True"),
])
def test_malformed_configuration_is_one_line_naming_the_field(two_nodes: Path, tmp_path: Path,
                                                              text: str, field: str) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text("kind: KubeSchedulerConfiguration\n" + text)
    with pytest.raises(UsageError, match=rf"sched\.yaml: {field}"):
        replay(two_nodes, "kube-scheduler", {"config": str(cfg)}, 0, tmp_path / "run")
    assert not (tmp_path / "run" / "task_runs.parquet").exists()
