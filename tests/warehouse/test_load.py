"""Loading run directories: tables, idempotence, one transaction, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.errors import TraceError, UsageError
from pipeline.warehouse import load, sql
from pipeline.warehouse import stage as load_module
from tests.warehouse.rundirs import demo_intervals, demo_runs, demo_tasks, write_run

TABLES = ("runs", "task_runs", "node_intervals", "metrics")


def snapshot(db: Path) -> dict[str, list[tuple]]:
    """Every row of every table, sorted (to compare warehouse states)."""
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            t: sorted(con.execute(f"select * exclude (loaded_at) from {t}").fetchall(), key=str)
            if t == "runs" else sorted(con.execute(f"select * from {t}").fetchall(), key=str)
            for t in (*TABLES, "settings")
        }


def counts(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in TABLES}


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    return demo_runs(tmp_path)


def test_load_fills_tables_and_views(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    result = load(runs, db)
    assert result["runs"] == 2 and result["replaced"] == 0
    assert result["rows"] == {"task_runs": 8, "node_intervals": 4, "metrics": 24}
    assert counts(db) == {"runs": 2, "task_runs": 8, "node_intervals": 4, "metrics": 24}
    columns, rows = sql(db, "select policy, node_hours, cost_usd from policy_summary")
    assert dict((r[0], r[1]) for r in rows) == {"yarn-uniform": 2.0, "packing": 1.5}
    columns, rows = sql(db, "select * from cost_savings where policy = 'packing'")
    row = dict(zip(columns, rows[0], strict=True))
    assert row["baseline_policy"] == "yarn-uniform"
    assert row["node_hours_saved"] == pytest.approx(0.5)
    assert row["node_hours_saved_pct"] == pytest.approx(25.0)
    assert row["cost_saved_usd"] == pytest.approx(0.5 * 0.192)
    assert row["cost_saved_pct"] == pytest.approx(25.0)


def test_runs_table_keeps_run_json(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    load(runs, db)
    _, rows = sql(db, "select params ->> 'slack', cluster ->> 'mode', seed, trace_tasks, "
                      "created_at from runs where policy = 'packing'")
    slack, mode, seed, trace_tasks, created_at = rows[0]
    assert (slack, mode, seed, trace_tasks) == ("0.1", "elastic", 0, 4)
    assert created_at.isoformat() == "2025-01-02T03:04:05"


def test_loading_twice_leaves_one_copy(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    load(runs, db)
    before = snapshot(db)
    again = load([runs[1], runs[0], runs[1]], db)
    assert again["replaced"] == 2 and again["runs"] == 2
    assert snapshot(db) == before


def test_reloading_a_changed_run_replaces_it(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    load(runs, db)
    metrics = runs[0] / "metrics.parquet"
    table = pq.read_table(metrics)
    values = [v + 1.0 if m == "preemptions" else v
              for m, v in zip(table["metric"].to_pylist(), table["value"].to_pylist(),
                              strict=True)]
    pq.write_table(table.set_column(2, "value", pa.array(values)), metrics)
    load([runs[0]], db)
    _, rows = sql(db, "select preemptions from policy_summary where policy = 'yarn-uniform'")
    assert rows == [(1.0,)]
    assert counts(db)["metrics"] == 24


def test_a_bad_second_run_leaves_the_warehouse_unchanged(tmp_path: Path,
                                                         runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    load([runs[0]], db)
    before = snapshot(db)
    # Readable schema, but a value that cannot be cast: fails mid-load, after run 1 went in.
    bad = write_run(tmp_path / "bad", "fifo", demo_tasks(False), demo_intervals(False),
                    edit_tasks=lambda t: t.set_column(
                        t.schema.get_field_index("attempts"), "attempts",
                        pa.array(["x"] * t.num_rows)))
    with pytest.raises(TraceError, match=r"task_runs\.parquet.*cannot load task_runs"):
        load([runs[1], bad], db)
    assert snapshot(db) == before


def test_a_crash_mid_load_leaves_the_warehouse_unchanged(
    tmp_path: Path, runs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "wh.duckdb"
    load([runs[0]], db)
    before = snapshot(db)
    real = load_module.load_run
    calls = []

    def crash_on_second(con: duckdb.DuckDBPyConnection, run: object) -> dict[str, int]:
        calls.append(run)
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(con, run)

    monkeypatch.setattr(load_module, "load_run", crash_on_second)
    with pytest.raises(RuntimeError, match="simulated crash"):
        load([runs[0], runs[1]], db)
    assert snapshot(db) == before


def test_a_corrupt_file_is_named(tmp_path: Path, runs: list[Path]) -> None:
    (runs[1] / "node_intervals.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(TraceError, match=r"node_intervals\.parquet: unreadable Parquet"):
        load(runs, tmp_path / "wh.duckdb")


def test_missing_file_column_and_key_are_named(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    (runs[0] / "metrics.parquet").unlink()
    with pytest.raises(TraceError, match=r"metrics\.parquet: metrics\.parquet is missing"):
        load(runs, db)
    table = pq.read_table(runs[1] / "task_runs.parquet").drop_columns(["outcome"])
    pq.write_table(table, runs[1] / "task_runs.parquet")
    with pytest.raises(TraceError, match=r"task_runs\.parquet: missing column\(s\) outcome"):
        load([runs[1]], db)
    meta = tmp_path / "x" / "run.json"
    meta.parent.mkdir()
    meta.write_text(json.dumps({"run_id": "r", "trace": "t"}))
    with pytest.raises(TraceError, match=r"run\.json: missing key\(s\) policy, seed"):
        load([meta.parent], db)
    with pytest.raises(UsageError, match="no run directories"):
        load([], db)


def test_rows_of_another_run_are_refused(tmp_path: Path, runs: list[Path]) -> None:
    path = runs[0] / "metrics.parquet"
    table = pq.read_table(path)
    pq.write_table(table.set_column(0, "run_id", pa.array(["other"] * table.num_rows)), path)
    with pytest.raises(TraceError, match=r"metrics\.parquet \[run_id\]: 12 row\(s\) have run_id"):
        load(runs, tmp_path / "wh.duckdb")


def test_part_files_extra_columns_and_nan_times(tmp_path: Path) -> None:
    def extras(table: pa.Table) -> pa.Table:
        ends = [float("nan") if v is None else v for v in table["end_s"].to_pylist()]
        table = table.set_column(table.schema.get_field_index("end_s"), "end_s", pa.array(ends))
        return table.append_column("wasted_s", pa.array([0.0] * table.num_rows))

    runs = demo_runs(tmp_path, parts=True, edit_tasks=extras)
    db = tmp_path / "wh.duckdb"
    load(runs, db)
    _, rows = sql(db, "select count(*), sum(wasted_s), count(end_s) from task_runs")
    assert rows == [(8, 0.0, 6)]


def test_baseline_setting_and_session_override(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    load(runs, db, baseline="packing")
    query = "select policy, node_hours_saved from cost_savings order by policy"
    assert sql(db, query)[1] == [("packing", 0.0), ("yarn-uniform", -0.5)]
    override = "set variable baseline_policy = 'yarn-uniform'; " + query
    assert sql(db, override)[1] == [("packing", 0.5), ("yarn-uniform", 0.0)]


def test_runs_without_a_baseline_keep_null_savings(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    other_seed = demo_runs(tmp_path / "seed1", seed=1)[1]
    load([*runs, other_seed], db)
    _, rows = sql(db, "select seed, baseline_run_id, node_hours_saved from cost_savings "
                      "where policy = 'packing' order by seed")
    assert rows[0][1] is not None and rows[0][2] == pytest.approx(0.5)
    assert rows[1] == (1, None, None)


def test_utilization_over_time_conserves_work(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    load(runs, db)
    _, rows = sql(db, """
        select policy, count(*), sum(nodes_provisioned * (bucket_end_s - bucket_start_s)),
               sum(cpu_allocated * (bucket_end_s - bucket_start_s))
        from utilization_over_time group by policy order by policy""")
    # one hour in 1-minute buckets; node-seconds and cpu-seconds add up to the records'
    assert rows[0][:2] == ("packing", 60) and rows[1][:2] == ("yarn-uniform", 60)
    assert rows[0][2] == pytest.approx(1.5 * 3600) and rows[1][2] == pytest.approx(7200)
    assert rows[0][3] == pytest.approx(2 * 1800 + 2 * 1790 + 2 * 1800)


def test_locked_warehouse_is_a_clear_error(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    load(runs, db)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         f"import duckdb, sys, time; c = duckdb.connect({str(db)!r}); "
         "print('locked', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(TraceError, match=r"wh.duckdb: cannot open the warehouse.*lock"):
            load(runs, db)
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.05)


def test_corrupt_warehouse_is_a_clear_error(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    db.write_bytes(b"garbage" * 2000)
    with pytest.raises(TraceError, match=r"cannot open the warehouse.*not a DuckDB file"):
        load(runs, db)


def test_labels_tell_configurations_apart(tmp_path: Path, runs: list[Path]) -> None:
    db = tmp_path / "wh.duckdb"
    same_label = write_run(tmp_path / "other", "packing", demo_tasks(True),
                           demo_intervals(True), params={"slack": 0.1}, seed=1,
                           cluster_mode="elastic")
    meta = json.loads((same_label / "run.json").read_text())
    meta["cluster"]["max_nodes"] = 9  # another configuration, same policy and params
    (same_label / "run.json").write_text(json.dumps(meta))
    load([*runs, same_label], db)
    _, rows = sql(db, "select label, params_text from policy_summary order by label")
    labels = [r[0] for r in rows]
    assert labels[2] == "yarn-uniform"
    assert labels[0].startswith("packing [elastic] #") and rows[0][1] == "slack=0.1"
    assert labels[1].startswith("packing [elastic] #") and labels[0] != labels[1]


def test_labels_name_the_parameters_that_vary(tmp_path: Path) -> None:
    db = tmp_path / "wh.duckdb"
    runs = [write_run(tmp_path, "packing", demo_tasks(True), demo_intervals(True),
                      params={"slack": slack, "min_nodes": 5}) for slack in (0.1, 0.2)]
    runs.append(write_run(tmp_path, "yarn-uniform", demo_tasks(False),
                          demo_intervals(False), params={"config": "a.xml", "groups": ""}))
    load(runs, db)
    _, rows = sql(db, "select label, params_text from policy_summary order by label")
    assert rows == [("packing slack=0.1", "min_nodes=5,slack=0.1"),
                    ("packing slack=0.2", "min_nodes=5,slack=0.2"),
                    ("yarn-uniform", "config=a.xml,groups=")]


def test_each_run_is_compared_with_the_baseline_on_the_same_cluster(tmp_path: Path) -> None:
    uniform_fixed = write_run(tmp_path, "yarn-uniform", demo_tasks(False), demo_intervals(False))
    uniform_elastic = write_run(tmp_path, "yarn-uniform", demo_tasks(False),
                                demo_intervals(True), params={"x": 1}, cluster_mode="elastic")
    packed_elastic = write_run(tmp_path, "packing", demo_tasks(True), demo_intervals(True),
                               params={"slack": 0.1}, cluster_mode="elastic")
    db = tmp_path / "wh.duckdb"
    load([uniform_fixed, uniform_elastic, packed_elastic], db)
    _, rows = sql(db, "select policy, baseline_run_id = (select run_id from runs where "
                      "policy = 'yarn-uniform' and cluster->>'mode' = 'elastic'), "
                      "node_hours_saved from cost_savings where policy = 'packing'")
    assert rows == [("packing", True, 0.0)]


def test_policy_timings_become_warehouse_metrics(tmp_path: Path, runs: list[Path]) -> None:
    """A policy's wall-clock figures (provenance ``policy_timings``, kept out of the run's
    deterministic metrics.parquet) are loaded as metrics in ms and reach policy_summary;
    a malformed entry is named."""
    prov = runs[0] / "provenance.json"
    meta = json.loads(prov.read_text()) if prov.exists() else {}
    prov.write_text(json.dumps({**meta, "policy_timings": {
        "solver_ms_p50": 12.5, "solver_ms_p99": 40.0, "round_ms_p50": None}}))
    db = tmp_path / "wh.duckdb"
    result = load(runs, db)
    assert result["rows"]["metrics"] == 24 + 2
    _, rows = sql(db, "select metric, value, unit from metrics where unit = 'ms' order by 1")
    assert rows == [("solver_ms_p50", 12.5, "ms"), ("solver_ms_p99", 40.0, "ms")]
    _, rows = sql(db, "select solver_ms_p50 from policy_summary where solver_ms_p50 is not null")
    assert rows == [(12.5,)]
    prov.write_text(json.dumps({**meta, "policy_timings": {"solver_ms_p50": "fast"}}))
    with pytest.raises(TraceError, match="policy_timings"):
        load(runs, tmp_path / "other.duckdb")


def test_the_warehouse_takes_a_memory_limit(tmp_path: Path, runs: list[Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB gets 2GB by default (it spills beyond); TRACEREPLAY_DB_MEMORY sets another;
    a value DuckDB cannot read is a one-line error naming the warehouse."""
    from pipeline.warehouse.db import connect

    db = tmp_path / "w.duckdb"
    load(runs, db)
    with connect(db, read_only=True) as con:
        limit = con.execute("select current_setting('memory_limit')").fetchone()[0]
    assert limit == "1.8 GiB"  # (2 GB in binary units)
    monkeypatch.setenv("TRACEREPLAY_DB_MEMORY", "500MB")
    with connect(db, read_only=True) as con:
        assert "476" in con.execute("select current_setting('memory_limit')").fetchone()[0]
    monkeypatch.setenv("TRACEREPLAY_DB_MEMORY", "lots")
    with pytest.raises(TraceError, match="cannot open the warehouse"), connect(
            db, read_only=True):
        pass


def test_files_without_nan_are_read_by_duckdb_itself(tmp_path: Path) -> None:
    """NaN-free files stream through read_parquet (bounded memory); a NaN anywhere sends the
    run through Arrow, where NaN still becomes NULL."""
    clean, dirty = tmp_path / "clean.parquet", tmp_path / "dirty.parquet"
    pq.write_table(pa.table({"a": [1.0, None], "s": ["x", "y"]}), clean)
    pq.write_table(pa.table({"a": [1.0, float("nan")], "s": ["x", "y"]}), dirty)
    assert load_module.nan_free([str(clean)])
    assert not load_module.nan_free([str(clean), str(dirty)])


def test_rows_are_counted_as_stored(tmp_path: Path, runs: list[Path]) -> None:
    """A run given twice in one load (a by-hand run beside the sweep's copy) is stored once,
    and counted once: the result's rows are what the warehouse holds for the runs loaded."""
    result = load([*runs, runs[0]], tmp_path / "w.duckdb")
    stored = counts(tmp_path / "w.duckdb")
    assert result["rows"] == {t: stored[t] for t in ("task_runs", "node_intervals", "metrics")}
    assert result["runs"] == len(runs)


def test_the_load_verb_prints_counts_not_lists(tmp_path: Path, runs: list[Path]) -> None:
    """The JSON result line counts run ids and views; the --summary file keeps them."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    summary = tmp_path / "loaded.json"
    out = CliRunner().invoke(app, ["load", *map(str, runs), "--db", str(tmp_path / "w.duckdb"),
                                   "--summary", str(summary)])
    assert out.exit_code == 0, out.output
    line = json.loads(out.stdout)
    assert line["run_ids"] == len(runs) and isinstance(line["views"], int)
    assert len(json.loads(summary.read_text())["runs"]) == len(runs)
