"""Over-allocation (YARN-1011 branch, apache/hadoop 0a54014) and MapReduce's opportunistic
maps: golden cases built from ``TestContainerSchedulerWithOverAllocation`` and
``RMContainerAllocator``, through the ``tracereplay replay`` CLI.

The branch's NodeManager: 2048 MB and 4 vcores for containers, over-allocation thresholds
0.75 (cpu and memory), preemption thresholds 0.8, ``NM_OVERALLOCATION_PREEMPTION_CPU_COUNT``
2, a queue of 3.  Its tests set the node's utilization by hand; here it is the sum of the
running containers' measured use (``cpu_used``/``mem_used``, or a usage profile), and the
NodeManager checks it every 3 s (at 3, 6, 9, ... s).  Priority 0 runs opportunistic
(``opp_by=priority``), priority 5 guaranteed.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pipeline.bench.workload import write_trace
from pipeline.cli import app

NODE = [{"machine_id": "m0", "cpu": 4.0, "mem": 2048.0}]
YARN_1011 = ["opp_by=priority", "opp_max_priority=0", "opp_nm_queue=3",
             "opp_overalloc_cpu=0.75", "opp_overalloc_mem=0.75", "opp_preempt_cpu=0.8",
             "opp_preempt_mem=0.8", "opp_preempt_cpu_count=2"]
USAGE = pa.schema([("task_id", pa.string()), ("start_s", pa.float64()),
                   ("end_s", pa.float64()), ("cpu", pa.float64()), ("mem", pa.float64())])


def task(name: str, submit_s: float, mem: float, cpu: float, used_mem: float,
         used_cpu: float, guaranteed: bool, duration_s: float = 200.0, **extra: object) -> dict:
    return {"task_id": name, "job_id": extra.pop("job_id", name), "submit_s": submit_s,
            "duration_s": duration_s, "cpu": cpu, "mem": mem, "cpu_used": used_cpu,
            "mem_used": used_mem, "priority": 5 if guaranteed else 0, **extra}


def replay_cli(tmp: Path, tasks: list[dict], sets: list[str], machines: list[dict] = NODE,
               usage: list[tuple] | None = None) -> dict[str, dict]:
    """``tracereplay replay`` of ``tasks`` (usage profile rows ``(task, start, end, cpu,
    mem)``); task id -> its task_runs row."""
    trace = write_trace(tmp / "trace", machines, tasks, window_end_s=1000.0)
    if usage is not None:
        columns = list(zip(*usage, strict=True))
        pq.write_table(pa.table(dict(zip(USAGE.names, columns, strict=True)), schema=USAGE),
                       trace / "task_usage.parquet")
    args = ["replay", str(trace), "--policy", "yarn-uniform", "--out", str(tmp / "run"),
            "--no-progress"]
    for s in sets:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(tmp / "run" / "task_runs.parquet")
    return {r["task_id"]: r for r in frame.to_dicts()}


@pytest.mark.parametrize(("used_each", "killed"), [(256.0, []), (900.0, ["O1"])])
def test_guaranteed_starts_by_over_allocating_when_utilization_is_low(
        tmp_path: Path, used_each: float, killed: list[str]) -> None:
    """``testKillNoOppContainersWithPartialOverallocationLowUtilization`` and its
    ``...HighUtilization`` twin (``ContainerScheduler.startGuaranteedContainers`` on
    ``UtilizationBasedResourceTracker.getAvailableResources``): O0 (1024 MB) and O1 (824 MB)
    run; G2 (512 MB) arrives with only 200 MB unallocated.  At 512 MB used the headroom
    below 0.75 x 2048 is 1024 MB: G2 starts by over-allocating and nothing is killed.  At
    1800 MB used there is none: O1, the last started, is killed for G2."""
    tasks = [task("O0", 0.0, 1024.0, 1.0, used_each, 0.25, False),
             task("O1", 0.0, 824.0, 1.0, used_each, 0.25, False),
             task("G2", 2.0, 512.0, 1.0, 100.0, 0.25, True)]
    r = replay_cli(tmp_path, tasks, YARN_1011)
    assert r["G2"]["start_s"] == 2.0 and not r["G2"]["opportunistic"]
    assert [t for t in ("O0", "O1") if r[t]["opp_kills"]] == killed
    if not killed:
        assert r["O0"]["end_s"] == r["O1"]["end_s"] == 200.0


def test_no_preemption_while_allocations_fit_the_node(tmp_path: Path) -> None:
    """``testNoPreemptionUponHighMemoryUtilizationButNoOverallocation``
    (``ContainerScheduler.getResourcesToReclaim``: min of the allocation above capacity and
    the use above the threshold): G0 and O1 take the whole node and use all of it, above
    both preemption thresholds at every check, yet the node is not over-allocated, so O1 is
    never killed and ends at 200 s."""
    tasks = [task("G0", 0.0, 1024.0, 2.0, 1024.0, 2.0, True),
             task("O1", 0.0, 1024.0, 2.0, 1024.0, 2.0, False)]
    r = replay_cli(tmp_path, tasks, YARN_1011)
    assert r["O1"]["opp_kills"] == 0 and r["O1"]["attempts"] == 1
    assert r["O1"]["start_s"] == 0.0 and r["O1"]["end_s"] == 200.0


def _memory_case(tmp: Path, g_mem: tuple[float, float], o_mem: tuple[float, float]
                 ) -> dict[str, dict]:
    """``testPreemptOpportunisticContainersUponHighMemoryUtilization``'s four containers:
    G0 1024 MB, O1 512 MB, G2 1024 MB, O3 300 MB.  G0 and G2 take the node; O1 and O3 queue
    and start by over-allocation at the 3 s check (use 40 MB); from 10 s G0 and G2 use
    ``g_mem`` (O1 and O3 use ``o_mem`` throughout)."""
    tasks = [task("G0", 0.0, 1024.0, 1.0, 10.0, 0.1, True),
             task("O1", 0.0, 512.0, 1.0, o_mem[0], 0.1, False),
             task("G2", 0.0, 1024.0, 1.0, 10.0, 0.1, True),
             task("O3", 0.0, 300.0, 1.0, o_mem[1], 0.1, False)]
    usage = [("G0", 0.0, 10.0, 0.1, 10.0), ("G0", 10.0, 200.0, 0.1, g_mem[0]),
             ("G2", 0.0, 10.0, 0.1, 10.0), ("G2", 10.0, 200.0, 0.1, g_mem[1])]
    return replay_cli(tmp, tasks, YARN_1011, usage=usage)


def test_memory_preemption_reclaims_the_use_above_the_threshold(tmp_path: Path) -> None:
    """The source's case: at 2048 MB used, 2048 - 0.8 x 2048 = 409.6 MB must be reclaimed;
    O3, the last started, would free only 300 MB of allocation, so O1 goes too, both at
    the first check after the rise (12 s)."""
    r = _memory_case(tmp_path, (1000.0, 998.0), (25.0, 25.0))
    assert r["O1"]["first_start_s"] == r["O3"]["first_start_s"] == 3.0
    assert r["O1"]["opp_kills"] == r["O3"]["opp_kills"] == 1
    assert r["O1"]["opp_wasted_s"] == r["O3"]["opp_wasted_s"] == pytest.approx(9.0)


def test_victims_are_credited_their_allocation_one_at_a_time(tmp_path: Path) -> None:
    """``pickOpportunisticContainersToReclaimResources``: at 1880 MB used, 241.6 MB must
    be reclaimed and O3's 300 MB allocation is credited, so O3 alone is killed at 12 s
    (its measured 50 MB would not have been enough); at the next check the use is still
    191.6 MB above the threshold and the node still over-allocated by O1: O1 goes at 15 s;
    then the node fits its capacity and nothing more is killed, though G0 and G2 alone use
    more than 0.8 x 2048."""
    r = _memory_case(tmp_path, (900.0, 880.0), (50.0, 50.0))
    assert r["O3"]["opp_kills"] == 1 and r["O3"]["opp_wasted_s"] == pytest.approx(9.0)
    assert r["O1"]["opp_kills"] == 1 and r["O1"]["opp_wasted_s"] == pytest.approx(12.0)
    assert r["O1"]["outcome"] == r["O3"]["outcome"] == "finished"
    # asked for again, they wait at the node until G0 and G2 end at 200 s
    assert r["O1"]["start_s"] >= 200.0 and r["O3"]["start_s"] >= 200.0


def test_cpu_preemption_waits_for_more_than_count_high_checks(tmp_path: Path) -> None:
    """``testPreemptionUponHighCPUUtilization`` (``SnapshotBasedOverAllocationPreemption
    Policy``, count 2): G0 and G2 (2 vcores each) take the node's 4; O1 and O3 (1 vcore)
    start by over-allocation at the 3 s check.  From 5 s the node uses 4.1 vcores, above
    0.8 x 4: nothing at the 6 and 9 s checks, O3 killed at the third (12 s), the count
    starts again, and O1 goes at the third check after (21 s)."""
    tasks = [task("G0", 0.0, 512.0, 2.0, 10.0, 0.05, True),
             task("O1", 0.0, 512.0, 1.0, 10.0, 0.05, False),
             task("G2", 0.0, 512.0, 2.0, 10.0, 0.05, True),
             task("O3", 0.0, 512.0, 1.0, 10.0, 0.05, False)]
    usage = [(g, a, b, c, 10.0) for g in ("G0", "G2")
             for a, b, c in ((0.0, 5.0, 0.05), (5.0, 200.0, 2.0))]
    r = replay_cli(tmp_path, tasks, YARN_1011, usage=usage)
    assert r["O1"]["first_start_s"] == r["O3"]["first_start_s"] == 3.0
    assert r["O3"]["opp_kills"] == 1 and r["O3"]["opp_wasted_s"] == pytest.approx(9.0)
    assert r["O1"]["opp_kills"] == 1 and r["O1"]["opp_wasted_s"] == pytest.approx(18.0)


def test_mapreduce_makes_the_first_maps_of_each_hundred_opportunistic(tmp_path: Path) -> None:
    """``RMContainerAllocator.ScheduledRequests.addMap`` with
    ``mapreduce.job.num-opportunistic-maps-percent`` 10: a map is opportunistic while the
    job's ``mapsMod100`` counter is below 10, so of a job's 120 maps the first ten and
    maps 100-109 are, and its reduces never."""
    maps = [{"task_id": f"m{i:03d}", "job_id": "j", "submit_s": 0.0, "duration_s": 10.0,
             "cpu": 1.0, "mem": 1.0, "task_kind": "map"} for i in range(120)]
    reduces = [{"task_id": f"r{i}", "job_id": "j", "submit_s": 0.0, "duration_s": 10.0,
                "cpu": 1.0, "mem": 1.0, "task_kind": "reduce"} for i in range(2)]
    machines = [{"machine_id": f"m{i}", "cpu": 100.0, "mem": 100.0} for i in range(2)]
    r = replay_cli(tmp_path, maps + reduces, ["opp_by=percent", "opp_percent=10"], machines)
    opp = sorted(t for t, row in r.items() if row["opportunistic"])
    assert opp == [f"m{i:03d}" for i in [*range(10), *range(100, 110)]]


def test_a_killed_map_is_a_new_request_for_the_counter(tmp_path: Path) -> None:
    """A killed attempt's map is asked for again through ``addMap`` (only a *failed*
    attempt's is always guaranteed): at 3 percent, M0-M2 (600 MB each) are the job's
    opportunistic maps 0-2.  At 1 s a reduce of 800 MB (always guaranteed) needs 552 MB
    more than the 248 MB left: the NodeManager kills M2, the last started.  M2's new
    request is the job's fourth map request, so guaranteed: placed at 2 s, it kills M1,
    whose new request is guaranteed too and kills M0 at 3 s; M0, guaranteed, waits for the
    reduce to end at 11 s."""
    tasks = [{"task_id": f"M{i}", "job_id": "j", "submit_s": 0.0, "duration_s": 50.0,
              "cpu": 1.0, "mem": 600.0, "task_kind": "map"} for i in range(3)]
    tasks.append({"task_id": "R", "job_id": "j", "submit_s": 1.0, "duration_s": 10.0,
                  "cpu": 1.0, "mem": 800.0, "task_kind": "reduce"})
    machines = [{"machine_id": "m0", "cpu": 100.0, "mem": 2048.0}]
    r = replay_cli(tmp_path, tasks, ["opp_by=percent", "opp_percent=3"], machines)
    assert all(r[m]["opp_starts"] == 1 and r[m]["opp_kills"] == 1 for m in ("M0", "M1", "M2"))
    assert not any(r[t]["opportunistic"] for t in r)
    assert [r[m]["start_s"] for m in ("M2", "M1", "M0")] == [2.0, 3.0, 11.0]
    assert r["R"]["start_s"] == 1.0 and r["R"]["opp_starts"] == 0
