"""The report's Kubernetes part: real replays of kube-scheduler on Cluster Autoscaler
clusters beside the status quo, the section's figures traced back to the warehouse; absent
when no run used a Kubernetes cluster."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay
from pipeline.report import report
from pipeline.warehouse import load, sql

CATALOG = ("instance_type,cpu,memory_gib,price_per_hour\n"
           "n4,4,16,0.2\n"  # general purpose
           "c4,4,8,0.17\n")  # compute: the pods ask for little memory, so it is cheaper
Built = tuple[Path, dict[str, Any], Path]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("k8s-report")
    (root / "catalog.csv").write_text(CATALOG)
    machines = [{"machine_id": f"m{i}", "cpu": 4.0, "mem": 16.0} for i in range(3)]
    tasks = [{"task_id": f"t{i}", "job_id": f"j{i % 3}", "submit_s": 400.0 * (i // 4),
              "duration_s": 900.0 + 300.0 * (i % 5), "cpu": 1.0, "mem": 1.0}
             for i in range(16)]
    trace = write_trace(root / "trace", machines, tasks, window_end_s=4 * 3600.0)
    ca = {"catalog": str(root / "catalog.csv"), "vcpu_per_unit": 1.0, "gib_per_unit": 1.0}
    replay(trace, "yarn-uniform", {}, 0, root / "fixed")
    replay(trace, "kube-scheduler", {}, 0, root / "quo", cluster="cluster-autoscaler",
           cluster_options={**ca, "autoscaler_flags": "--nodes=0:10:n4"})
    replay(trace, "kube-scheduler", {"scoring": "MostAllocated"}, 0, root / "price",
           cluster="cluster-autoscaler",
           cluster_options={**ca, "autoscaler_flags":
                            "--nodes=0:10:n4 --nodes=0:10:c4 --expander=price"})
    db = root / "wh.duckdb"
    load([root / "fixed", root / "quo", root / "price"], db)
    return root / "report", report(db, root / "report"), db


def _section(page: str, key: str) -> str | None:
    found = re.search(rf'<section id="[\w.-]*?-?{key}">(.*?)</section>', page, re.S)
    return found.group(1) if found else None


def test_the_section_names_the_cheapest_setting_with_the_warehouse_figures(built: Built) -> None:
    out, result, db = built
    _, rows = sql(db, "select cluster_label, scoring, cost_usd, is_status_quo, cost_saved_pct "
                      "from kubernetes_comparison order by cost_usd")
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("CA 2 types price", "MostAllocated", False), ("CA n4", "LeastAllocated", True)]
    cheap, quo = rows[0][2], rows[1][2]
    assert rows[0][4] == pytest.approx(100 * (quo - cheap) / quo)
    summary = (out / "summary.md").read_text()
    lead = (f"Against the Kubernetes status quo, LeastAllocated on CA n4 (${quo:,.2f}, "
            f"p95 pod wait")
    assert lead in summary
    assert f"MostAllocated on CA 2 types price costs ${cheap:,.2f} ({rows[0][4]:.1f}% less)" \
        in summary
    page = (out / "report.html").read_text()
    assert _section(page, "kubernetes") is not None
    assert "trace-kubernetes.png" in [Path(c).name for c in result["charts"]]
    assert (out / "charts" / "trace-kubernetes.png").read_bytes()[:4] == b"\x89PNG"
    assert "Which Kubernetes scoring and autoscaler setup costs least?" in summary


def test_cost_per_instance_type_adds_up_to_each_runs_cost(built: Built) -> None:
    _, _, db = built
    _, rows = sql(db, "select t.run_id, sum(t.cost_usd), max(m.value) from instance_type_cost t "
                      "join metrics m on m.run_id = t.run_id and m.metric = 'cost_usd' "
                      "group by t.run_id")
    assert len(rows) == 2
    for _, by_type, metric in rows:
        assert by_type == pytest.approx(metric)
    # the price expander buys only c4 (cheaper, and the pods' memory fits); the status quo
    # has n4 alone: four nodes each
    _, types = sql(db, "select k.cluster_label, t.instance_type, t.instances, t.cost_share "
                       "from instance_type_cost t join kubernetes_comparison k using (run_id) "
                       "order by 1")
    assert types == [("CA 2 types price", "c4", 4, 1.0), ("CA n4", "n4", 4, 1.0)]


def test_no_kubernetes_runs_no_section(built_report: tuple[Path, dict[str, Any]]) -> None:
    out, _ = built_report
    assert _section((out / "report.html").read_text(), "kubernetes") is None


def test_the_glance_says_when_the_cheapest_setting_leaves_more_work_undone() -> None:
    from pipeline.report.kubernetes import glance

    def rows(best_left: float) -> pl.DataFrame:
        return pl.DataFrame({
            "label": ["k", "sq"], "setting": ["MostAllocated on Karpenter", "LeastAllocated on CA"],
            "cost_usd": [1105.0, 1597.0], "k8s_saved_pct": [30.8, 0.0],
            "is_status_quo": [False, True], "pods_evicted": [17546.0, 1559.0],
            "pods_preempted": [0.0, 0.0], "wasted_task_s": [3600.0, 0.0],
            "backlog_task_s": [best_left * 3600, 4333.0 * 3600]})

    more = glance(rows(14619.0))
    assert more is not None and more.caveat.endswith(
        "It leaves 14,619 task-hours of work undone at the window's end (status quo: 4,333).")
    less = glance(rows(4000.0))
    assert less is not None and "undone" not in less.caveat
