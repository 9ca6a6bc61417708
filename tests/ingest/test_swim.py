"""SWIM ingest: the real FB-2009 and FB-2010 samples, task derivation, accounting, bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.errors import TraceError
from pipeline.ingest import swim_tasks as st
from pipeline.ingest.stage import ingest
from pipeline.ingest.swim import Swim
from pipeline.trace.io import atomic_dir, read_table
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.validate import count_rows, validate

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / ".." / "shared" / "traces" / "swim-facebook"
FB2009 = "FB-2009_samples_24_times_1hr_0.tsv"
FB2010 = "FB-2010_samples_24_times_1hr_withInputPaths_0.tsv"
MIB, BLOCK = 2**20, 64 * 2**20


def _sample(tmp: Path, name: str) -> Path:
    if not (SAMPLE / name).exists():
        pytest.skip(f"SWIM sample {name} not found under {SAMPLE.resolve()}")
    src = tmp / "src"
    src.mkdir()
    (src / name).symlink_to((SAMPLE / name).resolve())
    return src


def _run(adapter: Swim, src: Path, out: Path) -> Manifest:
    """What the ingest stage does, for an adapter built with non-default options."""
    with atomic_dir(out) as tmp:
        ledger, manifest = Ledger(), Manifest(source_format=adapter.name)
        adapter.run(src, tmp, ledger, manifest)
        ledger.fill(manifest)
        manifest.rows = count_rows(tmp)
        manifest.write(tmp)
        assert validate(tmp).ok, validate(tmp).first()
    return manifest


def _raw(name: str) -> np.ndarray:
    """Columns 1-5 of a published file (submit, gap, input, shuffle, output), as float64."""
    rows = [line.split("\t")[1:6] for line in (SAMPLE / name).read_text().splitlines()]
    return np.array(rows, dtype=np.float64).T


def _expected_counts(inp: np.ndarray, shuffle: np.ndarray, out: np.ndarray, machines: int,
                     map_only: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Maps and reduces per job (scaled bytes), derived again from the documented rules;
    ``map_only``: the trace's shuffle is 0 (default: the bytes given)."""
    map_only = shuffle == 0 if map_only is None else map_only
    written = np.where(map_only, out, shuffle)
    maps = np.maximum.reduce([np.ones_like(inp), np.ceil(inp / BLOCK),
                              np.ceil(written / (1024 * MIB))])
    reduces = np.maximum(1, np.floor((shuffle + out) / BLOCK + 0.5))
    reduces = np.where(reduces > machines, max(1, machines // 5), reduces)
    return maps, np.where(map_only, 0, reduces)


def _per_job(tasks: pl.DataFrame, kind: str) -> np.ndarray:
    counts = tasks.filter(pl.col("task_kind") == kind).group_by("job_id").len()
    number = pl.col("job_id").str.strip_prefix("job").cast(pl.Int64)
    return counts.with_columns(number.alias("k")).sort("k")["len"].to_numpy()


def _balanced(m: Manifest) -> None:
    for table, rows in m.input_rows.items():
        assert rows == m.rows_used.get(table, 0) + sum(m.rows_rejected.get(table, {}).values())


@pytest.fixture(scope="module")
def fb2009(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, pl.DataFrame]:
    tmp = tmp_path_factory.mktemp("fb09")
    manifest = ingest("swim", _sample(tmp, FB2009), tmp / "trace")
    return manifest, pl.from_arrow(read_table(tmp / "trace", "tasks"))


@pytest.fixture(scope="module")
def fb2010(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Path]:
    """FB-2010 scaled to 30 machines (1 % of the bytes), as SWIM scales to a small cluster."""
    tmp = tmp_path_factory.mktemp("fb10")
    return _run(Swim(machines=30), _sample(tmp, FB2010), tmp / "trace"), tmp / "trace"


def test_fb2009_every_row_accounted_for(fb2009: tuple[Manifest, pl.DataFrame]) -> None:
    m, tasks = fb2009
    assert m.input_rows == {"workload": 5894} and m.rows_used == {"workload": 5894}
    assert m.rows_rejected == {} and m.dropped == {} and m.repaired == {}
    assert m.rows["jobs"] == 5894 and m.rows["machines"] == 600
    assert (m.window_start_s, m.window_end_s) == (0.0, 86_404.0)
    assert m.units["cpu"].startswith("cores") and m.units["mem"].startswith("GiB")
    assert "FB-2009" in m.notes["cluster"] and m.sources[0].rows == 5894
    assert tasks["input_file"].null_count() == tasks.height  # FB-2009 publishes no paths


def test_fb2009_maps_and_reduces_as_derived(fb2009: tuple[Manifest, pl.DataFrame]) -> None:
    _, tasks = fb2009
    _, _, inp, shuffle, out = _raw(FB2009)
    maps, reduces = _expected_counts(inp, shuffle, out, machines=600)
    assert (_per_job(tasks, "map") == maps).all()
    with_reduces = tasks.filter(pl.col("task_kind") == "reduce")["job_id"].n_unique()
    assert with_reduces == int((reduces > 0).sum()) == 5894 - 4448  # 4,448 map-only jobs
    assert (_per_job(tasks, "reduce") == reduces[reduces > 0]).all()
    work = tasks.filter(~pl.col("synthetic"))
    assert work["duration_s"].min() >= st.TASK_OVERHEAD_S  # the overhead is the minimum
    maps_in = tasks.filter(pl.col("task_kind") == "map")["input_mb"].sum()
    assert maps_in == pytest.approx(inp.sum() / MIB)


def test_fb2009_first_job_golden(fb2009: tuple[Manifest, pl.DataFrame]) -> None:
    _, tasks = fb2009  # job0	49	49	740773	2339561	627471
    rows = {r["task_id"]: r for r in tasks.filter(pl.col("job_id") == "job0").to_dicts()}
    assert set(rows) == {"job0/m0", "job0/r0"}
    m0, r0 = rows["job0/m0"], rows["job0/r0"]
    assert (m0["submit_s"], m0["task_kind"], m0["cpu"], m0["mem"]) == (49.0, "map", 1.0, 2.0)
    assert m0["input_mb"] == pytest.approx(740_773 / MIB)
    assert m0["duration_s"] == pytest.approx(5 + 0.4 * 740_773 / MIB + 0.3 * 2_339_561 / MIB)
    assert r0["input_mb"] is None and r0["depends_on"] == ["job0/m0"]
    assert r0["duration_s"] == pytest.approx(5 + 0.4 * (2_339_561 + 627_471) / MIB)


def test_reduces_depend_on_all_maps(fb2009: tuple[Manifest, pl.DataFrame]) -> None:
    _, tasks = fb2009
    maps = tasks.filter(pl.col("task_kind") == "map").group_by("job_id").agg(
        pl.col("task_id").sort().alias("maps"))
    reduces = tasks.filter(pl.col("task_kind") == "reduce").select("job_id", "depends_on")
    barriers = tasks.filter(pl.col("synthetic")).join(maps, on="job_id")
    assert barriers.height > 0 and (barriers["cpu"] == 0).all() and (barriers["mem"] == 0).all()
    assert (barriers["task_id"] == barriers["job_id"] + "/barrier").all()
    assert (barriers["depends_on"].list.sort() == barriers["maps"]).all()  # all the maps
    assert (barriers["maps"].list.len() > 16).all()
    barred = reduces.join(barriers.select("job_id"), on="job_id", how="semi")
    assert (barred["depends_on"].list.len() == 1).all()
    assert (barred["depends_on"].list.first() == barred["job_id"] + "/barrier").all()
    direct = reduces.join(barriers.select("job_id"), on="job_id", how="anti").join(
        maps, on="job_id")
    assert (direct["depends_on"].list.sort() == direct["maps"]).all()
    assert (direct["maps"].list.len() <= 16).all()
    assert barred.height + direct.height == reduces.height


def test_fb2010_scaled_every_row_and_shared_paths(fb2010: tuple[Manifest, Path]) -> None:
    m, out = fb2010
    assert m.input_rows == {"workload": 25_428} and m.rows_used == {"workload": 25_428}
    _balanced(m)
    assert m.notes["scaling"].startswith("bytes x 30/3000")
    machines = pl.read_parquet(out / "machines.parquet")
    assert machines.height == 30 and machines["rack"].unique().to_list() == ["rack000"]
    tasks = pl.from_arrow(read_table(out, "tasks"))
    maps = tasks.filter(pl.col("task_kind") == "map")
    per_path = maps.group_by("input_file").agg(pl.col("job_id").n_unique().alias("jobs"))
    assert per_path.height == 17_158 and maps["input_file"].null_count() == 0
    assert per_path.sort("jobs")[-1].rows() == [("inputPath21", 721)]
    assert tasks.filter(pl.col("task_kind") == "reduce")["input_file"].null_count() == (
        tasks.filter(pl.col("task_kind") == "reduce").height)
    _, _, inp, shuffle, out_bytes = _raw(FB2010)
    scaled = [np.floor(b * 30 / 3000) for b in (inp, shuffle, out_bytes)]
    expected_maps, expected_reduces = _expected_counts(*scaled, machines=30,
                                                       map_only=shuffle == 0)
    assert maps.height == int(expected_maps.sum())
    assert (_per_job(tasks, "reduce") == expected_reduces[expected_reduces > 0]).all()
    assert maps["input_mb"].sum() == pytest.approx(scaled[0].sum() / MIB)


def test_same_input_same_trace(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "w.tsv").write_text(_rows(40))
    first = ingest("swim", src, tmp_path / "a")
    second = ingest("swim", src, tmp_path / "b")
    assert first.digest == second.digest
    assert read_table(tmp_path / "a", "tasks").equals(read_table(tmp_path / "b", "tasks"))


# -- small fixtures, written in the published format -------------------------------------------


def _rows(n: int, paths: bool = False) -> str:
    """``n`` well-formed jobs, a few of them big enough for barriers and several reduces."""
    lines = []
    for k in range(n):
        size = (k % 7 + 1) * (10 * BLOCK if k % 5 == 0 else 1000)
        row = f"job{k}\t{10 * k}\t{10 if k else 0}\t{size}\t{size // 2 * (k % 3)}\t{size // 4}"
        lines.append(row + (f"\tinputPath{k % 4}\t\t" if paths else ""))
    return "\n".join(lines) + "\n"


def _src(tmp_path: Path, text: str, name: str = "w.tsv") -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / name).write_text(text)
    return src


def test_fixture_window_gap_and_cluster(tmp_path: Path) -> None:
    text = _rows(10).replace("job3\t30\t10", "job3\t30\t7")  # a gap that disagrees
    m = _run(Swim(), _src(tmp_path, text), tmp_path / "out")
    assert m.repaired == {"jobs": {"gap_disagrees_with_submit_time": 1}}
    assert (m.window_start_s, m.window_end_s) == (0.0, 86_400.0)
    assert "FB-2009" in m.notes["cluster"]  # no paths, no FB-2010 mark: FB-2009's 600
    assert count_rows(tmp_path / "out")["machines"] == 600


def test_bad_rows_are_rejected_by_reason_with_file_and_line(tmp_path: Path) -> None:
    bad = ("job90\t1\t1\t100\t100\n"              # 5 fields
           "job91\t1\t1\tx100\t100\t100\n"        # not a number
           "job92\t1\t1\t100\t-5\t100\n"          # negative bytes
           "job93\t\t1\t100\t100\t100\n"          # empty submit time
           "job94\t1\t1\t100\t100\t100\textra\n"  # a 7th field in a file without paths
           "job95\t1\t1\t1.5\t100\t100\n"         # not a whole number
           "job96\t1e+03\t1\t100\t100\t100\n"     # a whole number written as a float: used
           "job1\t1\t1\t100\t100\t100\n"          # duplicate job id
           "\n")                                  # empty lines are not rows
    src = _src(tmp_path, _rows(10) + bad)
    with (src / "w.tsv").open("ab") as fh:
        fh.write(b"job97\t1\t1\t\xff\t100\t100\n")  # not UTF-8 text
    m = _run(Swim(), src, tmp_path / "out")
    assert m.rows_rejected["workload"] == {
        "wrong_column_count": 2, "bad_number:map_input_bytes": 2,
        "negative_value:shuffle_bytes": 1, "missing_value:submit_time_s": 1,
        "duplicate_job_id": 1, "not_utf8": 1,
    }
    assert m.input_rows["workload"] == 19 and m.rows_used["workload"] == 11
    example = next(e for e in m.examples if e["reason"] == "wrong_column_count")
    assert (example["path"], example["line"]) == ("w.tsv", 11)
    example = next(e for e in m.examples if e["reason"] == "negative_value:shuffle_bytes")
    assert (example["line"], example["field"]) == (13, "shuffle_bytes")
    jobs = pl.read_parquet(tmp_path / "out" / "jobs.parquet")
    assert jobs.filter(pl.col("job_id") == "job96")["submit_s"].to_list() == [1000.0]


def test_paths_file_rows_without_path_or_with_extra_fields(tmp_path: Path) -> None:
    bad = ("job90\t1\t1\t100\t100\t100\n"                   # no path in a file with paths
           "job91\t1\t1\t100\t100\t100\tinputPath9\t\tx\n"  # a non-empty field after 7
           "job92\t1\t1\t100\t100\t100\t\t\t\n")            # an empty path
    m = _run(Swim(), _src(tmp_path, _rows(12, paths=True) + bad), tmp_path / "out")
    assert m.rows_rejected["workload"] == {"missing_value:input_path": 2,
                                           "wrong_column_count": 1}
    assert "input paths are published for FB-2010 only" in m.notes["cluster"]
    tasks = pl.from_arrow(read_table(tmp_path / "out", "tasks"))
    assert set(tasks["input_file"].drop_nulls()) == {f"inputPath{k}" for k in range(4)}


def test_no_usable_row_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    src = _src(tmp_path, "job0\tnot\ta\tswim\tfile\there\njob1\t1\t2\n")
    result = CliRunner().invoke(app, ["ingest", "swim", str(src), str(tmp_path / "out")])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"{src / 'w.tsv'}:2 [3 fields, expected 6]" in lines[0]
    assert "no usable rows in table workload: all 2 rejected" in lines[0]
    assert "bad_number:submit_time_s: 1" in lines[0] and "Traceback" not in lines[0]
    assert not (tmp_path / "out").exists()


def test_two_workload_files_or_none_are_refused_by_name(tmp_path: Path) -> None:
    src = _src(tmp_path, _rows(3), "a.tsv")
    (src / "b.tsv").write_text(_rows(3))
    with pytest.raises(TraceError, match=r"a\.tsv, b\.tsv.*one workload per directory"):
        ingest("swim", src, tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match="required table 'workload'"):
        ingest("swim", empty, tmp_path / "out")


def test_gzip_file_and_smaller_cluster(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    text = _rows(20)
    (src / "FB-2010_part.tsv.gz").write_bytes(gzip.compress(text.encode()))
    m = _run(Swim(machines=100, machines_per_rack=20), src, tmp_path / "out")
    assert m.sources[0].path == "FB-2010_part.tsv.gz" and m.rows_used == {"workload": 20}
    assert m.notes["scaling"].startswith("bytes x 100/3000")  # FB-2010, by its name
    assert pl.read_parquet(tmp_path / "out" / "machines.parquet")["rack"].n_unique() == 5
    raw = np.array([line.split("\t")[3:6] for line in text.splitlines()], dtype=np.float64).T
    maps, reduces = _expected_counts(*(np.floor(b * 100 / 3000) for b in raw), machines=100,
                                     map_only=raw[1] == 0)
    tasks = pl.from_arrow(read_table(tmp_path / "out", "tasks"))
    assert (_per_job(tasks, "map") == maps).all()
    assert (_per_job(tasks, "reduce") == reduces[reduces > 0]).all()
