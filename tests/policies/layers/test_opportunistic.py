"""Opportunistic containers and over-allocation (Hadoop 3.3 ContainerScheduler and
NodeQueueLoadMonitor, YARN-1011 over-allocation): the issue's golden cases through
``replay``, the NodeManager queue rule through the core, and the RM's queue limit rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies import make_policy
from pipeline.policies.layers.opportunistic import queue_limit
from pipeline.replay import replay

MB = 1.0  # memory in MB, cpu plentiful: the cases are about memory
BIG_CPU = 100.0


def _trace(root: Path, tasks: list[dict], mem: float = 2048.0, n: int = 1,
           usage: list[dict] | None = None) -> Path:
    machines = [{"machine_id": f"m{i}", "cpu": BIG_CPU, "mem": mem} for i in range(n)]
    rows = [{"cpu": 1.0, "job_id": "j0", **t} for t in tasks]
    path = write_trace(root / "trace", machines, rows, window_end_s=1000.0)
    if usage is not None:
        pq.write_table(pa.Table.from_pylist(usage, schema=pa.schema([
            ("task_id", pa.string()), ("start_s", pa.float64()), ("end_s", pa.float64()),
            ("cpu", pa.float64()), ("mem", pa.float64())])), path / "task_usage.parquet")
    return path


def _runs(run: Path) -> dict[str, dict]:
    frame = pl.read_parquet(run / "task_runs.parquet")
    return {r["task_id"]: r for r in frame.to_dicts()}


def _opp(**extra: object) -> dict:
    # priority 0 runs opportunistic (Google's free tier), the rest guaranteed
    return {"opp_by": "priority", "opp_max_priority": 0, **extra}


def test_queue_limit_rule() -> None:
    assert queue_limit(np.array([0, 2, 4, 10]), 1.0, 5, 15) == 8
    assert queue_limit(np.zeros(4, dtype=int), 1.0, 5, 15) == 5
    assert queue_limit(np.full(4, 20), 1.0, 5, 15) == 15


def test_guaranteed_kills_the_most_recently_started_opportunistic(tmp_path: Path) -> None:
    """Node 2048 MB; O1 1024 MB started first, O2 824 MB second; a guaranteed 512 MB
    container arrives: only O2 is killed."""
    trace = _trace(tmp_path, [
        {"task_id": "O1", "submit_s": 0.0, "duration_s": 100.0, "mem": 1024.0, "priority": 0},
        {"task_id": "O2", "submit_s": 1.0, "duration_s": 100.0, "mem": 824.0, "priority": 0},
        {"task_id": "G", "submit_s": 2.0, "duration_s": 10.0, "mem": 512.0, "priority": 5},
    ])
    replay(trace, "yarn-uniform", _opp(), 0, tmp_path / "run")
    r = _runs(tmp_path / "run")
    assert r["O1"]["opp_kills"] == 0 and r["O1"]["start_s"] == 0.0
    assert r["O2"]["opp_kills"] == 1 and r["O2"]["opp_wasted_s"] == pytest.approx(1.0)
    assert r["G"]["start_s"] == 2.0 and not r["G"]["opportunistic"]
    assert r["O2"]["opportunistic"] and r["O2"]["outcome"] == "finished"
    # O2 is asked for again, sent at the next heartbeat (3 s), queues at the node and
    # starts when G gives its memory back
    assert r["O2"]["start_s"] == pytest.approx(12.0)
    assert r["O2"]["opp_queue_s"] == pytest.approx(9.0)


def test_pause_instead_of_kill_keeps_the_work(tmp_path: Path) -> None:
    trace = _trace(tmp_path, [
        {"task_id": "O1", "submit_s": 0.0, "duration_s": 100.0, "mem": 1024.0, "priority": 0},
        {"task_id": "O2", "submit_s": 1.0, "duration_s": 100.0, "mem": 824.0, "priority": 0},
        {"task_id": "G", "submit_s": 2.0, "duration_s": 10.0, "mem": 512.0, "priority": 5},
    ])
    replay(trace, "yarn-uniform", _opp(opp_pause=True), 0, tmp_path / "run")
    r = _runs(tmp_path / "run")
    assert r["O2"]["opp_pauses"] == 1 and r["O2"]["opp_kills"] == 0
    assert r["O2"]["wasted_s"] == 0.0 and r["O2"]["attempts"] == 1
    # 1 s of work before the pause, resumed when G ends at 12: 99 s left
    assert r["O2"]["end_s"] == pytest.approx(111.0)


def _full_node_case(tmp_path: Path, nm_queue: int) -> dict[str, dict]:
    """A node full of guaranteed containers, then 4 opportunistic ones."""
    tasks = [{"task_id": f"G{i}", "submit_s": 0.0, "duration_s": 50.0 + 10 * i,
              "mem": 512.0, "priority": 5} for i in range(4)]
    tasks += [{"task_id": f"O{i}", "submit_s": 5.0, "duration_s": 10.0, "mem": 512.0,
               "priority": 0} for i in range(4)]
    trace = _trace(tmp_path, tasks)
    replay(trace, "yarn-uniform", _opp(opp_nm_queue=nm_queue), 0, tmp_path / "run")
    return _runs(tmp_path / "run")


def test_nm_queue_holds_max_queue_length(tmp_path: Path) -> None:
    """Max queue length 3 on a full node: 3 queue, the 4th is not taken (the RM's
    compare-and-increment keeps it at the RM) until the queue moves."""
    r = _full_node_case(tmp_path, 3)
    starts = sorted((r[f"O{i}"]["start_s"], i) for i in range(4))
    # G0 ends at 50 -> O0 starts; G1 at 60 -> O1; G2 at 70 -> O2; O0 ends at 60 -> O3 ...
    assert [s for s, _ in starts[:3]] == [50.0, 60.0, 60.0]
    assert r["O0"]["opp_queue_s"] == pytest.approx(45.0)
    # the fourth never waited in the NM queue as long as the first three
    assert min(r[f"O{i}"]["opp_queue_s"] for i in range(4)) < 45.0


def test_over_allocation_starts_at_the_next_utilization_check(tmp_path: Path) -> None:
    """Node 2048 MB, utilization threshold 0.75, preemption 0.8; guaranteed 1024 + 824 MB
    allocated using 512 MB: a queued 512 MB opportunistic container starts at the next
    check (headroom 0.75 x 2048 - 512 = 1024 MB), not at its arrival."""
    def case(used_each: float, root: Path) -> dict[str, dict]:
        trace = _trace(root, [
            {"task_id": "G1", "submit_s": 0.0, "duration_s": 100.0, "mem": 1024.0,
             "mem_used": used_each, "cpu_used": 0.5, "priority": 5},
            {"task_id": "G2", "submit_s": 0.0, "duration_s": 100.0, "mem": 824.0,
             "mem_used": used_each, "cpu_used": 0.5, "priority": 5},
            {"task_id": "O", "submit_s": 1.0, "duration_s": 10.0, "mem": 512.0,
             "mem_used": 100.0, "cpu_used": 0.5, "priority": 0},
        ])
        replay(trace, "yarn-uniform", _opp(opp_overalloc_cpu=0.75, opp_overalloc_mem=0.75,
                                           opp_preempt_cpu=0.8, opp_preempt_mem=0.8),
               0, root / "run")
        return _runs(root / "run")

    low = case(256.0, tmp_path / "low")
    assert low["O"]["start_s"] == 3.0  # the first check after its arrival at 1 s
    assert low["O"]["opp_queue_s"] == pytest.approx(2.0)
    high = case(750.0, tmp_path / "high")  # 1500 MB used: headroom 36 MB, stays queued
    assert high["O"]["start_s"] == 100.0  # until the guaranteed containers end


def test_usage_over_time_drives_over_allocation_preemption(tmp_path: Path) -> None:
    """G's measured memory rises from 256 to 1400 MB after 10 s of work: the opportunistic
    container started on over-allocation is killed at the next check above 0.8."""
    trace = _trace(tmp_path, [
        {"task_id": "G", "submit_s": 0.0, "duration_s": 100.0, "mem": 1536.0,
         "mem_used": 900.0, "priority": 5},
        {"task_id": "O", "submit_s": 1.0, "duration_s": 50.0, "mem": 1024.0,
         "mem_used": 500.0, "priority": 0},
    ], usage=[{"task_id": "G", "start_s": 0.0, "end_s": 10.0, "cpu": 0.5, "mem": 256.0},
              {"task_id": "G", "start_s": 10.0, "end_s": 100.0, "cpu": 0.5, "mem": 1400.0}])
    result = replay(trace, "yarn-uniform", _opp(opp_overalloc_cpu=0.75, opp_overalloc_mem=0.75,
                                                opp_preempt_cpu=0.8, opp_preempt_mem=0.8),
                    0, tmp_path / "run")
    r = _runs(tmp_path / "run")
    assert r["O"]["opp_kills"] == 1
    assert r["O"]["opp_wasted_s"] == pytest.approx(9.0)  # started at 3, killed at 12
    assert r["O"]["start_s"] == 100.0  # no headroom again until G ends
    # G's usage integral follows its profile: 10 s at 256 MB, 90 s at 1400 MB
    assert r["G"]["used_mem_s"] == pytest.approx(10 * 256.0 + 90 * 1400.0)
    assert result.metrics["tasks_finished"] == 2


def test_shedding_to_the_rm_queue_limit(tmp_path: Path) -> None:
    tasks = [{"task_id": "G", "submit_s": 0.0, "duration_s": 30.0, "mem": 2048.0,
              "priority": 5}]
    tasks += [{"task_id": f"O{i}", "submit_s": 1.0, "duration_s": 5.0, "mem": 512.0,
               "priority": 0} for i in range(3)]
    trace = _trace(tmp_path, tasks)
    replay(trace, "yarn-uniform", _opp(opp_nm_queue=3, opp_min_queue=1, opp_max_queue=1),
           0, tmp_path / "run")
    r = _runs(tmp_path / "run")
    assert sum(r[f"O{i}"]["opp_shed"] for i in range(3)) >= 2
    assert all(r[f"O{i}"]["outcome"] == "finished" for i in range(3))


@pytest.mark.parametrize("params", [
    {"opp_by": "percent", "opp_overalloc_cpu": 0.5},
    {"opp_by": "percent", "opp_overalloc_cpu": 0.8, "opp_overalloc_mem": 0.8,
     "opp_preempt_cpu": 0.7},
    {"opp_by": "percent", "opp_overalloc_mem": 1.5},
    {"opp_by": "nonsense"},
    {"opp_typo": 1},
])
def test_bad_settings_are_usage_errors(params: dict) -> None:
    with pytest.raises(UsageError):
        make_policy("yarn-uniform", params)


def test_layer_composes_with_the_queue_schedulers(tmp_path: Path) -> None:
    tasks = [{"task_id": f"t{i}", "job_id": f"j{i % 3}", "submit_s": float(i % 7),
              "duration_s": 20.0 + i, "mem": 100.0, "priority": i % 2} for i in range(40)]
    trace = _trace(tmp_path, tasks, n=2)
    for policy in ("capacity-scheduler", "fair-scheduler", "drf"):
        result = replay(trace, policy, {"opp_by": "percent", "opp_percent": 20}, 0,
                        tmp_path / policy)
        r = pl.read_parquet(tmp_path / policy / "task_runs.parquet")
        assert result.metrics["tasks_finished"] == 40
        # MapReduce's rule: the first 20 maps of each hundred, so every map of these jobs
        # (14, 13 and 13 maps), each started once where it was sent
        assert r["opportunistic"].all() and (r["opp_starts"] == 1).all()


@pytest.mark.parametrize(("rows", "message"), [
    ([{"task_id": "nope", "start_s": 0.0, "end_s": 1.0, "cpu": 0.1, "mem": 1.0}],
     "nope"),
    ([{"task_id": "b", "start_s": 0.0, "end_s": 1.0, "cpu": 0.1, "mem": 1.0},
      {"task_id": "a", "start_s": 0.0, "end_s": 1.0, "cpu": 0.1, "mem": 1.0}],
     "order"),
])
def test_bad_usage_rows_are_one_line_errors(tmp_path: Path, rows: list[dict],
                                            message: str) -> None:
    from pipeline.errors import TraceError

    trace = _trace(tmp_path, [
        {"task_id": "a", "submit_s": 0.0, "duration_s": 10.0, "mem": 100.0},
        {"task_id": "b", "submit_s": 1.0, "duration_s": 10.0, "mem": 100.0}], usage=rows)
    with pytest.raises(TraceError, match=message):
        replay(trace, "yarn-uniform", {}, 0, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_task_asking_for_a_gpu_is_always_guaranteed(tmp_path: Path) -> None:
    """GPUs are not over-subscribed: of two free-tier tasks, the one asking for a GPU runs
    as a guaranteed container bound to a device, the other as opportunistic; a policy that
    sends a GPU task as opportunistic anyway is refused by the core."""
    machines = [{"machine_id": "m0", "cpu": BIG_CPU, "mem": 2048.0, "gpu": 1.0}]
    rows = [{"task_id": "cpu", "job_id": "j0", "submit_s": 0.0, "duration_s": 10.0,
             "cpu": 1.0, "mem": 100.0, "gpu": 0.0, "priority": 0},
            {"task_id": "gpu", "job_id": "j0", "submit_s": 0.0, "duration_s": 10.0,
             "cpu": 1.0, "mem": 100.0, "gpu": 0.5, "priority": 0}]
    trace = write_trace(tmp_path / "trace", machines, rows, window_end_s=1000.0)
    replay(trace, "yarn-uniform", _opp(), 0, tmp_path / "run")
    r = _runs(tmp_path / "run")
    assert r["cpu"]["opportunistic"] and not r["gpu"]["opportunistic"]
    assert r["gpu"]["outcome"] == r["cpu"]["outcome"] == "finished"

    from pipeline.policies.layers.opportunistic.types import ContainerTypes
    from pipeline.sim.interface import PolicyError

    original = ContainerTypes.mask
    ContainerTypes.mask = lambda self, pending: np.ones(len(pending), np.bool_)  # type: ignore
    try:
        with pytest.raises(PolicyError, match="asks for a GPU"):
            replay(trace, "yarn-uniform", _opp(), 0, tmp_path / "bad")
    finally:
        ContainerTypes.mask = original  # type: ignore[method-assign]
