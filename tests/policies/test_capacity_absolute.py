"""Absolute-resource capacities (``[memory=...,vcores=...]``) in the capacity-scheduler."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies.capacity.config import from_xml
from pipeline.policies.capacity.resources import QueueCaps
from pipeline.policies.queues.tree import QueueTree
from pipeline.replay import replay

POLICY = "capacity-scheduler"
P = "yarn.scheduler.capacity."
GIB = 1024


def _xml(path: Path, props: dict[str, str]) -> Path:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>"
                   for k, v in props.items())
    path.write_text(f"<configuration>{body}</configuration>")
    return path


def _two(a: str, b: str, **extra: str) -> dict[str, str]:
    return {P + "root.queues": "a,b", P + "root.a.capacity": a, P + "root.b.capacity": b,
            P + "maximum-am-resource-percent": "0.5", **extra}


def _workload(n_users: int = 4) -> tuple[list[dict], list[dict]]:
    """b's jobs fill the cluster from t=0; a's arrive from t=20 and compete for memory."""
    tasks, jobs = [], []
    for k in range(12):
        queue, user = ("b", "a")[k // 4 > 0], f"u{k % n_users}"
        submit = 0.0 if queue == "b" else 20.0 + 5.0 * k
        jobs.append({"job_id": f"j{k}", "user": user, "queue": queue, "submit_s": submit})
        tasks += [{"task_id": f"j{k}t{i}", "job_id": f"j{k}", "submit_s": submit,
                   "duration_s": 80.0 + 7 * (i % 5), "cpu": 1.0 + (i % 3), "mem": 2.0}
                  for i in range(30)]
    return tasks, jobs


def _runs(tmp_path: Path, trace: Path, props: dict[str, str], name: str,
          **kw: object) -> pl.DataFrame:
    config = _xml(tmp_path / f"{name}.xml", props)
    replay(trace, POLICY, {"config": str(config)}, 0, tmp_path / name, **kw)
    return pl.read_parquet(tmp_path / name / "task_runs.parquet").drop("run_id")


@pytest.mark.parametrize("calc", ["default", "dominant"])
def test_absolute_equals_the_equivalent_percentages_on_a_fixed_cluster(
        tmp_path: Path, calc: str) -> None:
    tasks, jobs = _workload()
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        tasks, jobs)
    common = {P + "resource-calculator": calc, P + "root.b.user-limit-factor": "10",
              "yarn.resourcemanager.scheduler.monitor.enable": "true",
              P + "root.a.minimum-user-limit-percent": "50"}
    pct = _runs(tmp_path, trace, _two("60", "40", **common), "pct")
    ab = _runs(tmp_path, trace, _two(f"[memory={60 * GIB},vcores=120]",
                                     f"[memory={40 * GIB},vcores=80]", **common), "abs")
    assert pct.filter(pl.col("preemptions") > 0).height > 0  # the case exercises preemption
    assert pct.equals(ab)


def test_absolute_scales_with_an_elastic_cluster(tmp_path: Path) -> None:
    """Guarantees add up to 10 nodes; the elastic cluster has 2..8: Hadoop scales them by
    cluster / configured at every size, i.e. 60/40 of whatever is up -- the percent run."""
    tasks, jobs = _workload()
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 20.0, "mem": 10.0}],
                        tasks, jobs)
    options = {"node_cpu": 20.0, "node_mem": 10.0, "min_nodes": 2, "max_nodes": 8,
               "initial_nodes": 2, "boot_delay_s": 10.0, "upscale_wait_s": 5.0,
               "idle_s": 20.0}
    common = {P + "root.a.user-limit-factor": "1", P + "root.b.user-limit-factor": "1"}
    kw = {"cluster": "elastic", "cluster_options": options}
    pct = _runs(tmp_path, trace, _two("60", "40", **common), "pct", **kw)
    ab = _runs(tmp_path, trace, _two(f"[memory={60 * GIB},vcores=120]",
                                     f"[memory={40 * GIB},vcores=80]", **common), "abs", **kw)
    assert pct.equals(ab)
    nodes = pl.read_parquet(tmp_path / "abs" / "node_intervals.parquet")
    assert nodes["machine_id"].n_unique() > 2  # the cluster did change size


def test_absolute_guarantee_is_not_scaled_up_on_a_larger_cluster(tmp_path: Path) -> None:
    """a = 30 GB of a 100 GB cluster, user-limit-factor 1: one user gets 30 GB (+1)."""
    tasks = [{"task_id": f"t{i}", "job_id": "j", "submit_s": 0.0, "duration_s": 100.0,
              "cpu": 1.0, "mem": 1.0} for i in range(80)]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        tasks, [{"job_id": "j", "user": "u", "queue": "a", "submit_s": 0.0}])
    tr = _runs(tmp_path, trace, _two(f"[memory={30 * GIB}]", f"[memory={20 * GIB}]"), "r",
               horizon_s=10.0)
    assert tr["start_s"].drop_nulls().len() == 31


def test_maximum_applications_follow_the_effective_share(tmp_path: Path) -> None:
    """maximum-applications 10, a = 50 GB of 200 GB (share 0.25): 2 applications at once."""
    jobs = [{"job_id": f"j{k}", "user": f"u{k}", "queue": "a", "submit_s": 0.0}
            for k in range(6)]
    tasks = [{"task_id": f"t{k}", "job_id": f"j{k}", "submit_s": 0.0, "duration_s": 50.0,
              "cpu": 1.0, "mem": 1.0} for k in range(6)]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 200.0}],
                        tasks, jobs)
    props = _two(f"[memory={50 * GIB}]", f"[memory={50 * GIB}]",
                 **{P + "maximum-applications": "10"})
    tr = _runs(tmp_path, trace, props, "r", horizon_s=60.0)
    assert sorted(tr["start_s"].drop_nulls().to_list()) == [0.0, 0.0, 50.0, 50.0]


def test_memory_in_trace_units_follows_the_manifest_or_mem_unit_mb(tmp_path: Path) -> None:
    tasks, jobs = _workload()
    mib = [dict(t, mem=t["mem"] * GIB) for t in tasks]
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0 * GIB}],
                        mib, jobs, units={"cpu": "cores", "mem": "MiB"})
    pct = _runs(tmp_path, trace, _two("60", "40"), "pct")
    ab = _runs(tmp_path, trace, _two(f"[memory={60 * GIB}]", f"[memory={40 * GIB}]"), "abs")
    assert pct.equals(ab)
    norm = write_trace(tmp_path / "n", [{"machine_id": "m0", "cpu": 1.0, "mem": 1.0}],
                       [dict(t, cpu=0.01, mem=0.01) for t in tasks], jobs,
                       units={"cpu": "normalized", "mem": "normalized: 1.0 = largest"})
    config = _xml(tmp_path / "n.xml", _two("[memory=600]", "[memory=400]"))
    with pytest.raises(UsageError, match="set mem_unit_mb"):
        replay(norm, POLICY, {"config": str(config)}, 0, tmp_path / "n1")
    replay(norm, POLICY, {"config": str(config), "mem_unit_mb": 1000.0}, 0, tmp_path / "n2")


def test_queue_rows_report_effective_absolute_values(tmp_path: Path) -> None:
    tasks, jobs = _workload()
    trace = write_trace(tmp_path / "t", [{"machine_id": "m0", "cpu": 200.0, "mem": 100.0}],
                        tasks, jobs)
    _runs(tmp_path, trace, _two(f"[memory={120 * GIB},vcores=100]",
                                f"[memory={80 * GIB},vcores=100]"), "r", horizon_s=1.0)
    q = {r["queue"]: r for r in pl.read_parquet(tmp_path / "r" / "queues.parquet")
         .iter_rows(named=True)}
    # scaled by 100/200 GB (memory) and 200/200 vcores
    assert q["root.a"]["guaranteed_mem"] == pytest.approx(60.0)
    assert q["root.a"]["guaranteed_cpu"] == pytest.approx(100.0)
    assert q["root.a"]["capacity_mode"] == "absolute"
    assert q["root.a"]["max_mem"] == pytest.approx(100.0)


# -- effective resources -----------------------------------------------------------------
def _caps(tmp_path: Path, props: dict[str, str]) -> tuple[QueueCaps, QueueTree]:
    conf = from_xml(_xml(tmp_path / "c.xml", props))
    assert conf.caps is not None
    return conf.caps.in_units(1024.0), conf.tree


def test_effective_scales_children_per_resource(tmp_path: Path) -> None:
    caps, t = _caps(tmp_path, {
        P + "root.queues": "p,q", P + "root.p.capacity": "[memory=102400,vcores=40]",
        P + "root.q.capacity": "[memory=51200,vcores=10]",
        P + "root.p.maximum-capacity": "[memory=122880,vcores=60]",
        P + "root.p.queues": "c,d", P + "root.p.c.capacity": "[memory=61440,vcores=10]",
        P + "root.p.d.capacity": "[memory=40960,vcores=10]",
        P + "root.p.d.maximum-capacity": "[memory=112640]"})
    guar, maxi = caps.effective(0, np.array([100.0, 300.0, 0.0]), 0)
    i = t.index
    # root: 150 GB asked of 300: unscaled; p: children ask exactly p's 100 GB
    assert guar[i["root.p"]].tolist() == [40.0, 100.0, 0.0]
    assert guar[i["root.p.c"]].tolist() == [10.0, 60.0, 0.0]
    # the cluster shrinks to 75 GB: root's children scaled by 75/150 (memory) and, per
    # resource as Hadoop does, vcores by 100/50 (scaled up)
    guar, maxi = caps.effective(0, np.array([100.0, 75.0, 0.0]), 0)
    assert guar[i["root.p"]].tolist() == [80.0, 50.0, 0.0]
    assert guar[i["root.p.c"]].tolist() == pytest.approx([40.0, 30.0, 0.0])
    # maxima: p's configured one capped by root's; d's 110 GB capped by p's; c's = p's
    assert maxi[i["root.p"]].tolist() == [100.0, 75.0, 0.0]
    assert maxi[i["root.p.d"]].tolist() == [100.0, 75.0, 0.0]
    assert maxi[i["root.p.c"]].tolist() == [100.0, 75.0, 0.0]


def test_effective_with_the_dominant_calculator_compares_shares(tmp_path: Path) -> None:
    caps, t = _caps(tmp_path, {P + "root.queues": "a,b",
                               P + "root.a.capacity": "[memory=10240,vcores=90]",
                               P + "root.b.capacity": "[memory=10240,vcores=30]"})
    total = np.array([100.0, 100.0, 0.0])
    # memory 20 of 100 fits, vcores 120 of 100 do not: only the dominant calculator scales
    assert caps.effective(0, total, 0)[0][t.index["root.a"]].tolist() == [90.0, 10.0, 0.0]
    scaled = caps.effective(0, total, 1)[0][t.index["root.a"]]
    assert scaled.tolist() == pytest.approx([75.0, 50.0, 0.0])


@pytest.mark.parametrize(("props", "message"), [
    ({P + "root.queues": "a,b", P + "root.a.capacity": "[memory=1024]",
      P + "root.b.capacity": "50"}, "mix absolute resources and percentages"),
    ({P + "root.queues": "a", P + "root.a.capacity": "100", P + "root.a.queues": "c",
      P + "root.a.c.capacity": "[memory=1024]"}, "either percentage"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[memory=1024]",
      P + "root.a.queues": "c", P + "root.a.c.capacity": "100"}, "either percentage"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[memory=2048]",
      P + "root.a.maximum-capacity": "[memory=1024]"}, "above the maximum"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[memory=1024]",
      P + "root.a.queues": "c,d", P + "root.a.c.capacity": "[memory=1024]",
      P + "root.a.d.capacity": "[memory=1024]"}, "add up to more than"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[memory=1024]",
      P + "root.a.maximum-capacity": "[memory=2048]", P + "root.a.queues": "c",
      P + "root.a.c.capacity": "[memory=1024]",
      P + "root.a.c.maximum-capacity": "[memory=4096]"}, "above the maximum of 'root.a'"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[vcores=4]"}, "must give memory"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[memory=4Xi]"}, "unit 'Xi'"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[disk=4]"}, "not memory=N"),
    ({P + "root.queues": "a", P + "root.a.capacity": "[memory=1024]",
      P + "root.a.maximum-capacity": "50"}, "takes an absolute maximum"),
    ({P + "root.queues": "a", P + "root.a.capacity": "100",
      P + "root.a.maximum-capacity": "[memory=1024]"}, "needs the capacity in absolute"),
])
def test_absolute_config_errors_name_the_property(tmp_path: Path, props: dict[str, str],
                                                  message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        from_xml(_xml(tmp_path / "capacity-scheduler.xml", props))
    assert "capacity-scheduler.xml: property 'yarn.scheduler.capacity." in str(info.value)


def test_units_in_absolute_values(tmp_path: Path) -> None:
    caps, t = _caps(tmp_path, {P + "root.queues": "a,b",
                               P + "root.a.capacity": "[memory=4Gi,vcores=2,yarn.io/gpu=1]",
                               P + "root.b.capacity": "[memory=1024]"})
    assert caps.min_res[0, t.index["root.a"]].tolist() == [2.0, 4.0, 1.0]


def test_shipped_absolute_example_parses() -> None:
    conf = from_xml(Path(__file__).parents[2] / "configs" / "capacity-scheduler-absolute.xml")
    assert conf.caps is not None and conf.caps.absolute[1:].all()
