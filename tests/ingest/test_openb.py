"""Alibaba GPU 2023 (openb) ingest: the complete published trace, fixtures for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import TraceError
from pipeline.generate import generate
from pipeline.ingest.stage import ingest
from pipeline.trace.validate import validate

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / ".." / "shared" / "traces" / "alibaba-cluster-trace-gpu-v2023"
NODES = "sn,cpu_milli,memory_mib,gpu,model\n"
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n")


def _src(tmp_path: Path, nodes: str, pods: str) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "openb_node_list_all_node.csv").write_text(NODES + nodes)
    (src / "openb_pod_list_default.csv").write_text(PODS + pods)
    return src


def test_the_published_trace_ingests_with_every_row_accounted_for(tmp_path: Path) -> None:
    if not (SAMPLE / "openb_pod_list_default.csv").exists():
        pytest.skip(f"openb not found under {SAMPLE.resolve()}")
    manifest = ingest("alibaba-gpu2023", SAMPLE, tmp_path / "t")
    assert manifest.input_rows == {"node_list": 1523, "pod_list": 8152}
    assert manifest.rows == {"machines": 1523, "jobs": 8152, "tasks": 8152}
    assert not manifest.rows_rejected
    assert validate(tmp_path / "t").ok
    machines = pl.read_parquet(tmp_path / "t" / "machines.parquet")
    tasks = pl.read_parquet(tmp_path / "t" / "tasks.parquet")
    models = dict(machines.group_by("gpu_model").len().iter_rows())
    assert models == {None: 310, "G2": 549, "T4": 404, "P100": 134, "V100M16": 55, "G3": 39,
                      "V100M32": 30, "A10": 2}
    assert machines["gpu"].sum() == 6212  # 1,213 GPU nodes
    shares = tasks.filter((pl.col("gpu") > 0) & (pl.col("gpu") < 1))
    assert shares.height == 3078  # PROVENANCE: GPU-sharing pods
    assert tasks.filter(pl.col("gpu") == 0).height == 1088
    assert (tasks["trace_attempts"] == 0).sum() == 897  # Pending, never scheduled
    assert manifest.window_end_s == 12_902_960


def test_mapping_of_each_kind_of_pod(tmp_path: Path) -> None:
    src = _src(tmp_path, "n0,32000,262144,0,\nn1,96000,393216,8,G2\nn2,16000,122880,2,P100\n",
               "p0,12000,16384,1,460,,LS,Running,0,500,10\n"
               "p1,8000,8192,2,1000,G2|P100,BE,Failed,5,100,5\n"
               "p2,4000,4096,0,0,,BE,Pending,7,50,\n"
               "p3,4000,4096,1,1000,T4,LS,Succeeded,8,8,8\n")
    manifest = ingest("alibaba-gpu2023", src, tmp_path / "t")
    tasks = {r["task_id"]: r for r in pl.read_parquet(
        tmp_path / "t" / "tasks.parquet").iter_rows(named=True)}
    machines = pl.read_parquet(tmp_path / "t" / "machines.parquet")
    assert machines["gpu_model"].to_list() == [None, "G2", "P100"]
    assert machines["cpu"].to_list() == [32.0, 96.0, 16.0]
    assert tasks["p0"]["gpu"] == 0.46 and tasks["p0"]["duration_s"] == 490
    assert tasks["p0"]["recorded_start_s"] == 10 and tasks["p0"]["end_event"] == "censored"
    assert tasks["p1"]["gpu"] == 2.0 and tasks["p1"]["gpu_spec"] == ["G2", "P100"]
    assert tasks["p1"]["end_event"] == "failed"
    assert tasks["p2"]["trace_attempts"] == 0 and tasks["p2"]["duration_s"] == 43
    assert tasks["p2"]["end_event"] == "killed"
    assert tasks["p3"]["duration_s"] == 1  # deleted the second it started
    assert manifest.repaired["tasks"] == {"gpu_spec_model_absent": 1,
                                          "zero_run_time_set_to_1s": 1}
    jobs = pl.read_parquet(tmp_path / "t" / "jobs.parquet")
    assert jobs.filter(pl.col("job_id") == "p0")["queue"].item() == "LS"


def test_impossible_pods_are_rejected_by_reason(tmp_path: Path) -> None:
    src = _src(tmp_path, "n1,96000,393216,8,G2\n",
               "ok,1000,1024,1,500,,LS,Running,0,100,0\n"
               "a,1000,1024,1,1500,,LS,Running,0,100,0\n"
               "b,1000,1024,0,300,,LS,Running,0,100,0\n"
               "c,1000,1024,2,500,,LS,Running,0,100,0\n"
               "d,1000,1024,1,1000,,LS,Running,100,50,100\n"
               "e,1000,1024,1,x,,LS,Running,0,100,0\n"
               "f,1000,1024,1,1000,,LS,Running,0,100,\n"
               "g,1000,1024,9,1000,,LS,Running,0,100,0\n")
    manifest = ingest("alibaba-gpu2023", src, tmp_path / "t")
    assert manifest.rows_rejected["pod_list"] == {
        "gpu_milli_above_1000": 1, "gpu_milli_without_gpu": 1, "share_over_several_gpus": 1,
        "deleted_before_created": 1, "bad_number:gpu_milli": 1}
    assert manifest.repaired["tasks"]["more_gpus_than_any_node"] == 1
    assert manifest.rows["tasks"] == 3 and validate(tmp_path / "t").ok


def test_a_missing_pod_list_is_one_line_naming_the_table(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "openb_node_list_all_node.csv").write_text(NODES + "n1,96000,393216,8,G2\n")
    with pytest.raises(TraceError, match="pod_list") as err:
        ingest("alibaba-gpu2023", src, tmp_path / "t")
    assert "\n" not in str(err.value) and not (tmp_path / "t").exists()


def test_generate_then_ingest_round_trip(tmp_path: Path) -> None:
    summary = generate(tmp_path / "raw", "alibaba-gpu2023", machines=40, hours=2, seed=3)
    again = generate(tmp_path / "raw2", "alibaba-gpu2023", machines=40, hours=2, seed=3)
    for name in ("openb_node_list_all_node.csv", "openb_pod_list_default.csv"):
        assert (tmp_path / "raw" / name).read_bytes() == (tmp_path / "raw2" / name).read_bytes()
    assert summary["rows"] == again["rows"]
    manifest = ingest("alibaba-gpu2023", tmp_path / "raw", tmp_path / "t")
    assert validate(tmp_path / "t").ok and not manifest.rows_rejected
    stated = json.loads((tmp_path / "raw" / "generated.json").read_text())
    assert manifest.window_end_s == stated["window_end_s"] == 7200


def test_a_file_with_another_header_is_one_line_naming_the_column(tmp_path: Path) -> None:
    src = _src(tmp_path, "n1,96000,393216,8,G2\n", "p0,1000,1024,1,500,,LS,Running,0,100,0\n")
    text = (src / "openb_pod_list_default.csv").read_text().replace("num_gpu", "gpus", 1)
    (src / "openb_pod_list_default.csv").write_text(text)
    with pytest.raises(TraceError, match="column 4 is 'gpus', expected 'num_gpu'") as err:
        ingest("alibaba-gpu2023", src, tmp_path / "t")
    assert "openb_pod_list_default.csv" in str(err.value) and "\n" not in str(err.value)
