"""Effective settings: what a run used, configuration files included, and where each came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay
from pipeline.warehouse import load, sql

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
MACHINES = [{"machine_id": f"m{i}", "cpu": 8.0, "mem": 16.0} for i in range(2)]
TASKS = [{"task_id": f"t{i}", "job_id": f"j{i % 3}", "submit_s": float(i), "duration_s": 5.0,
          "cpu": 1.0, "mem": 1.0} for i in range(6)]
JOBS = [{"job_id": f"j{j}", "user": f"u{j}", "submit_s": 0.0} for j in range(3)]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace(tmp_path_factory.mktemp("t") / "trace", MACHINES, TASKS, JOBS)


def test_capacity_settings_read_from_the_config_are_the_ones_shown(trace: Path,
                                                                   tmp_path: Path) -> None:
    """The tenants config turns preemption on, sets the AM share to 0.2 and the dominant
    calculator: runs.params must say so (it used to show the inline defaults)."""
    conf = CONFIGS / "capacity-scheduler-tenants.xml"
    result = replay(trace, "capacity-scheduler", {"config": str(conf),
                                                  "groups": "hash:3:team"}, 0, tmp_path / "cs")
    settings = result.run["settings"]
    assert settings["preemption"]["value"] is True
    assert settings["preemption"]["source"].endswith(
        "yarn.resourcemanager.scheduler.monitor.enable")
    assert settings["max_am_resource_percent"]["value"] == 0.2
    assert settings["resource_calculator"]["value"] == "dominant"
    assert settings["groups"] == {"value": "hash:3:team", "source": "set"}
    assert settings["min_alloc_mem"]["source"] == "default"
    assert settings["preemption.wait_before_kill_s"]["value"] == 15.0
    assert result.run["params"]["preemption"] is False  # the inline parameter, unused
    load([tmp_path / "cs"], tmp_path / "w.duckdb")
    _, rows = sql(tmp_path / "w.duckdb", "select s.params, r.settings from policy_summary s "
                                         "join runs r using (run_id)")
    params, sources = json.loads(rows[0][0]), json.loads(rows[0][1])
    assert params["preemption"] is True and params["resource_calculator"] == "dominant"
    assert params["max_am_resource_percent"] == 0.2
    assert sources["preemption"]["source"].startswith(str(conf))


def test_fair_settings_from_the_allocation_file(trace: Path, tmp_path: Path) -> None:
    conf = CONFIGS / "fair-scheduler-tenants.xml"
    result = replay(trace, "fair-scheduler", {"allocation_file": str(conf), "preemption": True},
                    0, tmp_path / "fs")
    settings = result.run["settings"]
    assert settings["preemption"] == {"value": True, "source": "set"}
    timeouts = settings["fair_share_preemption_timeout_s"]
    assert timeouts["source"].startswith(str(conf)) and isinstance(timeouts["value"], dict)
    assert set(settings["default_policy"]["value"].values()) <= {"fair", "drf", "fifo"}


def test_policies_without_files_list_their_parameters(trace: Path, tmp_path: Path) -> None:
    result = replay(trace, "container-packing", {"high_memory_threshold": 0.8}, 0,
                    tmp_path / "p")
    assert result.run["settings"] == {
        "high_memory_threshold": {"value": 0.8, "source": "set"},
        "packing_min_nodes": {"value": 5, "source": "default"},
        "locality_delay_node_ms": {"value": 6.0, "source": "default"}}


def test_relative_config_paths_are_named_as_given(trace: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CONFIGS.parent)
    result = replay(trace, "capacity-scheduler", {"config": "configs/capacity-scheduler.xml"},
                    0, tmp_path / "rel", files_dir=CONFIGS.parent)
    sources = {s["source"] for s in result.run["settings"].values()}
    assert any(s.startswith("configs/capacity-scheduler.xml") for s in sources)
    assert not any(str(CONFIGS) in s for s in sources)  # no absolute path in run.json
