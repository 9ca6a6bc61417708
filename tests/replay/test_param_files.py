"""File parameters (scheduler configurations): their contents are part of a run's identity."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import ClassVar

import pytest

from pipeline.bench.workload import write_trace
from pipeline.errors import UsageError
from pipeline.policies import POLICIES, Param, PolicyBase
from pipeline.policies.base import file_params
from pipeline.replay import replay

MACHINES = [{"machine_id": f"m{i}", "cpu": 4.0, "mem": 8.0} for i in range(2)]
TASKS = [{"task_id": f"t{i}", "job_id": f"j{i % 2}", "submit_s": float(i), "duration_s": 10.0,
          "cpu": 1.0, "mem": 2.0} for i in range(8)]
JOBS = [{"job_id": "j0", "user": "alice", "submit_s": 0.0},
        {"job_id": "j1", "user": "bob", "submit_s": 0.0}]


def capacity_xml(a: int) -> str:
    """A two-queue capacity-scheduler.xml with guarantees a% and (100 - a)%."""
    props = {"root.queues": "a,default", "root.a.capacity": str(a),
             "root.default.capacity": str(100 - a)}
    body = "".join(f"<property><name>yarn.scheduler.capacity.{k}</name><value>{v}</value>"
                   "</property>" for k, v in props.items())
    return f"<configuration>{body}</configuration>"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace(tmp_path_factory.mktemp("t") / "trace", MACHINES, TASKS, JOBS)


class WithTable(PolicyBase):
    name = "with-table"
    PARAMS: ClassVar[dict[str, Param]] = {
        "table": Param("", "a lookup table file", str, file=True),
        "rate": Param(1.0, "a number"),
    }


def test_file_params_are_the_declared_configuration_files() -> None:
    assert file_params(WithTable) == ["table"]
    assert file_params(POLICIES["capacity-scheduler"]) == ["config"]
    assert file_params(POLICIES["fair-scheduler"]) == ["allocation_file", "site_file"]
    assert file_params(POLICIES["yarn-uniform"]) == file_params(POLICIES["drf"]) == []


def test_run_id_follows_the_configuration_contents(trace: Path, tmp_path: Path) -> None:
    conf = tmp_path / "capacity-scheduler.xml"
    conf.write_text(capacity_xml(50))
    params = {"config": str(conf)}
    first = replay(trace, "capacity-scheduler", params, 0, tmp_path / "a")
    conf.write_text(capacity_xml(50))  # rewritten, same contents
    again = replay(trace, "capacity-scheduler", params, 0, tmp_path / "b")
    assert again.run_id == first.run_id
    sha = hashlib.sha256(capacity_xml(50).encode()).hexdigest()
    assert first.run["param_files"] == {"config": {"path": str(conf), "sha256": sha}}
    conf.write_text(capacity_xml(70))  # edited: same path, another run
    edited = replay(trace, "capacity-scheduler", params, 0, tmp_path / "c")
    assert edited.run_id != first.run_id
    inline = replay(trace, "capacity-scheduler", {}, 0, tmp_path / "d")
    assert "param_files" not in inline.run


def test_relative_configuration_paths_and_missing_files(trace: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "cs.xml").write_text(capacity_xml(50))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    params = {"config": "configs/cs.xml"}
    result = replay(trace, "capacity-scheduler", params, 0, tmp_path / "r", files_dir=tmp_path,
                    drain=True)
    assert result.run["params"]["config"] == "configs/cs.xml"  # kept as given
    assert result.metrics["tasks_finished"] == len(TASKS)
    with pytest.raises(UsageError, match="parameter 'config': no such file") as err:
        replay(trace, "capacity-scheduler", params, 0, tmp_path / "r2")  # read from the cwd
    assert "configs/cs.xml" in str(err.value) and err.value.field == "config"
    assert not (tmp_path / "r2").exists()
