"""Atomic output directories: leftovers of killed runs cleaned, live ones kept, no empty swap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.errors import TraceError
from pipeline.trace import outdir
from pipeline.trace.outdir import (
    Owner,
    atomic_dir,
    clean_abandoned,
    clean_leftovers,
    current_owner,
    host_name,
    leftovers,
    process_start,
    replace_dir,
)

REPO = Path(__file__).resolve().parents[2]


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def leftover(out: Path, kind: str, owner: Owner | None, files: int = 1) -> Path:
    """A directory named the way atomic_dir names its temporaries (or backups)."""
    suffix = f"-{owner.tag()}" if owner else ""
    path = out.with_name(f".{out.name}.{kind}-0123abcd{suffix}")
    path.mkdir()
    for i in range(files):
        (path / f"part-{i}").write_bytes(b"x" * 100)
    return path


def output(out: Path, text: str) -> None:
    with atomic_dir(out) as tmp:
        (tmp / "data.txt").write_text(text)


def test_leftover_of_a_dead_process_is_removed_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    dead = leftover(out, "tmp", Owner(host_name(), dead_pid(), 0), files=3)
    other_output = leftover(tmp_path / "other", "tmp", Owner(host_name(), dead_pid(), 0))
    output(out, "new")
    assert not dead.exists()
    assert (out / "data.txt").read_text() == "new"
    assert other_output.exists()  # another output's leftovers are that output's business
    assert sorted(p.name for p in tmp_path.iterdir()) == [other_output.name, "trace"]


def test_leftovers_of_outputs_never_written_again_are_cleaned_by_directory(
        tmp_path: Path) -> None:
    """A killed run whose output name is not used again (a sweep run of older code)."""
    gone = [leftover(tmp_path / f"run{i}", "tmp", Owner(host_name(), dead_pid(), 0))
            for i in range(2)]
    live = leftover(tmp_path / "busy", "tmp", current_owner())
    finished = tmp_path / "done"
    finished.mkdir()
    assert sorted(clean_abandoned(tmp_path)) == sorted(gone)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "done"])
    assert clean_abandoned(tmp_path / "missing") == []


def test_temporaries_of_live_runs_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.05)
        live = Owner(host_name(), sleeper.pid, process_start(sleeper.pid))
        concurrent = leftover(out, "tmp", live)
        elsewhere = leftover(out.with_name("run2"), "tmp", None)  # different output
        remote = out.with_name(f".run.tmp-89abcdef-otherhost-{dead_pid()}-5")
        remote.mkdir()
        mine = leftover(out.with_name("run3"), "tmp", current_owner())
        output(out, "done")
        assert concurrent.exists() and remote.exists() and elsewhere.exists() and mine.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_reused_pid_is_not_taken_for_the_owner(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.05)
        start = process_start(sleeper.pid)
        if not start:
            pytest.skip("no /proc start times here")
        assert Owner(host_name(), sleeper.pid, start).alive()
        assert not Owner(host_name(), sleeper.pid, start + 1).alive()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not Owner(host_name(), sleeper.pid, start).alive()


def test_unchecked_owners_leftovers_go_only_once_old(tmp_path: Path) -> None:
    """No owner recorded, or one on another host or pid namespace: judged by age."""
    out = tmp_path / "report"
    fresh = leftover(out, "tmp", None)
    old = out.with_name(".report.tmp-fedcba98")
    old.mkdir()
    remote_fresh = out.with_name(".report.tmp-01234567-otherhost.1-5-5")
    remote_old = out.with_name(".report.tmp-89abcdef-otherhost.1-5-5")
    remote_fresh.mkdir()
    remote_old.mkdir()
    stale = time.time() - outdir.UNOWNED_STALE_S - 60
    for path in (old, remote_old):
        os.utime(path, (stale, stale))
    assert sorted(clean_leftovers(out)) == sorted([old, remote_old])
    assert fresh.exists() and remote_fresh.exists()


def test_names_of_similar_outputs_are_not_confused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    dead = Owner(host_name(), dead_pid(), 0)
    tricky = leftover(tmp_path / "run.tmp-x", "tmp", dead)  # .run.tmp-x.tmp-...
    assert [p for p, _, _ in leftovers(out)] == []
    assert [p for p, _, _ in leftovers(tmp_path / "run.tmp-x")] == [tricky]


def test_cut_short_swap_is_recovered_from_the_backup(tmp_path: Path) -> None:
    """Without an atomic exchange the old output waits in .NAME.old-*: put it back."""
    out = tmp_path / "trace"
    dead = Owner(host_name(), dead_pid(), 0)
    backup = leftover(out, "old", dead)
    half = leftover(out, "tmp", dead)
    clean_leftovers(out)
    assert out.is_dir() and (out / "part-0").exists()
    assert not backup.exists() and not half.exists()
    # With the output back in place, a later stale backup is simply removed.
    later = leftover(out, "old", dead)
    output(out, "new")
    assert not later.exists() and (out / "data.txt").read_text() == "new"


def test_replace_never_leaves_the_path_missing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    output(out, "0")
    missing = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if not out.exists():
                missing.append(time.perf_counter())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(200):
            output(out, str(i))
    finally:
        stop.set()
        watcher.join()
    if outdir.exchange(tmp_path / "nope-a", tmp_path / "nope-b") is None:
        pytest.skip("no atomic exchange on this system (the backup path is tested above)")
    assert missing == []
    assert (out / "data.txt").read_text() == "199"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replace_falls_back_to_a_backup_rename(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outdir, "exchange", lambda a, b: None)
    out = tmp_path / "out"
    output(out, "a")
    output(out, "b")
    assert (out / "data.txt").read_text() == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replace_dir_moves_into_a_missing_path(tmp_path: Path) -> None:
    new = tmp_path / "new"
    new.mkdir()
    replace_dir(new, tmp_path / "out")
    assert (tmp_path / "out").is_dir() and not new.exists()


def test_output_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("precious")
    with pytest.raises(TraceError, match="exists and is not a directory"):
        output(tmp_path / "out", "x")
    assert (tmp_path / "out").read_text() == "precious"


def test_parent_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(TraceError) as err:
        output(tmp_path / "file" / "sub" / "out", "x")
    assert err.value.path == tmp_path / "file" and "Not a directory" in err.value.reason


def test_failure_inside_removes_the_temporary(tmp_path: Path) -> None:
    out = tmp_path / "out"
    output(out, "good")
    with pytest.raises(ValueError), atomic_dir(out) as tmp:
        (tmp / "half").write_text("x")
        raise ValueError("boom")
    assert (out / "data.txt").read_text() == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


KILLED = """
import sys, time
from pathlib import Path
from pipeline.trace.io import atomic_dir
with atomic_dir(Path(sys.argv[1])) as tmp:
    (tmp / "big").write_bytes(b"x" * 1_000_000)
    print("ready", flush=True)
    time.sleep(60)
"""


def test_killed_run_leaves_a_temporary_that_the_next_run_removes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert len(leftovers(out)) == 1  # still running: a second writer must keep it
        output(tmp_path / "out", "concurrent")
        assert len(leftovers(out)) == 1
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(leftovers(out)) == 1  # what a killed run leaves
    output(out, "next")
    assert leftovers(out) == [] and (out / "data.txt").read_text() == "next"


def test_own_pid_from_an_earlier_process_is_not_alive() -> None:
    me = current_owner()
    assert me.alive()
    if me.start:
        assert not Owner(me.host, me.pid, me.start - 1).alive()
