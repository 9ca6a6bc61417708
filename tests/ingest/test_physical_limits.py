"""Values no real trace can hold (``1e30``: a corrupt file or a unit mistake) are rejected and
counted by reason at ingest, on every adapter that read them before; SWF headers are read
as whole values or fall back as documented (pipeline.ingest.limits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.ingest.stage import ingest
from pipeline.trace.validate import validate
from tests.ingest.test_google2019 import make_src, res, write_part

ROOT = Path(__file__).resolve().parents[2]
SLS = ROOT / ".." / "shared" / "traces" / "hadoop-sls" / "inputsls.json"
NODES = "sn,cpu_milli,memory_mib,gpu,model\n"
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n")


def test_openb_node_and_pod_past_any_machine(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "openb_node_list_all_node.csv").write_text(
        NODES + "n0,32000,1e30,1,T4\nn1,32000,262144,1,T4\nn2,1e30,1024,0,\n")
    (src / "openb_pod_list_default.csv").write_text(
        PODS + "p0,1e30,1024,1,500,,LS,Running,0,10,0\np1,1000,1e30,1,500,,LS,Running,0,10,0\n"
        "p2,1000,1024,1,500,,LS,Running,0,1e30,0\np3,1000,1024,1,500,,LS,Running,0,10,0\n")
    m = ingest("alibaba-gpu2023", src, tmp_path / "out")
    assert m.rows_rejected == {
        "node_list": {"above_physical_limit:memory_mib": 1, "above_physical_limit:cpu_milli": 1},
        "pod_list": {"above_physical_limit:cpu_milli": 1, "above_physical_limit:memory_mib": 1,
                     "above_physical_limit:deletion_time": 1}}
    assert m.rows == {"machines": 1, "jobs": 1, "tasks": 1}
    assert validate(tmp_path / "out").ok


def _swf(tmp: Path, max_procs: str, run_time: str = "100") -> dict:
    src = tmp / "src"
    src.mkdir()
    (src / "log.swf").write_text(
        f"; Version: 2.2\n; MaxProcs: {max_procs}\n"
        f"1 0 10 {run_time} 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\n"
        "2 5 10 50 8 -1 -1 8 200 -1 1 1 1 1 1 1 -1 -1\n")
    m = ingest("swf", src, tmp / "out")
    return {"notes": m.notes["machines"], "rejected": m.rows_rejected,
            "repaired": m.repaired}


@pytest.mark.parametrize(("header", "pool"), [
    ("64", "64 processors (header MaxProcs)"),
    ("338 (batch partition)", "338 processors (header MaxProcs)"),
    ("1e30", "8 processors (no usable MaxProcs header"),
    ("12abc", "8 processors (no usable MaxProcs header"),
    ("1000000000000", "8 processors (no usable MaxProcs header"),
])
def test_swf_max_procs_is_a_whole_value_or_the_documented_fallback(
        tmp_path: Path, header: str, pool: str) -> None:
    """``MaxProcs: 12abc`` was read as 12 and ``1e30`` as 1 (leading digits); now a header
    whose first word is not a whole number a machine can have falls back to the largest job
    size, counted as a repair."""
    got = _swf(tmp_path, header)
    assert pool in got["notes"]
    fallback = "no usable" in pool
    assert got["repaired"].get("machines", {}).get(
        "max_procs_unreadable_largest_job_used", 0) == int(fallback)


def test_swf_run_time_past_any_trace_is_rejected(tmp_path: Path) -> None:
    got = _swf(tmp_path, "64", run_time="1e30")
    assert got["rejected"] == {"swf": {"above_physical_limit:run_time": 1}}


def test_sls_container_end_past_any_trace_is_rejected(tmp_path: Path) -> None:
    if not SLS.exists():
        pytest.skip(f"SLS sample not found under {SLS.parent.resolve()}")
    text = SLS.read_text().replace('"container.end.ms": 23707', '"container.end.ms": 1e30', 1)
    assert "1e30" in text
    src = tmp_path / "src"
    src.mkdir()
    (src / "inputsls.json").write_text(text)
    m = ingest("sls", src, tmp_path / "out")
    assert m.rows_rejected["sls_containers"] == {
        "above_physical_limit:container.end.ms": 1}


def test_google2019_capacity_above_the_largest_machine_is_rejected(tmp_path: Path) -> None:
    """Capacities are fractions of the largest machine of all the traces (the format's
    documentation): a machine event with memory 1e30 describes no machine."""
    src = make_src(tmp_path, usage=False)
    write_part(src, "machine_events", [json.dumps(
        {"time": 0, "machine_id": 104, "type": 1, "capacity": res(0.5, 1e30)})], part=1)
    m = ingest("google2019", src, tmp_path / "out")
    assert m.rows_rejected["machine_events"] == {
        "above_physical_limit:capacity_memory": 1}
    assert validate(tmp_path / "out").ok
