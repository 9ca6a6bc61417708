"""fair-scheduler application limits (maxRunningApps per queue and user, maxAMShare): golden
cases through the ``tracereplay replay`` CLI on small canonical traces, bad values, and a
hypothesis check that running applications never exceed the limits."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.bench.workload import write_trace
from pipeline.cli import app
from pipeline.errors import UsageError
from pipeline.policies import make_policy
from pipeline.policies.fair.config import UNLIMITED
from pipeline.replay import replay
from pipeline.sim.interface import ClusterInfo

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

BIG = [{"machine_id": "m0", "cpu": 100.0, "mem": 100.0}]
SMALL = [{"machine_id": "m0", "cpu": 10.0, "mem": 10.0}]


def _trace(tmp: Path, jobs: list[tuple[str, str, str, float, int, float]],
           machines: list[dict] | None = None, cpu: float = 1.0) -> Path:
    """Jobs ``(job, user, queue, submit_s, n_tasks, duration_s)`` of 1-cpu/1-mem tasks."""
    tasks = [{"task_id": f"{j}-{i}", "job_id": j, "submit_s": s, "duration_s": d,
              "cpu": cpu, "mem": 1.0} for j, _, _, s, n, d in jobs for i in range(n)]
    rows = [{"job_id": j, "user": u, "queue": q, "submit_s": s} for j, u, q, s, _, _ in jobs]
    return write_trace(tmp / "trace", machines or BIG, tasks, rows)


def _cli(tmp: Path, trace: Path, xml: str | None = None, *sets: str) -> dict[str, list]:
    """Run ``tracereplay replay`` (optionally with an allocation file); job -> start times."""
    args = ["replay", str(trace), "--policy", "fair-scheduler", "--out", str(tmp / "run"),
            "--drain"]
    if xml is not None:
        path = tmp / "fair-scheduler.xml"
        path.write_text(f"<allocations>{xml}</allocations>")
        args += ["--set", f"allocation_file={path}"]
    for s in sets:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    tr = pl.read_parquet(tmp / "run" / "task_runs.parquet")
    starts: dict[str, list] = {}
    for job, start in tr.sort("task_id").select("job_id", "start_s").iter_rows():
        starts.setdefault(job, []).append(start)
    return starts


def test_queue_limit_runs_jobs_one_after_another(tmp_path: Path) -> None:
    """A has maxRunningApps 1: its jobs run one at a time in submission order (jb was
    submitted before ja); B, without a limit, runs at once."""
    trace = _trace(tmp_path, [("ja", "u", "A", 2.0, 3, 10.0), ("jb", "u", "A", 1.0, 3, 10.0),
                              ("j1", "u", "A", 0.0, 3, 10.0), ("jx", "u", "B", 0.0, 3, 10.0)])
    starts = _cli(tmp_path, trace, "<queue name='A'><maxRunningApps>1</maxRunningApps></queue>"
                                   "<queue name='B'/>")
    assert starts == {"j1": [0.0] * 3, "jb": [10.0] * 3, "ja": [20.0] * 3, "jx": [0.0] * 3}


def test_parent_limit_counts_its_descendants(tmp_path: Path) -> None:
    """Parent P allows 1 running app for its two leaves together."""
    trace = _trace(tmp_path, [("jx", "u", "x", 0.0, 2, 10.0), ("jy", "u", "y", 0.0, 2, 10.0),
                              ("jz", "u", "z", 0.0, 2, 10.0)])
    # the trace queues 'x' and 'y' name the leaves root.P.x and root.P.y by short name
    starts = _cli(tmp_path, trace, "<queue name='P'><maxRunningApps>1</maxRunningApps>"
                                   "<queue name='x'/><queue name='y'/></queue>"
                                   "<queue name='z'/>")
    assert starts == {"jx": [0.0] * 2, "jy": [10.0] * 2, "jz": [0.0] * 2}


def test_queue_default_applies_to_the_root_too(tmp_path: Path) -> None:
    """queueMaxAppsDefault is every queue's limit, the root's included (Hadoop's
    getQueueMaxApps): with 1, the whole cluster runs one application at a time."""
    trace = _trace(tmp_path, [("j1", "u", "A", 0.0, 1, 10.0), ("j2", "u", "B", 0.0, 1, 10.0)])
    starts = _cli(tmp_path, trace, "<queueMaxAppsDefault>1</queueMaxAppsDefault>"
                                   "<queue name='A'/><queue name='B'/>")
    assert starts == {"j1": [0.0], "j2": [10.0]}
    # the root's own setting wins over the default
    starts = _cli(tmp_path, trace, "<queueMaxAppsDefault>1</queueMaxAppsDefault>"
                                   "<queue name='root'><maxRunningApps>5</maxRunningApps>"
                                   "<queue name='A'/><queue name='B'/></queue>")
    assert starts == {"j1": [0.0], "j2": [0.0]}


def test_user_limits(tmp_path: Path) -> None:
    """userMaxAppsDefault 1, but u1 may run 2: u1's two jobs at once, u2's one by one."""
    trace = _trace(tmp_path, [("j1", "u1", "A", 0.0, 2, 10.0), ("j2", "u1", "A", 0.0, 2, 10.0),
                              ("j3", "u2", "A", 0.0, 2, 10.0), ("j4", "u2", "A", 0.0, 2, 10.0)])
    starts = _cli(tmp_path, trace, "<userMaxAppsDefault>1</userMaxAppsDefault>"
                                   "<user name='u1'><maxRunningApps>2</maxRunningApps></user>"
                                   "<queue name='A'/>")
    assert starts == {"j1": [0.0] * 2, "j2": [0.0] * 2, "j3": [0.0] * 2, "j4": [10.0] * 2}


def test_inline_parameters_without_a_file(tmp_path: Path) -> None:
    """user_max_apps / max_running_apps stand for the file defaults."""
    trace = _trace(tmp_path, [("j1", "u1", "A", 0.0, 1, 10.0), ("j2", "u1", "B", 0.0, 1, 10.0),
                              ("j3", "u2", "A", 0.0, 1, 10.0)])
    assert _cli(tmp_path, trace, None, "user_max_apps=1") == {
        "j1": [0.0], "j2": [10.0], "j3": [0.0]}
    assert _cli(tmp_path, trace, None, "max_running_apps=2") == {  # root included
        "j1": [0.0], "j2": [0.0], "j3": [10.0]}


def test_am_share_holds_a_second_am_back(tmp_path: Path) -> None:
    """10 GiB, maxAMShare 0.1: 1 GiB for AMs, so j2's AM waits until j1 ends at 20 s; j1's
    second task (not an AM) runs at once, and j1's AM counts until the job is done, not
    only while its first container runs.  -1 turns the check off; 0.5 leaves room."""
    tasks = [{"task_id": "j1-0", "job_id": "j1", "submit_s": 0.0, "duration_s": 5.0,
              "cpu": 1.0, "mem": 1.0},
             {"task_id": "j1-1", "job_id": "j1", "submit_s": 0.0, "duration_s": 20.0,
              "cpu": 1.0, "mem": 1.0},
             {"task_id": "j2-0", "job_id": "j2", "submit_s": 1.0, "duration_s": 10.0,
              "cpu": 1.0, "mem": 1.0}]
    trace = write_trace(tmp_path / "trace", SMALL, tasks, [
        {"job_id": "j1", "user": "u", "queue": "A", "submit_s": 0.0},
        {"job_id": "j2", "user": "u", "queue": "A", "submit_s": 1.0}])
    xml = "<queue name='A'><maxAMShare>{}</maxAMShare></queue>"
    assert _cli(tmp_path, trace, xml.format(0.1)) == {"j1": [0.0, 0.0], "j2": [20.0]}
    assert _cli(tmp_path, trace, xml.format(-1)) == {"j1": [0.0, 0.0], "j2": [1.0]}
    assert _cli(tmp_path, trace, xml.format(0.5)) == {"j1": [0.0, 0.0], "j2": [1.0]}
    # queueMaxAMShareDefault, and the inline parameter, do the same
    assert _cli(tmp_path, trace, "<queueMaxAMShareDefault>0.1</queueMaxAMShareDefault>"
                                 "<queue name='A'/>") == {"j1": [0.0, 0.0], "j2": [20.0]}
    assert _cli(tmp_path, trace, None, "max_am_share=0.1") == {"j1": [0.0, 0.0],
                                                               "j2": [20.0]}


@pytest.mark.parametrize(("policy", "j2_start"), [("fair", 10.0), ("drf", 1.0)])
def test_am_vcores_below_fair_and_drf_parents(tmp_path: Path, policy: str,
                                              j2_start: float) -> None:
    """10 cores, maxAMShare 0.5; j1's AM takes 4 cores.  A fair parent sets its children's
    fair share for memory only (FairSharePolicy.computeShares), so the vcore base is the
    unallocated 6 cores: limit 3 < 4 + 1, and j2 (1 core) waits for j1.  Under drf the base
    is the queue's fair share of 10 cores: limit 5 >= 4 + 1."""
    tasks = [{"task_id": "a", "job_id": "j1", "submit_s": 0.0, "duration_s": 10.0,
              "cpu": 4.0, "mem": 1.0},
             {"task_id": "b", "job_id": "j2", "submit_s": 1.0, "duration_s": 10.0,
              "cpu": 1.0, "mem": 1.0}]
    trace = write_trace(tmp_path / "trace", [{"machine_id": "m0", "cpu": 10.0, "mem": 100.0}],
                        tasks, [{"job_id": j, "user": "u", "queue": "A", "submit_s": 0.0}
                                for j in ("j1", "j2")])
    xml = (f"<defaultQueueSchedulingPolicy>{policy}</defaultQueueSchedulingPolicy>"
           "<queue name='A'/>")
    assert _cli(tmp_path, trace, xml) == {"j1": [0.0], "j2": [j2_start]}


def test_file_settings_reach_the_policy(tmp_path: Path) -> None:
    """Queue values, file defaults, parents (no AM limit), users and the queue table;
    a maxAMShare above 1 reads as 1 (Hadoop clamps it)."""
    path = tmp_path / "fs.xml"
    path.write_text(
        "<allocations><queueMaxAppsDefault>7</queueMaxAppsDefault>"
        "<queueMaxAMShareDefault>0.3</queueMaxAMShareDefault>"
        "<userMaxAppsDefault>4</userMaxAppsDefault>"
        "<user name='alice'><maxRunningApps>9</maxRunningApps></user>"
        "<queue name='p'><maxRunningApps>3</maxRunningApps><maxAMShare>0.9</maxAMShare>"
        "<aclSubmitApps>alice</aclSubmitApps>"
        "<queue name='c'><maxAMShare>-1</maxAMShare></queue></queue>"
        "<queue name='d'><maxAMShare>1.5</maxAMShare><maxRunningApps>0</maxRunningApps></queue>"
        "</allocations>")
    policy = make_policy("fair-scheduler", {"allocation_file": str(path)})
    policy.setup(ClusterInfo("fixed", 1, None, None, 0, ("alice", "bob"), ("c",)), None)
    qs = policy.queues_
    assert qs.tree.paths == ("root", "root.p", "root.d", "root.p.c")
    assert qs.max_apps.tolist() == [7, 3, 0, 7]
    assert qs.am_share.tolist() == [-1.0, -1.0, 1.0, -1.0]
    assert qs.user_limits(("alice", "bob")).tolist() == [9, 4, 4]
    rows = policy.queue_rows(np.array([10.0, 10.0, 0.0]))
    assert rows["max_running_apps"] == [7, 3, 0, 7]
    assert rows["max_am_share"] == [None, None, 1.0, -1.0]


def test_defaults_are_hadoops() -> None:
    """No file: unlimited applications, maxAMShare 0.5 on every leaf."""
    policy = make_policy("fair-scheduler", {"queues": "a:1w,b:1w,b.c:1w"})
    policy.setup(ClusterInfo("fixed", 1, None, None, 0, ("u",), ("a",)), None)
    qs = policy.queues_
    assert (qs.max_apps == UNLIMITED).all() and not qs.limits_apps
    assert qs.am_share.tolist() == [-1.0, 0.5, -1.0, 0.5]
    assert policy.limits_.check_am and not policy.limits_.count_apps


@pytest.mark.parametrize(("body", "match"), [
    ("<queue name='a'><maxRunningApps>-1</maxRunningApps></queue>",
     "queue 'root.a': <maxRunningApps> must be a whole number >= 0, got '-1'"),
    ("<queue name='a'><maxRunningApps>two</maxRunningApps></queue>", "<maxRunningApps>"),
    ("<queue name='a'><maxRunningApps>1.5</maxRunningApps></queue>", "<maxRunningApps>"),
    ("<queue name='a'><maxRunningApps/></queue>", "<maxRunningApps>"),
    ("<queue name='a'><maxAMShare>-0.5</maxAMShare></queue>",
     r"queue 'root.a': <maxAMShare> must be -1 \(off\) or a number >= 0, got '-0.5'"),
    ("<queue name='a'><maxAMShare>half</maxAMShare></queue>", "<maxAMShare>"),
    ("<queue name='a'><maxAMShare>nan</maxAMShare></queue>", "<maxAMShare>"),
    ("<queueMaxAppsDefault>-3</queueMaxAppsDefault><queue name='a'/>",
     "<allocations>: <queueMaxAppsDefault>"),
    ("<queueMaxAMShareDefault>-2</queueMaxAMShareDefault><queue name='a'/>",
     "<queueMaxAMShareDefault>"),
    ("<userMaxAppsDefault>x</userMaxAppsDefault><queue name='a'/>", "<userMaxAppsDefault>"),
    ("<user name='bob'><maxRunningApps>-2</maxRunningApps></user><queue name='a'/>",
     "<user name='bob'>: <maxRunningApps>"),
    ("<user><maxRunningApps>2</maxRunningApps></user><queue name='a'/>", "needs a name"),
    ("<user name='bob'><weight>2</weight></user><queue name='a'/>",
     "<user name='bob'>: unknown element <weight>"),
    ("<maxRunningApps>2</maxRunningApps><queue name='a'/>",
     "unknown element <maxRunningApps> in <allocations>"),
])
def test_bad_limits_name_the_file_and_element(tmp_path: Path, body: str, match: str) -> None:
    path = tmp_path / "fair-scheduler.xml"
    path.write_text(f"<allocations>{body}</allocations>")
    policy = make_policy("fair-scheduler", {"allocation_file": str(path)})
    with pytest.raises(UsageError, match=match) as err:
        policy.setup(ClusterInfo("fixed", 1, None, None, 0, ("u",), ("",)), None)
    assert str(err.value).startswith(str(path))


def test_bad_limits_through_the_cli(tmp_path: Path) -> None:
    trace = _trace(tmp_path, [("j1", "u", "A", 0.0, 1, 10.0)])
    path = tmp_path / "fair-scheduler.xml"
    path.write_text("<allocations><queue name='A'><maxAMShare>-2</maxAMShare></queue>"
                    "</allocations>")
    result = CliRunner().invoke(app, ["replay", str(trace), "--policy", "fair-scheduler",
                                      "--out", str(tmp_path / "run"),
                                      "--set", f"allocation_file={path}"])
    assert result.exit_code == 1
    assert str(path) in result.output and "<maxAMShare>" in result.output
    for setting, match in (("max_am_share=-0.5", "must be -1"),
                           ("max_am_share=1.5", "above the maximum"),
                           ("max_running_apps=-2", "below the minimum"),
                           ("user_max_apps=x", "expected int")):
        result = CliRunner().invoke(app, ["replay", str(trace), "--policy", "fair-scheduler",
                                          "--out", str(tmp_path / "run2"), "--set", setting])
        assert result.exit_code == 1 and match in result.output, (setting, result.output)
        assert setting.split("=")[0] in result.output


def _concurrent(tr: pl.DataFrame, key: str, end_s: float) -> dict:
    """Max number of distinct jobs with a running task at once, per value of ``key``."""
    ran = tr.filter(pl.col("start_s").is_not_null()).with_columns(
        pl.col("end_s").fill_null(end_s))
    out: dict = {}
    for t in ran["start_s"].unique().to_list():
        now = ran.filter((pl.col("start_s") <= t) & (pl.col("end_s") > t))
        for value, n in now.group_by(key).agg(pl.col("job_id").n_unique()).iter_rows():
            out[value] = max(out.get(value, 0), n)
    return out


def test_running_apps_never_exceed_the_limits(tmp_path: Path) -> None:
    """Generated traces: at any instant, jobs with a running task stay within the queue,
    parent and user limits; the conformance invariants still hold."""
    from hypothesis import HealthCheck, given, settings

    from tests.policies import test_conformance as conf

    xml = tmp_path / "fs.xml"
    xml.write_text("<allocations><queue name='root'><maxRunningApps>2</maxRunningApps>"
                   "<queue name='A'><maxRunningApps>1</maxRunningApps></queue>"
                   "<queue name='B'/></queue>"
                   "<user name='u1'><maxRunningApps>1</maxRunningApps></user></allocations>")
    params = {"allocation_file": str(xml), "max_am_share": 0.5}

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=conf.small_trace())
    def check(case: dict) -> None:
        for k, job in enumerate(case["jobs"]):
            job["queue"] = "AB"[k % 2]
        case["jobs"].append({"job_id": "j3", "user": "u1", "queue": "B", "submit_s": 0.0})
        for k, task in enumerate(case["tasks"]):
            task["job_id"] = f"j{k % 4}"
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        trace = conf._write(case, root / "trace")
        result = replay(trace, "fair-scheduler", params, 7, root / "a",
                        sched_interval_s=case["interval"], horizon_s=case["horizon"])
        end_s = result.run["summary"]["end_s"]
        tr = conf.check_run(case, root / "a", end_s)
        assert _concurrent(tr, "queue", end_s).get("root.A", 0) <= 1
        assert max(_concurrent(tr.with_columns(pl.lit("all").alias("all")), "all",
                               end_s).values(), default=0) <= 2
        assert _concurrent(tr, "user", end_s).get("u1", 0) <= 1

    check()
