"""The generate stage: determinism, the raw published layouts, the event grammar, the
published shapes, and (when the adapters are present) generate -> ingest -> validate."""

from __future__ import annotations

import gzip
import importlib.util
import itertools
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.errors import UsageError
from pipeline.generate import GENERATORS, generate
from pipeline.generate import shapes as sh
from pipeline.ingest.window import GENERATED

OFFSET_US = 600_000_000
HOURS = 8.0
GOOGLE_COLUMNS = {"job_events": 8, "task_events": 13, "machine_events": 6, "task_usage": 20}
TASK_COLS = ["time", "missing", "job", "index", "machine", "type", "user", "sched_class",
             "priority", "cpu", "mem", "disk", "dm"]
JOB_COLS = ["time", "missing", "job", "type", "user", "sched_class", "name", "logical"]
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPD_PENDING, UPD_RUNNING = range(9)
PART = re.compile(r"part-(\d{5})-of-(\d{5})\.csv\.gz$")


@pytest.fixture(scope="module")
def google(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("gen") / "google"
    return out, generate(out, "google2011", machines=200, hours=HOURS, seed=7, usage=True,
                         rows_per_part=8000)


@pytest.fixture(scope="module")
def alibaba(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("gen") / "alibaba"
    return out, generate(out, "alibaba2018", machines=12, hours=8.0, seed=7)


def _lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    data = gzip.decompress(data) if path.suffix == ".gz" else data
    return data.splitlines()


def _read(paths: list[Path], names: list[str]) -> pl.DataFrame:
    frames = []
    for path in paths:
        data = path.read_bytes()
        data = gzip.decompress(data) if path.suffix == ".gz" else data
        if data:
            frames.append(pl.read_csv(data, has_header=False, new_columns=names,
                                      infer_schema_length=None, quote_char=None))
    return pl.concat(frames, how="vertical_relaxed")


def _parts(root: Path, table: str) -> list[Path]:
    return sorted((root / table).glob("part-*.csv.gz"))


# --- determinism and arguments ---------------------------------------------------------

@pytest.mark.parametrize("fmt", sorted(GENERATORS))
def test_same_seed_gives_identical_bytes_other_seed_differs(tmp_path: Path, fmt: str) -> None:
    def files(out: Path) -> dict[str, bytes]:
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
                if p.is_file()}

    args = {"machines": 20, "hours": 3.0}
    generate(tmp_path / "a", fmt, seed=5, **args)
    generate(tmp_path / "b", fmt, seed=5, **args)
    generate(tmp_path / "c", fmt, seed=6, **args)
    a, b, c = files(tmp_path / "a"), files(tmp_path / "b"), files(tmp_path / "c")
    assert a and a == b
    assert a.keys() == c.keys() and a != c


@pytest.mark.parametrize("args", [
    {"fmt": "nope"}, {"machines": 0}, {"machines": -3}, {"machines": 2.5}, {"hours": 0.0},
    {"hours": -1.0}, {"hours": float("nan")}, {"load": 0.0}, {"colour": "red"},
])
def test_invalid_arguments_are_usage_errors(tmp_path: Path, args: dict) -> None:
    call = {"fmt": "google2011", "machines": 5, "hours": 1.0, **args}
    with pytest.raises(UsageError):
        generate(tmp_path / "out", **call)
    assert not (tmp_path / "out").exists()


def test_output_replaces_old_atomically(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    generate(out, "alibaba2018", machines=3, hours=1.0)
    assert not (out / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace"]


# --- google2011 layout ----------------------------------------------------------------

def test_google_layout_matches_the_schema(google: tuple[Path, dict]) -> None:
    root, summary = google
    assert sorted(p.name for p in root.iterdir()) == sorted([*GOOGLE_COLUMNS, GENERATED])
    stated = json.loads((root / GENERATED).read_text())
    assert stated["window_end_s"] == stated["hours"] * 3600 and stated["window_start_s"] == 0
    for table, ncols in GOOGLE_COLUMNS.items():
        parts = sorted((root / table).iterdir())
        totals = {PART.search(p.name).group(2) for p in parts}
        assert len(totals) == 1 and int(totals.pop()) == len(parts)
        for p in parts:
            assert all(line.count(b",") == ncols - 1 for line in _lines(p)), p
    assert summary["rows"]["task_events"] == sum(len(_lines(p)) for p in _parts(root,
                                                                               "task_events"))


@pytest.mark.parametrize("table", ["task_events", "job_events"])
def test_google_parts_are_split_by_time(google: tuple[Path, dict], table: str) -> None:
    root, _ = google
    spans = []
    for part in _parts(root, table):
        times = np.array([int(line.split(b",", 1)[0]) for line in _lines(part)])
        assert times.size and np.all(np.diff(times) >= 0), part
        assert np.all((times == 0) | (times >= OFFSET_US))
        spans.append((times[0], times[-1]))
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))


def test_google_part_count_follows_size(google: tuple[Path, dict]) -> None:
    _, summary = google
    assert summary["parts"] >= 3
    assert summary["rows"]["task_events"] / summary["parts"] < 3 * 8000


def _histories(root: Path) -> pl.DataFrame:
    events = _read(_parts(root, "task_events"), TASK_COLS).with_row_index("row")
    return events.sort("job", "index", "row")


def _walk(events: pl.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Check each task's event sequence; return problems, run seconds and their cpu."""
    problems, runs, cpus = [], [], []
    cols = [events[c].to_numpy() for c in ("job", "index", "time", "type", "machine", "cpu")]
    job, index, time, etype, machine, cpu = cols
    state, last_key, started, last_t = "none", None, 0.0, -1
    for k in range(len(job)):
        key = (job[k], index[k])
        if key != last_key:
            if state == "running":
                runs.append(HOURS * 3600.0 - started)
                cpus.append(cpu[k - 1])
            state, last_key, last_t = "none", key, -1
        t, e = int(time[k]), int(etype[k])
        sec = max(t - OFFSET_US, 0) / 1e6
        placed = not np.isnan(machine[k])
        if t < last_t:
            problems.append(f"{key}: time goes back")
        last_t = t
        if e == SUBMIT:
            ok = state in ("none", "dead") and (placed == (t == 0 and placed))
            state = "running" if (t == 0 and placed) else "pending"
            started = 0.0
        elif e == SCHEDULE:
            ok = (state == "pending" and placed) or (state == "running" and t == 0)
            state, started = "running", sec
        elif e in (EVICT, FAIL, FINISH, LOST):
            ok = state == "running" and placed
            runs.append(sec - started)
            cpus.append(cpu[k])
            state = "dead" if e in (EVICT, FAIL) else "ended"
        elif e == KILL:
            ok = state in ("pending", "running") and placed == (state == "running")
            if state == "running":
                runs.append(sec - started)
                cpus.append(cpu[k])
            state = "ended"
        elif e == UPD_RUNNING:
            ok = state == "running" and placed
        else:
            ok = False
        if not ok:
            problems.append(f"{key}: event {e} at {t} in state {state}")
    if state == "running":
        runs.append(HOURS * 3600.0 - started)
        cpus.append(cpu[-1])
    return problems, np.array(runs), np.nan_to_num(np.array(cpus, dtype=float))


def test_google_event_grammar_holds_for_every_task(google: tuple[Path, dict]) -> None:
    root, summary = google
    events = _histories(root)
    problems, runs, cpus = _walk(events)
    assert problems == []
    assert np.all(runs >= 0)
    kinds = set(events["type"].unique().to_list())
    assert {SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL} <= kinds
    # the offered load recomputed from the raw events matches the summary and the target
    machines = _read([root / "machine_events/part-00000-of-00001.csv.gz"],
                     ["time", "machine", "type", "platform", "cpu", "mem"])
    capacity = machines.filter(pl.col("time") == 0)["cpu"].sum() * HOURS * 3600.0
    load = float((runs * cpus).sum() / capacity)
    assert load == pytest.approx(summary["offered_load"], rel=0.02)
    assert 0.45 <= load <= 0.8  # target 0.65; arrivals follow the day (a trough at 7 h)


def test_google_rows_at_window_start_look_like_the_trace(google: tuple[Path, dict]) -> None:
    root, _ = google
    events = _read(_parts(root, "task_events"), TASK_COLS)
    zero = events.filter(pl.col("time") == 0)
    running = zero.filter((pl.col("type") == SUBMIT) & pl.col("machine").is_not_null())
    assert running.height > 0
    assert zero.filter((pl.col("type") == SUBMIT) & pl.col("machine").is_null()).height > 0
    # services alive at the start that outlive the window have no terminal event
    ended = events.filter(pl.col("type").is_in([FINISH, KILL, LOST])).select("job", "index")
    assert running.select("job", "index").join(ended, on=["job", "index"], how="anti").height
    # all of a time-0 SUBMIT block precedes the time-0 SCHEDULE block, like the real part 0
    types = zero["type"].to_numpy()
    assert np.all(np.diff(types) >= 0)
    # jobs alive at the start are older (smaller ids) than arriving ones
    later = events.filter((pl.col("time") > 0) & (pl.col("type") == SUBMIT))["job"]
    assert zero["job"].max() < later.max() and later.max() > 6_000_000_000


def test_google_jobs_match_their_tasks(google: tuple[Path, dict]) -> None:
    root, _ = google
    tasks = _read(_parts(root, "task_events"), TASK_COLS)
    jobs = _read(_parts(root, "job_events"), JOB_COLS)
    submitted = jobs.filter(pl.col("type") == SUBMIT)
    assert submitted["job"].is_unique().all()
    assert set(tasks["job"].unique()) == set(submitted["job"])
    per_job_user = tasks.select("job", "user").unique()
    assert per_job_user["job"].is_unique().all()
    joined = per_job_user.join(submitted.select("job", "user"), on="job", suffix="_job")
    assert (joined["user"] == joined["user_job"]).all()
    assert jobs["user"].str.len_chars().unique().to_list() == [44]
    first_index = tasks.group_by("job").agg(pl.col("index").min(), pl.col("index").max()
                                            .alias("top"), pl.col("index").n_unique().alias("n"))
    assert (first_index["index"] == 0).all() and (first_index["top"] + 1 == first_index["n"]).all()


def test_google_usage_stays_below_request(google: tuple[Path, dict]) -> None:
    root, _ = google
    names = ["start", "end", "job", "index", "machine", "cpu_rate", "mem"] + [
        f"c{k}" for k in range(13)]
    usage = _read(_parts(root, "task_usage"), names)
    requests = _read(_parts(root, "task_events"), TASK_COLS).group_by("job", "index").agg(
        pl.col("cpu").max().alias("cpu_req"), pl.col("mem").max().alias("mem_req"))
    joined = usage.join(requests, on=["job", "index"])
    assert joined.height == usage.height > 0
    assert ((usage["end"] - usage["start"]) <= 300_000_000).all()
    assert ((usage["end"] - usage["start"]) > 0).all()
    ratio = (joined["cpu_rate"] / joined["cpu_req"]).drop_nans().drop_nulls()
    # well below the request on the whole; CPU may pass it (compressible), memory never does
    assert 0.2 < ratio.median() < 0.8 and ratio.quantile(0.99) < 1.6
    mem_ratio = (joined["mem"] / joined["mem_req"]).drop_nans().drop_nulls()
    assert 0.2 < mem_ratio.median() < 0.8 and mem_ratio.max() <= 1.0


# --- published shapes -----------------------------------------------------------------

def test_machine_classes_follow_the_published_shares() -> None:
    classes = sh.machine_classes(np.random.default_rng(0), 12_500)
    shares = np.bincount(classes, minlength=10) / 12_500
    published = np.array([c[2] for c in sh.GOOGLE_MACHINE_CLASSES])
    assert np.abs(shares - published).max() < 0.0005


def test_google_machines_have_published_configurations(google: tuple[Path, dict]) -> None:
    root, _ = google
    machines = _read([root / "machine_events/part-00000-of-00001.csv.gz"],
                     ["time", "machine", "type", "platform", "cpu", "mem"])
    added = machines.filter(pl.col("time") == 0)
    assert added.height == 200 and added["machine"].is_unique().all()
    assert set(machines["type"].unique()) <= {0, 1, 2}
    top = added.group_by("cpu", "mem").len().sort("len", descending=True).row(0)
    assert top[:2] == (0.5, 0.5) and 0.45 < top[2] / 200 < 0.62


def test_google_workload_is_heavy_tailed_and_skewed(google: tuple[Path, dict]) -> None:
    root, _ = google
    events = _histories(root)
    finish = events.filter(pl.col("type") == FINISH).select("job", "index", "time")
    sched = events.filter((pl.col("type") == SCHEDULE) & (pl.col("time") > 0)).group_by(
        "job", "index").agg(pl.col("time").max())
    durations = finish.join(sched, on=["job", "index"], suffix="_s").select(
        (pl.col("time") - pl.col("time_s")) / 1e6)["time"].to_numpy()
    assert np.percentile(durations, 99) / np.percentile(durations, 50) > 20
    per_job = events.filter(pl.col("type") == SUBMIT).group_by("job").agg(
        pl.col("index").n_unique().alias("n"), pl.col("user").first())
    assert (per_job["n"] == 1).mean() > 0.4 and per_job["n"].max() >= 50
    by_user = np.sort(per_job.group_by("user").len()["len"].to_numpy())[::-1]
    assert by_user[0] > 3 * np.median(by_user)
    prio = events["priority"].unique().to_list()
    assert min(prio) <= 1 and max(prio) >= 9


def test_steady_state_population_is_production_heavy() -> None:
    rng = np.random.default_rng(1)
    tier = sh.priority_tier(sh.priorities(rng, 200_000, sh.PRIORITIES_ARRIVING))
    life = sh.job_durations(rng, tier)
    alive = rng.choice(tier.size, 20_000, p=life / life.sum())
    sample = sh.priority_tier(np.array(list(sh.PRIORITIES_AT_START)))
    sample_prod = np.average(sample == sh.PRODUCTION, weights=list(
        sh.PRIORITIES_AT_START.values()))
    assert (tier == sh.PRODUCTION).mean() < 0.2
    assert abs((tier[alive] == sh.PRODUCTION).mean() - sample_prod) < 0.2


# --- alibaba2018 ----------------------------------------------------------------------

def _alibaba_tables(root: Path) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    meta = _read([root / "machine_meta.csv"], ["machine_id", "time_stamp", "fd1", "fd2",
                                               "cpu_num", "mem_size", "status"])
    tasks = _read([root / "batch_task.csv"], ["task_name", "instance_num", "job_name",
                                              "task_type", "status", "start_time",
                                              "end_time", "plan_cpu", "plan_mem"])
    inst = _read([root / "batch_instance.csv"], [
        "instance_name", "task_name", "job_name", "task_type", "status", "start_time",
        "end_time", "machine_id", "seq_no", "total_seq_no", "cpu_avg", "cpu_max", "mem_avg",
        "mem_max"])
    return meta, tasks, inst


def test_alibaba_layout_matches_the_schema(alibaba: tuple[Path, dict]) -> None:
    root, summary = alibaba
    assert sorted(p.name for p in root.iterdir()) == sorted([*summary["files"], GENERATED])
    for name, ncols in (("machine_meta.csv", 7), ("batch_task.csv", 9),
                        ("batch_instance.csv", 14)):
        lines = _lines(root / name)
        assert lines and all(line.count(b",") == ncols - 1 for line in lines)
        assert summary["rows"][name[:-4]] == len(lines)
    meta, tasks, inst = _alibaba_tables(root)
    assert meta["machine_id"].n_unique() == 12
    assert (meta["cpu_num"] == 96).all() and (meta["mem_size"] == 100).all()
    assert set(tasks["status"].unique()) <= {"Terminated", "Failed", "Running"}
    assert tasks["job_name"].str.contains(r"^j_\d+$").all()
    assert tasks["task_name"].str.contains(r"^([MRJ]\d+(_\d+)*|task_[A-Za-z0-9+/=]+)$").all()
    assert tasks.select("job_name", "task_name").is_unique().all()
    assert inst["instance_name"].str.starts_with("ins_").all()
    assert inst["machine_id"].is_in(meta["machine_id"].unique().implode()).all()
    assert ((inst["seq_no"] >= 1) & (inst["seq_no"] <= inst["total_seq_no"])).all()
    assert tasks["plan_cpu"].is_in([50, 100, 150, 200, 300, 400, 600, 800]).all()
    # target 0.65 x the mean diurnal arrival rate over hours 0-8 (0.81)
    assert 0.35 < summary["offered_load"] < 0.7


def test_alibaba_instances_fit_their_tasks_and_the_dag(alibaba: tuple[Path, dict]) -> None:
    root, _ = alibaba
    _, tasks, inst = _alibaba_tables(root)
    done = tasks.filter(pl.col("status") != "Running")
    span = inst.join(done, on=["job_name", "task_name"], suffix="_task")
    assert (span["start_time"] >= span["start_time_task"]).all()
    assert (span["end_time"] <= span["end_time_task"]).all()
    per_task = inst.filter(pl.col("seq_no") == pl.col("total_seq_no")).group_by(
        "job_name", "task_name").len().join(tasks, on=["job_name", "task_name"])
    assert (per_task["len"] <= per_task["instance_num"]).all()
    dag = tasks.filter(pl.col("task_name").str.contains("_") &
                       ~pl.col("task_name").str.starts_with("task_"))
    assert dag.height > 0
    number = tasks.with_columns(
        num=pl.col("task_name").str.extract(r"^[A-Z](\d+)").cast(pl.Int64))
    edges = dag.with_columns(parent=pl.col("task_name").str.extract_all(r"\d+").list.slice(1)
                             ).explode("parent").with_columns(pl.col("parent").cast(pl.Int64))
    joined = edges.join(number, left_on=["job_name", "parent"], right_on=["job_name", "num"],
                        suffix="_parent")
    assert joined.height == edges.height  # every parent of a started task exists
    assert (joined["start_time"] >= joined["end_time_parent"]).all()
    assert (joined["status_parent"] == "Terminated").all()


# --- round trip through the ingest adapters --------------------------------------------

@pytest.mark.parametrize("fmt", ["google2011", "alibaba2018"])
def test_generated_trace_ingests_and_validates(tmp_path: Path, fmt: str) -> None:
    module = f"pipeline.ingest.{fmt}"
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not written yet")
    from pipeline.ingest.stage import ingest
    from pipeline.trace.validate import validate

    raw = tmp_path / "raw"
    summary = generate(raw, fmt, machines=10, hours=3.0, seed=3)
    manifest = ingest(fmt, raw, tmp_path / "canonical")
    assert validate(tmp_path / "canonical").ok
    assert not any(manifest.rows_rejected.values())
    assert manifest.input_rows == {k: v for k, v in summary["rows"].items() if v}
    assert manifest.rows["tasks"] > 0
