"""fetch: selection, resumable verified downloads, against a loopback server only."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipeline.errors import TraceError, UsageError
from pipeline.fetch import DATASETS, fetch, select
from pipeline.fetch.datasets import dataset, parse_sha256sum

if TYPE_CHECKING:  # conftest is loaded by pytest, not importable as a package module
    from conftest import Control

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"

TASK0 = "task_events/part-00000-of-00500.csv.gz"
JOB0 = "job_events/part-00000-of-00500.csv.gz"
MACHINES = "machine_events/part-00000-of-00001.csv.gz"
DEFAULT = [JOB0, TASK0, MACHINES, "schema.csv"]


def rels(dataset_name: str, parts: list[str] | None) -> list[str]:
    return [f.rel for f in select(DATASETS[dataset_name], parts)]


def same_bytes(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


# --- selection ---------------------------------------------------------------------------


def test_google_default_is_machines_schema_and_first_event_parts() -> None:
    assert sorted(rels("google2011", None)) == sorted(DEFAULT)
    assert rels("google2011", []) == rels("google2011", None)


@pytest.mark.parametrize(("parts", "count", "first"), [
    (["task_events:0-9"], 10, TASK0),
    (["job_events:0"], 1, JOB0),
    (["machine_events"], 1, MACHINES),
    (["schema.csv"], 1, "schema.csv"),
    (["task_usage"], 500, "task_usage/part-00000-of-00500.csv.gz"),
    (["task_events:3-4,7,job_events:0"], 4, JOB0),
    (["task_events:0", "task_events:0-1"], 2, TASK0),
    (["task_events/part-00499-of-00500.csv.gz"], 1, "task_events/part-00499-of-00500.csv.gz"),
    (["all"], 4 * 500 + 2 + 2, JOB0),
])
def test_selectors(parts: list[str], count: int, first: str) -> None:
    chosen = rels("google2011", parts)
    assert len(chosen) == count == len(set(chosen))
    assert chosen[0] == first


@pytest.mark.parametrize(("parts", "needle"), [
    (["tasks"], "unknown table or file 'tasks'"),
    (["task_events:9-3"], "outside 0-499"),
    (["task_events:500"], "outside 0-499"),
    (["task_events:x"], "bad part range 'x'"),
    (["machine_events:1"], "outside 0-0"),
])
def test_bad_selectors_name_the_selector(parts: list[str], needle: str) -> None:
    with pytest.raises(UsageError, match=re.escape(needle)) as caught:
        select(DATASETS["google2011"], parts)
    assert caught.value.field == "--parts"


def test_unknown_dataset_lists_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown dataset 'borg'.*google2011"):
        dataset("borg")


def test_alibaba_defaults() -> None:
    assert rels("alibaba2017", None) == ["alibaba-trace-2017.tar.gz"]
    assert rels("alibaba2018", None) == [
        "machine_meta.tar.gz", "container_meta.tar.gz", "batch_task.tar.gz"]
    assert len(rels("alibaba2018", ["all"])) == 6


def test_alibaba2018_hashes_are_the_published_ones() -> None:
    doc = SHARED_TRACES / "alibaba-cluster-trace-v2018" / "docs" / "trace_2018.md"
    if not doc.is_file():
        pytest.skip(f"{doc} not found")
    published = dict((name, digest) for digest, name in
                     re.findall(r"^([0-9a-f]{64})  (\w+\.tar\.gz)$", doc.read_text(), re.M))
    registry = {f.rel: f.sha256 for f in DATASETS["alibaba2018"].all_files()}
    assert registry == {k: v for k, v in published.items() if k in registry}
    assert len(registry) == 6


def test_parse_sha256sum(tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUM"
    sums.write_text(f"{'a' * 64}  ./job_events/x.csv.gz\n{'B' * 64} *schema.csv\n\n")
    assert parse_sha256sum(sums) == {"job_events/x.csv.gz": "a" * 64, "schema.csv": "b" * 64}
    sums.write_text(f"{'a' * 64}  schema.csv\nnot a checksum\n")
    with pytest.raises(TraceError, match="not a sha256sum line") as caught:
        parse_sha256sum(sums)
    assert caught.value.line == 2


# --- downloads ---------------------------------------------------------------------------


def test_fresh_download_verifies_against_sha256sum(server: Control, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = fetch("google2011", out, [*DEFAULT, "task_events:1-2"], server.url, False)
    expected = [*DEFAULT, "task_events/part-00001-of-00500.csv.gz",
                "task_events/part-00002-of-00500.csv.gz", "SHA256SUM"]
    assert sorted(summary["downloaded"]) == sorted(expected)
    assert summary["skipped"] == []
    assert summary["unverified"] == ["SHA256SUM"]
    assert summary["checksum_list"] == "SHA256SUM"
    for rel in expected:
        assert same_bytes(out / rel, server.root / rel), rel
    assert summary["bytes_downloaded"] == summary["bytes_total"] == sum(
        (server.root / rel).stat().st_size for rel in expected)
    assert not list(out.rglob("*.part"))
    assert server.asked("SHA256SUM") == [None]


def test_resume_after_connection_dropped_mid_file(server: Control, tmp_path: Path) -> None:
    server.drop_once.add(TASK0)
    out = tmp_path / "out"
    fetch("google2011", out, ["task_events:0"], server.url, progress=False)
    assert same_bytes(out / TASK0, server.root / TASK0)
    first, second = server.asked(TASK0)
    half = (server.root / TASK0).stat().st_size // 2
    assert first is None and second == f"bytes={half}-"


def test_resume_from_existing_partial_file(server: Control, tmp_path: Path) -> None:
    out = tmp_path / "out"
    data = (server.root / JOB0).read_bytes()
    (out / "job_events").mkdir(parents=True)
    (out / f"{JOB0}.part").write_bytes(data[:300_000])
    summary = fetch("google2011", out, ["job_events:0"], server.url, progress=False)
    assert (out / JOB0).read_bytes() == data
    assert server.asked(JOB0) == ["bytes=300000-"]
    assert summary["downloaded"] == ["SHA256SUM", JOB0]
    assert JOB0 not in summary["unverified"]


def test_server_ignoring_range_restarts_cleanly(server: Control, tmp_path: Path) -> None:
    server.ignore_range = True
    out = tmp_path / "out"
    (out / "job_events").mkdir(parents=True)
    (out / f"{JOB0}.part").write_bytes(b"stale bytes that are not the file" * 1000)
    fetch("google2011", out, ["job_events:0"], server.url, progress=False)
    assert same_bytes(out / JOB0, server.root / JOB0)
    assert not (out / f"{JOB0}.part").exists()


def test_complete_partial_file_is_finished_after_416(server: Control, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "job_events").mkdir(parents=True)
    (out / f"{JOB0}.part").write_bytes((server.root / JOB0).read_bytes())
    fetch("google2011", out, ["job_events:0"], server.url, progress=False)
    assert same_bytes(out / JOB0, server.root / JOB0)


def test_missing_file_names_the_url(server: Control, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="HTTP 404") as caught:
        fetch("google2011", tmp_path / "out", ["task_events:7"], server.url, progress=False)
    assert str(caught.value).startswith(f"{server.url}task_events/part-00007-of-00500.csv.gz")


def test_checksum_mismatch_leaves_no_file(server: Control, tmp_path: Path) -> None:
    want = hashlib.sha256((server.root / JOB0).read_bytes()).hexdigest()
    (server.root / JOB0).write_bytes(b"tampered" + (server.root / JOB0).read_bytes()[8:])
    got = hashlib.sha256((server.root / JOB0).read_bytes()).hexdigest()
    out = tmp_path / "out"
    with pytest.raises(TraceError, match="sha256 mismatch") as caught:
        fetch("google2011", out, ["job_events:0"], server.url, progress=False)
    assert want in str(caught.value) and got in str(caught.value)
    assert JOB0 in str(caught.value)
    assert not (out / JOB0).exists() and not (out / f"{JOB0}.part").exists()


def test_rerun_skips_verified_files_and_replaces_damaged_ones(
    server: Control, tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    fetch("google2011", out, None, server.url, progress=False)
    server.requests.clear()
    again = fetch("google2011", out, None, server.url, progress=False)
    assert again["downloaded"] == [] and again["bytes_downloaded"] == 0
    assert sorted(again["skipped"]) == sorted([*DEFAULT, "SHA256SUM"])
    assert server.requests == []
    (out / MACHINES).write_bytes(b"damaged")
    third = fetch("google2011", out, None, server.url, progress=False)
    assert third["downloaded"] == [MACHINES]
    assert same_bytes(out / MACHINES, server.root / MACHINES)


def test_transient_server_errors_are_retried(server: Control, tmp_path: Path) -> None:
    server.fail_once[JOB0] = 503
    out = tmp_path / "out"
    fetch("google2011", out, ["job_events:0"], server.url, progress=False)
    assert same_bytes(out / JOB0, server.root / JOB0)
    assert len(server.asked(JOB0)) == 2


def test_persistent_server_errors_give_up(server: Control, tmp_path: Path) -> None:
    server.fail_always[JOB0] = 500
    with pytest.raises(TraceError, match="download failed after 3 consecutive attempt"):
        fetch("google2011", tmp_path / "out", ["job_events:0"], server.url, progress=False)
    assert len(server.asked(JOB0)) == 3


def test_without_checksum_list_sizes_are_checked_only(server: Control, tmp_path: Path) -> None:
    (server.root / "SHA256SUM").unlink()
    summary = fetch("google2011", tmp_path / "out", ["job_events:0"], server.url, False)
    assert summary["downloaded"] == [JOB0] and summary["unverified"] == [JOB0]
    assert "not found" in summary["checksum_list"]


def test_published_size_and_hash_are_enforced(server: Control, tmp_path: Path) -> None:
    (server.root / "machine_meta.tar.gz").write_bytes(b"x" * 92_432)
    server.write_sha256sum()
    out = tmp_path / "out"
    with pytest.raises(TraceError, match="sha256 mismatch: expected b5b1b786"):
        fetch("alibaba2018", out, ["machine_meta"], server.url, progress=False)
    (server.root / "machine_meta.tar.gz").write_bytes(b"x" * 10)
    with pytest.raises(TraceError, match="server offers 10 bytes, the published size is 92432"):
        fetch("alibaba2018", out, ["machine_meta"], server.url, progress=False)
    assert not list(out.rglob("machine_meta*"))


def test_base_url_must_be_http(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="base URL"):
        fetch("google2011", tmp_path / "out", None, "ftp://example.org/", progress=False)
