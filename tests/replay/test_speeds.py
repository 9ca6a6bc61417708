"""Heterogeneous machines on request: a seeded share slowed by a factor, and speeds by
platform (pipeline.replay.speeds), through ``replay``."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.replay import replay

N = 10


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    machines = [{"machine_id": f"m{i}", "cpu": 1.0, "mem": 1.0,
                 "platform": "old" if i < 4 else "new"} for i in range(N)]
    # one 100 s task per machine, all at once: each lands on its own machine
    tasks = [{"task_id": f"t{i}", "job_id": "j", "submit_s": 0.0, "duration_s": 100.0,
              "cpu": 1.0, "mem": 1.0} for i in range(N)]
    return write_trace(tmp_path_factory.mktemp("speeds") / "trace", machines, tasks,
                       window_end_s=1000.0)


def _runtimes(run: Path) -> dict[str, float]:
    tr = pl.read_parquet(run / "task_runs.parquet")
    return {r["machine_id"]: r["end_s"] - r["start_s"] for r in tr.to_dicts()}


def test_a_seeded_share_of_machines_runs_slower(trace: Path, tmp_path: Path) -> None:
    options = {"slow_fraction": 0.3, "slow_factor": 2.5}
    replay(trace, "yarn-uniform", {}, 3, tmp_path / "a", cluster_options=options)
    times = _runtimes(tmp_path / "a")
    slow = sorted(m for m, t in times.items() if t == pytest.approx(250.0))
    assert len(slow) == 3 and all(times[m] == pytest.approx(100.0)
                                  for m in times if m not in slow)
    # the same seed slows the same machines under another policy; another seed may differ
    replay(trace, "container-packing", {}, 3, tmp_path / "b", cluster_options=options)
    assert sorted(m for m, t in _runtimes(tmp_path / "b").items() if t > 200) == slow
    picks = set()
    for seed in range(6):
        replay(trace, "yarn-uniform", {}, seed, tmp_path / f"s{seed}", cluster_options=options)
        picks.add(tuple(sorted(m for m, t in _runtimes(tmp_path / f"s{seed}").items()
                               if t > 200)))
    assert len(picks) > 1


def test_platform_speeds(trace: Path, tmp_path: Path) -> None:
    replay(trace, "yarn-uniform", {}, 0, tmp_path / "run",
           cluster_options={"platform_speed": "old=0.5;new=2"})
    times = _runtimes(tmp_path / "run")
    assert {m: t for m, t in times.items() if int(m[1:]) < 4} == {
        f"m{i}": pytest.approx(200.0) for i in range(4)}
    assert all(t == pytest.approx(50.0) for m, t in times.items() if int(m[1:]) >= 4)


@pytest.mark.parametrize(("options", "message"), [
    ({"platform_speed": "ancient=0.5"}, "no machine has platform 'ancient'"),
    ({"platform_speed": "old=fast"}, "PLATFORM=SPEED"),
    ({"platform_speed": "old=0"}, "PLATFORM=SPEED"),
    ({"slow_fraction": 1.5}, "above the maximum"),
    ({"slow_factor": 0.5}, "below the minimum"),
])
def test_bad_speed_options_are_usage_errors(trace: Path, tmp_path: Path, options: dict,
                                            message: str) -> None:
    with pytest.raises(UsageError, match=message):
        replay(trace, "yarn-uniform", {}, 0, tmp_path / "run", cluster_options=options)
    assert not (tmp_path / "run").exists()


def test_elastic_nodes_can_be_slowed_but_have_no_platform(trace: Path, tmp_path: Path) -> None:
    options = {"slow_fraction": 0.5, "max_nodes": N, "initial_nodes": N}
    replay(trace, "yarn-uniform", {}, 0, tmp_path / "run", cluster="elastic",
           cluster_options=options)
    assert sorted(_runtimes(tmp_path / "run").values()).count(pytest.approx(250.0)) >= 1
    with pytest.raises(UsageError, match="fixed cluster only"):
        replay(trace, "yarn-uniform", {}, 0, tmp_path / "e2", cluster="elastic",
               cluster_options={"platform_speed": "old=0.5"})


def test_contention_that_comes_and_goes_stretches_runs_the_same_way_for_every_policy(
        trace: Path, tmp_path: Path) -> None:
    options = {"contention_share": 0.5, "contention_factor": 2.0, "contention_mean_s": 50.0}
    replay(trace, "yarn-uniform", {}, 1, tmp_path / "a", cluster_options=options)
    times = _runtimes(tmp_path / "a")
    assert all(100.0 - 1e-9 <= t <= 200.0 + 1e-9 for t in times.values())
    assert len({round(t, 6) for t in times.values()}) > 2  # machines contended differently
    replay(trace, "container-packing", {}, 1, tmp_path / "b", cluster_options=options)
    assert _runtimes(tmp_path / "b") == pytest.approx(times)
    replay(trace, "yarn-uniform", {}, 2, tmp_path / "c", cluster_options=options)
    assert _runtimes(tmp_path / "c") != pytest.approx(times)
    replay(trace, "yarn-uniform", {}, 1, tmp_path / "d")
    assert set(_runtimes(tmp_path / "d").values()) == {100.0}


@pytest.mark.parametrize(("option", "value"), [("contention_share", 1.0),
                                               ("contention_share", -0.1),
                                               ("contention_factor", 0.5),
                                               ("contention_mean_s", 0.0)])
def test_bad_contention_options_are_refused(trace: Path, tmp_path: Path, option: str,
                                            value: float) -> None:
    with pytest.raises(UsageError, match=option):
        replay(trace, "yarn-uniform", {}, 0, tmp_path / "x", cluster_options={option: value})


def test_contention_periods_end_at_the_window_end() -> None:
    """A drained replay runs on past the window at the machines' own speeds."""
    import numpy as np

    from pipeline.replay.speeds import contention_changes
    from pipeline.sim.cluster import ClusterSpec

    spec = ClusterSpec(contention_share=0.9, contention_factor=2.0, contention_mean_s=50.0)
    times, nodes, speeds = contention_changes(spec, np.array([1.0, 0.5, 2.0]), 7, 300.0)
    assert (np.diff(times) >= 0).all() and times.max() <= 300.0
    for node, base in enumerate([1.0, 0.5, 2.0]):
        mine = speeds[nodes == node]
        assert set(mine.tolist()) <= {base, base / 2.0} and mine[-1] == base
    assert contention_changes(ClusterSpec(), np.ones(3), 7, 300.0) is None
