"""``opportunistic_effect``: a run with opportunistic containers beside its run without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipeline.errors import TraceError
from pipeline.warehouse import load
from tests.warehouse.rundirs import (
    OPP,
    OPP_NODES,
    OPP_PARAMS,
    demo_runs,
    opp_tasks,
    opportunistic_runs,
    with_opp_columns,
    write_run,
    write_trace,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("opp-view")
    path = root / "wh.duckdb"
    load(opportunistic_runs(root), path)  # the capacity check passes: c1 is opportunistic
    return path


def _rows(db: Path) -> list[dict[str, Any]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        result = con.execute("select * from opportunistic_effect order by seed")
        names = [d[0] for d in result.description]
        return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
    finally:
        con.close()


def test_paired_run_numbers(db: Path) -> None:
    rows = _rows(db)
    assert [r["seed"] for r in rows] == [0, 1]
    row = rows[0]
    assert row["base_run_id"] is not None and row["base_run_id"] != row["run_id"]
    assert (row["opp_by"], row["opp_percent"], row["opp_overalloc_mem"], row["opp_preempt_mem"],
            row["opp_pause"], row["opp_overalloc_cpu"]) == ("percent", 30.0, 0.75, 0.9, True,
                                                            None)
    assert row["opp_settings"] == ("opp_by=percent,opp_overalloc_mem=0.75,opp_pause=true,"
                                   "opp_percent=30,opp_preempt_mem=0.9")
    assert (row["util_used_cpu"], row["base_util_used_cpu"]) == (0.5, 0.3)
    assert row["util_used_cpu_gain_pts"] == pytest.approx(20.0)
    assert row["util_used_mem_gain_pts"] == pytest.approx(5.0)
    assert row["base_util_alloc_cpu"] == pytest.approx((100 + 200 + 400 + 150 + 100) * 2
                                                       / (2 * 3600 * 4))
    assert (row["opp_started"], row["opp_killed"], row["opp_paused"], row["opp_shed"]) == (
        3, 1, 1, 0)
    assert row["task_work_s"] == pytest.approx(950.0)
    assert row["opp_wasted_share"] == pytest.approx(50.0 / 950.0)
    assert (row["opp_queue_p50_s"], row["opp_queue_p95_s"]) == (20.0, 29.0)
    # jA 300/200 and jB 400/400; jC and jD ran opportunistic and are left out
    assert row["guaranteed_jobs"] == 2
    assert row["guaranteed_slowdown_mean"] == pytest.approx(1.25)
    assert row["guaranteed_slowdown_p95"] == pytest.approx(1.0 + 0.95 * 0.5)
    assert row["node_hours"] == row["base_node_hours"] == pytest.approx(2.0)


def test_run_without_a_base_keeps_its_row(db: Path) -> None:
    row = _rows(db)[1]
    assert row["base_run_id"] is None
    assert row["opp_started"] == 3 and row["util_used_cpu"] == 0.5
    for column in ("base_util_used_cpu", "util_used_cpu_gain_pts", "base_node_hours",
                   "guaranteed_slowdown_mean", "guaranteed_jobs"):
        assert row[column] is None, column


def test_runs_before_the_layer_give_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    load(demo_runs(tmp_path), path)  # task_runs without the opportunistic columns
    assert _rows(path) == []


def test_labels_leave_unset_opp_parameters_out(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    labels = con.execute("select distinct label from policy_summary order by 1").fetchall()
    con.close()
    # the opp runs share every opp_* value but opp_by, which says the layer is on
    assert labels == [("yarn-uniform",), ("yarn-uniform opp_by=percent",)]


def test_capacity_check_still_holds_guaranteed_containers(tmp_path: Path) -> None:
    """The same placement with c1 guaranteed overfills m0: the load is refused."""
    trace = write_trace(tmp_path, tasks=len(OPP))
    run = write_run(tmp_path, "yarn-uniform", opp_tasks(OPP), OPP_NODES, trace_path=trace,
                    params=OPP_PARAMS, edit_tasks=with_opp_columns(False))
    with pytest.raises(TraceError, match="cpu over capacity"):
        load([run], tmp_path / "wh.duckdb")
