"""task_runs written while the core runs (pipeline.replay.records): same bytes, whatever the
bucket size and thread timing; a failed replay stops the writer and leaves no run."""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.bench.workload import synthetic_workload
from pipeline.errors import UsageError
from pipeline.replay import output, records, replay
from pipeline.replay.records import RecordStore
from pipeline.sim.tasks import N_EXTRA, SPEC_DEFAULT, RecordChunk


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_workload(tmp_path_factory.mktemp("w") / "trace", 30, 5_000, seed=4)


@pytest.mark.parametrize("cluster", ["fixed", "elastic"])
def test_task_runs_bytes_do_not_depend_on_buckets(workload: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  cluster: str) -> None:
    options = {"max_nodes": 40} if cluster == "elastic" else {}
    whole = replay(workload, "yarn-uniform", {}, 0, tmp_path / "whole", cluster=cluster,
                   cluster_options=options, drain=True)
    monkeypatch.setattr(records, "BUCKET_ROWS", 97)  # buckets complete while the core runs
    for name in ("small", "again"):
        small = replay(workload, "yarn-uniform", {}, 0, tmp_path / name, cluster=cluster,
                       cluster_options=options, drain=True)
        for table in ("task_runs", "metrics"):
            assert (small.out_dir / f"{table}.parquet").read_bytes() == (
                whole.out_dir / f"{table}.parquet").read_bytes(), (name, table)


def test_a_failing_replay_stops_the_writer_and_leaves_nothing(
        workload: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.sim.core import Simulation

    calls = {"n": 0}
    original = Simulation._admit

    def failing(self: Simulation, *args: object) -> None:
        calls["n"] += 1
        if calls["n"] == 40:
            raise UsageError("stop here")
        original(self, *args)

    monkeypatch.setattr(records, "BUCKET_ROWS", 97)
    monkeypatch.setattr(Simulation, "_admit", failing)
    with pytest.raises(UsageError, match="stop here"):
        replay(workload, "yarn-uniform", {}, 0, tmp_path / "run", drain=True)
    assert not (tmp_path / "run").exists()


def _chunk(rows: list[int]) -> RecordChunk:
    n = len(rows)
    floats = np.zeros(n)
    return RecordChunk(
        row=np.array(rows, np.int64), instance=np.zeros(n, np.int64), job=np.zeros(n, np.int32),
        ready=floats, first_start=floats, start=floats, end=floats,
        outcome=np.zeros(n, np.int8), attempts=np.ones(n, np.int32),
        preemptions=np.zeros(n, np.int32), evictions=np.zeros(n, np.int32), wasted=floats,
        locality=np.full(n, -1, np.int8), remaining=floats, read=np.zeros((n, 2)),
        extra=np.zeros((n, N_EXTRA), np.float32), kind=np.zeros(n, np.int8),
        spec=np.tile(SPEC_DEFAULT, (n, 1)))


def test_a_row_recorded_twice_is_refused(tmp_path: Path) -> None:
    store = RecordStore(tmp_path, bucket_rows=4, total_rows=4)
    store.write(_chunk([0, 1, 1, 3]))
    store.close()
    with pytest.raises(RuntimeError, match="rows"):
        store.rows(0, 4)


def test_rows_wait_for_their_bucket(tmp_path: Path) -> None:
    store = RecordStore(tmp_path, bucket_rows=4, total_rows=6)
    store.write(_chunk([3, 0, 2, 5]))
    assert store._complete == 0  # row 1 is missing
    store.write(_chunk([1]))
    assert store._complete == 4  # bucket 0 whole; bucket 1 waits for row 4
    store.write(_chunk([4]))
    assert store._complete == 6
    assert store.rows(0, 6)["row"].tolist() == list(range(6))


def test_an_encoding_error_is_reported_while_the_next_batch_is_awaited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch is encoded on a thread of its own: its error reaches the replay (``check``)
    at once, not when the next batch, which may wait for the core for hours, is built."""
    def full(self: pq.ParquetWriter, table: pa.Table, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    release = threading.Event()

    def batches() -> Iterator[pa.Table]:  # one batch, then wait as for the core until the
        # replay gives up
        yield pa.table({"x": [1]})
        release.wait(30)
        raise records.CancelledError

    writer = records.BackgroundWriter(
        lambda b, failed: output.write_task_runs(b, tmp_path / "t.parquet", failed), batches())
    for _ in range(300):
        try:
            writer.check()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            break
        threading.Event().wait(0.01)
    else:
        pytest.fail("the encoding error was not reported while the writer waited")
    assert not release.is_set()
    release.set()
    with pytest.raises(OSError, match="No space left"):
        writer.join()
