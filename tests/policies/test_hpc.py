"""HPC batch policies on SWF logs through ``tracereplay ingest swf`` and ``replay``: the
issue's golden cases, and FCFS against an independent implementation on a real log."""

from __future__ import annotations

import gzip
import heapq
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.ingest.stage import ingest
from pipeline.replay import replay

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / ".." / "shared" / "traces" / "parallel-workloads-archive-swf"


def _swf(directory: Path, procs: int, jobs: list[tuple[float, float, int, float]]) -> Path:
    """An SWF log of (submit, run, processors, requested time) jobs numbered from 1."""
    directory.mkdir(parents=True)
    lines = [f"; MaxProcs: {procs}", f"; MaxNodes: {procs}"]
    for n, (submit, run, size, asked) in enumerate(jobs, start=1):
        lines.append(f"{n} {submit:g} -1 {run:g} {size} -1 -1 {size} {asked:g} -1 1 1 1 1 1 1 "
                     "-1 -1")
    (directory / "log.swf").write_text("\n".join(lines) + "\n")
    return directory


def _starts(tmp_path: Path, log: Path, policy: str) -> dict[str, float]:
    trace, run = tmp_path / f"{log.name}-t", tmp_path / f"{log.name}-{policy}"
    if not trace.exists():
        assert CliRunner().invoke(app, ["ingest", "swf", str(log), str(trace)]).exit_code == 0
    result = CliRunner().invoke(app, ["replay", str(trace), "--policy", policy, "--drain",
                                      "--out", str(run)])
    assert result.exit_code == 0, result.output
    runs = pl.read_parquet(run / "task_runs.parquet")
    return dict(zip(runs["task_id"].to_list(), runs["start_s"].to_list(), strict=True))


# A (8 processors, 100 s) at 0, B (6, 50 s) at 1, C (2, requested and actual 5,000 s) at 2
CASE_1 = [(0, 100, 8, 100), (1, 50, 6, 50), (2, 5000, 2, 5000)]
# A (5, 100 s) at 0, B (8, 50 s) at 1, C (4, 5,000 s) at 2, D (2, 50 s) at 3
CASE_2 = [(0, 100, 5, 100), (1, 50, 8, 50), (2, 5000, 4, 5000), (3, 50, 2, 50)]


def test_golden_case_1(tmp_path: Path) -> None:
    log = _swf(tmp_path / "case1", 10, CASE_1)
    fcfs = _starts(tmp_path, log, "fcfs")
    assert (fcfs["1"], fcfs["2"], fcfs["3"]) == (0, 100, 100)
    easy = _starts(tmp_path, log, "easy-backfill")  # C fits the 4 extra processors at 100
    assert (easy["1"], easy["2"], easy["3"]) == (0, 100, 2)


def test_golden_case_2(tmp_path: Path) -> None:
    log = _swf(tmp_path / "case2", 10, CASE_2)
    fcfs = _starts(tmp_path, log, "fcfs")
    assert (fcfs["2"], fcfs["3"], fcfs["4"]) == (100, 150, 150)
    easy = _starts(tmp_path, log, "easy-backfill")  # C would delay B; D ends before 100
    assert (easy["2"], easy["3"], easy["4"]) == (100, 150, 3)


def test_a_job_without_requested_time_backfills_only_into_extra_processors(
        tmp_path: Path) -> None:
    """B's reservation at 100 leaves 2 extra processors.  Job 3 (3 processors) fits now, and
    with a requested time of 20 s it ends before 100: it backfills.  Without one it is
    planned never to end, so it may only use the extra processors: too few, it waits; job 4
    (2 processors, no requested time) takes them."""
    base = [(0, 100, 6, 100), (1, 50, 8, 50)]
    told = _starts(tmp_path, _swf(tmp_path / "told", 10, [*base, (2, 20, 3, 20)]),
                   "easy-backfill")
    assert told["3"] == 2
    untold = _starts(tmp_path, _swf(tmp_path / "untold", 10,
                                    [*base, (2, 20, 3, -1), (3, 20, 2, -1)]), "easy-backfill")
    assert (untold["2"], untold["3"], untold["4"]) == (100, 150, 3)


def _sdsc_head(tmp_path: Path, jobs: int) -> Path:
    """A directory holding SDSC-SP2's header and its first ``jobs`` job lines."""
    log = LOGS / "SDSC-SP2-1998-4.2-cln.swf.gz"
    if not log.exists():
        pytest.skip(f"SWF logs not found under {LOGS.resolve()}")
    src = tmp_path / "src"
    src.mkdir()
    lines = gzip.decompress(log.read_bytes()).decode().splitlines()
    body = [line for line in lines if not line.startswith(";")][:jobs]
    (src / "sdsc.swf").write_text("\n".join([h for h in lines if h.startswith(";")] + body))
    return src


def _fcfs_reference(jobs: pl.DataFrame, procs: float) -> dict[str, float]:
    """Strict FCFS on one pool, written apart from the policy and the core: an event loop
    over (time, kind) where completions come before arrivals at the same instant."""
    order = jobs.sort("submit_s", "task_id", maintain_order=True)
    arrivals = list(zip(order["submit_s"], order["task_id"], order["cpu"],
                        order["duration_s"], strict=True))
    running: list[tuple[float, float]] = []
    queue: list[tuple[str, float, float]] = []
    free, starts, i = procs, {}, 0
    while i < len(arrivals) or queue:
        now = min(arrivals[i][0] if i < len(arrivals) else float("inf"),
                  running[0][0] if running else float("inf"))
        while running and running[0][0] <= now:
            free += heapq.heappop(running)[1]
        while i < len(arrivals) and arrivals[i][0] <= now:
            queue.append(arrivals[i][1:])
            i += 1
        while queue and queue[0][1] <= free:
            tid, cpu, run = queue.pop(0)
            starts[tid] = now
            free -= cpu
            heapq.heappush(running, (now + run, cpu))
        if not running and i >= len(arrivals) and queue:
            break  # a job larger than the pool
    return starts


def test_fcfs_matches_an_independent_implementation_on_sdsc_sp2(tmp_path: Path) -> None:
    src = _sdsc_head(tmp_path, 4000)
    ingest("swf", src, tmp_path / "t")
    result = replay(tmp_path / "t", "fcfs", {}, 0, tmp_path / "run", drain=True)
    runs = pl.read_parquet(tmp_path / "run" / "task_runs.parquet")
    tasks = pl.read_parquet(tmp_path / "t" / "tasks.parquet")
    procs = pl.read_parquet(tmp_path / "t" / "machines.parquet")["cpu"].item()
    expected = _fcfs_reference(tasks.select("task_id", "submit_s", "cpu", "duration_s"), procs)
    got = dict(zip(runs["task_id"].to_list(), runs["start_s"].to_list(), strict=True))
    assert len(expected) == tasks.height and result.metrics["tasks_finished"] == tasks.height
    assert got == pytest.approx(expected)


def test_hpc_metrics_view_and_report_section(tmp_path: Path) -> None:
    log = _swf(tmp_path / "log", 10, [*CASE_2, (4, 30, 1, 40), (5, 9, 10, 20)])
    ingest("swf", log, tmp_path / "t")
    runs = []
    for policy in ("fcfs", "easy-backfill"):
        result = replay(tmp_path / "t", policy, {}, 0, tmp_path / policy, drain=True)
        runs.append(result.out_dir)
        m = result.metrics
        starts = dict(zip(*pl.read_parquet(result.out_dir / "task_runs.parquet").select(
            "task_id", "start_s"), strict=True))
        # job 2 (B: 8 processors, 50 s, submitted at 1) waits for A: 99 s, slowdown 149/50
        assert starts["2"] == 100
        assert m["makespan_s"] is not None and m["bsld_mean"] >= 1
    fcfs, easy = (pl.read_parquet(r / "metrics.parquet") for r in runs)
    value = {name: dict(frame.select("metric", "value").iter_rows())
             for name, frame in (("fcfs", fcfs), ("easy", easy))}
    assert value["easy"]["bsld_mean"] < value["fcfs"]["bsld_mean"]
    assert value["easy"]["job_wait_mean_s"] < value["fcfs"]["job_wait_mean_s"]
    db = tmp_path / "w.duckdb"
    from pipeline.warehouse.stage import load

    load(runs, db)
    out = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "r"),
                                   "--baseline", "fcfs"])
    assert out.exit_code == 0, out.output
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "HPC batch jobs: wait and slowdown by job size" in summary
    # drained runs: nothing claims they were measured over the log's window
    assert "until every task ended (drain)" in summary and "pays for them until" in summary
    assert "measured over this window" not in summary
    # a node-hour of an SWF log is an hour of its whole pool, and the report says so
    assert "a node-hour here is an hour of the whole pool" in summary
    glance = summary.split("## At a glance")[1].split("## Trace")[0]
    assert "Which setting finishes the same work soonest?" in glance and "saves" not in glance
    sizes = CliRunner().invoke(app, ["sql", "--db", str(db), "--format", "csv",
                                     "select label, size_class, jobs from hpc_by_size "
                                     "order by label, size_order"])
    assert sizes.stdout.splitlines()[1:3] == ["easy-backfill,1,1", "easy-backfill,2-4,2"]


@pytest.mark.parametrize("policy", ["fcfs", "easy-backfill"])
def test_pool_and_nodes_models_give_the_same_job_starts(tmp_path: Path, policy: str) -> None:
    """SDSC-SP2 has one processor per node (MaxNodes = MaxProcs = 128), so no job depends
    on node boundaries: read as 128 nodes, each job a gang of one-processor tasks, every job
    starts when it does on the 128-processor pool."""
    src = _sdsc_head(tmp_path, 1500)
    starts = {}
    for machine in ("pool", "nodes"):
        ingest("swf", src, tmp_path / machine, options={"machine": machine})
        replay(tmp_path / machine, policy, {}, 0, tmp_path / f"{machine}-run", drain=True)
        runs = pl.read_parquet(tmp_path / f"{machine}-run" / "task_runs.parquet")
        jobs = runs.group_by("job_id").agg(pl.col("start_s").min(), pl.col("start_s").max()
                                           .alias("last"), pl.len())
        assert (jobs["start_s"] == jobs["last"]).all()  # a gang starts at once
        starts[machine] = dict(zip(jobs["job_id"], jobs["start_s"], strict=True))
    assert len(starts["nodes"]) == len(starts["pool"]) > 1000
    assert starts["nodes"] == starts["pool"]
    nodes = pl.read_parquet(tmp_path / "nodes" / "machines.parquet")
    assert nodes.height == 128 and (nodes["cpu"] == 1).all()


def test_the_extra_processors_count_every_job_ending_at_the_shadow_time() -> None:
    from pipeline.policies.hpc.easy import reservation

    # 2 free now; jobs of 3 and 4 processors both end at 50: a head of 4 needs the first
    # release, and at 50 all 2 + 3 + 4 = 9 are free: 5 extra, not 1
    assert reservation(2.0, 4.0, np.array([50.0, 50.0, 90.0]), np.array([3.0, 4.0, 1.0])) == (
        50.0, 5.0)
    assert reservation(0.0, 4.0, np.array([np.inf]), np.array([8.0])) == (np.inf, 0.0)


def _first_fit_reference(free: np.ndarray, req: np.ndarray, gang: np.ndarray,
                         allow: np.ndarray | None, bits: np.ndarray | None,
                         ) -> tuple[list[int], list[int]]:
    """FCFS by hand: each job (a gang's consecutive requests) on the lowest nodes that fit,
    all its tasks or none; stop at the first job that does not fit."""
    rows: list[int] = []
    nodes: list[int] = []
    i = 0
    while i < len(req):
        j = i + 1
        while j < len(req) and gang[i] >= 0 and gang[j] == gang[i]:
            j += 1
        taken: list[int] = []
        for t in range(i, j):
            ok = [n for n in range(len(free))
                  if all(free[n, r] >= req[t, r] - 1e-9 * max(abs(req[t, r]), 1.0)
                         for r in range(3))
                  and (allow is None or bits is None or allow[t] == 0 or bits[n] & allow[t])]
            if not ok:
                for t2, n2 in zip(range(i, j), taken, strict=False):
                    free[n2] += req[t2]
                return rows, nodes
            free[ok[0]] -= req[t]
            taken.append(ok[0])
        rows += list(range(i, j))
        nodes += taken
        i = j
    return rows, nodes


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_pass_places_as_first_fit_by_hand(seed: int) -> None:
    """fcfs_pass (lowest node first, gangs whole, full nodes skipped) against a by-hand
    first fit, with down nodes, gangs that do not fit and GPU model masks."""
    from types import SimpleNamespace

    from pipeline.policies.hpc.pool import Placed, Pool, fcfs_pass, job_starts

    rng = np.random.default_rng(seed)
    n_nodes, n_req = int(rng.integers(1, 30)), int(rng.integers(0, 50))
    cap = rng.integers(1, 9, size=(n_nodes, 3)).astype(float)
    alloc = cap * rng.random((n_nodes, 3)) * rng.integers(0, 2, size=(n_nodes, 1))
    bits = (1 << rng.integers(0, 4, n_nodes)).astype(np.int64) if seed % 2 else None
    nodes = SimpleNamespace(up=rng.random(n_nodes) > 0.1, cap=cap, alloc=alloc,
                            gpu_model=bits)
    req = rng.integers(0, 5, size=(n_req, 3)) * rng.random((n_req, 1))
    gang = np.where(rng.random(n_req) < 0.5, -1, rng.integers(0, 5, n_req))
    allow = rng.integers(0, 16, n_req).astype(np.int64) if seed % 2 else None
    pool = Pool(nodes, req, allow)  # type: ignore[arg-type]
    free = pool.free.copy()
    expected = _first_fit_reference(free, req, gang, allow, bits)
    rows, got = np.empty(n_req, np.int64), np.empty(n_req, np.int64)
    n, _ = fcfs_pass(pool.room, job_starts(gang), Placed(rows, got))
    assert (rows[:n].tolist(), got[:n].tolist()) == expected
    # a gang that did not fit gave its room back (EASY's reservation counts it)
    assert np.array_equal(pool.free, free)
