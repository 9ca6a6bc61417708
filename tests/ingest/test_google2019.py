"""Google cluster-usage traces v3 ingest: hand-built NDJSON parts in the published schema."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import TraceError
from pipeline.ingest.google2019.tables import WINDOW_END_S
from pipeline.ingest.stage import ingest
from pipeline.trace.manifest import Manifest
from pipeline.trace.validate import validate

MAXINT = str(2**63 - 1)


def us(t_s: float) -> str:
    """Seconds from the window start -> trace µs, as BigQuery writes INT64 (a string)."""
    return str(600_000_000 + round(t_s * 1e6))


def res(cpus: float, memory: float) -> dict[str, float]:
    return {"cpus": cpus, "memory": memory}


def write_part(src: Path, table: str, rows: list[dict | str], part: int = 0) -> None:
    """One gzipped NDJSON part; a str row is written as is (a broken line)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    (src / f"{table}-{part:012d}.json.gz").write_bytes(
        gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))


def ie(t: str, kind: int, cid: int, idx: int, **extra: object) -> dict:
    """An instance event (ints as strings, like the export)."""
    return {"time": t, "type": str(kind), "collection_id": str(cid), "collection_type": "0",
            "instance_index": str(idx), **extra}


MACHINES = [  # ints as JSON numbers here (both spellings must read the same)
    {"time": 0, "machine_id": 101, "type": 1, "switch_id": "sw1", "platform_id": "p1",
     "capacity": res(0.5, 0.25)},
    {"time": 0, "machine_id": 102, "type": 1, "switch_id": "sw2", "capacity": res(0.25, 0.5)},
    {"time": 0, "machine_id": 103, "type": 1, "switch_id": "sw1", "capacity": res(0.5, 0.5)},
    {"time": int(us(1000)), "machine_id": 102, "type": 2},
    {"time": int(us(2000)), "machine_id": 102, "type": 1, "capacity": res(0.25, 0.5)},
    {"time": int(us(3000)), "machine_id": 102, "type": 3, "capacity": res(0.5, 0.5)},
    {"time": int(us(5000)), "machine_id": 103, "type": 2},
]
COLLECTIONS = [
    {"time": "0", "type": "0", "collection_id": "1", "collection_type": "0", "user": "u1",
     "priority": "200", "scheduling_class": "2", "scheduler": "1", "collection_name": "n1"},
    {"time": "0", "type": "0", "collection_id": "9", "collection_type": "1", "user": "u9"},
    {"time": us(50), "type": "0", "collection_id": "3", "collection_type": "0", "user": "u3",
     "alloc_collection_id": "9", "start_after_collection_ids": ["77"]},
    {"time": us(100), "type": "0", "collection_id": "2", "collection_type": "0", "user": "u2",
     "priority": "0", "scheduler": "0", "start_after_collection_ids": ["1"],
     "vertical_scaling": "3"},
]
INSTANCES = [
    ie("0", 0, 1, 0, resource_request=res(0.1, 0.05), priority="200"),  # running throughout
    ie("0", 3, 1, 0, machine_id="101"),
    ie(us(10), 0, 1, 1, resource_request=res(0.2, 0.1)),  # evicted, then rescheduled
    ie(us(20), 3, 1, 1, machine_id="102"),
    ie(us(120), 4, 1, 1, machine_id="102"),
    ie(us(120), 0, 1, 1, resource_request=res(0.2, 0.1)),
    ie(us(130), 3, 1, 1, machine_id="101"),
    ie(us(200), 10, 1, 1, machine_id="101", resource_request=res(0.3, 0.1)),  # resized
    ie(us(530), 6, 1, 1, machine_id="101"),
    ie(us(50), 0, 3, 0, resource_request=res(0.05, 0.02), alloc_collection_id="9"),
    ie(us(60), 3, 3, 0, machine_id="103"),
    ie(us(70), 5, 3, 0, machine_id="103"),
    ie("0", 0, 9, 0, resource_request=res(0.5, 0.5), collection_type="1"),  # alloc instance
    ie(us(100), 0, 2, 0, resource_request=res(0.05, 0.02), constraint=[
        {"name": "c", "value": "1", "relation": "0"}]),
    ie(us(150), 3, 2, 0, machine_id="-1"),  # a dedicated machine
    ie(us(250), 7, 2, 0, machine_id="-1"),
    ie(us(100), 0, 2, 1, resource_request=res(0.05, 0.02)),  # killed before it ran
    ie(us(300), 7, 2, 1),
    ie(us(300), 0, 4, 0, resource_request=res(0.01, 0.01)),  # job 4: no collection events
    ie(us(300), 3, 4, 0, machine_id="999"),
    ie(us(400), 6, 4, 0, machine_id="999"),
]
USAGE = [
    {"start_time": us(130), "end_time": us(430), "collection_id": "1", "instance_index": "1",
     "average_usage": res(0.15, 0.05)},
    {"start_time": us(430), "end_time": us(530), "collection_id": "1", "instance_index": "1",
     "average_usage": res(0.6, 0.2)},  # above the largest machine and the memory request
    {"start_time": us(20), "end_time": us(120), "collection_id": "1", "instance_index": "1",
     "average_usage": res(0.1, 0.1)},  # the evicted attempt
    {"start_time": us(200), "end_time": us(250), "collection_id": "1", "instance_index": "1",
     "average_usage": res(0.1, 0.1)},  # overlaps the first window
    {"start_time": us(0), "end_time": us(300), "collection_id": "5", "instance_index": "5",
     "average_usage": res(0.1, 0.1)},
    {"start_time": us(0), "end_time": us(300), "collection_id": "1", "instance_index": "0"},
]


def make_src(tmp_path: Path, usage: bool = True) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    write_part(src, "machine_events", MACHINES)
    write_part(src, "collection_events", COLLECTIONS)
    write_part(src, "instance_events", INSTANCES[:9])  # two parts: order comes from time
    write_part(src, "instance_events", INSTANCES[9:], part=1)
    if usage:
        write_part(src, "instance_usage", USAGE)
    return src


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    tmp = tmp_path_factory.mktemp("g19")
    out = tmp / "trace"
    return ingest("google2019", make_src(tmp), out), out


def _row(out: Path, table: str, key: str, value: str) -> dict:
    return pl.read_parquet(out / f"{table}.parquet").filter(pl.col(key) == value).row(
        0, named=True)


def test_tasks_mapping(trace: tuple[Manifest, Path]) -> None:
    _, out = trace
    tasks = pl.read_parquet(out / "tasks.parquet")
    assert tasks["task_id"].to_list() == ["1-0", "1-1", "3-0", "2-0", "4-0"]  # submit order
    running = _row(out, "tasks", "task_id", "1-0")
    assert (running["submit_s"], running["duration_s"], running["end_event"]) == (
        0.0, WINDOW_END_S, "censored")
    assert (running["cpu"], running["mem"], running["priority"]) == (0.1, 0.05, 200)
    assert (running["recorded_machine_id"], running["recorded_start_s"]) == ("101", 0.0)
    evicted = _row(out, "tasks", "task_id", "1-1")
    assert (evicted["submit_s"], evicted["duration_s"], evicted["end_event"]) == (
        10.0, 400.0, "finished")
    assert (evicted["trace_attempts"], evicted["trace_lost_s"]) == (2, 100.0)
    assert (evicted["recorded_machine_id"], evicted["recorded_start_s"]) == ("101", 130.0)
    assert (evicted["cpu"], evicted["mem"]) == (0.3, 0.1)  # largest request while running
    assert evicted["cpu_used"] == pytest.approx((0.15 * 300 + 0.5 * 100) / 400)
    assert evicted["mem_used"] == pytest.approx((0.05 * 300 + 0.1 * 100) / 400)
    dedicated = _row(out, "tasks", "task_id", "2-0")
    assert (dedicated["end_event"], dedicated["duration_s"]) == ("killed", 100.0)
    assert dedicated["recorded_machine_id"] is None
    assert dedicated["depends_on"] == ["1-0", "1-1"]  # start_after_collection_ids
    failed = _row(out, "tasks", "task_id", "3-0")
    assert (failed["end_event"], failed["duration_s"], failed["depends_on"]) == (
        "failed", 10.0, None)
    assert _row(out, "tasks", "task_id", "4-0")["recorded_machine_id"] is None  # unknown


def test_jobs_machines_and_usage(trace: tuple[Manifest, Path]) -> None:
    _, out = trace
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert sorted(jobs["job_id"]) == ["1", "2", "3", "4"]  # alloc set 9 is not a job
    one = _row(out, "jobs", "job_id", "1")
    assert (one["user"], one["priority"], one["sched_class"], one["queue"], one["name"]) == (
        "u1", 200, 2, "batch", "n1")
    assert _row(out, "jobs", "job_id", "2")["queue"] == "default"
    assert _row(out, "jobs", "job_id", "4")["user"] == "4"
    machines = pl.read_parquet(out / "machines.parquet")
    assert machines["machine_id"].to_list() == ["101", "102", "103"]
    m102 = _row(out, "machines", "machine_id", "102")
    assert (m102["cpu"], m102["mem"], m102["rack"], m102["removed_s"]) == (0.5, 0.5, "sw2", None)
    assert _row(out, "machines", "machine_id", "103")["removed_s"] == 5000.0
    assert _row(out, "machines", "machine_id", "101")["platform"] == "p1"
    down = pl.read_parquet(out / "machine_downtime.parquet")
    assert down.rows() == [("102", 1000.0, 2000.0)]
    usage = pl.read_parquet(out / "task_usage.parquet")
    assert usage.rows() == [("1-1", 0.0, 300.0, 0.15, 0.05), ("1-1", 300.0, 400.0, 0.5, 0.1)]


def test_manifest_accounting(trace: tuple[Manifest, Path]) -> None:
    m, out = trace
    assert validate(out).ok, validate(out).first()
    assert m.window_end_s == WINDOW_END_S and m.units["cpu"].startswith("normalized")
    assert m.input_rows == {"collection_events": 4, "instance_events": 21,
                            "instance_usage": 6, "machine_events": 7}
    assert m.rows_rejected == {
        "collection_events": {"alloc_set_not_replayed": 1},
        "instance_events": {"alloc_set_not_replayed": 1},
        "instance_usage": {"missing_usage": 1, "outside_task_life": 1,
                           "overlapping_sample": 1, "unknown_task": 1},
    }
    assert m.dropped == {"job_dependencies": {"parent_not_in_trace": 1},
                         "tasks": {"never_scheduled": 1}}
    assert m.repaired["tasks"] == {
        "censored_at_window_end": 1, "dedicated_machine": 1, "recorded_machine_not_in_machines": 1,
        "request_resized_took_max": 1, "started_before_window": 1, "terminal_while_pending": 1,
    }
    assert m.repaired["jobs"] == {"job_without_collection_events": 1}
    assert m.repaired["task_usage"] == {"cpu_above_machine_clipped": 1,
                                        "mem_above_request_clipped": 1}
    assert "1 instance event rows with constraints" in m.notes["not_replayed"]
    assert "alloc set" in m.notes["alloc_sets"]


def test_bad_rows_are_counted_by_reason(tmp_path: Path) -> None:
    src = make_src(tmp_path, usage=False)
    write_part(src, "instance_events", [
        "{not json", "[1, 2]", "",
        json.dumps({"time": us(5), "type": "0", "instance_index": "0"}),  # no collection_id
        json.dumps(ie("12x", 0, 8, 0)),
        json.dumps(ie("-5", 0, 8, 0)),
        json.dumps(ie(us(5), 0, 8, 0, resource_request="big")),
        json.dumps(ie(us(5), 0, 8, 0, resource_request={"cpus": "NaN", "memory": 0.1})),
        json.dumps(ie(us(5), 42, 8, 0)),
        json.dumps(ie(MAXINT, 6, 8, 0)),
    ], part=2)
    m = ingest("google2019", src, tmp_path / "out")
    assert m.rows_rejected["instance_events"] == {
        "after_window": 1, "alloc_set_not_replayed": 1, "bad_number:time": 1,
        "missing_value:collection_id": 1, "negative_value:time": 1, "not_an_object": 1,
        "not_finite:resource_request_cpus": 1, "unexpected_json_type": 1,
        "unknown_event_type": 1, "unparsable_json": 1,
    }
    assert m.input_rows["instance_events"] == 21 + 9 + 1 - 1  # the empty line is not a row
    example = next(e for e in m.examples if e["reason"] == "unparsable_json")
    assert (example["path"], example["line"]) == ("instance_events-000000000002.json.gz", 1)
    assert validate(tmp_path / "out").ok


def test_missing_required_table_is_one_line(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    (src / "collection_events-000000000000.json.gz").unlink()
    with pytest.raises(TraceError, match="required table 'collection_events' not found") as err:
        ingest("google2019", src, tmp_path / "out")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_all_rows_unusable_is_an_error(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    for part in src.glob("instance_events-*"):
        part.unlink()
    write_part(src, "instance_events", ["oops", "{]"])
    with pytest.raises(TraceError, match="no usable rows in table instance_events"):
        ingest("google2019", src, tmp_path / "out")


def test_small_blocks_read_the_same(tmp_path: Path) -> None:
    from pipeline.ingest.google2019 import Google2019
    from pipeline.ingest.registry import ADAPTERS

    assert ADAPTERS["google2019"].endswith(":Google2019")
    src = make_src(tmp_path)
    whole = ingest("google2019", src, tmp_path / "a")
    adapter = Google2019(block_bytes=64)  # shorter than a line: blocks grow to whole lines
    from pipeline.trace.io import atomic_dir
    from pipeline.trace.manifest import Ledger

    with atomic_dir(tmp_path / "b") as tmp:
        ledger, manifest = Ledger(), Manifest(source_format="google2019")
        adapter.run(src, tmp, ledger, manifest)
        ledger.fill(manifest)
    assert manifest.rows_rejected == whole.rows_rejected
    assert pl.read_parquet(tmp_path / "a" / "tasks.parquet").equals(
        pl.read_parquet(tmp_path / "b" / "tasks.parquet"))
