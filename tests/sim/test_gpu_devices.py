"""GPU devices in the event-driven replay: shares on one device, whole devices apart, and
the core holding back what fits no device, for every policy."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.policies import POLICIES
from pipeline.replay import replay


def _run(tmp_path: Path, gpus: float, requests: list[tuple[float, float, float]],
         policy: str = "yarn-uniform") -> tuple[dict, dict]:
    """Tasks (submit, duration, gpu) on one node of 64 cores and ``gpus`` devices."""
    machines = [{"machine_id": "n0", "cpu": 64.0, "mem": 256.0, "gpu": gpus}]
    tasks = [{"task_id": f"p{i}", "job_id": f"p{i}", "submit_s": s, "duration_s": d,
              "cpu": 1.0, "mem": 1.0, "gpu": g} for i, (s, d, g) in enumerate(requests)]
    trace = write_trace(tmp_path / "t", machines, tasks, window_end_s=1000.0)
    result = replay(trace, policy, {}, 0, tmp_path / policy, sched_interval_s=0.0)
    runs = pl.read_parquet(tmp_path / policy / "task_runs.parquet")
    return dict(zip(runs["task_id"], runs["start_s"], strict=True)), result.run["summary"]


def test_shares_pack_a_device_and_a_whole_gpu_waits(tmp_path: Path) -> None:
    """One node, 2 GPUs: 0.5, 0.5, 0.6 then 1 whole GPU (the issue's golden case): the
    halves share device 0, 0.6 takes device 1, and the whole GPU waits for device 1."""
    starts, _ = _run(tmp_path, 2, [(0, 100, 0.5), (1, 100, 0.5), (2, 10, 0.6), (3, 10, 1.0)])
    assert (starts["p0"], starts["p1"], starts["p2"]) == (0, 1, 2)
    assert starts["p3"] == 12  # device 1 is whole again when the 0.6 ends


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_share_never_spans_two_devices(tmp_path: Path, policy: str) -> None:
    """0.7 and 0.7 leave 0.3 + 0.3 free apart: a 0.6 fits the node's total GPU but no
    device, so under no policy do the three ever run at once (the core holds the 0.6 back
    while both 0.7 run), and the 0.6 does run once one of them has ended."""
    machines = [{"machine_id": "n0", "cpu": 64.0, "mem": 256.0, "gpu": 2.0}]
    tasks = [{"task_id": f"p{i}", "job_id": f"p{i}", "submit_s": s, "duration_s": d,
              "cpu": 1.0, "mem": 1.0, "gpu": g}
             for i, (s, d, g) in enumerate([(0, 50, 0.7), (0, 80, 0.7), (1, 10, 0.6)])]
    trace = write_trace(tmp_path / "t", machines, tasks, window_end_s=1000.0)
    replay(trace, policy, {}, 0, tmp_path / "run", sched_interval_s=0.0)
    runs = {r["task_id"]: r for r in pl.read_parquet(
        tmp_path / "run" / "task_runs.parquet").iter_rows(named=True)}
    assert all(r["outcome"] == "finished" for r in runs.values()), policy
    latest_start = max(r["start_s"] for r in runs.values())
    earliest_end = min(r["end_s"] for r in runs.values())
    assert latest_start >= earliest_end, policy  # never all three at once


def test_room_admits_exactly_what_some_device_can_take() -> None:
    """One number per node decides both kinds of request: a share fits iff some device has
    that much free, k whole GPUs iff k devices are fully free."""
    import numpy as np
    from hypothesis import given
    from hypothesis import strategies as st

    from pipeline.sim.gpus import MILLI, GpuDevices

    @given(st.lists(st.integers(0, 1000), min_size=1, max_size=8),
           st.sampled_from([0.1, 0.25, 0.5, 0.75, 0.99, 1.0, 2.0, 3.0, 8.0]))
    def check(free: list[int], request: float) -> None:
        devices = GpuDevices(np.array([len(free)]))
        devices.free[0, :len(free)] = free
        arr = np.array(free)
        fits = ((arr >= round(request * MILLI)).any() if request < 1
                else (arr == MILLI).sum() >= request)
        assert (request <= devices.room()[0] + 1e-12) == fits

    check()


def test_bench_with_gpu_requests(tmp_path: Path) -> None:
    from pipeline.bench.run import bench

    out = bench("yarn-uniform", machines=30, tasks=3000, gpu=True, workdir=tmp_path)
    assert out["gpu"] and out["tasks_finished"] == 3000 and out["gpu_held"] >= 0


def _model_trace(tmp_path: Path) -> Path:
    """Two GPU machines of different models and tasks naming models: ``v`` may use only
    the V100 machine (n1; least-allocated order would pick n0 first), ``x`` names a model
    no machine has, ``free`` names none, and four more V100-only tasks queue behind."""
    machines = [{"machine_id": "n0", "cpu": 16.0, "mem": 64.0, "gpu": 2.0, "gpu_model": "T4"},
                {"machine_id": "n1", "cpu": 8.0, "mem": 32.0, "gpu": 2.0,
                 "gpu_model": "V100"}]
    spec = {"v": ["V100"], "x": ["A100"], "free": None, "both": ["T4", "V100"],
            **{f"w{i}": ["V100"] for i in range(4)}}
    tasks = [{"task_id": k, "job_id": k, "submit_s": float(i), "duration_s": 20.0,
              "cpu": 1.0, "mem": 1.0, "gpu": 1.0, "gpu_spec": s}
             for i, (k, s) in enumerate(spec.items())]
    return write_trace(tmp_path / "t", machines, tasks, window_end_s=1000.0)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_gpu_models_are_enforced_by_every_policy(tmp_path: Path, policy: str) -> None:
    """A task runs only on a machine of a model its ``gpu_spec`` names (the V100 ones wait
    for the V100 machine's two GPUs while the T4 machine has room), a task naming only an
    absent model is unschedulable and blocks nobody, and the run says nothing is
    unenforced."""
    trace = _model_trace(tmp_path)
    result = replay(trace, policy, {}, 0, tmp_path / "run", sched_interval_s=0.0)
    runs = {r["task_id"]: r for r in pl.read_parquet(
        tmp_path / "run" / "task_runs.parquet").iter_rows(named=True)}
    assert runs["x"]["outcome"] == "unschedulable", policy
    for k in ("v", "w0", "w1", "w2", "w3"):
        assert runs[k]["outcome"] == "finished" and runs[k]["machine_id"] == "n1", (policy, k)
    assert runs["free"]["outcome"] == runs["both"]["outcome"] == "finished", policy
    v100 = sorted((runs[k]["start_s"], runs[k]["end_s"]) for k in ("v", "w0", "w1", "w2",
                                                                   "w3"))
    for i in range(2, len(v100)):  # never three at once on the V100 machine's two GPUs
        assert v100[i][0] >= min(v100[i - 2][1], v100[i - 1][1]), policy
    assert "unenforced" not in result.run
    assert result.run["summary"]["gpu_model_held"] == 0, policy  # no policy needed holding


def test_gpu_models_without_machine_models_are_said(tmp_path: Path) -> None:
    """Machines that name no model cannot enforce ``gpu_spec``: said, not silently kept."""
    machines = [{"machine_id": "n0", "cpu": 8.0, "mem": 8.0, "gpu": 2.0}]
    tasks = [{"task_id": "a", "job_id": "a", "submit_s": 0.0, "duration_s": 5.0, "cpu": 1.0,
              "mem": 1.0, "gpu": 1.0, "gpu_spec": ["V100"]}]
    trace = write_trace(tmp_path / "t", machines, tasks, window_end_s=100.0)
    with pytest.warns(UserWarning, match="no machine names its GPU model"):
        result = replay(trace, "yarn-uniform", {}, 0, tmp_path / "run")
    assert result.run["unenforced"] == {"gpu_spec_tasks": 1}


def test_the_core_holds_back_a_placement_on_another_model(tmp_path: Path) -> None:
    """A policy that ignores the model masks loses the placement, never breaks the
    constraint: the core holds it back and counts it."""
    import numpy as np

    from pipeline.sim.models import GpuModels

    models = GpuModels(np.array([1, 2], np.int64), np.ones((2, 3)))
    dirty = np.zeros(2, np.bool_)
    req, node = models.check(np.array([0, 1, 2]), np.array([0, 0, 1]), np.arange(3),
                             np.array([2, 0, 1], np.int64), dirty)
    assert req.tolist() == [1] and node.tolist() == [0]
    assert models.held == 2 and dirty.tolist() == [True, True]
